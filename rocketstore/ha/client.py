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

from rocketstore.ha.protocol import (
    HEADER_SIZE,
    MAX_FRAME_BODY,
    REPORT,
    HAFrameError,
    parse_header,
)
from rocketstore.remoting import connected_to_itself
from rocketstore.store import MessageStore

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 3.0
MIN_BACKOFF_S = 0.2
#: RocketMQ's slave waits 5 s before connecting again
MAX_BACKOFF_S = 5.0
#: how often an idle connection checks whether a report or housekeeping is due
HOUSEKEEPING_TICK_S = 0.5
#: room kept free at the end of the read buffer for the next read
READ_SLACK = 256 * 1024


def split_address(address: str) -> tuple[str, int]:
    """("host", port) of "host:port"; ValueError naming the address otherwise."""
    host, sep, port = address.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) <= 65535:
        raise ValueError(f"haMasterAddress must be host:port, got {address!r}")
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
        #: host:port of this end of the connection to the master ("" when not connected)
        self.local_address = ""
        #: the last offset reported to the master
        self.reported_offset = -1
        self.last_read = 0.0
        self.last_write = 0.0
        self._appended = False
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
            if exc is not None:
                log.warning("HAClient: connection to master %s ends: %s", address,
                            _describe(exc))
            # a connection that brought records starts the back-off afresh; a master that
            # sends nothing usable is asked less and less often
            backoff = MIN_BACKOFF_S if self._appended else min(backoff * 2, MAX_BACKOFF_S)
            self._address_changed.clear()
            try:
                await asyncio.wait_for(self._address_changed.wait(), backoff)
            except asyncio.TimeoutError:
                pass

    async def _follow(self, address: str) -> None:
        """One connection to the master (``_appended``: whether it brought records)."""
        self._appended = False
        host, port = split_address(address)
        loop = asyncio.get_running_loop()
        transport, stream = await asyncio.wait_for(
            loop.create_connection(lambda: MasterStream(self), host, port), CONNECT_TIMEOUT_S)
        store = self.store
        if connected_to_itself(transport):
            transport.close()
            raise ConnectionError(f"connected to itself at {address}: nothing listens there "
                                  "(the port is in the ephemeral range)")
        try:
            self.connected = True
            local = transport.get_extra_info("sockname")
            # what the master sees as this slave's address (controller mode maps it to a
            # broker id)
            self.local_address = f"{local[0]}:{local[1]}" if isinstance(local, tuple) else ""
            self.last_read = time.monotonic()
            stream.report(store.get_replica_offset())
            log.info("HAClient connected to master %s, reporting offset %d", address,
                     self.reported_offset)
            tick = min(HOUSEKEEPING_TICK_S, self.heartbeat_interval_s / 2)
            while True:
                # reports when idle, housekeeping when the master is silent
                try:
                    await asyncio.wait_for(asyncio.shield(stream.closed), tick)
                    return
                except asyncio.TimeoutError:
                    pass
                now = time.monotonic()
                if now - self.last_read > self.housekeeping_interval_s:
                    raise ConnectionError(
                        f"HAClient, housekeeping, found this connection[{address}] expired, "
                        f"{int((now - self.last_read) * 1000)} ms")
                if now - self.last_write >= self.heartbeat_interval_s:
                    stream.report(store.get_replica_offset())
        finally:
            transport.close()
            if self.connected:
                log.info("HAClient disconnected from master %s at offset %d", address,
                         store.get_replica_offset())


class MasterStream(asyncio.BufferedProtocol):
    """The bytes from the master, received straight into one buffer (RocketMQ's slave reads
    into a 4 MiB buffer too) and appended frame by frame; after each read that completed
    frames, one report of the new end. A protocol error or a failed append ends the
    connection: ``closed`` holds why."""

    def __init__(self, client: HAClient) -> None:
        self.client = client
        self.buffer = bytearray(HEADER_SIZE + MAX_FRAME_BODY + READ_SLACK)
        self.view = memoryview(self.buffer)
        self.start = 0      # the next frame's first byte
        self.end = 0        # bytes received up to here
        self.transport: asyncio.Transport | None = None
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            if exc is None:
                left = self.end - self.start
                exc = ConnectionError("end of stream" + (
                    f" ({left} bytes of a frame read)" if left else ""))
            self.closed.set_exception(exc)
            self.closed.exception()     # retrieved: _follow may be gone already

    def _fail(self, exc: BaseException) -> None:
        if not self.closed.done():
            self.closed.set_exception(exc)
            self.closed.exception()
        if self.transport is not None:
            self.transport.abort()

    def get_buffer(self, sizehint: int) -> memoryview:
        if len(self.buffer) - self.end < READ_SLACK:
            # move the partial frame to the front (a whole frame always fits after it)
            left = self.end - self.start
            self.buffer[:left] = bytes(self.view[self.start:self.end])
            self.start, self.end = 0, left
        return self.view[self.end:]

    def buffer_updated(self, nbytes: int) -> None:
        self.end += nbytes
        client = self.client
        client.last_read = time.monotonic()
        try:
            appended = self._frames()
        except Exception as exc:  # noqa: BLE001 - the connection ends, the slave goes on
            self._fail(exc)
            return
        if appended:
            client._appended = True
            self.report(client.store.get_replica_offset())

    def _frames(self) -> bool:
        """Append the bodies of every complete frame in the buffer (one store call: they
        follow each other); whether any carried bytes. A frame not at the slave's end
        raises HAFrameError after the frames before it are appended."""
        store = self.client.store
        view = self.view
        expected = store.get_replica_offset()
        first = -1          # the first body's offset
        bodies: list[memoryview] = []
        try:
            while self.end - self.start >= HEADER_SIZE:
                phy_offset, size = parse_header(view[self.start:self.start + HEADER_SIZE])
                body_at = self.start + HEADER_SIZE
                if self.end - body_at < size:
                    break
                if expected != 0 and expected != phy_offset:
                    raise HAFrameError(
                        "master pushed offset not equal the max phy offset in slave, "
                        f"SLAVE: {expected} MASTER: {phy_offset}")
                if size:
                    if first < 0:
                        first = phy_offset
                    bodies.append(view[body_at:body_at + size])
                    expected = phy_offset + size
                self.start = body_at + size
        finally:
            if bodies:
                store.append_commit_log(first, bodies)
                bodies.clear()
        if self.start == self.end:
            self.start = self.end = 0
        return first >= 0

    def report(self, offset: int) -> None:
        """Tell the master how far this slave's CommitLog goes."""
        if self.transport is None or self.transport.is_closing():
            return
        self.transport.write(REPORT.pack(offset))
        self.client.reported_offset = offset
        self.client.last_write = time.monotonic()


def _describe(exc: BaseException) -> str:
    if isinstance(exc, asyncio.IncompleteReadError):
        return f"end of stream ({len(exc.partial)} bytes of a frame read)"
    if isinstance(exc, asyncio.TimeoutError):
        return "connect timed out"
    return f"{type(exc).__name__}: {exc}"
