"""Recovery on open (RocketMQ recoverNormally / recoverAbnormally).

Normal (clean shutdown, no abort file): the CommitLog's end is found by scanning its last three
files. Abnormal (abort file present): replay starts at the newest file whose first record was
stored at or before the checkpoint's minimum timestamp; every record is validated (magic,
size, body CRC when check_crc_on_recover) up to the first bad one, which is where the log ends.
In both cases everything after the end is dropped from the CommitLog and the ConsumeQueues, the
replayed range is dispatched again (idempotent), and the topic queue table is rebuilt from the
ConsumeQueues."""
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np

from rocketstore._native import dispatch, record
from rocketstore.config import StoreConfig
from rocketstore.store.checkpoint import StoreCheckpoint
from rocketstore.store.commit_log import CommitLog
from rocketstore.store.consume_queue_table import ConsumeQueueTable
from rocketstore.store.index_service import IndexService
from rocketstore.store.services.reput import ReputMessageService

log = logging.getLogger("rocketstore.store")

# progress(bytes_done, bytes_total) while the CommitLog is scanned
Progress = Callable[[int, int], None]


@dataclass
class RecoveryReport:
    """What opening the store had to do."""

    abnormal: bool                 # the abort file was there: the last run did not shut down
    start_offset: int              # where the CommitLog scan started
    end_offset: int                # the CommitLog's end after recovery
    records: int                   # valid records scanned (replayed when abnormal)
    files_scanned: int
    truncated_bytes: int           # bytes given up after the end: the rest of the end
                                   # segment (zeroed after a corrupt record) + later segments
    dispatched_records: int        # records (re)dispatched to ConsumeQueue/IndexFile
    stop_status: str               # 'end' (clean), 'corrupt' (torn/invalid record found)
    stop_reason: str | None
    duration_s: float
    dispatch_s: float = 0.0        # of duration_s, the re-dispatch (after the scan)

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def first_file_to_replay(commit_log: CommitLog, min_timestamp: int) -> int:
    """Index of the newest file whose first record is valid and stored at or before
    min_timestamp (RocketMQ isMappedFileMatchedRecover); 0 when none is."""
    files = commit_log.queue.files
    for index in range(len(files) - 1, -1, -1):
        mf = files[index]
        found = record.scan_region(mf, 0, mf.file_size, check_crc=False, max_records=1,
                                   base_offset=mf.file_from_offset)
        if len(found) and 0 < int(found.store_timestamps[0]) <= min_timestamp:
            return index
    return 0


def damaged_queues_start(commit_log: CommitLog, queues: ConsumeQueueTable,
                         expected: dict[str, dict[str, int]]) -> int | None:
    """Where dispatch must restart so queues that lost units since the last clean shutdown
    (damaged or deleted files) are rebuilt: the smallest end among them, or None."""
    starts = []
    for topic, by_queue in expected.items():
        for qid, next_offset in by_queue.items():
            cq = queues.find(topic, int(qid))
            if cq is None or cq.max_offset < next_offset:
                starts.append(cq.max_physic_offset if cq is not None and
                              cq.max_physic_offset >= 0 else commit_log.min_offset())
                log.warning("ConsumeQueue %s:%s ends at %d, %d at the last shutdown: rebuilt "
                            "from the CommitLog", topic, qid,
                            0 if cq is None else cq.max_offset, next_offset)
    return min(starts) if starts else None


class QueuesBehindLog:
    """Watches the recovery scan for records whose queue offset is at or past their
    ConsumeQueue's end: after a clean shutdown every record was dispatched, so such a queue
    lost units (damaged or deleted files). start is where dispatch must restart."""

    def __init__(self, queues: ConsumeQueueTable) -> None:
        self.queues = queues
        self.start: int | None = None

    def __call__(self, batch: dispatch.DispatchBatch) -> None:
        tran = batch.sys_flags & 0xC
        counted = (tran == 0) | (tran == 0x8)       # the records that get units
        for topic_id, topic in enumerate(batch.topics):
            rows = counted & (batch.topic_ids == topic_id)
            if not rows.any():
                continue
            queue_ids = batch.queue_ids[rows]
            queue_offsets = batch.queue_offsets[rows]
            phys = batch.phy_offsets[rows]
            for queue_id in np.unique(queue_ids).tolist():
                cq = self.queues.find(topic, queue_id)
                end = 0 if cq is None else cq.max_offset
                behind = (queue_ids == queue_id) & (queue_offsets >= end)
                if behind.any():
                    first = int(phys[behind].min())
                    self.start = first if self.start is None else min(self.start, first)


