"""HAClient: the slave's side of replication (RocketMQ 4.9's HAService.HAClient), on the
broker's event loop.

It connects to the master's HA address (``haMasterAddress``, or the haServerAddr the name
server answers a registration with), reports its CommitLog end, and appends each frame whose
phyOffset is that end (an empty store takes the first frame where it starts: the master's last
segment); a frame anywhere else, a frame that breaks the protocol or bytes that are not
CommitLog records close the connection (one log line) and it connects again, after a back-off
that doubles up to ``MAX_BACKOFF_S``. It reports its end after every append and, when idle,
every ``haSendHeartbeatInterval``; a master silent for ``haHousekeepingInterval`` is dropped.
"""
from __future__ import annotations

import asyncio
import logging
import time

from rocketstore.ha.protocol import HEADER_SIZE, REPORT, HAFrameError, parse_header
from rocketstore.store import MessageStore

log = logging.getLogger("rocketstore.ha")

CONNECT_TIMEOUT_S = 3.0
MIN_BACKOFF_S = 0.2
#: RocketMQ's slave waits 5 s before connecting again
MAX_BACKOFF_S = 5.0


def split_address(address: str) -> tuple[str, int]:
    """("host", port) of "host:port"; ValueError naming the address otherwise."""
    host, sep, port = address.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) <= 65535:
        raise ValueError(f"HA master address must be host:port, got {address!r}")
    return host, int(port)


class HAClient:
    """Follows a master: ``start()`` on the broker's event loop, ``stop()`` at shutdown;
    ``update_master_address`` (from a registration reply) switches masters."""

    def __init__(self, store: MessageStore, master_address: str | None = None, *,
                 heartbeat_interval_ms: int | None = None,
                 housekeeping_interval_ms: int | None = None) -> None:
        config = store.config
        self.store = store
        self.heartbeat_interval_s = (heartbeat_interval_ms or config.ha_send_heartbeat_interval) / 1000
        self.housekeeping_interval_s = \
            (housekeeping_interval_ms or config.ha_housekeeping_interval) / 1000
        self.master_address: str | None = None
        self.connected = False
        #: the last offset reported to the master
        self.reported_offset = -1
        self.last_read = 0.0
        self.last_write = 0.0
        self._received = False
        self._address_changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._session: asyncio.Task[None] | None = None
        if master_address:
            self.update_master_address(master_address)

    def update_master_address(self, address: str | None) -> None:
        """Follow the master at address ("host:port" of its HA port) from now on; a
        connection to another master is closed."""
        if address:
            split_address(address)
        if address == self.master_address:
            return
        log.info("update master address, OLD: %s NEW: %s", self.master_address, address)
        self.master_address = address
        self._address_changed.set()
        if self._session is not None:
            self._session.cancel()

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _run(self) -> None:
        backoff = MIN_BACKOFF_S
        while True:
            address = self.master_address
            if address is None:
                self._address_changed.clear()
                await self._address_changed.wait()
                continue
            session = self._session = asyncio.ensure_future(self._follow(address))
            try:
                await asyncio.wait({session})   # a cancelled session does not cancel _run
            finally:
                if not session.done():
                    session.cancel()
                    await asyncio.gather(session, return_exceptions=True)
                self._session = None
                self.connected = False
            if session.cancelled():     # another master: connect to it at once
                continue
            exc = session.exception()
            received = self._received
            if exc is not None:
                log.warning("HAClient: connection to master %s ends: %s", address,
                            _describe(exc))
            backoff = MIN_BACKOFF_S if received else min(backoff * 2, MAX_BACKOFF_S)
            self._address_changed.clear()
            try:
                await asyncio.wait_for(self._address_changed.wait(), backoff)
            except asyncio.TimeoutError:
                pass

    async def _follow(self, address: str) -> None:
        """One connection to the master (``_received``: whether any frame came)."""
        self._received = False
        host, port = split_address(address)
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port),
                                                CONNECT_TIMEOUT_S)
        store = self.store
        heartbeat: asyncio.Task[None] | None = None
        try:
            self.connected = True
            self.reported_offset = store.get_replica_offset()
            self.last_write = time.monotonic()
            writer.write(REPORT.pack(self.reported_offset))
            await writer.drain()
            log.info("HAClient connected to master %s, reporting offset %d", address,
                     self.reported_offset)
            heartbeat = asyncio.ensure_future(self._heartbeat(writer))
            while True:
                try:
                    header = await asyncio.wait_for(reader.readexactly(HEADER_SIZE),
                                                    self.housekeeping_interval_s)
                    phy_offset, size = parse_header(header)
                    body = await asyncio.wait_for(reader.readexactly(size),
                                                  self.housekeeping_interval_s) if size else b""
                except asyncio.TimeoutError:
                    raise ConnectionError(
                        f"HAClient, housekeeping, found this connection[{address}] expired, "
                        f"{int((time.monotonic() - self.last_read) * 1000)} ms") from None
                self.last_read = time.monotonic()
                self._received = True
                mine = store.get_replica_offset()
                if mine != 0 and mine != phy_offset:
                    raise HAFrameError(
                        "master pushed offset not equal the max phy offset in slave, "
                        f"SLAVE: {mine} MASTER: {phy_offset}")
                if size:
                    mine = store.append_commit_log(phy_offset, body)
                    if mine != self.reported_offset:
                        self._report(writer, mine)
                        await writer.drain()
        finally:
            if heartbeat is not None:
                heartbeat.cancel()
            writer.close()
            if self.connected:
                log.info("HAClient disconnected from master %s at offset %d", address,
                         store.get_replica_offset())

    def _report(self, writer: asyncio.StreamWriter, offset: int) -> None:
        writer.write(REPORT.pack(offset))
        self.reported_offset = offset
        self.last_write = time.monotonic()

    async def _heartbeat(self, writer: asyncio.StreamWriter) -> None:
        """Report the end every haSendHeartbeatInterval when nothing else was reported."""
        while True:
            wait = self.heartbeat_interval_s - (time.monotonic() - self.last_write)
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            self._report(writer, self.store.get_replica_offset())
            await writer.drain()


def _describe(exc: BaseException) -> str:
    if isinstance(exc, asyncio.IncompleteReadError):
        return f"end of stream ({len(exc.partial)} bytes of a frame read)"
    if isinstance(exc, asyncio.TimeoutError):
        return "connect timed out"
    return f"{type(exc).__name__}: {exc}"
