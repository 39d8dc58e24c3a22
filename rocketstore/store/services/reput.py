"""ReputMessageService: follows the CommitLog and dispatches each new record to its
ConsumeQueue and the IndexFile, then tells the arrival listeners.

The walk and both writes are native passes without the GIL (rocketstore._native.dispatch):
the service thread loops over them in native code and takes the GIL only when a pass needs
Python (a queue seen for the first time or whose file is full, a full index file, the next
CommitLog file, a corrupt record) or when listeners or extra dispatchers are registered. So on a
busy store producers almost never hand the GIL to it. Extra dispatchers get each dispatched
range as a DispatchBatch (dispatch.dispatch_region)."""
from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import numpy as np

from rocketstore._native import dispatch as native
from rocketstore._native.dispatch import DispatchBatch, dispatch_region
from rocketstore._native.stop_flag import StopFlag
from rocketstore._native.topic_queue_table import MAX_QUEUE_ID
from rocketstore.common.record import TRANSACTION_TYPE_MASK, SysFlag
from rocketstore.common.topics import SCHEDULE_TOPIC
from rocketstore.store.commit_log import CommitLog
from rocketstore.store.services.service_thread import ServiceThread

if TYPE_CHECKING:
    from rocketstore.store.consume_queue_table import ConsumeQueueTable
    from rocketstore.store.index_service import IndexService

log = logging.getLogger(__name__)

Dispatcher = Callable[[DispatchBatch], None]
# listener(topic, queue_id, next_queue_offset): new messages are visible in that queue
ArrivalListener = Callable[[str, int, int], None]

ROOM_RETRY_S = 0.1      # how often dispatch tries again while the disk has no room
EXT_AHEAD_RECORDS = 4096    # records looked at ahead for queues with an extension


