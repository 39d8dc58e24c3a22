"""HAService: the master's side of replication (RocketMQ 4.9's HAService, AcceptSocketService
and HAConnection with its ReadSocketService and WriteSocketService), on the broker's event loop.

Each slave's first 8-byte report says where to start: its CommitLog end, or 0 for "from the
master's last segment" (the start of the segment holding the master's end, as RocketMQ). From
there the connection streams the CommitLog in frames of at most ``haTransferBatchSize`` bytes,
each body a view of the mapped segment (no copy in Python). A connection is a protocol driven by
callbacks, not a task: new bytes (a send's append, the dispatch thread's arrival, a 100 ms poll)
make it write every readable byte at once, many frames in one vectored write (up to
``BURST_BYTES``), until the transport's buffer passes its high-water mark; it goes on when the
buffer drained. Group commit: the sends appended while the slave has not reported the last
write yet leave together in the write its report triggers, and that report answers the
SYNC_MASTER waiters in the callback that reads it, with no task to wake. With nothing to send it sends a heartbeat (bodySize 0) every ``haSendHeartbeatInterval``.
Later reports are the slave's acknowledged offset. A slave silent for ``haHousekeepingInterval``
is dropped; bytes that break the protocol close the connection with one log line.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rocketstore.ha._acks import SlaveAcks
from rocketstore.ha.protocol import HEADER, REPORT_SIZE, HAFrameError, parse_report
from rocketstore.store import MessageStore

if TYPE_CHECKING:
    from rocketstore.ha.sync_state import SyncStateSet

log = logging.getLogger(__name__)

#: how often a connection looks for new CommitLog bytes when no arrival woke it, and checks
#: its heartbeat and housekeeping (RocketMQ WriteSocketService waits 100 ms)
IDLE_POLL_S = 0.1
#: the most frame bytes handed to the transport in one vectored write: 32 frames of the
#: default haTransferBatchSize (each frame stays at most haTransferBatchSize on the wire)
BURST_BYTES = 1024 * 1024
#: the transport's buffer above which a connection stops writing until it drained (pinned
#: segment views, not copies)
WRITE_HIGH_WATER = 4 * BURST_BYTES
#: how long stop() waits for the connections to close
STOP_WAIT_S = 5.0


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


class HAConnection(asyncio.Protocol):
    """One slave's connection: reads its reports, writes CommitLog frames (see the module)."""

    def __init__(self, service: HAService) -> None:
        self.service = service
        self.state = SlaveState("", connected_at=time.time())
        self.transport: asyncio.Transport | None = None
        #: the start of a report split across reads
        self._partial = b""
        self._streaming = False
        self._paused = False
        self._why = "closed"
        self._last_read = self._last_write = time.monotonic()
        self._tick_handle: asyncio.TimerHandle | None = None
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    @property
    def address(self) -> str:
        return self.state.address

    # ---- the transport's callbacks ---------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.state.address = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        service = self.service
        if not service.listening:
            transport.close()
            return
        transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)    # type: ignore[attr-defined]
        log.info("HAService receive new connection, %s", self.address)
        service.connections.add(self)
        service.refresh_acks()
        self._tick_handle = asyncio.get_running_loop().call_later(IDLE_POLL_S, self._tick)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._tick_handle is not None:
            self._tick_handle.cancel()
            self._tick_handle = None
        if self in self.service.connections:
            self.service.connections.discard(self)
            self.service.refresh_acks()
            why = self._why if exc is None or self._why != "closed" else _describe(exc)
            log.info("HA slave %s disconnected (%s); it had acknowledged offset %d",
                     self.address, why, self.state.ack_offset)
        if not self.closed.done():
            self.closed.set_result(None)

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self.transfer()

    def eof_received(self) -> bool:
        self._why = "end of stream" if not self._partial else \
            f"end of stream inside a report ({len(self._partial)} of 8 bytes)"
        return False

    def data_received(self, data: bytes) -> None:
        self._last_read = time.monotonic()
        if self._partial:
            data = self._partial + data
        whole = len(data) - len(data) % REPORT_SIZE
        self._partial = data[whole:]
        try:
            for at in range(0, whole, REPORT_SIZE):
                self._report(parse_report(data[at:at + REPORT_SIZE]))
        except HAFrameError as exc:
            self.close(_describe(exc))
            return
        if whole:
            self.transfer()     # what was appended meanwhile goes first: the slave works on
            self.service.refresh_acks()     # it while the master answers the sends

    def _report(self, offset: int) -> None:
        state = self.state
        if state.request_offset >= 0:
            # an acknowledgement of bytes never sent is not the slave's end (a stream out of
            # step): counting it would answer SYNC_MASTER sends no replica has
            sent = max(state.next_transfer_offset, state.request_offset)
            if offset > sent:
                raise HAFrameError(f"slave reported offset {offset}, past the {sent} sent to it")
        state.ack_offset = offset
        self._judge_lag(offset)
        if state.request_offset < 0:
            state.request_offset = offset
            log.info("slave[%s] request offset %d", self.address, offset)
            self._start_streaming(offset)

    def close(self, why: str) -> None:
        """End the connection (why goes in the log line)."""
        self._why = why
        if self.transport is not None:
            self.transport.abort()

    # ---- what it sends ---------------------------------------------------------------------
    def _start_streaming(self, offset: int) -> None:
        store = self.service.store
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
        self._streaming = True
        self.transfer()

    def transfer(self, *, force: bool = False) -> None:
        """Write every readable byte from the next transfer offset, as frames of at most
        haTransferBatchSize, BURST_BYTES a vectored write, until the transport's buffer is
        full (resume_writing goes on) or nothing is left.

        Group commit: while the slave has not acknowledged the last write, less than a
        burst of new bytes waits for its report (the slave's next read then takes every send
        appended meanwhile, one append and one report for all; against writing at once, a
        little less CPU a send and a higher SYNC_MASTER rate: bench/README.md, "ha.py: the
        master's HA connection"); a slave catching up (a burst or more to send) is streamed
        to without waiting, and ``force`` (the 100 ms poll) writes regardless."""
        transport = self.transport
        if not self._streaming or transport is None or transport.is_closing():
            return
        store = self.service.store
        batch = self.service.transfer_batch_size
        burst = max(batch, BURST_BYTES - BURST_BYTES % batch)     # whole frames
        offset = self.state.next_transfer_offset
        if (not force and self.state.ack_offset < offset
                and store.get_max_phy_offset() - offset < burst):
            return
        pack = HEADER.pack
        while not self._paused:
            view = store.get_commitlog_data(offset)
            if view is None:
                break
            size = min(len(view), burst)
            parts: list[bytes | memoryview] = []
            at = 0
            while at < size:
                n = min(batch, size - at)
                parts.append(pack(offset + at, n))
                parts.append(view[at:at + n])
                at += n
            del view        # the segment stays pinned only while the transport holds bytes
            offset += size
            self.state.next_transfer_offset = offset
            transport.writelines(parts)
            self._last_write = time.monotonic()

    def _tick(self) -> None:
        """Every IDLE_POLL_S: new bytes no wake-up announced, the heartbeat when idle, and
        housekeeping (a slave silent for haHousekeepingInterval is dropped)."""
        self._tick_handle = None
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        service = self.service
        now = time.monotonic()
        silent = now - self._last_read
        if silent > service.housekeeping_interval_s:
            silent_ms = int(silent * 1000)
            log.warning("ha housekeeping, found this connection[%s] expired, %d ms",
                        self.address, silent_ms)
            self.close(f"silent for {silent_ms} ms")
            return
        self.transfer(force=True)
        if (self._streaming and not self._paused
                and now - self._last_write >= service.heartbeat_interval_s):
            transport.write(HEADER.pack(self.state.next_transfer_offset, 0))
            self._last_write = now
        self._tick_handle = asyncio.get_running_loop().call_later(IDLE_POLL_S, self._tick)

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


