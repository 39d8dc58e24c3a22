"""HAService: the master's side of replication (RocketMQ 4.9's HAService, AcceptSocketService
and HAConnection with its ReadSocketService and WriteSocketService), on the broker's event loop.

Each slave's first 8-byte report says where to start: its CommitLog end, or 0 for "from the
master's last segment" (the start of the segment holding the master's end, as RocketMQ). From
there the connection streams the CommitLog in frames of at most ``haTransferBatchSize`` bytes,
each body a view of the mapped segment (no copy in Python), waiting for the transport to drain
before the next; with nothing to send it sends a heartbeat (bodySize 0) every
``haSendHeartbeatInterval``. Later reports are the slave's acknowledged offset. A slave silent
for ``haHousekeepingInterval`` is dropped; bytes that break the protocol close the connection
with one log line.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rocketstore.ha.protocol import HEADER, REPORT_SIZE, HAFrameError, parse_report
from rocketstore.store import MessageStore

if TYPE_CHECKING:
    from rocketstore.ha.sync_state import SyncStateSet

log = logging.getLogger(__name__)

#: how often an idle connection looks for new CommitLog bytes when no arrival woke it (RocketMQ
#: WriteSocketService waits 100 ms)
IDLE_POLL_S = 0.1


#: acknowledged_offset() when no replica but the master must acknowledge
ALL_ACKNOWLEDGED = 2**63 - 1


@dataclass
class SlaveState:
    """What the master knows of one connected slave (for runtime info and SYNC_MASTER)."""

    address: str
    #: the offset of the slave's first report (-1 before it came)
    request_offset: int = -1
    #: the slave's last reported CommitLog end (-1 before the first report)
    ack_offset: int = -1
    #: where the next frame starts
    next_transfer_offset: int = -1
    connected_at: float = 0.0
    #: more than haSlaveFallbehindMax behind at its last report
    behind: bool = False


class HAConnection:
    """One slave's connection: a reader of its reports and a writer of CommitLog frames."""

    def __init__(self, service: HAService, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.service = service
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername")
        address = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.state = SlaveState(address, connected_at=time.time())
        self._requested = asyncio.Event()
        self._last_read = time.monotonic()

    @property
    def address(self) -> str:
        return self.state.address

    async def run(self) -> None:
        reading = asyncio.ensure_future(self._read_reports())
        writing = asyncio.ensure_future(self._write_frames())
        why = "closed"
        try:
            done, _ = await asyncio.wait({reading, writing},
                                         return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                exc = task.exception()
                if exc is not None:
                    why = _describe(exc)
                    break
                why = task.result() or why
        except asyncio.CancelledError:
            why = "the master stops"
            raise
        finally:
            for task in (reading, writing):
                task.cancel()
            await asyncio.gather(reading, writing, return_exceptions=True)
            self.writer.close()
            log.info("HA slave %s disconnected (%s); it had acknowledged offset %d",
                     self.address, why, self.state.ack_offset)

    async def _read_reports(self) -> str:
        housekeeping = self.service.housekeeping_interval_s
        while True:
            try:
                data = await asyncio.wait_for(self.reader.readexactly(REPORT_SIZE),
                                              housekeeping)
            except asyncio.TimeoutError:
                silent_ms = int((time.monotonic() - self._last_read) * 1000)
                log.warning("ha housekeeping, found this connection[%s] expired, %d ms",
                            self.address, silent_ms)
                return f"silent for {silent_ms} ms"
            except asyncio.IncompleteReadError as exc:
                return "end of stream" if not exc.partial else \
                    f"end of stream inside a report ({len(exc.partial)} of 8 bytes)"
            self._last_read = time.monotonic()
            offset = parse_report(data)
            if self.state.request_offset >= 0:
                # an acknowledgement of bytes never sent is not the slave's end (a stream out
                # of step): counting it would answer SYNC_MASTER sends no replica has
                sent = max(self.state.next_transfer_offset, self.state.request_offset)
                if offset > sent:
                    raise HAFrameError(f"slave reported offset {offset}, past the {sent} "
                                       "sent to it")
            self.state.ack_offset = offset
            self.service.acknowledged()
            self._judge_lag(offset)
            if self.state.request_offset < 0:
                self.state.request_offset = offset
                log.info("slave[%s] request offset %d", self.address, offset)
                self._requested.set()

    def _judge_lag(self, offset: int) -> None:
        """Log when the slave falls more than haSlaveFallbehindMax behind, and when it is
        back within it."""
        lag = self.service.store.get_max_phy_offset() - offset
        limit = self.service.store.config.ha_slave_fallbehind_max
        if lag > limit and not self.state.behind:
            self.state.behind = True
            log.warning("HA slave %s falls behind: %d bytes behind the master "
                        "(haSlaveFallbehindMax %d)", self.address, lag, limit)
        elif lag <= limit and self.state.behind:
            self.state.behind = False
            log.info("HA slave %s is within haSlaveFallbehindMax again (%d bytes behind)",
                     self.address, lag)

    async def _write_frames(self) -> str:
        service = self.service
        store = service.store
        await self._requested.wait()
        offset = self.state.request_offset
        if offset == 0:
            # the start of the segment holding the end (RocketMQ: maxOffset - maxOffset % size)
            end = store.get_max_phy_offset()
            offset = end - end % store.config.mapped_file_size_commit_log
        self.state.next_transfer_offset = offset
        if offset > store.get_max_phy_offset():
            log.warning("HA slave %s asks for offset %d, past the master's end %d: it gets "
                        "heartbeats until the master gets there", self.address, offset,
                        store.get_max_phy_offset())
        log.info("HA slave %s: streaming the CommitLog from offset %d", self.address, offset)
        batch = service.transfer_batch_size
        writer = self.writer
        last_write = time.monotonic()
        while True:
            view = store.get_commitlog_data(offset)
            if view is None:
                now = time.monotonic()
                if now - last_write >= service.heartbeat_interval_s:
                    writer.write(HEADER.pack(offset, 0))
                    await writer.drain()
                    last_write = time.monotonic()
                    continue
                wait = min(IDLE_POLL_S, service.heartbeat_interval_s - (now - last_write))
                await service.wait_for_data(wait)
                continue
            size = min(len(view), batch)
            writer.write(HEADER.pack(offset, size))
            writer.write(view[:size] if size < len(view) else view)
            del view        # the segment stays pinned only while the transport holds bytes
            offset += size
            self.state.next_transfer_offset = offset
            await writer.drain()
            last_write = time.monotonic()


def _describe(exc: BaseException) -> str:
    if isinstance(exc, HAFrameError):
        return f"bad report: {exc}"
    return f"{type(exc).__name__}: {exc}"


class HAService:
    """The master's HA listener; ``start()`` on the broker's event loop, ``stop()`` at
    shutdown. ``slaves()`` tells who follows and how far they acknowledged."""

    #: controller mode: the replicas the controller holds caught up (None: not in that mode)
    sync_state_set: SyncStateSet | None = None

    def __init__(self, store: MessageStore, *, port: int, bind_address: str = "127.0.0.1",
                 transfer_batch_size: int | None = None,
                 heartbeat_interval_ms: int | None = None,
                 housekeeping_interval_ms: int | None = None) -> None:
        config = store.config
        self.store = store
        self.port = port
        self.bind_address = bind_address
        self.transfer_batch_size = transfer_batch_size or config.ha_transfer_batch_size
        if self.transfer_batch_size <= 0:
            raise ValueError(f"transfer_batch_size must be positive, got {self.transfer_batch_size}")
        self.heartbeat_interval_s = (heartbeat_interval_ms or config.ha_send_heartbeat_interval) / 1000
        self.housekeeping_interval_s = \
            (housekeeping_interval_ms or config.ha_housekeeping_interval) / 1000
        self.connections: set[HAConnection] = set()
        self._server: asyncio.AbstractServer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._data = asyncio.Event()
        self._wake_pending = False
        self._listening = False
        #: SYNC_MASTER's sends waiting for a slave: (offset, deadline, callback), in append
        #: order (offsets and deadlines both grow along it)
        self._waiters: deque[tuple[int, float, Callable[[bool], object]]] = deque()
        self._timeout_handle: asyncio.TimerHandle | None = None

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._server = await asyncio.start_server(self._accept, self.bind_address, self.port)
        sockets = self._server.sockets
        if sockets:
            self.port = sockets[0].getsockname()[1]
        if not self._listening:
            self.store.add_arrival_listener(self._arrival)
        self._listening = True
        log.info("HAService listening on %s:%d", self.bind_address, self.port)

    async def stop(self) -> None:
        self._listening = False
        self._fail_waiters()
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if server is not None:
            await server.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self._listening:
            writer.close()
            return
        connection = HAConnection(self, reader, writer)
        log.info("HAService receive new connection, %s", connection.address)
        self.connections.add(connection)
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)   # type: ignore[arg-type]
        try:
            await connection.run()
        except asyncio.CancelledError:
            pass
        except Exception:   # noqa: BLE001 - one slave's failure never reaches the loop
            log.exception("HA connection %s failed", connection.address)
        finally:
            self.connections.discard(connection)
            self._tasks.discard(task)     # type: ignore[arg-type]

    # ---- new data ----------------------------------------------------------------------------
    def _arrival(self, topic: str, queue_id: int, next_offset: int) -> None:
        """The store's arrival listener (its dispatch thread): wake idle connections once."""
        if self._wake_pending or not self.connections or self._loop is None:
            return
        self._wake_pending = True
        try:
            self._loop.call_soon_threadsafe(self._wake)
        except RuntimeError:    # the loop is closed: the broker stopped
            pass

    def appended(self) -> None:
        """The loop, after a send that waits for a slave: wake idle connections now, not
        after the dispatch thread's arrival (a thread hop on every SYNC_MASTER send's path);
        one wake a loop turn."""
        if not self._wake_pending and self.connections and self._loop is not None:
            self._wake_pending = True
            self._loop.call_soon(self._wake)

    def _wake(self) -> None:
        self._wake_pending = False
        self._data.set()
        self._data = asyncio.Event()

    async def wait_for_data(self, timeout_s: float) -> None:
        """Until new CommitLog bytes were dispatched or timeout_s passed."""
        if timeout_s <= 0:
            return
        try:
            await asyncio.wait_for(self._data.wait(), timeout_s)
        except asyncio.TimeoutError:
            pass

    # ---- what it knows -----------------------------------------------------------------------
    def slaves(self) -> list[dict[str, Any]]:
        """Each connected slave: address, acknowledged offset and lag in bytes and in ms
        (None before its first report, or when the store times are unknown)."""
        end = self.store.get_max_phy_offset()
        return [{"address": c.state.address, "ackOffset": c.state.ack_offset,
                 "lagBytes": max(0, end - c.state.ack_offset) if c.state.ack_offset >= 0
                 else None, "lagMs": self.lag_ms(c.state.ack_offset, end)}
                for c in sorted(self.connections, key=lambda c: c.state.address)]

    def lag_ms(self, ack_offset: int, end: int) -> int | None:
        """How much older the first record a slave lacks is than the master's newest (0 when
        it lacks nothing; None before its first report or when the times are unknown)."""
        if ack_offset < 0:
            return None
        if ack_offset >= end:
            return 0
        store = self.store
        newest = store.last_store_timestamp()
        first_missing = store.store_timestamp_from(ack_offset)
        if first_missing < 0:   # only the rest of the newest record is missing
            return 0
        return None if newest <= 0 else max(0, newest - first_missing)

    def max_ack_offset(self) -> int:
        """The highest offset a connected slave acknowledged (RocketMQ push2SlaveMaxOffset;
        -1 with no slave)."""
        return max((c.state.ack_offset for c in self.connections), default=-1)

    # ---- SYNC_MASTER ---------------------------------------------------------------------------
    # The acknowledgement rule lives in acknowledged_offset and is_slave_ok alone: a controller
    # mode that counts the SyncStateSet (inSyncReplicas) replaces these two.

    def acknowledged_offset(self) -> int:
        """The CommitLog offset below which enough replicas have every byte for SYNC_MASTER to
        answer a send ending there: RocketMQ 4.9's rule, any one slave (push2SlaveMaxOffset);
        in controller mode every slave of the SyncStateSet and every replica joining it (the
        set decides who counts; a set of the master alone acknowledges everything, as
        RocketMQ 5 with one in-sync replica)."""
        sync_state = self.sync_state_set
        if sync_state is None:
            return self.max_ack_offset()
        slave_ids = sync_state.waited_for()
        if not slave_ids:
            return ALL_ACKNOWLEDGED
        acks = {c.state.address: c.state.ack_offset for c in self.connections}
        return min(acks.get(sync_state.addresses.get(i, ""), -1) for i in slave_ids)

    def is_acknowledged(self, offset: int) -> bool:
        """Whether a send whose record ends at ``offset`` is acknowledged by enough replicas."""
        return offset <= self.acknowledged_offset()

    def is_slave_ok(self, master_put_where: int) -> bool:
        """RocketMQ's isSlaveOK: a slave is connected and the best one is less than
        haSlaveFallbehindMax behind ``master_put_where`` (else SLAVE_NOT_AVAILABLE at once)."""
        if self.sync_state_set is not None:
            # controller mode: the SyncStateSet says who must acknowledge; a member that stays
            # behind leaves it (haMaxTimeSlaveNotCatchup) rather than failing sends at once
            return True
        if not self.connections:
            return False
        return master_put_where - self.max_ack_offset() < self.store.config.ha_slave_fallbehind_max

    def when_acknowledged(self, offset: int, timeout_s: float,
                          callback: Callable[[bool], object]) -> None:
        """``callback(True)`` on the loop once :meth:`is_acknowledged` holds for ``offset``
        (at once when it does now), ``callback(False)`` when ``timeout_s`` passed first
        (FLUSH_SLAVE_TIMEOUT). Connections waiting for data are woken (RocketMQ's wakeupAll)."""
        if self.is_acknowledged(offset):
            callback(True)
            return
        loop = self._loop or asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        self._waiters.append((offset, deadline, callback))
        if self._timeout_handle is None:
            self._timeout_handle = loop.call_at(deadline, self._expire)
        self._wake()    # at once: the writers run in the next loop iteration

    def acknowledged(self) -> None:
        """A slave reported: answer the waiters now acknowledged (in order)."""
        waiters = self._waiters
        if not waiters:
            return
        acked = self.acknowledged_offset()
        while waiters and waiters[0][0] <= acked:
            _answer(waiters.popleft()[2], True)

    def _expire(self) -> None:
        """Time out the waiters past their deadline; wait for the next one's."""
        self._timeout_handle = None
        waiters = self._waiters
        loop = self._loop or asyncio.get_running_loop()
        now = loop.time()
        while waiters and waiters[0][1] <= now:
            offset, _, callback = waiters.popleft()
            _answer(callback, self.is_acknowledged(offset))
        if waiters:
            self._timeout_handle = loop.call_at(waiters[0][1], self._expire)

    def _fail_waiters(self) -> None:
        """At stop: every waiter gets its answer now (acknowledged or not)."""
        if self._timeout_handle is not None:
            self._timeout_handle.cancel()
            self._timeout_handle = None
        while self._waiters:
            offset, _, callback = self._waiters.popleft()
            _answer(callback, self.is_acknowledged(offset))


def _answer(callback: Callable[[bool], object], acknowledged: bool) -> None:
    try:
        callback(acknowledged)
    except Exception:   # noqa: BLE001 - one waiter's failure never reaches the others
        log.exception("answering a SYNC_MASTER send failed")
