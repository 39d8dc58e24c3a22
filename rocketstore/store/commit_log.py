"""CommitLog: the append-only log of every message, over a MappedFileQueue.

One lock (RocketMQ's putMessageLock) serialises appends; the native RecordWriter encodes each
record in place. Readers go lock-free through positions published after the bytes are written.
"""
from __future__ import annotations

import errno
import logging
import os
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from rocketstore._native import (
    batch_put,
    dispatch,
    put_path,
    record,
    record_writer,
    topic_queue_table,
)
from rocketstore._native.mapped_file import MappedFile
from rocketstore.common.record import BLANK_MAGIC_CODE, TRANSACTION_TYPE_MASK, SysFlag
from rocketstore.config import StoreConfig
from rocketstore.message import (
    Message,
    MessageExt,
    PutMessageResult,
    PutMessagesResult,
    PutMessageStatus,
)
from rocketstore.store.checkpoint import StoreCheckpoint
from rocketstore.store.damage import CommitLogDamage, DamagedRange
from rocketstore.store.layout import COMMIT_LOG_ALLOCATION_CHUNK, COMMITLOG_DIR
from rocketstore.store.mapped_file_queue import FlushFunction, MappedFileQueue
from rocketstore.store.replica_append import ReplicaAppender
from rocketstore.store.services.commit import CommitRealTimeService
from rocketstore.store.services.durability import DurabilityNotifier, DurableCallback, DurableWatch
from rocketstore.store.services.flush import FlushRealTimeService
from rocketstore.store.services.group_commit import GroupCommitService
from rocketstore.store.services.prefault import CommitLogPrefaultService
from rocketstore.store.services.service_thread import ServiceThread
from rocketstore.store.transient_store_pool import TransientStorePool

log = logging.getLogger(__name__)



#: the errnos that mean the file system has no room for what is asked (a full disk, a quota)
NO_ROOM_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def os_errno(exc: BaseException) -> int | None:
    """The errno of exc or of the first exception in its chain that has one (a file made on
    the allocation thread fails there; the put sees an error raised from it)."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return None
        if isinstance(seen, OSError) and seen.errno is not None:
            return int(seen.errno)
        seen = seen.__cause__ or seen.__context__
    return None


@dataclass
class LogScan:
    """What a walk over the CommitLog found: where its valid data ends (after the last valid
    record), the damaged ranges before that end, and what follows it (the torn tail)."""

    records: int = 0
    end_offset: int = 0
    stop_status: str = "end"        # 'end': nothing after the end but unwritten space
                                    # 'corrupt': invalid bytes after the last valid record
    stop_reason: str | None = None
    files_scanned: int = 0
    damaged: list[DamagedRange] = field(default_factory=list)
    tail: list[DamagedRange] = field(default_factory=list)  # invalid bytes after the end


#: why a walk found no record where one should start, by the walk's stop status
_ZEROS = "no record where data was written (zeroed bytes)"


def _readable_end(mf: MappedFile) -> int:
    """Where a walk of mf ends: its read position, or its first hole before that (nothing
    is written past the blocks a file has; reading a hole on tmpfs would take space)."""
    return max(0, min(mf.read_position, mf.allocated_position))


def _commit_pending(mf: MappedFile) -> bool:
    """Whether mf holds appended bytes that readers may not see yet (a write buffer not yet
    committed): the readable log ends there for now, even when a newer file exists."""
    return mf.wrote_position > mf.read_position


def _fills_segment(mf: MappedFile, pos: int, segment: int) -> bool:
    """Whether an END_FILE blank at pos fills the rest of the segment exactly. A walk bounded
    by the file's blocks (_readable_end) sees a blank whose size reaches into the hole after
    it as too long; it is the segment's valid end (the writer gives it blocks for 8 bytes)."""
    if pos + 8 > _readable_end(mf):
        return False
    size, magic = struct.unpack(">iI", mf.read(pos, 8))
    return magic == BLANK_MAGIC_CODE and size == segment - pos