def _describe(exc: BaseException) -> str:
    if isinstance(exc, HAFrameError):
        return f"bad report: {exc}"
    return f"{type(exc).__name__}: {exc}"


class HAService:
    """The master's HA listener; ``start()`` on the broker's event loop, ``stop()`` at
    shutdown. ``slaves()`` tells who follows and how far they acknowledged."""

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
        self._listening = False
        #: SYNC_MASTER's sends waiting for a slave, and the acknowledgements they wait on
        #: (kept current by refresh_acks)
        self.acks = SlaveAcks(config.ha_slave_fallbehind_max)
        self._sync_state_set: SyncStateSet | None = None
        self._timeout_handle: asyncio.TimerHandle | None = None

    @property
    def sync_state_set(self) -> SyncStateSet | None:
        """Controller mode: the replicas the controller holds caught up (None: not in that
        mode)."""
        return self._sync_state_set

    @sync_state_set.setter
    def sync_state_set(self, value: SyncStateSet | None) -> None:
        self._sync_state_set = value
        self.acks.controller_mode = value is not None
        self.refresh_acks()

    @property
    def listening(self) -> bool:
        return self._listening

    async def start(self) -> None:
        loop = self._loop = asyncio.get_running_loop()
        self.acks.bind(loop.time, loop.call_soon, self._wake, self._arm_timer)
        if not self._listening:
            self.store.add_arrival_listener(self._arrival)
        self._listening = True
        self._server = await loop.create_server(lambda: HAConnection(self), self.bind_address,
                                                self.port)
        sockets = self._server.sockets
        if sockets:
            self.port = sockets[0].getsockname()[1]
        log.info("HAService listening on %s:%d", self.bind_address, self.port)

    async def stop(self) -> None:
        self._listening = False
        self._fail_waiters()
        server, self._server = self._server, None
        if server is not None:
            server.close()
        connections = list(self.connections)
        for connection in connections:
            connection.close("the master stops")
        if connections:
            await asyncio.wait([c.closed for c in connections], timeout=STOP_WAIT_S)
        if server is not None:
            await server.wait_closed()

    # ---- new data ----------------------------------------------------------------------------
    def _arrival(self, topic: str, queue_id: int, next_offset: int) -> None:
        """The store's arrival listener (its dispatch thread): wake the connections once."""
        acks = self.acks
        if acks.wake_pending or not self.connections or self._loop is None:
            return
        acks.wake_pending = True
        try:
            self._loop.call_soon_threadsafe(self._wake)
        except RuntimeError:    # the loop is closed: the broker stopped
            acks.wake_pending = False

    def _wake(self) -> None:
        self.acks.wake_pending = False
        for connection in list(self.connections):
            connection.transfer()

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
        best = -1
        for connection in self.connections:     # once per send: no generator
            ack = connection.state.ack_offset
            if ack > best:
                best = ack
        return best

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
        haSlaveFallbehindMax behind ``master_put_where`` (else SLAVE_NOT_AVAILABLE at once);
        in controller mode always: the SyncStateSet says who must acknowledge, and a member
        that stays behind leaves it (haMaxTimeSlaveNotCatchup) rather than failing sends."""
        self.refresh_acks()
        return self.acks.slave_ok(master_put_where)

    def when_acknowledged(self, offset: int, timeout_s: float,
                          callback: Callable[[bool], object]) -> None:
        """``callback(True)`` on the loop once :meth:`is_acknowledged` holds for ``offset``
        (at once when it does now), ``callback(False)`` when ``timeout_s`` passed first
        (FLUSH_SLAVE_TIMEOUT). Connections waiting for data are woken (RocketMQ's wakeupAll).
        The broker's sends call ``acks.wait`` directly (the same, natively)."""
        self.acks.wait(offset, timeout_s, callback)

    def refresh_acks(self) -> None:
        """Tell :attr:`acks` what the slaves acknowledged now (after reports, a connection
        change, a SyncStateSet change), answering the waiters it acknowledges, in order."""
        best = self.max_ack_offset()
        acked = best if self._sync_state_set is None else self.acknowledged_offset()
        self.acks.update(bool(self.connections), best, acked)

    def _arm_timer(self, deadline: float) -> None:
        loop = self._loop or asyncio.get_running_loop()
        self._timeout_handle = loop.call_at(deadline, self._expire)

    def _expire(self) -> None:
        """Time out the waiters past their deadline; wait for the next one's."""
        self._timeout_handle = None
        self.acks.timer_armed = False
        self.refresh_acks()
        loop = self._loop or asyncio.get_running_loop()
        following = self.acks.expire(loop.time())
        if following >= 0:
            self.acks.timer_armed = True
            self._arm_timer(following)

    def _fail_waiters(self) -> None:
        """At stop: every waiter gets its answer now (acknowledged or not)."""
        if self._timeout_handle is not None:
            self._timeout_handle.cancel()
            self._timeout_handle = None
        self.acks.timer_armed = False
        self.refresh_acks()
        self.acks.fail_all()