class ReputMessageService(ServiceThread):
    wait_interval_s = 0.001     # RocketMQ sleeps 1 ms between rounds

    def __init__(self, commit_log: CommitLog, consume_queues: ConsumeQueueTable,
                 index_service: IndexService | None = None, *,
                 batch_records: int = 1 << 20) -> None:
        super().__init__("ReputMessageService")
        self.commit_log = commit_log
        self.consume_queues = consume_queues
        self.index_service = index_service
        #: records per pass at most (a pass is one stretch without the GIL)
        self.batch_records = batch_records
        #: more dispatchers, each given every dispatched range as a DispatchBatch, and the
        #: arrival listeners: add them with add_dispatcher / add_arrival_listener, which
        #: tell a running dispatch loop to come back to Python after each pass
        self.dispatchers: list[Dispatcher] = []
        self.arrival_listeners: list[ArrivalListener] = []
        self._native = native.Dispatcher(index_service is not None)
        self._native.set_delay_levels(commit_log.config.delay_levels_ms)
        self._stop = StopFlag()
        self._round_lock = threading.Lock()     # one thread runs passes at a time
        self._follower: threading.Thread | None = None
        self._corrupt_at: int | None = None
        #: why dispatch waits (a ConsumeQueue or IndexFile could not get blocks on disk)
        self.room_error: str | None = None

    def add_arrival_listener(self, listener: ArrivalListener) -> None:
        """listener(topic, queue_id, next_queue_offset) after new messages reach a queue."""
        self.arrival_listeners.append(listener)
        self._native.call_after_pass = 1

    def add_dispatcher(self, dispatcher: Dispatcher) -> None:
        self.dispatchers.append(dispatcher)
        self._native.call_after_pass = 1

    # ---- state -----------------------------------------------------------------------------
    @property
    def reput_from_offset(self) -> int:
        """CommitLog offset of the next record to dispatch."""
        return self._native.offset

    @reput_from_offset.setter
    def reput_from_offset(self, offset: int) -> None:
        # applied by whichever thread runs the next pass (the service thread, or do_reput)
        self._native.request_offset(offset)

    @property
    def dispatched_records(self) -> int:
        return self._native.records

    @property
    def dispatched_timestamp(self) -> int:
        """Store time of the newest record dispatched (0 before the first)."""
        return self._native.last_store_timestamp

    def behind(self) -> int:
        """dispatch_behind_bytes: CommitLog bytes not dispatched yet."""
        return max(0, self.commit_log.max_offset() - self.reput_from_offset)

    # ---- rounds ----------------------------------------------------------------------------
    def do_reput(self) -> int:
        """Dispatch everything readable now; returns the number of records dispatched. While
        the service thread runs, it waits for that thread to get there instead."""
        # The follower holds the round lock for as long as it runs, and takes it before it
        # says so (_follower): poll both instead of blocking on the lock.
        while not self._round_lock.acquire(timeout=0.001):
            follower = self._follower
            if follower is not None and follower is not threading.current_thread():
                return self._wait_follower()
        try:
            before = self._native.records
            while True:
                self._native.take_request()
                status = self._native.run(self.batch_records)
                if not self._handle(status) and status != native.LIMIT:
                    break
            return self._native.records - before
        finally:
            self._native.clear()
            self._round_lock.release()

    def _wait_follower(self) -> int:
        before = self._native.records
        target = self.commit_log.max_offset()
        while self.reput_from_offset < target and self._follower is not None:
            if self._native.last_stop == native.CORRUPT:
                break       # stuck at a corrupt record: nothing more is readable
            time.sleep(0.0005)
        return self._native.records - before

    def run_once(self) -> None:
        with self._round_lock:
            self._follower = threading.current_thread()
            try:
                self._native.take_request()
                self._native.call_after_pass = bool(self.dispatchers or self.arrival_listeners)
                self._native.follow(self.wait_interval_s, self._stop, self._handle,
                                    self.batch_records)
            finally:
                self._follower = None
                self._native.clear()

    def release_files(self) -> None:
        """Let go of every file a pass holds (a store that failed to open)."""
        with self._round_lock:
            self._native.clear()

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Dispatch stops (the running pass ends and every file it held is released) for the
        duration, so files can be removed under it (a deleted topic's queues)."""
        self._stop.set()
        with self._round_lock:
            if not self.is_stopped:
                self._stop.clear()      # the loop's next round waits for this lock
            yield

    def start(self) -> None:
        self._stop.clear()
        super().start()

    def shutdown(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        super().shutdown(timeout_s)

    def on_shutdown(self) -> None:
        self.do_reput()

    # ---- what a pass needs from Python ------------------------------------------------------
    def _handle(self, status: int) -> bool:
        """Deal with a pass's stop (under the round lock); True when the next pass can go
        on at once, False when nothing more can be done now."""
        d = self._native
        self._after_pass()      # first: a requested position drops the file the pass read
        if d.take_request():
            return True
        if status == native.CAUGHT_UP:
            return False
        if status == native.LIMIT:
            return True
        if status == native.NO_FILE:
            return self._next_file()
        if status == native.NEED_QUEUE:
            return self._needs_room(self._register_queue)
        if status == native.NEED_INDEX:
            return self._needs_room(self._register_index)
        if status == native.CORRUPT:
            # damage: skip it (known, or found now: up to the next valid record); records
            # after it are dispatched (README "Integrity")
            offset = d.offset
            damaged = self.commit_log.find_damage(offset, d.stop_reason)
            if damaged.end <= offset:
                if self._corrupt_at != offset:
                    self._corrupt_at = offset
                    log.error("dispatch stopped at CommitLog offset %d: %s", offset,
                              d.stop_reason)
                return False
            log.error("dispatch skips damaged CommitLog range %s", damaged)
            d.set_offset(damaged.end)
            return True
        raise RuntimeError(f"unknown dispatch stop {status}")

    def _needs_room(self, step: Callable[[], None]) -> bool:
        """Run a step that may allocate blocks on disk (a ConsumeQueue or IndexFile growing).
        When the disk has no room it is tried again after ROOM_RETRY_S: dispatch waits, puts
        are refused by the disk watermarks meanwhile, and nothing is lost."""
        try:
            step()
        except OSError as exc:
            if self.room_error is None:
                log.error("dispatch waits for disk space: %s", exc)
            self.room_error = str(exc)
            self._stopped.wait(ROOM_RETRY_S)
            return False
        if self.room_error is not None:
            log.warning("dispatch goes on: the disk has room again")
            self.room_error = None
        return True

    def _next_file(self) -> bool:
        offset = self._native.offset
        low = self.commit_log.min_offset()
        if offset < low:
            offset = low
        if offset >= self.commit_log.max_offset():
            if offset != self._native.offset:
                self._native.set_offset(offset)
            return False
        damaged = self.commit_log.damage.covering(offset) if self.commit_log.damage.ranges else None
        mf = None if damaged is not None else self.commit_log.queue.find_by_offset(offset)
        if mf is None:      # a damaged range or a missing file: on past it
            damaged = damaged or self.commit_log.find_damage(offset)
            if damaged.end <= offset:
                return False
            self._native.set_offset(damaged.end)
            return True
        self._native.set_file(mf, offset - mf.file_from_offset)
        return True

    def _register_queue(self) -> None:
        raw, queue_id, phy, size, tags, qoff = self._native.stop_record()
        topic = raw.decode("utf-8", "replace")
        if not 0 <= queue_id <= MAX_QUEUE_ID:
            log.warning("record with queue id %d in topic %r: not dispatched", queue_id, topic)
            self._native.add_queue(raw, queue_id, None, None, -1)
            return
        cq = self.consume_queues.find_or_create(topic, queue_id)
        cq.max_physic_offset = self._native.queue_max_phy(raw, queue_id, cq.max_physic_offset)
        # the unit that did not fit, the queue's first, or one past the queue's end:
        # ConsumeQueue rolls or creates files, and judges gaps
        cq.put_units(np.array([phy], np.int64), np.array([size], np.int32),
                     np.array([tags], np.int64), np.array([qoff], np.int64))
        self._native.add_queue(raw, queue_id, cq, cq.queue.last_file(), cq.max_physic_offset,
                               cq.ext is not None)
        if cq.rejected:     # its queue offset is the damage: the record is skipped
            self._native.set_offset(phy + size)
        elif cq.ext is not None:
            self._ext_units_ahead(phy + size)

    def _ext_units_ahead(self, start_phy: int) -> None:
        """Write now the units of the next records (up to EXT_AHEAD_RECORDS, in this file)
        of queues with an extension, a queue at a time, which the pass would otherwise stop
        at one by one; the pass then finds them written (and writes their index keys). A
        queue whose next units are not a plain continuation (a gap, a queue offset taken)
        and the delay topic (its tags codes are delivery times) are left to the pass."""
        d = self._native
        mf = d.file
        if mf is None or not 0 <= start_phy - mf.file_from_offset < mf.file_size:
            return
        batch = dispatch_region(mf, start_phy - mf.file_from_offset,
                                max_records=EXT_AHEAD_RECORDS)
        if not len(batch):
            return
        tran = batch.sys_flags & TRANSACTION_TYPE_MASK
        counted = (tran == SysFlag.TRANSACTION_NOT_TYPE) | (tran == SysFlag.TRANSACTION_COMMIT)
        for topic_id, topic in enumerate(batch.topics):
            if topic == SCHEDULE_TOPIC:
                continue
            rows = np.flatnonzero(counted & (batch.topic_ids == topic_id))
            for queue_id in np.unique(batch.queue_ids[rows]).tolist():
                cq = self.consume_queues.find(topic, queue_id)
                if cq is None or cq.ext is None:
                    continue
                mine = rows[batch.queue_ids[rows] == queue_id]
                qoffs = np.ascontiguousarray(batch.queue_offsets[mine], np.int64)
                phys = np.ascontiguousarray(batch.phy_offsets[mine], np.int64)
                if int(qoffs[0]) != cq.file_max_offset or int(phys[0]) < cq.max_physic_offset \
                        or (np.diff(qoffs) != 1).any():
                    continue
                cq.put_units(phys, np.ascontiguousarray(batch.sizes[mine], np.int32),
                             np.ascontiguousarray(batch.tags_codes[mine], np.int64), qoffs)
                d.add_queue(topic.encode("utf-8"), queue_id, cq, cq.queue.last_file(),
                            cq.max_physic_offset, True)

    def _register_index(self) -> None:
        index = self.index_service
        assert index is not None
        d = self._native
        full = d.index_file
        if full is None:
            f, key_start, key_start_phy = index.writable_file()
            d.set_index(f, key_start, key_start_phy)
        else:
            d.set_index(index.roll(full), d.key_start, d.key_start_phy)

    def _after_pass(self) -> None:
        """Extra dispatchers get the range the pass dispatched; listeners hear of new units."""
        d = self._native
        if self.dispatchers and d.file is not None:
            start, end = d.pass_start, d.offset - d.file.file_from_offset
            while start < end:
                batch = dispatch_region(d.file, start, end, max_records=1 << 20)
                if not len(batch):
                    break
                for dispatch in self.dispatchers:
                    dispatch(batch)
                start = batch.stop_position
        if self.arrival_listeners:
            for raw, queue_id, next_offset in d.touched():
                topic = raw.decode("utf-8", "replace")
                for listener in self.arrival_listeners:
                    try:
                        listener(topic, queue_id, next_offset)
                    except Exception:  # noqa: BLE001 - a listener must not stop dispatch
                        log.exception("message arrival listener failed")