def recover(config: StoreConfig, commit_log: CommitLog, queues: ConsumeQueueTable,
            reput: ReputMessageService, checkpoint: StoreCheckpoint, *, abnormal: bool,
            read_only: bool, progress: Progress | None = None,
            expected_queue_offsets: dict[str, dict[str, int]] | None = None,
            reindex_from: int | None = None,
            index: IndexService | None = None) -> RecoveryReport:
    """expected_queue_offsets: each queue's next offset recorded at the last clean shutdown
    (config/queueOffsets.json); a queue that recovers shorter is rebuilt. reindex_from: where
    the IndexFiles end when some were dropped at load (newer than the checkpoint, or
    corrupt); dispatch restarts there at the latest so their keys are indexed again."""
    started = time.monotonic()
    queues.recover()
    files = commit_log.queue.files
    if abnormal:
        min_ts = checkpoint.min_timestamp()
        if config.message_index_enable and config.message_index_safe:
            min_ts = checkpoint.min_timestamp_index()
        first = first_file_to_replay(commit_log, min_ts)
    else:
        first = max(0, len(files) - 3)
    start_offset = files[first].file_from_offset if files else 0
    check_crc = config.check_crc_on_recover
    behind = QueuesBehindLog(queues)
    found = commit_log.scan_files(first, check_crc=check_crc, progress=progress,
                                  on_batch=None if abnormal else behind)
    truncated = commit_log.set_end(found.end_offset, zero_tail=found.stop_status == "corrupt")
    dispatched = 0
    dispatch_s = 0.0
    if not read_only:
        queues.truncate_dirty(found.end_offset)
        if index is not None:
            index.truncate(found.end_offset)    # items of records given up go too
        if abnormal:
            # replay the range: what is already in a ConsumeQueue or IndexFile is skipped
            reput.reput_from_offset = start_offset
            if reindex_from is not None:
                reput.reput_from_offset = max(commit_log.min_offset(),
                                              min(start_offset, reindex_from))
        else:
            start = min(queues.max_physic_offset(), found.end_offset)
            if behind.start is not None:
                start = min(start, behind.start)
            if expected_queue_offsets:
                damaged = damaged_queues_start(commit_log, queues, expected_queue_offsets)
                if damaged is not None:
                    start = min(start, damaged)
            if reindex_from is not None:
                start = min(start, reindex_from)
            reput.reput_from_offset = max(commit_log.min_offset(), start)
        dispatch_started = time.monotonic()
        dispatched = reput.do_reput()
        dispatch_s = time.monotonic() - dispatch_started
    else:
        reput.reput_from_offset = found.end_offset
    queues.correct_min_offsets(commit_log.min_offset())
    table = commit_log.queue_table
    table.clear()
    for cq in queues.all():
        table.set(cq.topic, cq.queue_id, cq.max_offset)
    report = RecoveryReport(
        abnormal=abnormal, start_offset=start_offset, end_offset=found.end_offset,
        records=found.records, files_scanned=found.files_scanned, truncated_bytes=truncated,
        dispatched_records=dispatched, stop_status=found.stop_status,
        stop_reason=found.stop_reason, duration_s=time.monotonic() - started,
        dispatch_s=dispatch_s)
    if found.stop_status == "corrupt":
        log.warning("CommitLog ends with an invalid record at %d (%s): %d bytes after it given "
                    "up", found.end_offset, found.stop_reason, truncated)
    log.info("recovery %s: %s", "abnormal" if abnormal else "normal", report)
    return report
