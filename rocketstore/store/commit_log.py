"""CommitLog: the append-only log of every message, over a MappedFileQueue.

One lock (RocketMQ's putMessageLock) serialises appends; the native RecordWriter encodes each
record in place. Readers go lock-free through positions published after the bytes are written.
"""
from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from rocketstore._native import (
    dispatch,
    put_path,
    record,
    record_writer,
    topic_queue_table,
)
from rocketstore._native.mapped_file import MappedFile
from rocketstore.config import StoreConfig
from rocketstore.message import (
    Message,
    MessageExt,
    PutMessageResult,
    PutMessagesResult,
    PutMessageStatus,
)
from rocketstore.store.checkpoint import StoreCheckpoint
from rocketstore.store.layout import COMMIT_LOG_ALLOCATION_CHUNK, COMMITLOG_DIR
from rocketstore.store.mapped_file_queue import FlushFunction, MappedFileQueue
from rocketstore.store.services.commit import CommitRealTimeService
from rocketstore.store.services.durability import DurabilityNotifier, DurableCallback
from rocketstore.store.services.flush import FlushRealTimeService
from rocketstore.store.services.group_commit import GroupCommitService
from rocketstore.store.services.prefault import CommitLogPrefaultService
from rocketstore.store.services.service_thread import ServiceThread
from rocketstore.store.transient_store_pool import TransientStorePool

log = logging.getLogger("rocketstore.store")


@dataclass
class LogScan:
    """What a walk over the CommitLog found: where valid data ends and why it stopped."""

    records: int = 0
    end_offset: int = 0
    stop_status: str = "end"
    stop_reason: str | None = None
    files_scanned: int = 0


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
            and not read_only
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
        self.put_path = put_path.PutPath(self.writer, self._append_rolling)
        self.put_lock = self.put_path.lock
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
                   on_batch: Callable[[dispatch.DispatchBatch], None] | None = None) -> LogScan:
        """Walk records from files[first_index] on; stop at the end of data, or at the first
        corrupt record. progress(done, total) is called per file with byte counts; on_batch
        sees the valid records decoded for dispatch (topic, queue, queue offset...; no tags
        codes: recovery does not need them)."""
        files = self.queue.files
        result = LogScan(end_offset=files[first_index].file_from_offset if files else 0)
        total = sum(mf.file_size for mf in files[first_index:])
        done = 0
        for mf in files[first_index:]:
            if progress is not None:
                progress(done, total)
            done += mf.file_size
            result.files_scanned += 1
            pos = 0
            # past the file's first hole there is no record (see MappedFile: what is
            # written has blocks; reading a hole on tmpfs would take space)
            end = max(pos, min(mf.file_size, mf.allocated_position))
            while True:
                batch = dispatch.dispatch_region(mf, pos, end, max_records=8192,
                                                 check_crc=check_crc, tags_codes=False)
                result.records += len(batch)
                if on_batch is not None and len(batch):
                    on_batch(batch)
                pos = batch.stop_position
                if batch.stop_status != "limit":
                    break
            result.end_offset = mf.file_from_offset + pos
            if batch.stop_status == "blank":
                result.end_offset = mf.file_from_offset + mf.file_size
                continue
            result.stop_status = "end" if batch.stop_status in ("end", "limit") else \
                batch.stop_status
            result.stop_reason = batch.reason
            break
        if progress is not None:
            progress(total, total)
        return result

    def set_end(self, end_offset: int, *, zero_tail: bool) -> int:
        """Make end_offset the end of the log: positions set, later files dropped (deleted,
        or only closed when read-only), and with zero_tail (after a corrupt record) the rest
        of the end file zeroed. Returns the bytes given up."""
        for mf in self.queue.files:
            if mf.file_from_offset + mf.file_size <= end_offset:
                mf.wrote_position = mf.committed_position = mf.flushed_position = mf.file_size
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

    def append_message(self, msg: Message, queue_id: int) -> PutMessageResult:
        """put_message without waiting for SYNC_FLUSH's flush (see on_durable)."""
        result = self.put_path.append(msg, queue_id)
        if self._wake_on_put:
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

    def put_messages(self, msgs: list[Message], queue_ids: int | list[int], *,
                     wait_flush: bool = True) -> PutMessagesResult:
        with self.put_lock:
            if self.closed:
                return record_writer.rejected_batch(len(msgs), PutMessageStatus.SERVICE_NOT_AVAILABLE)
            result = self.writer.prepare_batch(msgs, queue_ids)
            if result.status_code != PutMessageStatus.PUT_OK or not msgs:
                return result
            mf = self._file_for_append()
            while mf is not None and not self.writer.write_batch(mf, result):
                mf = self._file_for_append()
            if mf is None:    # what was stored stays; the result says where it stopped
                result = record_writer.fail_batch(
                    result, PutMessageStatus.CREATE_MAPPED_FILE_FAILED, self.roll_error)
        if result.stored:
            end = int(result.commitlog_offsets[result.stored - 1] +
                      result.sizes[result.stored - 1])
            if self.sync_flush:
                if not wait_flush:
                    pass    # the caller asks on_durable
                elif not self._wait_flushed(end) and result.status_code == PutMessageStatus.PUT_OK:
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
            if self.roll_error is None:     # once per outage: every put would say it
                log.error("creating the next CommitLog file failed: %s", exc)
            self.roll_error = f"creating the next CommitLog file failed: {exc}"
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
        """The message whose record starts at offset (None past the end, or when size is
        given and the record there is not that long). Raises CorruptRecordError."""
        mf = self.queue.find_by_offset(offset)
        if mf is None:
            return None
        pos = offset - mf.file_from_offset
        if pos >= mf.read_position or (size is not None and pos + size > mf.read_position):
            return None
        msg = record.decode_at(mf, pos)
        return None if size is not None and msg.store_size != size else msg

    def scan(self, from_offset: int = 0, *, check_crc: bool = False) -> Iterator[MessageExt]:
        """Every message from from_offset (a record boundary) to the end, in log order. It
        starts at the minimum offset when from_offset is below it, and a file deleted by
        retention while the scan reads it ends that file: the scan goes on at the new
        minimum offset."""
        offset = max(from_offset, self.min_offset())
        while True:
            mf = self.queue.find_by_offset(offset)
            if mf is None:
                low = self.min_offset()
                if offset < low:        # deleted meanwhile: what is left starts there
                    offset = low
                    continue
                return
            pos = offset - mf.file_from_offset
            try:
                found = record.scan_region(mf, pos, check_crc=check_crc,
                                           base_offset=mf.file_from_offset)
                for rel in found.offsets.tolist():
                    msg = record.decode_at(mf, rel)
                    offset = mf.file_from_offset + rel + msg.store_size
                    yield msg
            except ValueError:
                if mf.is_available:
                    raise
                offset = max(offset, self.min_offset(), mf.file_from_offset + mf.file_size)
                continue
            if found.stop_status == "corrupt":
                raise record.CorruptRecordError(found.reason or "corrupt record",
                                                mf.file_from_offset + found.stop_position)
            if found.stop_status != "blank":
                return
            offset = mf.file_from_offset + mf.file_size

    def flush(self, least_pages: int = 0) -> bool:
        return self.queue.flush(least_pages)

    def shutdown(self) -> None:
        """Stop the commit and flush services (each finishes its work), then flush the rest."""
        with self.put_lock:     # waits for an append in progress (copies run without the GIL)
            self.closed = True
            self.put_path.file = None
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
