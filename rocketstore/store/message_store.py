"""MessageStore: the one entry point. Wires the CommitLog (and the services built on it) and
owns the lifecycle: load -> recover -> start -> shutdown."""
from __future__ import annotations

import atexit
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from rocketstore._native import batch_put, hosts, record, record_writer
from rocketstore.common.bloom import BloomFilter
from rocketstore.config import LIVE_CONFIG_FIELDS, StoreConfig
from rocketstore.message import (
    GetMessageStatus,
    Message,
    MessageExt,
    PutMessageResult,
    PutMessagesResult,
    PutMessageStatus,
)
from rocketstore.store import description
from rocketstore.store import get_message as reader
from rocketstore.store.checkpoint import StoreCheckpoint
from rocketstore.store.clock import Clock, SystemClock
from rocketstore.store.commit_log import CommitLog
from rocketstore.store.consume_queue import ConsumeQueue
from rocketstore.store.consume_queue_ext import CqExtUnit
from rocketstore.store.consume_queue_table import ConsumeQueueTable
from rocketstore.store.damage import DAMAGE_FILE, DamagedRange
from rocketstore.store.damage_book import DamageBook
from rocketstore.store.filter_bitmap import (
    CONSUMER_FILTER_FILE,
    FilterBitmaps,
    GroupFilter,
    ext_unit_writer,
)
from rocketstore.store.get_message import GetMessageResult
from rocketstore.store.index_service import IndexService
from rocketstore.store.layout import StorePaths, detect_geometry
from rocketstore.store.mapped_file_queue import FlushFunction
from rocketstore.store.reader import ColumnarReads
from rocketstore.store.recovery import Progress, RecoveryReport, recover
from rocketstore.store.replica_log import ReplicaLog
from rocketstore.store.services.allocate import AllocateMappedFileService
from rocketstore.store.services.clean import (
    CleanCommitLogService,
    CleanConsumeQueueService,
    CleanFilesService,
    DiskUsageProbe,
    disk_used_ratio,
)
from rocketstore.store.services.flush_consume_queue import FlushConsumeQueueService
from rocketstore.store.services.reput import ArrivalListener, ReputMessageService
from rocketstore.store.shutdown_state import (
    QUEUE_OFFSETS_FILE,
    QueueOffsets,
    read_shutdown_state,
    remove_shutdown_state,
    write_shutdown_state,
)
from rocketstore.store.store_lock import StoreLock, lock_holder
from rocketstore.store.store_maintenance import StoreMaintenance
from rocketstore.store.transient_store_pool import TransientStorePool

if TYPE_CHECKING:
    from rocketstore._native.put_path import PutLock
    from rocketstore.store.services.durability import DurableWatch

log = logging.getLogger(__name__)

_open_stores: weakref.WeakSet[MessageStore] = weakref.WeakSet()


def _fit_to_files(root: str, config: StoreConfig, *, index_geometry_given: bool) -> StoreConfig:
    """config with the file sizes of the files already in the store: an existing store opens
    as it was written (segment and ConsumeQueue sizes cannot change under it). Each IndexFile
    is read with its own geometry (IndexService.load); new ones get the config's when it was
    given, as RocketMQ's, else the newest file's."""
    found = detect_geometry(root, config.store_path_commit_log,
                            hash_slots=config.max_hash_slot_num, index_num=config.max_index_num)
    if index_geometry_given:
        found.pop("max_hash_slot_num", None)
        found.pop("max_index_num", None)
    changes = {name: size for name, size in found.items() if getattr(config, name) != size}
    if not changes:
        return config
    log.info("store %s: file sizes taken from its files: %s", root,
             ", ".join(f"{name}={size}" for name, size in sorted(changes.items())))
    return config.replace(**changes)


@dataclass
class QueryMessageResult:
    messages: list[MessageExt]
    index_last_update_timestamp: int
    index_last_update_phy_offset: int


class PutMessageCall(Protocol):
    """MessageStore.put_message's signature."""

    def __call__(self, message: Message, queue_id: int = 0) -> PutMessageResult: ...