def _report_damage(on_damage: Callable[[DamagedRange], None] | None, damaged: DamagedRange,
                   what: str) -> None:
    if on_damage is not None:
        on_damage(damaged)
    else:
        log.error("%s skips damaged CommitLog range %s", what, damaged)


class CommitLog:
    def __init__(self, config: StoreConfig, root: str, checkpoint: StoreCheckpoint, *,
                 read_only: bool = False, allocate=None,
                 pool: TransientStorePool | None = None,
                 sync: FlushFunction | None = None) -> None:
        self.config = config
        self.read_only = read_only
        self.checkpoint = checkpoint
        self.sync_flush = config.flush_disk_type == "SYNC_FLUSH"
        # SYNC_FLUSH: appends go to a buffer and each flush pwrites them, then fdatasyncs
        # (see MappedFile.enable_write_through for why not msync of the mapping)
        self.write_through = self.sync_flush and config.commit_log_write_through \
            and not read_only and config.broker_role != "SLAVE"   # a slave writes raw bytes
        self.queue = MappedFileQueue(
            os.path.join(root, COMMITLOG_DIR) if config.store_path_commit_log is None
            else config.store_path_commit_log,
            config.mapped_file_size_commit_log, read_only=read_only, preallocate=True,
            allocation_chunk=COMMIT_LOG_ALLOCATION_CHUNK, allocate=allocate,
            prepare=self._prepare_file if self.write_through else None)
        self.writer = record_writer.RecordWriter(config.mapped_file_size_commit_log,
                                                 config.max_message_size, config.store_host)
        # put_message's fast path runs natively (lock, append to the cached last file,
        # result); _append_rolling is its slow path, put_path.after its post-lock hook
        #: the log's damaged ranges (recovery and the readers add them; see damage.py)
        self.damage = CommitLogDamage()
        self.put_path = put_path.PutPath(self.writer, self._append_rolling)
        self.put_lock = self.put_path.lock
        #: a slave's appends of its master's raw bytes (append_data)
        self.replica = ReplicaAppender(self)
        self.closed = False     # set under put_lock at shutdown: later puts are refused
        self.roll_error: str | None = None     # why the next file could not be created
        self.sync_flush_timeout_s = config.sync_flush_timeout / 1000.0
        self.flush_service: ServiceThread
        if self.sync_flush:
            self.flush_service = GroupCommitService(self.queue, checkpoint, sync)
        else:
            self.flush_service = FlushRealTimeService(config, self.queue, checkpoint, sync)
        # SYNC_FLUSH puts that do not wait on their thread are answered from here
        self.durability: DurabilityNotifier | None = None
        if self.sync_flush:
            group = self.flush_service.group   # type: ignore[attr-defined]
            self.durability = DurabilityNotifier(
                self._wait_flushed_for,
                lambda: max(self.queue.flushed_where, group.flushed_where),
                self.sync_flush_timeout_s)
        self._durable_watch: DurableWatch | None = None
        self.commit_service: CommitRealTimeService | None = None
        if pool is not None:
            self.commit_service = CommitRealTimeService(config, self.queue, pool,
                                                        self.flush_service)
        self.prefault_service: CommitLogPrefaultService | None = None
        # (write-through files take appends into their own buffer: nothing to fault in)
        if pool is None and not self.write_through and config.commit_log_prefault_ahead > 0:
            self.prefault_service = CommitLogPrefaultService(self.queue,
                                                             config.commit_log_prefault_ahead)
        # what a put does after its append: wait for the group commit (SYNC_FLUSH, natively),
        # wake the flusher (when it is not on a fixed timer), or nothing
        self._wake_on_put = not self.sync_flush and (
            pool is not None or not config.flush_commit_log_timed)
        if self.sync_flush:
            self.put_path.wait_for_flush(self.flush_service.group,  # type: ignore[attr-defined]
                                         self.sync_flush_timeout_s)
        elif self._wake_on_put:
            self.put_path.after = self._wake_after_put
        #: append_message(msg, queue_id): put_message without waiting for SYNC_FLUSH's flush
        #: (see on_durable); the put path's append and its after hook, with no Python frame
        self.append_message = self.put_path.append_hooked

    def start(self) -> None:
        if self.read_only:
            return
        self.flush_service.start()
        if self.durability is not None:
            self.durability.start()
        if self.commit_service is not None:
            self.commit_service.start()
        if self.prefault_service is not None:
            self.prefault_service.start()

    @property
    def queue_table(self) -> topic_queue_table.TopicQueueTable:
        return self.writer.queue_table

    def load(self) -> None:
        self.queue.load()

    # ---- recovery --------------------------------------------------------------------------
    def scan_files(self, first_index: int, *, check_crc: bool,
                   progress: Callable[[int, int], None] | None = None,
                   on_batch: Callable[[dispatch.DispatchBatch], None] | None = None,
                   search_last_file: bool = True, known_end: int | None = None,
                   tags_codes: bool = False) -> LogScan:
        """Walk records from files[first_index] on to the end of the log. Where a record
        fails validation (or zeros stand where one should start), look for the next valid
        one (record.find_record: a record whose PHYSICALOFFSET is its position); a bad region
        followed by valid data is damage (LogScan.damaged), only what follows the last valid
        record is the tail (tags_codes: decode them for on_batch too). search_last_file
        False: in the last file, bad bytes end the walk
        (a reader beside a writer: what lies past the last record may be a record being
        written). known_end: where the log ended at the last clean shutdown; a walk that
        stops there cleanly does not search the unwritten rest of the file. progress(done,
        total) is called per file with byte counts; on_batch sees the valid records decoded
        for dispatch (no tags codes: recovery does not need them)."""
        files = self.queue.files
        segment = self.queue.mapped_file_size
        start = files[first_index].file_from_offset if files else 0
        result = LogScan(end_offset=start)
        total = sum(mf.file_size for mf in files[first_index:])
        done = 0
        pending: list[DamagedRange] = []        # bad bytes since the last valid record
        expected = start

        def valid_data(end: int) -> None:
            result.damaged.extend(pending)
            pending.clear()
            result.end_offset = end

        for mf in files[first_index:]:
            if progress is not None:
                progress(done, total)
            done += mf.file_size
            result.files_scanned += 1
            base = mf.file_from_offset
            if base > expected:
                pending.append(DamagedRange(expected, base, "segment file missing"))
            expected = base + segment
            is_last = mf is files[-1]
            pos = 0
            # past the file's first hole there is no record (see MappedFile: what is
            # written has blocks; reading a hole on tmpfs would take space)
            data_end = _readable_end(mf)
            while True:
                batch = dispatch.dispatch_region(mf, pos, data_end, max_records=8192,
                                                 check_crc=check_crc, tags_codes=tags_codes)
                if len(batch):
                    result.records += len(batch)
                    if on_batch is not None:
                        on_batch(batch)
                    valid_data(base + batch.stop_position)
                pos = batch.stop_position
                if batch.stop_status == "limit":
                    continue
                if batch.stop_status == "blank" or (batch.stop_status == "corrupt" and
                                                    _fills_segment(mf, pos, segment)):
                    valid_data(base + segment)
                    break
                if pos >= data_end:
                    if mf.file_size < segment or (data_end < segment and not is_last):
                        # a segment file cut short, or one with nothing past a hole
                        pending.append(DamagedRange(base + data_end, base + segment,
                                                    "segment file cut short"))
                    break
                reason = batch.reason or _ZEROS
                if is_last and (not search_last_file or known_end == base + pos):
                    # not searched: a writer may be appending there, or the log ends where
                    # the last clean shutdown left it
                    pending.append(DamagedRange(base + pos, base + data_end, reason))
                    break
                found = record.find_record(mf, pos + 1, data_end, check_crc=check_crc,
                                           base_offset=base, segment_end=segment)
                if found < 0:
                    pending.append(DamagedRange(base + pos, base + segment, reason))
                    break
                pending.append(DamagedRange(base + pos, base + found, reason))
                pos = found
        if progress is not None:
            progress(total, total)
        # what follows the last valid record: unwritten space (zeros up to the end, where no
        # clean shutdown saw more), or a torn tail
        unwritten = len(pending) == 1 and pending[0].reason == _ZEROS and (
            known_end is None or known_end <= pending[0].start)
        result.tail = [] if unwritten else pending
        if result.tail:
            result.stop_status = "corrupt"
            result.stop_reason = result.tail[0].reason
        return result

    def set_end(self, end_offset: int, *, zero_tail: bool) -> int:
        """Make end_offset the end of the log: positions set, later files dropped (deleted,
        or only closed when read-only), and with zero_tail (after a corrupt record) the rest
        of the end file zeroed. Returns the bytes given up."""
        for mf in self.queue.files:
            if mf.file_from_offset + mf.file_size <= end_offset:
                mf.wrote_position = mf.committed_position = mf.flushed_position = mf.file_size
        self.damage.drop_from(end_offset)
        dropped = self.queue.truncate_dirty(end_offset, zero_tail=zero_tail and not self.read_only)
        self.queue.flushed_where = self.queue.committed_where = end_offset
        last = self.queue.last_file()
        if last is not None and self.write_through and not last.write_through \
                and not last.is_full:
            self._prepare_file(last)
        self.put_path.file = last if last is not None and not self.read_only else None
        return dropped

    @staticmethod
    def _prepare_file(mf: MappedFile) -> None:
        """A file appends will go to, before anyone else sees it (SYNC_FLUSH)."""
        mf.enable_write_through()

    # ---- writes ----------------------------------------------------------------------------
    # put_message(message, queue_id) -> PutMessageResult is self.put_path (see __init__)

    def _append_rolling(self, msg: Message, queue_id: int) -> PutMessageResult:
        """Slow path of put_message, under the put lock: roll to a new file and retry."""
        if self.closed:
            return record_writer.put_result(PutMessageStatus.SERVICE_NOT_AVAILABLE)
        mf = self._file_for_append()
        if mf is None:
            return record_writer.put_result(PutMessageStatus.CREATE_MAPPED_FILE_FAILED,
                                            self.roll_error)
        result = self.writer.append(mf, msg, queue_id)
        if result is None:
            mf = self._file_for_append()
            if mf is None:
                return record_writer.put_result(PutMessageStatus.CREATE_MAPPED_FILE_FAILED,
                                                self.roll_error)
            result = self.writer.append(mf, msg, queue_id)
        return record_writer.put_result(PutMessageStatus.UNKNOWN_ERROR) if result is None else result

    def _wake_after_put(self, result: PutMessageResult, msg: Message) -> PutMessageResult:
        self._wake_flusher()
        return result

    def on_durable(self, next_offset: int, callback: DurableCallback) -> None:
        """callback(True) from a store thread once everything below next_offset is durable,
        callback(False) when SYNC_FLUSH's flush did not come within sync_flush_timeout or the
        log shut down first. Without SYNC_FLUSH there is nothing to wait for: True at once."""
        if self.durability is None:
            callback(True)
        else:
            self.durability.notify_when_durable(next_offset, callback)

    def durable_watch(self) -> DurableWatch | None:
        """SYNC_FLUSH: the log's one DurableWatch (answers on an event loop); None otherwise."""
        if self.durability is None:
            return None
        if self._durable_watch is None:
            group = self.flush_service.group    # type: ignore[attr-defined]
            self._durable_watch = DurableWatch(
                group, lambda: max(self.queue.flushed_where, group.flushed_where),
                self.sync_flush_timeout_s)
        return self._durable_watch

    def put_messages(self, msgs: list[Message], queue_ids: int | list[int], *,
                     wait_flush: bool = True) -> PutMessagesResult:
        return self._put_batch(lambda: self.writer.prepare_batch(msgs, queue_ids), len(msgs),
                               wait_flush)

    def put_encoded_batch(self, batch: batch_put.EncodedBatch, topic: str, queue_id: int, *,
                          wait_flush: bool = True) -> PutMessagesResult:
        """put_messages of a batch body read by batch_put.read_batch_body, to one queue."""
        return self._put_batch(
            lambda: batch_put.prepare_encoded_batch(self.writer, batch, topic, queue_id),
            batch.count, wait_flush)

    def _put_batch(self, prepare: Callable[[], PutMessagesResult], count: int,
                   wait_flush: bool) -> PutMessagesResult:
        with self.put_lock:
            if self.closed:
                return record_writer.rejected_batch(count, PutMessageStatus.SERVICE_NOT_AVAILABLE)
            result = prepare()
            if result.status_code != PutMessageStatus.PUT_OK or not count:
                return result
            mf = self._file_for_append()
            while mf is not None and not self.writer.write_batch(mf, result):
                mf = self._file_for_append()
            if mf is None:    # what was stored stays; the result says where it stopped
                result = record_writer.fail_batch(
                    result, PutMessageStatus.CREATE_MAPPED_FILE_FAILED, self.roll_error)
            self.put_lock.note_put()
        if result.stored:
            if self.sync_flush:
                if not wait_flush:
                    pass    # the caller asks on_durable
                elif not self._wait_flushed(int(result.commitlog_offsets[result.stored - 1]
                                                + result.sizes[result.stored - 1])) \
                        and result.status_code == PutMessageStatus.PUT_OK:
                    result = record_writer.fail_batch(result, PutMessageStatus.FLUSH_DISK_TIMEOUT)
            elif self._wake_on_put:
                self._wake_flusher()
        return result

    def _wait_flushed(self, next_offset: int) -> bool:
        """SYNC_FLUSH: wait until the group commit made next_offset durable (or time out)."""
        return self.flush_service.wait_flushed(  # type: ignore[attr-defined]
            next_offset, self.sync_flush_timeout_s)

    def _wait_flushed_for(self, next_offset: int, timeout_s: float) -> bool:
        return self.flush_service.wait_flushed(  # type: ignore[attr-defined]
            next_offset, timeout_s)

    def _wake_flusher(self) -> None:
        (self.commit_service or self.flush_service).wakeup()

    def _file_for_append(self) -> MappedFile | None:
        """The file appends go to (rolling when the last is full); cached for the next put.
        None when the next file cannot be created (roll_error says why)."""
        try:
            self.put_path.file = self.queue.last_file_for_append(0)
            self.roll_error = None
        except OSError as exc:
            code = os_errno(exc)
            if code in NO_ROOM_ERRNOS:      # as the writer says when a file cannot grow
                reason = (f"no room on disk for CommitLog file {self.queue.next_file_path()}: "
                          f"{os.strerror(code)}")
            else:
                reason = f"creating the next CommitLog file failed: {exc}"
            if self.roll_error is None:     # once per outage: every put would say it
                log.error("%s: puts fail with CREATE_MAPPED_FILE_FAILED until it works", reason)
            self.roll_error = reason
            self.put_path.file = None
        return self.put_path.file

    # ---- reads -----------------------------------------------------------------------------
    def min_offset(self) -> int:
        return self.queue.min_offset()

    def max_offset(self) -> int:
        return self.queue.max_offset()

    def get_data(self, offset: int) -> memoryview | None:
        """Readable bytes from offset to the end of its file (pinned view), or None."""
        return self.queue.read_view(offset)

    def get_message(self, offset: int, size: int) -> memoryview | None:
        """The raw record bytes [offset, offset+size) as a pinned view (None if not there)."""
        if size <= 0:
            raise ValueError(f"size must be positive, got {size}")
        view = self.queue.read_view(offset, size)
        return view if view is not None and len(view) == size else None

    def look_message_by_offset(self, offset: int, size: int | None = None) -> MessageExt | None:
        """The message whose record starts at offset (None past the end, below the minimum
        offset (deleted, or in a file being deleted), in a damaged range, or when size is
        given and the record there is not that long). Raises CorruptRecordError when the
        bytes there are not a valid record."""
        if offset < self.min_offset():
            return None
        mf = self.queue.find_by_offset(offset)
        if mf is None:
            return None
        pos = offset - mf.file_from_offset
        if pos >= mf.read_position or (size is not None and pos + size > mf.read_position):
            return None
        if self.damage.ranges and self.damage.covering(offset) is not None:
            return None
        try:
            msg = record.decode_at(mf, pos)
        except ValueError:
            if mf.is_available:
                raise
            return None         # deleted by retention meanwhile
        return None if size is not None and msg.store_size != size else msg

    def record_at(self, offset: int) -> tuple[str, int, str | None]:
        """(status, size, reason) of what starts at offset, as record.record_status says
        (the body CRC unchecked, PHYSICALOFFSET checked): 'end' where nothing is readable."""
        data = self.queue.read_view(offset)
        if data is None:
            return ("end", 0, None)
        try:
            return record.record_status(data, 0, check_crc=False, expected_phy=offset)
        finally:
            data.release()

    def find_damage(self, offset: int, reason: str | None = None) -> DamagedRange:
        """The damaged range that starts at offset (a position where no valid record starts,
        e.g. where a walk stopped): known, or found now (it ends where the next valid record
        or a blank that ends its segment starts, at its file's end otherwise) and added to
        ``damage``."""
        known = self.damage.covering(offset)
        if known is not None:
            return known
        mf = self.queue.find_by_offset(offset)
        segment = self.queue.mapped_file_size
        if mf is None:
            files = self.queue.files
            later = [f.file_from_offset for f in files if f.file_from_offset > offset]
            end = later[0] if later else offset + 1
            return self.damage.add(offset, end, reason or "segment file missing") or \
                DamagedRange(offset, end, reason or "segment file missing")
        base = mf.file_from_offset
        data_end = _readable_end(mf)
        found = record.find_record(mf, offset - base + 1, data_end,
                                   check_crc=self.config.check_crc_on_recover,
                                   base_offset=base, segment_end=segment)
        if reason is None:
            reason = self.record_at(offset)[2] or _ZEROS
        if found >= 0:
            end = base + found
        elif mf is self.queue.files[-1] or _commit_pending(mf):
            end = base + data_end       # what follows may be a record being written
        else:
            end = base + segment
        added = self.damage.add(offset, end, reason)
        return added or self.damage.covering(offset) or DamagedRange(offset, end, reason)

    def _after_region(self, mf: MappedFile, stop_rel: int, status: str, reason: str | None,
                      limit: int, ahead: list[DamagedRange], first: int | None = None
                      ) -> tuple[int | None, DamagedRange | None]:
        """Where a walk of mf goes on after a native pass over [.., limit) stopped at stop_rel
        with status: the next offset (None: the readable log ends here for now) and the
        damage found there, if any. first: the walk's own start, where a stop is the
        caller's wrong offset (CorruptRecordError), not damage."""
        base = mf.file_from_offset
        segment = self.queue.mapped_file_size
        stop = base + stop_rel
        if status == "blank" or (status == "corrupt" and _fills_segment(mf, stop_rel, segment)):
            return base + segment, None
        if stop_rel >= limit:
            if ahead:
                return ahead[0].start, None
            if _readable_end(mf) > limit:       # a writer appended meanwhile: go on
                return stop, None
            if mf is self.queue.files[-1] or _commit_pending(mf):
                return None, None
            if limit < segment:     # a file cut short (or with a hole): the rest
                reason = "segment file cut short"
                return base + segment, (self.damage.add(stop, base + segment, reason)
                                        or DamagedRange(stop, base + segment, reason))
            return base + segment, None
        if stop == first and first != base:
            raise record.CorruptRecordError(
                f"no record starts at {first} ({reason or 'zeroed bytes'})", first)
        damaged = self.find_damage(stop, reason)
        return max(damaged.end, stop + 1), damaged

    def scan(self, from_offset: int = 0, *, check_crc: bool = False,
             on_damage: Callable[[DamagedRange], None] | None = None) -> Iterator[MessageExt]:
        """Every message from from_offset (a record boundary) to the end, in log order. It
        starts at the minimum offset when from_offset is below it, and a file deleted by
        retention while the scan reads it ends that file: the scan goes on at the new
        minimum offset. Damaged ranges (known, or found on the way) are skipped: each is
        passed to on_damage, or logged at ERROR. CorruptRecordError when no record starts
        at from_offset (inside a segment: a caller's wrong offset is not damage)."""
        offset = max(from_offset, self.min_offset())
        first = offset     # the caller's start: no record there is their error, not damage
        while offset < self.max_offset():
            damaged = self.damage.covering(offset) if self.damage.ranges else None
            mf = None if damaged is not None else self.queue.find_by_offset(offset)
            if damaged is None and mf is None:
                low = self.min_offset()
                if offset < low:        # deleted meanwhile: what is left starts there
                    offset = low
                    continue
                damaged = self.find_damage(offset)
            if damaged is not None:
                _report_damage(on_damage, damaged, "scan")
                offset = max(damaged.end, offset + 1)
                continue
            assert mf is not None
            base = mf.file_from_offset
            pos = offset - base
            end = _readable_end(mf)
            ahead = self.damage.overlapping(offset, base + end) if self.damage.ranges else []
            if ahead:
                end = ahead[0].start - base
            try:
                found = record.scan_region(mf, pos, end, check_crc=check_crc, base_offset=base)
                for rel in found.offsets.tolist():
                    msg = record.decode_at(mf, rel)
                    offset = base + rel + msg.store_size
                    yield msg
            except ValueError:
                if mf.is_available:
                    raise
                offset = max(offset, self.min_offset(), base + mf.file_size)
                continue
            after, damaged = self._after_region(mf, found.stop_position, found.stop_status,
                                                found.reason, end, ahead, first)
            if damaged is not None:
                _report_damage(on_damage, damaged, "scan")
            if after is None:
                return
            offset = after

    def batches(self, start: int = 0, end: int | None = None, *, check_crc: bool = False,
                tags_codes: bool = True, max_records: int = 65536
                ) -> Iterator[dispatch.DispatchBatch]:
        """The records that start in [start, end) (a record boundary; end: the log's end) as
        DispatchBatch columns, decoded natively, in log order; damaged ranges (known, or found
        on the way and added to ``damage``) are skipped."""
        offset = max(start, self.min_offset())
        while True:
            stop = self.max_offset() if end is None else min(end, self.max_offset())
            if offset >= stop:
                return
            damaged = self.damage.covering(offset) if self.damage.ranges else None
            if damaged is not None:
                offset = max(damaged.end, offset + 1)
                continue
            mf = self.queue.find_by_offset(offset)
            if mf is None:
                low = self.min_offset()
                if offset < low:        # deleted by retention meanwhile
                    offset = low
                    continue
                offset = max(self.find_damage(offset).end, offset + 1)
                continue
            base = mf.file_from_offset
            limit = _readable_end(mf)
            ahead = self.damage.overlapping(offset, base + limit) if self.damage.ranges else []
            if ahead:
                limit = ahead[0].start - base
            try:
                batch = dispatch.dispatch_region(mf, offset - base, limit,
                                                 max_records=max_records, check_crc=check_crc,
                                                 tags_codes=tags_codes,
                                                 starts_before=stop - base)
            except ValueError:
                if mf.is_available:
                    raise
                offset = max(offset, self.min_offset(), base + mf.file_size)
                continue
            if len(batch):
                yield batch
            at = base + batch.stop_position
            if at >= stop:
                return
            if batch.stop_status == "limit":
                offset = at
                continue
            after, _ = self._after_region(mf, batch.stop_position, batch.stop_status,
                                          batch.reason, limit, ahead)
            if after is None:
                return
            offset = after

    def find_keyed(self, topic: str, key: str, start: int, end: int | None) -> Iterator[int]:
        """Offsets of the records of topic in [start, end) whose UNIQ_KEY or a KEYS token is
        key (rolled-back transactions excluded, as the index has them): what an IndexFile
        over that range would find, read from the CommitLog."""
        for batch in self.batches(start, end, tags_codes=False):
            if topic not in batch.topics:
                continue
            rows = np.flatnonzero((batch.topic_ids == batch.topics.index(topic))
                                  & ((batch.sys_flags & TRANSACTION_TYPE_MASK)
                                     != SysFlag.TRANSACTION_ROLLBACK))
            mf = batch.mapped_file
            for i in rows.tolist():
                msg = record.decode_at(mf, int(batch.positions[i]))
                if msg.uniq_key == key or key in msg.keys:
                    yield int(batch.phy_offsets[i])

    def find_queue_record(self, topic: str, queue_id: int, queue_offset: int, start: int,
                          end: int) -> tuple[int, int, int] | None:
        """(offset, size, tags code) of the record of topic:queue_id at queue_offset among
        the records that start in [start, end), walked natively; None when none does (a
        reader's way around a damaged ConsumeQueue unit)."""
        offset = max(start, self.min_offset())
        end = min(end, self.max_offset())
        segment = self.queue.mapped_file_size
        while offset < end:
            damaged = self.damage.covering(offset) if self.damage.ranges else None
            if damaged is not None:
                offset = damaged.end
                continue
            mf = self.queue.find_by_offset(offset)
            if mf is None:
                offset = self.find_damage(offset).end
                continue
            base = mf.file_from_offset
            stop_at = _readable_end(mf)
            try:
                batch = dispatch.dispatch_region(mf, offset - base, stop_at,
                                                 max_records=65536, starts_before=end - base)
            except ValueError:      # deleted by retention meanwhile
                return None
            if len(batch) and topic in batch.topics:
                rows = np.flatnonzero(
                    (batch.topic_ids == batch.topics.index(topic))
                    & (batch.queue_ids == queue_id) & (batch.queue_offsets == queue_offset)
                    & ((batch.sys_flags & TRANSACTION_TYPE_MASK) != SysFlag.TRANSACTION_PREPARED)
                    & ((batch.sys_flags & TRANSACTION_TYPE_MASK) != SysFlag.TRANSACTION_ROLLBACK))
                if len(rows):
                    i = int(rows[0])
                    return (int(batch.phy_offsets[i]), int(batch.sizes[i]),
                            int(batch.tags_codes[i]))
            if base + batch.stop_position >= end:
                return None
            if batch.stop_status == "limit":
                offset = base + batch.stop_position
            elif batch.stop_status == "blank" or batch.stop_position >= stop_at or (
                    batch.stop_status == "corrupt" and _fills_segment(mf, batch.stop_position,
                                                                      segment)):
                offset = base + segment
            else:
                offset = max(self.find_damage(base + batch.stop_position, batch.reason).end,
                             base + batch.stop_position + 1)
        return None

    def flush(self, least_pages: int = 0) -> bool:
        return self.queue.flush(least_pages)

    def shutdown(self) -> None:
        """Stop the commit and flush services (each finishes its work), then flush the rest."""
        with self.put_lock:     # waits for an append in progress (copies run without the GIL)
            self.closed = True
            self.put_path.file = None
            self.replica.drop_pending()
        if self.prefault_service is not None:
            self.prefault_service.shutdown()
        if self.commit_service is not None:
            self.commit_service.shutdown()
        self.flush_service.shutdown()
        if not self.read_only:
            self.queue.flush_all()
        if self.durability is not None:
            self.durability.shutdown()      # after the last flush: answers by what is durable
        if not self.read_only:
            if self.queue.store_timestamp > 0:
                self.checkpoint.physic_msg_timestamp = self.queue.store_timestamp
        self.queue.close()