class MessageStore(ColumnarReads, StoreMaintenance, ReplicaLog):
    """An embedded RocketMQ-format message store on a directory. Use ``MessageStore.open``.

    Bulk reads (``read_range``, ``plan_ranges``, ``read_queue_range``, ``segments``, ...) come
    from ColumnarReads (rocketstore.store.reader)."""

    def __init__(self, root: str | os.PathLike[str], config: StoreConfig | None = None, *,
                 read_only: bool = False, commit_log_flush: FlushFunction | None = None,
                 disk_probe: DiskUsageProbe | None = None, clock: Clock | None = None
                 ) -> None:
        self.root = os.path.abspath(os.fspath(root))
        given = config is not None
        if config is None:
            config = StoreConfig(store_path_root_dir=self.root)
        elif not isinstance(config, StoreConfig):
            raise TypeError(f"config must be a StoreConfig, got {type(config).__name__}")
        self.config = config = _fit_to_files(self.root, config, index_geometry_given=given)
        self.paths = StorePaths.of(self.root, config.store_path_commit_log)
        self.read_only = bool(read_only or config.read_only)
        ro = self.read_only
        self.pool: TransientStorePool | None = None
        if config.transient_store_pool_enable and not ro:
            if config.flush_disk_type != "ASYNC_FLUSH" or config.broker_role == "SLAVE":
                raise ValueError(
                    "transient_store_pool_enable needs flush_disk_type ASYNC_FLUSH and a "
                    f"master broker_role (got flush_disk_type {config.flush_disk_type}, "
                    f"broker_role {config.broker_role})")
            self.pool = TransientStorePool(config.transient_store_pool_size,
                                           config.mapped_file_size_commit_log)
        self.clock: Clock = clock or SystemClock()
        self.checkpoint = StoreCheckpoint(self.paths.checkpoint, read_only=ro)
        self.allocate_service = None if ro else AllocateMappedFileService(config, self.pool)
        self.commit_log = CommitLog(
            config, self.root, self.checkpoint, read_only=ro, pool=self.pool,
            allocate=None if self.allocate_service is None else self.allocate_service.allocate,
            sync=commit_log_flush)
        self.put_message = self.commit_log.put_path.put
        self.append_message = self.commit_log.append_message
        self.consume_queues = ConsumeQueueTable(
            self.root, config.mapped_file_size_consume_queue, read_only=ro,
            ext_file_size=config.mapped_file_size_consume_queue_ext,
            ext_writes=config.enable_consume_queue_ext)
        #: SQL92 groups' filters and the bitmaps dispatch computes (enable_filter_bitmaps)
        self.filter_bitmaps: FilterBitmaps | None = None
        self.consume_queues.ext_unit_of = ext_unit_writer(self.commit_log,
                                                          lambda: self.filter_bitmaps)
        self.index_service = IndexService(config, self.root, read_only=ro, clock=self.clock)
        self.index_service.on_file_full = self._index_file_full
        self.reput = ReputMessageService(
            self.commit_log, self.consume_queues,
            self.index_service if config.message_index_enable else None)
        self.flush_consume_queue = FlushConsumeQueueService(
            config, self.consume_queues, self.checkpoint, lambda: self.reput.dispatched_timestamp)
        self.clean_commit_log = CleanCommitLogService(
            config, self.commit_log.queue,
            [self.commit_log.queue.store_path, self.consume_queues.root_dir],
            probe=disk_probe or disk_used_ratio, clock=self.clock,
            on_disk_state=self._disk_state_changed)
        self.clean_consume_queue = CleanConsumeQueueService(
            config, self.commit_log.min_offset, self.consume_queues, self.index_service)
        self.clean_service = None if ro else CleanFilesService(
            config, self.clean_commit_log, self.clean_consume_queue)
        self.recovery: RecoveryReport | None = None
        self.clean_end: int | None = None
        self.damage_book = DamageBook(self.commit_log, self.index_service,
                                      self.paths.config_file(DAMAGE_FILE), read_only=ro)
        self.index_service.on_damaged = self.damage_book.index_file_damaged
        self._lock = StoreLock(self.paths.lock)
        self._running = False
        self._state_lock = threading.Lock()
        self._disk_full: str | None = None      # why puts are refused (over the watermark)
        self._put_state_lock = threading.Lock()

    # ---- lifecycle -------------------------------------------------------------------------
    @classmethod
    def open(cls, root: str | os.PathLike[str], config: StoreConfig | None = None, *,
             read_only: bool = False, progress: Progress | None = None,
             commit_log_flush: FlushFunction | None = None,
             disk_probe: DiskUsageProbe | None = None,
             clock: Clock | None = None) -> MessageStore:
        """Open (creating if needed) the store at root: load, recover, start the services.

        read_only takes no lock, starts no service and never modifies a file: it sees the
        valid prefix of what is there (another process may be writing). progress(done,
        total) follows the CommitLog scan of recovery (a progress bar for large stores).
        commit_log_flush(file, start, end) replaces the flush services' fdatasync / msync
        of the CommitLog (a seam for tests: slow, failing or recording disks): it is asked
        to make bytes [start, end) of that CommitLog file (a MappedFile; positions in the
        file) durable, returns when they are and raises when they could not be made so. A
        SYNC_FLUSH put returns PUT_OK only after the call covering its bytes returned.
        disk_probe(path) -> used fraction replaces the disk usage read by retention and the
        watermarks (services/clean.py), and clock its time (wall and monotonic ms): seams
        for tests ("the disk is 87% full", "three days later at 04:00")."""
        store = cls(root, config, read_only=read_only, commit_log_flush=commit_log_flush,
                    disk_probe=disk_probe, clock=clock)
        try:
            store.load(progress)
            store.start()
        except BaseException:
            store._release_after_failed_open()
            raise
        return store

    def _release_after_failed_open(self) -> None:
        """Close every file and mapping load() opened and drop the lock: a failed open
        leaves nothing behind for the garbage collector."""
        self.commit_log.put_path.accepting = False
        services = [self.reput, self.flush_consume_queue, self.commit_log.flush_service,
                    self.commit_log.commit_service, self.commit_log.prefault_service,
                    self.allocate_service]
        steps = [s.shutdown for s in services if s is not None]
        steps += [self.reput.release_files, self.commit_log.queue.close,
                  self.consume_queues.close, self.index_service.shutdown,
                  self.checkpoint.close]
        if self.pool is not None:
            steps.append(self.pool.destroy)
        for step in steps:
            try:
                step()
            except Exception:  # noqa: BLE001 - the open's own error is the one to raise
                log.debug("closing after a failed open", exc_info=True)
        _open_stores.discard(self)
        self._lock.release()

    def load(self, progress: Progress | None = None) -> None:
        if os.path.exists(self.root) and not os.path.isdir(self.root):
            raise NotADirectoryError(f"{self.root} is a file, not a directory")
        if self.read_only:
            if not os.path.isdir(self.root):
                raise FileNotFoundError(f"store directory {self.root} does not exist")
        else:
            os.makedirs(self.root, exist_ok=True)
            self._lock.acquire()
        self.checkpoint.load()
        abnormal = os.path.exists(self._abort_path)
        shutdown_state = None if abnormal else read_shutdown_state(self._shutdown_state_path)
        expected = None if shutdown_state is None else shutdown_state[0]
        known_end = None if shutdown_state is None else shutdown_state[1]
        #: where the CommitLog ended at the last clean shutdown (None: unknown)
        self.clean_end = known_end
        self.damage_book.load()
        self.consume_queues.gap_allowed = self.damage_book.queue_gap_allowed
        self.consume_queues.offset_taken = self.damage_book.queue_offset_taken
        self.commit_log.load()
        self.consume_queues.load()
        loaded_before = self.index_service.file_names()
        # A reader beside a running writer sees its abort file; it rebuilds nothing, so it
        # keeps every index file (the writer's newest one included).
        self.index_service.load(not abnormal or self.read_only,
                                self.checkpoint.index_msg_timestamp,
                                tolerate_damage=True, damaged=self.damage_book.index_files)
        reindex_from = None
        if self.config.message_index_enable and \
                len(self.index_service.files) < len(loaded_before):
            # index files dropped (newer than the checkpoint, or corrupt): index again from
            # where the newest remaining one ends (already-indexed records are skipped)
            files = self.index_service.files
            reindex_from = files[-1].end_phy_offset if files else 0
        # a reader beside a running writer does not look past the last valid record: the
        # writer may be appending there
        writer_elsewhere = self.read_only and lock_holder(self.paths.lock)[0] is not False
        self.recovery = recover(self.config, self.commit_log, self.consume_queues, self.reput,
                                self.checkpoint, abnormal=abnormal, read_only=self.read_only,
                                progress=progress, expected_queue_offsets=expected,
                                reindex_from=reindex_from, index=self.index_service,
                                known_end=known_end, search_last_file=not writer_elsewhere)
        if not self.read_only and self.config.message_index_enable:
            self.recovery.index_files_repaired = self.index_service.rebuild_holes(
                lambda start, end: self.commit_log.batches(start, end))
            self.damage_book.forget_rebuilt_index_files()
        if self.checkpoint.problem:
            self.recovery.problems.append(f"checkpoint: {self.checkpoint.problem}")
        if self.damage_book.problem:
            self.recovery.problems.append(self.damage_book.problem)
        if not self.read_only:
            self.damage_book.save()

    # ---- damage ----------------------------------------------------------------------------
    @property
    def damaged_ranges(self) -> list[DamagedRange]:
        """The CommitLog's damaged ranges known now: unreadable, skipped by every reader."""
        return self.damage_book.ranges()

    def _index_file_full(self, end_timestamp: int) -> None:
        # full files are flushed on their own threads: keep the newest time, whatever order
        # their flushes finish in
        if end_timestamp > self.checkpoint.index_msg_timestamp:
            self.checkpoint.index_msg_timestamp = end_timestamp
            self.checkpoint.flush()

    def start(self) -> None:
        if not self.read_only:
            with open(self._abort_path, "w"):
                pass
            # valid only after a clean shutdown: a crash must not leave a stale one
            remove_shutdown_state(self._shutdown_state_path)
            if self.pool is not None:
                self.pool.init()
            assert self.allocate_service is not None
            self.allocate_service.start()
            self.commit_log.start()
            self.reput.start()
            self.flush_consume_queue.start()
            assert self.clean_service is not None
            self.clean_service.start()      # measures the disk first: full, puts refused
        self._running = True
        self._update_put_path()
        _open_stores.add(self)

    def _update_put_path(self) -> None:
        """The one flag both put paths check (accepting), and the reason refused puts carry:
        running, not read-only, and the disk under the warning level."""
        with self._put_state_lock:
            path = self.commit_log.put_path
            if self.read_only:
                path.refusal = f"store {self.root} is opened read-only"
            elif not self._running:
                path.refusal = f"store {self.root} is not running"
            elif self.config.broker_role == "SLAVE":
                # RocketMQ checkStoreStatus: a slave's log is its master's copy
                path.refusal = f"store {self.root} is a slave (broker_role SLAVE): puts are forbidden"
            else:
                path.refusal = self._disk_full
            path.accepting = path.refusal is None

    def _disk_state_changed(self, full: bool, reason: str | None) -> None:
        """CleanCommitLogService: usage crossed disk_space_warning_level_ratio."""
        self._disk_full = (reason or "disk full") if full else None
        if self._running:
            self._update_put_path()

    def shutdown(self) -> None:
        """Stop the services in order (dispatch what is left, flush queues, commit and flush
        the log), write the checkpoint, remove the abort file, release the lock. Idempotent."""
        with self._state_lock:
            if not self._running and not self._lock.held:
                return
            self._running = False
            self._update_put_path()
            if self.clean_service is not None:
                self.clean_service.shutdown()
            self.reput.shutdown()
            self.flush_consume_queue.shutdown()
            self.commit_log.shutdown()
            if self.allocate_service is not None:
                self.allocate_service.shutdown()
            self.index_service.shutdown()
            if not self.read_only:
                write_shutdown_state(self._shutdown_state_path, self._queue_ends(),
                                     self.commit_log.max_offset())
            self.consume_queues.close()
            if not self.read_only:
                if self.reput.dispatched_timestamp > 0:
                    self.checkpoint.logics_msg_timestamp = self.reput.dispatched_timestamp
                self.checkpoint.shutdown()
                if self.pool is not None:
                    self.pool.destroy()
                if os.path.exists(self._abort_path):
                    os.remove(self._abort_path)
            self._lock.release()
        _open_stores.discard(self)

    close = shutdown

    def __enter__(self) -> MessageStore:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()

    @property
    def is_running(self) -> bool:
        return self._running

    @property
    def _abort_path(self) -> str:
        return self.paths.abort

    @property
    def _shutdown_state_path(self) -> str:
        return self.paths.config_file(QUEUE_OFFSETS_FILE)

    def _queue_ends(self) -> QueueOffsets:
        table: QueueOffsets = {}
        for cq in self.consume_queues.all():
            table.setdefault(cq.topic, {})[str(cq.queue_id)] = cq.max_offset
        return table

    @property
    def holds_lock(self) -> bool:
        """Whether this store holds its directory's lock (it is the writer)."""
        return self._lock.held

    # ---- writes ----------------------------------------------------------------------------
    #: put_message(message, queue_id=0) -> PutMessageResult: append one message to queue_id of
    #: its topic. It is the CommitLog's native put path (PutPath.put: no Python frame per
    #: put), which refuses every put with SERVICE_NOT_AVAILABLE until start() and after
    #: shutdown(), and always on a read-only store.
    put_message: PutMessageCall

    def put_messages(self, messages: list[Message], queue_ids: int | list[int] = 0, *,
                     wait_flush: bool = True) -> PutMessagesResult:
        """Append a batch under one lock: all validated first, then written in order.
        wait_flush=False: as append_message, SYNC_FLUSH's flush is not waited for."""
        if not isinstance(messages, list):
            messages = list(messages)
        path = self.commit_log.put_path
        if not path.accepting:
            return record_writer.rejected_batch(len(messages),
                                                PutMessageStatus.SERVICE_NOT_AVAILABLE,
                                                path.refusal)
        return self.commit_log.put_messages(messages, queue_ids, wait_flush=wait_flush)

    def put_encoded_batch(self, batch: batch_put.EncodedBatch, topic: str, queue_id: int, *,
                          wait_flush: bool = True) -> PutMessagesResult:
        """put_messages of a batch body read by ``batch_put.read_batch_body`` (no Message per
        message), all to ``queue_id`` of ``topic``."""
        path = self.commit_log.put_path
        if not path.accepting:
            return record_writer.rejected_batch(batch.count, PutMessageStatus.SERVICE_NOT_AVAILABLE,
                                                path.refusal)
        return self.commit_log.put_encoded_batch(batch, topic, queue_id, wait_flush=wait_flush)

    #: append_message(message, queue_id=0) -> PutMessageResult: put_message without waiting
    #: for SYNC_FLUSH's flush: the record is written (and visible to readers once dispatched)
    #: but maybe not durable yet: a server answers the producer from on_durable's callback
    #: (or durable_watch's, on an event loop) with commitlog_offset + wrote_bytes. It is the
    #: CommitLog's native put path (PutPath.append_hooked: no Python frame).
    append_message: PutMessageCall

    def on_durable(self, next_offset: int, callback: Callable[[bool], None]) -> None:
        """SYNC_FLUSH: callback(True), from a store thread, once the CommitLog is durable
        below next_offset; callback(False) when that flush did not come within
        sync_flush_timeout (the put's FLUSH_DISK_TIMEOUT) or the store shut down first.
        ASYNC_FLUSH: callback(True) at once. The callback must be quick and not raise."""
        self.commit_log.on_durable(next_offset, callback)

    def durable_watch(self) -> DurableWatch | None:
        """SYNC_FLUSH: the store's one DurableWatch (on_durable for an event loop); None
        without SYNC_FLUSH."""
        return self.commit_log.durable_watch()

    @property
    def put_lock(self) -> PutLock:
        """The CommitLog's put lock: a broker's send path reads how long the current put has
        held it (``held_ns``, ``held_since_ns``) to answer SYSTEM_BUSY without queueing."""
        return self.commit_log.put_lock

    def put_lock_held_ms(self) -> float:
        """How long the current put has held the CommitLog's put lock (0 while it is free):
        over os_page_cache_busy_timeout_mills RocketMQ calls the OS page cache busy, and a
        broker answers sends SYSTEM_BUSY instead of queueing behind it."""
        return self.commit_log.put_lock.held_ns / 1e6

    def put_hold_times(self) -> tuple[list[int], list[int], int]:
        """How long puts held the put lock (RocketMQ's putMessageEntireTime, to the coarse
        clock's few ms), counted since the store opened: (puts per putMessageDistributeTime
        range of ``HOLD_RANGE_BOUNDS``, puts per percentile bucket of
        ``HOLD_BUCKET_CEILINGS``, the longest hold in ms)."""
        return self.commit_log.put_lock.hold_times()

    def remain_how_many_data_to_flush(self) -> int:
        """CommitLog bytes readable but not yet flushed (RocketMQ's remainHowManyDataToFlush)."""
        queue = self.commit_log.queue
        return max(0, queue.max_offset() - queue.flushed_where)

    def remain_how_many_data_to_commit(self) -> int | None:
        """With the transient store pool: bytes written to its buffers not yet committed to
        the files (None without the pool)."""
        if self.pool is None:
            return None
        queue = self.commit_log.queue
        return max(0, queue.max_wrote_offset() - queue.committed_where)

    def remain_transient_store_buffers(self) -> int | None:
        """The transient store pool's free buffers (None without the pool)."""
        return None if self.pool is None else self.pool.available()

    def update_config(self, **changes: Any) -> None:
        """Change settings of the open store that it reads at every use (LIVE_CONFIG_FIELDS:
        retention, disk watermarks, read batch limits), validated as a new StoreConfig would
        be; all or nothing. Others need a restart: ValueError names them."""
        fixed = sorted(set(changes) - LIVE_CONFIG_FIELDS)
        if fixed:
            raise ValueError(f"{', '.join(fixed)} cannot change while the store is open")
        checked = self.config.replace(**changes)
        for name in changes:
            setattr(self.config, name, getattr(checked, name))

    def is_os_page_cache_busy(self) -> bool:
        return self.put_lock_held_ms() > self.config.os_page_cache_busy_timeout_mills

    @property
    def disk_full(self) -> str | None:
        """Why puts are refused for disk space (over disk_space_warning_level_ratio), or
        None."""
        return self._disk_full

    # ---- reads -----------------------------------------------------------------------------
    def look_message_by_offset(self, commitlog_offset: int) -> MessageExt | None:
        """The message whose record starts at commitlog_offset (None past the end)."""
        if commitlog_offset < 0:
            raise ValueError(f"commitlog_offset must be >= 0, got {commitlog_offset}")
        return self.commit_log.look_message_by_offset(commitlog_offset)

    def scan(self, from_offset: int = 0, *, check_crc: bool = False,
             on_damage: Callable[[DamagedRange], None] | None = None) -> Iterator[MessageExt]:
        """Every message from from_offset (a record boundary) in CommitLog order. Damaged
        ranges are skipped: each is given to on_damage, or logged at ERROR."""
        if from_offset < 0:
            raise ValueError(f"from_offset must be >= 0, got {from_offset}")
        return self.commit_log.scan(from_offset, check_crc=check_crc, on_damage=on_damage)

    def get_min_phy_offset(self) -> int:
        return self.commit_log.min_offset()

    def get_max_phy_offset(self) -> int:
        return self.commit_log.max_offset()

    def next_queue_offset(self, topic: str, queue_id: int) -> int:
        """The queue offset the next put to (topic, queue_id) gets."""
        return self.commit_log.queue_table.get(topic, queue_id)

    # ---- queue reads -----------------------------------------------------------------------
    def get_message(self, group: str, topic: str, queue_id: int, offset: int,
                    max_msgs: int = 32, subscription: str | None = "*",
                    expression_type: str | None = None) -> GetMessageResult:
        """Up to max_msgs messages of (topic, queue_id) from logical offset on that match the
        subscription, within RocketMQ's transfer limits: a tag expression ('*' or
        'TagA || TagB', expression_type None or "TAG") or an SQL92 expression over the
        messages' properties (expression_type "SQL92")."""
        if not isinstance(group, str):
            raise TypeError(f"group must be a str, got {type(group).__name__}")
        if not self._running:
            return GetMessageResult(GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, offset, 0, 0)
        bloom = self._group_filter(topic, group, subscription)
        return reader.get_message(self.config, self.commit_log, self.consume_queues, topic,
                                  queue_id, offset, max_msgs, subscription, expression_type,
                                  bloom)

    def enable_filter_bitmaps(self, max_error_rate: int = 20,
                              expect_consumer_num: int = 32) -> FilterBitmaps:
        """Compute SQL92 filter bitmaps at dispatch (RocketMQ's enableCalcFilterBitMap, with
        maxErrorRateOfBloomFilter and expectConsumerNumUseFilter); groups are registered on
        the returned table. Bitmaps are kept only with enable_consume_queue_ext."""
        if self.filter_bitmaps is None:
            self.filter_bitmaps = FilterBitmaps(
                BloomFilter(max_error_rate, expect_consumer_num),
                lambda: self.reput.reput_from_offset,
                None if self.read_only else self.paths.config_file(CONSUMER_FILTER_FILE))
        return self.filter_bitmaps

    def get_message_records(self, group: str, topic: str, queue_id: int, offset: int,
                            max_msgs: int = 32, subscription: str | None = "*",
                            expression_type: str | None = None) -> GetMessageResult:
        """get_message's answer, the records joined into one ``body`` (what a pull reply
        carries) without a MessageExt per message where the native walk applies."""
        if not isinstance(group, str):
            raise TypeError(f"group must be a str, got {type(group).__name__}")
        if not self._running:
            return GetMessageResult(GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, offset, 0, 0)
        bloom = self._group_filter(topic, group, subscription)
        return reader.get_message_records(self.config, self.commit_log, self.consume_queues,
                                          topic, queue_id, offset, max_msgs, subscription,
                                          expression_type, bloom)

    def _group_filter(self, topic: str, group: str, subscription: str | None) -> GroupFilter | None:
        """The group's SQL92 bitmap filter when bitmaps are kept and it has one."""
        bitmaps = self.filter_bitmaps
        if bitmaps is None or subscription is None:
            return None
        return bitmaps.check_for(topic, group, subscription)

    def _consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        return self.consume_queues.find(topic, queue_id)

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.consume_queues.find(topic, queue_id)
        return 0 if cq is None else cq.max_offset

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.consume_queues.find(topic, queue_id)
        return 0 if cq is None else cq.min_offset

    def get_commitlog_offset_in_queue(self, topic: str, queue_id: int, offset: int) -> int:
        cq = self.consume_queues.find(topic, queue_id)
        unit = None if cq is None else cq.get_unit(offset)
        return 0 if unit is None else unit[0]

    def consume_queue_units(self, topic: str, queue_id: int, index: int, count: int
                            ) -> list[tuple[int, int, int]] | None:
        """(commitlog offset, size, tags code) of up to count units from index, within one
        ConsumeQueue file (RocketMQ's getIndexBuffer: mqadmin queryCq); None: no such queue."""
        cq = self.consume_queues.find(topic, queue_id)
        if cq is None:
            return None
        units = cq.read_units(index, count) if cq.min_offset <= index < cq.max_offset else None
        return [] if units is None else [(int(u["offset"]), int(u["size"]), int(u["tags_code"]))
                                         for u in units]

    def consume_queue_ext_unit(self, topic: str, queue_id: int, address: int) -> CqExtUnit | None:
        """The ConsumeQueue extension unit at address (a unit's tags code; None: none)."""
        cq = self.consume_queues.find(topic, queue_id)
        return None if cq is None or cq.ext is None else cq.ext.get(address)

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        """Logical offset of the message stored nearest to timestamp (ms)."""
        cq = self.consume_queues.find(topic, queue_id)
        if cq is None:
            return 0
        return cq.get_offset_by_time(
            timestamp, lambda phy, size: reader.store_time_of(self.commit_log, phy, size))

    def get_message_store_timestamp(self, topic: str, queue_id: int, offset: int) -> int:
        """Store time of the message at a logical offset (-1 when there is none)."""
        cq = self.consume_queues.find(topic, queue_id)
        unit = None if cq is None else cq.get_unit(offset)
        return -1 if unit is None else reader.store_time_of(self.commit_log, *unit[:2])

    def get_earliest_message_time(self, topic: str | None = None, queue_id: int = 0) -> int:
        """Store time of the oldest message of a queue, or of the whole CommitLog."""
        if topic is None:
            msg = self.commit_log.look_message_by_offset(self.commit_log.min_offset())
            return -1 if msg is None else msg.store_timestamp
        return self.get_message_store_timestamp(topic, queue_id,
                                                self.get_min_offset_in_queue(topic, queue_id))

    def topics(self) -> list[str]:
        return self.consume_queues.topics()

    def queues(self, topic: str) -> list[int]:
        return sorted(self.consume_queues.queues(topic))

    def query_message(self, topic: str, key: str, max_num: int = 32, begin: int = 0,
                      end: int = 2**63 - 1) -> QueryMessageResult:
        """Messages of topic whose UNIQ_KEY or a KEYS token is key, stored within
        [begin, end] ms, oldest first, at most max_num (capped at max_msgs_num_batch).
        Every index hit is checked against the stored record, so keys whose hashes collide
        never return each other's messages."""
        if not isinstance(topic, str) or not isinstance(key, str):
            raise TypeError("topic and key must be str")
        if not key:
            raise ValueError("key must not be empty")
        if not isinstance(max_num, int) or max_num <= 0:
            raise ValueError(f"max_num must be a positive int, got {max_num!r}")
        if begin > end:
            raise ValueError(f"begin {begin} is after end {end}")
        found: dict[int, MessageExt] = {}

        damage = self.commit_log.damage

        def verify(phy: int) -> bool:
            damaged = damage.covering(phy) if damage.ranges else None
            if damaged is not None:
                log.error("query_message %s#%s skips CommitLog offset %d: in the damaged "
                          "range %s", topic, key, phy, damaged)
                return False
            try:
                msg = self.commit_log.look_message_by_offset(phy)
            except (record.CorruptRecordError, ValueError):
                return False
            if msg is None or msg.topic != topic or not begin <= msg.store_timestamp <= end:
                return False
            if msg.uniq_key != key and key not in msg.keys:
                return False
            found[phy] = msg
            return True

        offsets = self.index_service.query(topic, key, max_num, begin, end, verify)
        for hole in self.index_service.holes[:] if self.index_service.holes else ():
            # a damaged IndexFile's range: the CommitLog answers
            if len(offsets) >= max_num:
                break
            end_phy = None if hole.end is None else hole.end + 1
            for phy in self.commit_log.find_keyed(topic, key, max(hole.start, 0), end_phy):
                if phy not in found and verify(phy):
                    offsets.append(phy)
        ts, phy = self.index_service.index_last_update()
        cap = min(max_num, self.config.max_msgs_num_batch)     # the newest ones
        messages = [found[o] for o in sorted(set(offsets)) if o in found]
        return QueryMessageResult(messages[-cap:], ts, phy)

    def view_message(self, msg_id: str) -> MessageExt | None:
        """The message of an offsetMsgId (store host + CommitLog offset); None when there is
        none. ValueError when msg_id is not 32 or 56 hex characters."""
        if isinstance(msg_id, str) and len(msg_id) in (32, 56):
            try:
                port = int(msg_id[-24:-16], 16)
            except ValueError:
                port = 0        # not hexadecimal: parse_msg_id names it
            if port > 65535:    # names no store (a client msgId often does)
                return None
        _host, offset = hosts.parse_msg_id(msg_id)
        if offset < self.commit_log.min_offset() or offset >= self.commit_log.max_offset():
            return None
        damaged = self.commit_log.damage.covering(offset)
        if damaged is not None:
            log.error("view_message %s: CommitLog offset %d is in the damaged range %s",
                      msg_id, offset, damaged)
            return None
        try:
            return self.commit_log.look_message_by_offset(offset)
        except record.CorruptRecordError:
            return None

    def record_start_problem(self, offset: int) -> str | None:
        """Why no record (nor END_FILE blank) starts at CommitLog offset, as the native record
        check finds it (sizes, layout, the record's own offset; not the body CRC), or None
        when one does. None too for offsets outside [min, max) offset: no data to check."""
        if offset < self.get_min_phy_offset() or offset >= self.get_max_phy_offset():
            return None
        damaged = self.commit_log.damage.covering(offset)
        if damaged is not None:
            return f"inside the damaged range {damaged}"
        status, _size, reason = self.commit_log.record_at(offset)
        if status in ("ok", "blank"):
            return None
        return reason or "no record (end of data)"

    # ---- description -------------------------------------------------------------------
    def queue_offsets(self) -> dict[str, dict[str, int]]:
        """{"topic:queueId": {"min": .., "max": ..}} of every queue, sorted by key (max is the
        next offset to be written)."""
        out = {f"{topic}:{qid}": {"min": self.get_min_offset_in_queue(topic, qid),
                                  "max": self.get_max_offset_in_queue(topic, qid)}
               for topic in self.topics() for qid in self.queues(topic)}
        return dict(sorted(out.items()))

    def dispatch_lag_bytes(self) -> int:
        """CommitLog bytes not yet in a ConsumeQueue. Read-only (no dispatch service): the
        CommitLog end minus the end of the newest record a ConsumeQueue points at."""
        if not self.read_only:
            return self.dispatch_behind_bytes()
        dispatched = max(self.consume_queues.max_physic_offset(), self.get_min_phy_offset())
        return max(0, self.get_max_phy_offset() - dispatched)

    def describe(self) -> dict[str, Any]:
        """What the store holds and how it stands, as JSON-able data (camelCase keys, like
        RocketMQ's JSON): see ``rocketstore.store.description.describe``."""
        return description.describe(self)

    def describe_retention(self) -> dict[str, Any]:
        """Disk usage of the CommitLog's file system (measured now), the watermarks, why
        puts are refused (a running writer over the warning level: putsRefused) and what a
        cleanup run now would delete."""
        return description.describe_retention(self)

    def damage_report(self) -> dict[str, Any]:
        """What is damaged and how the store works around it (README "Integrity"), as
        JSON-able data: see ``DamageBook.report``."""
        return self.damage_book.report(self.recovery)

    # ---- dispatch --------------------------------------------------------------------------
    def add_arrival_listener(self, listener: ArrivalListener) -> None:
        """listener(topic, queue_id, next_queue_offset) is called on the dispatch thread after
        new messages reach a queue (they are readable then). It must be quick and not
        block: a broker hands the news to its event loop."""
        self.reput.add_arrival_listener(listener)

    def dispatch_behind_bytes(self) -> int:
        return self.reput.behind()

    def wait_dispatched(self, timeout_s: float = 10.0) -> bool:
        """Block until everything put so far is dispatched (tests, tools)."""
        deadline = time.monotonic() + timeout_s
        target = self.commit_log.queue.max_wrote_offset()   # written, maybe not committed
        while self.reput.reput_from_offset < target:
            if time.monotonic() > deadline:
                return False
            if self.commit_log.commit_service is not None:
                self.commit_log.commit_service.wakeup()
            self.reput.wakeup()
            time.sleep(0.0005)
        return True

    def __repr__(self) -> str:
        return (f"MessageStore({self.root!r}, running={self._running}, "
                f"read_only={self.read_only}, max_phy_offset={self.get_max_phy_offset()})")


@atexit.register
def _shutdown_open_stores() -> None:
    for store in list(_open_stores):
        try:
            store.shutdown()
        except Exception:  # noqa: BLE001 - interpreter exit: log and go on
            log.exception("shutting down %s at exit failed", store.root)
