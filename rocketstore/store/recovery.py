"""Recovery on open (RocketMQ recoverNormally / recoverAbnormally, with rocketstore's damage
policy: README "Integrity").

Normal (clean shutdown, no abort file): the CommitLog's last three files are walked. Abnormal
(abort file present): the walk starts at the newest file whose first record was stored at or
before the checkpoint's minimum timestamp. Every record is validated (magic, sizes, the
fields the CRC does not cover, body CRC when check_crc_on_recover). Where validation fails,
the walk looks for the next valid record: a bad region followed by valid records is damage
(kept, marked unreadable, reported at ERROR); only what follows the last valid record is a
torn tail and is trimmed from the CommitLog, the ConsumeQueues and the IndexFiles.

The ConsumeQueues are checked against the records the walk sees (a unit must point at its
record) and against the queue ends recorded at the last clean shutdown; the newest unit of
every queue must point at its record. A writable store cuts a damaged queue back to its last
good unit and dispatches again from a record boundary (idempotent); a read-only store serves
what the CommitLog says instead, from memory."""
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np

from rocketstore._native import dispatch, record
from rocketstore._native.record import CorruptRecordError
from rocketstore.common.record import TRANSACTION_TYPE_MASK, SysFlag
from rocketstore.config import StoreConfig
from rocketstore.store.checkpoint import StoreCheckpoint
from rocketstore.store.commit_log import CommitLog
from rocketstore.store.consume_queue import BLANK_UNIT_SIZE, UNIT_DTYPE, ConsumeQueue
from rocketstore.store.consume_queue_table import ConsumeQueueTable
from rocketstore.store.damage import DamagedRange
from rocketstore.store.index_service import IndexService
from rocketstore.store.services.reput import ReputMessageService

log = logging.getLogger(__name__)

# progress(bytes_done, bytes_total) while the CommitLog is scanned
Progress = Callable[[int, int], None]

MIN_RECORD_SIZE = 91
_MAX_MISMATCHES = 100_000       # unit/record disagreements examined per recovery


@dataclass
class RecoveryReport:
    """What opening the store had to do."""

    abnormal: bool                 # the abort file was there: the last run did not shut down
    start_offset: int              # where the CommitLog scan started
    end_offset: int                # the CommitLog's end after recovery
    records: int                   # valid records scanned (replayed when abnormal)
    files_scanned: int
    truncated_bytes: int           # bytes given up after the end (the torn tail): the rest
                                   # of the end segment when it held invalid bytes, and later
                                   # segments without a valid record
    dispatched_records: int        # records (re)dispatched to ConsumeQueue/IndexFile
    stop_status: str               # 'end': only unwritten space after the last valid record
                                   # 'corrupt': a torn tail (invalid bytes) was there
    stop_reason: str | None
    duration_s: float
    dispatch_s: float = 0.0        # of duration_s, the re-dispatch (after the scan)
    # damage: CommitLog ranges kept but unreadable (found now, or known from earlier runs)
    damaged_ranges: list[dict[str, object]] = field(default_factory=list)
    damaged_bytes: int = 0
    queues_repaired: list[str] = field(default_factory=list)   # "topic:queueId: what"
    index_files_repaired: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)          # files found short, missing...

    @property
    def damaged(self) -> bool:
        """Whether recovery found (or knew of) damage it could not undo."""
        return bool(self.damaged_ranges)

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def first_file_to_replay(commit_log: CommitLog, min_timestamp: int) -> int:
    """Index of the newest file whose first record is valid and stored at or before
    min_timestamp (RocketMQ isMappedFileMatchedRecover); 0 when none is."""
    files = commit_log.queue.files
    for index in range(len(files) - 1, -1, -1):
        mf = files[index]
        found = record.scan_region(mf, 0, mf.read_position, check_crc=False, max_records=1,
                                   base_offset=mf.file_from_offset)
        if len(found) and 0 < int(found.store_timestamps[0]) <= min_timestamp:
            return index
    return 0


def gap_explained(commit_log: CommitLog, after: int, phy: int, gap: int) -> bool:
    """Whether `gap` records of one queue can be missing between CommitLog offsets after
    (the end of the queue's previous record, -1 for a queue without units) and phy: only
    damaged bytes (or, before the queue's first unit, the log deleted by retention) can
    have held them, and a record takes at least 91 bytes."""
    if gap <= 0:
        return True
    room = commit_log.damage.bytes_between(max(after, 0), phy)
    if after < 0:
        room += commit_log.min_offset()
    return gap * MIN_RECORD_SIZE <= room


class QueueObserver:
    """Watches the recovery scan's records against the ConsumeQueues: records whose queue
    offset is at or past their queue's end (the queue lost units: damaged or deleted files,
    or a dispatch that had not got there), and records whose unit points elsewhere."""

    def __init__(self, queues: ConsumeQueueTable) -> None:
        self.queues = queues
        # (topic, queue_id) -> (smallest queue offset seen at/after the queue's end, its phy)
        self.behind: dict[tuple[str, int], tuple[int, int]] = {}
        # (topic, queue_id, queue_offset, phy, size) whose unit disagrees
        self.mismatches: list[tuple[str, int, int, int, int]] = []

    def __call__(self, batch: dispatch.DispatchBatch) -> None:
        tran = batch.sys_flags & TRANSACTION_TYPE_MASK
        # the records that get units
        counted = (tran == SysFlag.TRANSACTION_NOT_TYPE) | (tran == SysFlag.TRANSACTION_COMMIT)
        for topic_id, topic in enumerate(batch.topics):
            rows = counted & (batch.topic_ids == topic_id)
            if not rows.any():
                continue
            queue_ids = batch.queue_ids[rows]
            queue_offsets = batch.queue_offsets[rows]
            phys = batch.phy_offsets[rows]
            sizes = batch.sizes[rows]
            for queue_id in np.unique(queue_ids).tolist():
                mine = queue_ids == queue_id
                self._queue(topic, queue_id, queue_offsets[mine], phys[mine], sizes[mine])

    def _queue(self, topic: str, queue_id: int, qoffs: np.ndarray, phys: np.ndarray,
               sizes: np.ndarray) -> None:
        cq = self.queues.find(topic, queue_id)
        end = 0 if cq is None else cq.file_max_offset
        ahead = qoffs >= end
        if ahead.any():
            i = int(np.argmin(np.where(ahead, qoffs, np.iinfo(np.int64).max)))
            key = (topic, queue_id)
            known = self.behind.get(key)
            if known is None or int(qoffs[i]) < known[0]:
                self.behind[key] = (int(qoffs[i]), int(phys[i]))
        if cq is None or len(self.mismatches) >= _MAX_MISMATCHES:
            return
        inside = ~ahead & (qoffs >= cq.min_offset)
        if not inside.any():
            return
        q, p, z = qoffs[inside], phys[inside], sizes[inside]
        lo, hi = int(q.min()), int(q.max()) + 1
        if hi - lo <= 4 * len(q) + 1024:
            units = cq.units_between(lo, hi)
            idx = q - lo
            have = idx < len(units)
            u = units[idx[have]]
            bad = np.flatnonzero((u["offset"] != p[have]) | (u["size"] != z[have]))
            rows = np.flatnonzero(have)[bad]
        else:       # a few far-apart offsets (a damaged queue offset among them)
            rows = [i for i in range(len(q))
                    if (cq.get_unit(int(q[i])) or (None, None))[:2] != (int(p[i]), int(z[i]))]
        for i in rows:
            self.mismatches.append((topic, queue_id, int(q[i]), int(p[i]), int(z[i])))


def unit_points_at_its_record(commit_log: CommitLog, cq: ConsumeQueue, queue_offset: int,
                              phy: int, size: int) -> bool:
    """Whether the unit (phy, size) at queue_offset of cq points at the record it stands for:
    a valid record of cq's topic and queue, at that queue offset, of that size."""
    if size == BLANK_UNIT_SIZE or phy < commit_log.min_offset():
        return True     # a blank, or a record deleted with its file: nothing to check
    try:
        msg = commit_log.look_message_by_offset(phy, size)
    except (CorruptRecordError, ValueError):
        return False
    return (msg is not None and msg.queue_id == cq.queue_id
            and msg.queue_offset == queue_offset and msg.topic == cq.topic)


def _judge_mismatches(commit_log: CommitLog, queues: ConsumeQueueTable,
                      mismatches: list[tuple[str, int, int, int, int]]
                      ) -> dict[tuple[str, int], int]:
    """For each record whose unit disagrees: when the unit points at a valid record of that
    queue and offset, the record's own QUEUEOFFSET is the damage (its range is marked);
    otherwise the unit is damaged. Returns the first damaged unit of each queue."""
    first_bad: dict[tuple[str, int], int] = {}
    for topic, queue_id, qoff, phy, size in mismatches:
        cq = queues.find(topic, queue_id)
        if cq is None:
            continue
        unit = cq.get_unit(qoff)
        if unit is not None and unit[1] != BLANK_UNIT_SIZE and \
                unit_points_at_its_record(commit_log, cq, qoff, unit[0], unit[1]):
            if commit_log.damage.add(phy, phy + size,
                                     f"queue offset {qoff} of {topic}:{queue_id} belongs to "
                                     f"the record at {unit[0]}") is not None:
                log.error("CommitLog record at %d claims offset %d of %s:%d, which the "
                          "record at %d holds: marked damaged", phy, qoff, topic, queue_id,
                          unit[0])
            continue
        key = (topic, queue_id)
        if key not in first_bad or qoff < first_bad[key]:
            first_bad[key] = qoff
    return first_bad


def _record_start(commit_log: CommitLog, offset: int) -> int:
    """offset when a record (or a blank, or a known damaged range) starts there, or the log's
    end is there; otherwise the start of its file (always a record boundary)."""
    if offset >= commit_log.max_offset() or offset <= commit_log.min_offset():
        return offset
    if commit_log.damage.covering(offset) is not None:
        return offset
    mf = commit_log.queue.find_by_offset(offset)
    if mf is None:
        return offset
    status, _size, _reason = commit_log.record_at(offset)
    if status in ("ok", "blank"):
        return offset
    log.warning("dispatch would restart at %d, which is not a record boundary: restarting "
                "at the start of its file, %d", offset, mf.file_from_offset)
    return mf.file_from_offset


def _overlay_queues(commit_log: CommitLog, queues: ConsumeQueueTable,
                    wanted: dict[tuple[str, int], int], start: int) -> None:
    """Read-only stores: build in memory the units of the queues in `wanted` ({queue: first
    queue offset to rebuild}) from the records from start on, and serve them from there."""
    found: dict[tuple[str, int], list[tuple[int, int, int, int]]] = {k: [] for k in wanted}
    topics = {t for t, _ in wanted}
    for batch in commit_log.batches(start):
        tran = batch.sys_flags & TRANSACTION_TYPE_MASK
        counted = (tran == SysFlag.TRANSACTION_NOT_TYPE) | (tran == SysFlag.TRANSACTION_COMMIT)
        for topic_id, topic in enumerate(batch.topics):
            if topic not in topics:
                continue
            rows = np.flatnonzero(counted & (batch.topic_ids == topic_id))
            for i in rows.tolist():
                key = (topic, int(batch.queue_ids[i]))
                if key in found:
                    found[key].append((int(batch.queue_offsets[i]), int(batch.phy_offsets[i]),
                                       int(batch.sizes[i]), int(batch.tags_codes[i])))
    for key, first in wanted.items():
        cq = queues.find_or_create(*key)
        prev_end = cq.max_physic_offset if first > cq.min_offset else -1
        units: dict[int, tuple[int, int, int]] = {}
        expect = first
        for qoff, phy, size, tags in found[key]:
            if qoff < expect:
                if phy >= max(prev_end, 0) and qoff >= 0:
                    # after the queue's newest record, a queue offset it already has: the
                    # QUEUEOFFSET is the damage, never the records after it
                    commit_log.damage.add(phy, phy + size, f"queue offset {qoff} of "
                                          f"{key[0]}:{key[1]} belongs to an earlier record")
                continue
            if not gap_explained(commit_log, prev_end, phy, qoff - expect):
                commit_log.damage.add(phy, phy + size, f"queue offset {qoff} of {key[0]}:"
                                      f"{key[1]} is past the queue's next ({expect})")
                continue
            units[qoff] = (phy, size, tags)
            expect = qoff + 1
            prev_end = phy + size
        if not units:
            if first < cq.file_max_offset:
                cq.set_overlay(first, np.zeros(0, UNIT_DTYPE))
            continue
        last = max(units)
        arr = np.zeros(last + 1 - first, UNIT_DTYPE)
        arr["size"] = BLANK_UNIT_SIZE
        for qoff, unit in units.items():
            arr[qoff - first] = unit
        cq.set_overlay(first, arr)
        log.error("ConsumeQueue %s:%d is damaged or behind the CommitLog: units from %d on "
                  "are served from the CommitLog (read-only; a writable open rebuilds them)",
                  key[0], key[1], first)


def recover(config: StoreConfig, commit_log: CommitLog, queues: ConsumeQueueTable,
            reput: ReputMessageService, checkpoint: StoreCheckpoint, *, abnormal: bool,
            read_only: bool, progress: Progress | None = None,
            expected_queue_offsets: dict[str, dict[str, int]] | None = None,
            reindex_from: int | None = None,
            index: IndexService | None = None, known_end: int | None = None,
            search_last_file: bool = True) -> RecoveryReport:
    """expected_queue_offsets: each queue's next offset recorded at the last clean shutdown
    (config/queueOffsets.json); a queue that recovers shorter is rebuilt. reindex_from: where
    the IndexFiles end when some were dropped at load (newer than the checkpoint, or
    corrupt); dispatch restarts there at the latest so their keys are indexed again.
    known_end: the CommitLog's end at the last clean shutdown. search_last_file False: a
    reader beside a running writer does not look past the last valid record."""
    started = time.monotonic()
    report_queues: list[str] = []
    queues.recover()
    # the newest unit of every queue must point at its record (else dispatch could restart
    # inside a record); a damaged one is dropped, and dispatch rebuilds it
    dropped_ends: dict[tuple[str, int], list[int]] = {}
    for cq in queues.all():
        dropped = cq.check_end(lambda q, phy, size, _tags, cq=cq:
                               unit_points_at_its_record(commit_log, cq, q, phy, size))
        if dropped:
            dropped_ends[(cq.topic, cq.queue_id)] = dropped
    files = commit_log.queue.files
    if abnormal:
        min_ts = checkpoint.min_timestamp()
        if config.message_index_enable and config.message_index_safe:
            min_ts = checkpoint.min_timestamp_index()
        first = first_file_to_replay(commit_log, min_ts)
    else:
        first = max(0, len(files) - 3)
    start_offset = files[first].file_from_offset if files else 0
    observer = QueueObserver(queues)
    found = commit_log.scan_files(first, check_crc=config.check_crc_on_recover,
                                  progress=progress, on_batch=observer,
                                  search_last_file=search_last_file, known_end=known_end)
    before = {(r.start, r.end) for r in commit_log.damage}
    # ranges known from earlier runs stay (some are not in the bytes' walk: a record whose
    # queue offset was found wrong); the walk adds what it found
    for r in found.damaged:
        commit_log.damage.add(r.start, r.end, r.reason, notify=False)
    for r in commit_log.damage:
        if (r.start, r.end) not in before:
            log.error("CommitLog damage at %s: kept, unreadable; every valid record before "
                      "and after it is served (`rocketstore salvage` copies them into a new "
                      "store)", r)
    truncated = commit_log.set_end(found.end_offset, zero_tail=found.stop_status == "corrupt")
    for (topic, qid), phys in dropped_ends.items():
        # units of records in the torn tail are what a crash leaves: only the others are
        # damage
        damaged_units = [p for p in phys if p < found.end_offset]
        if damaged_units:
            report_queues.append(f"{topic}:{qid}: {len(damaged_units)} newest unit(s) did "
                                 "not point at their records")
            log.error("ConsumeQueue %s:%d: the newest %d unit(s) did not point at their "
                      "records: rebuilt from the CommitLog", topic, qid, len(damaged_units))
    first_bad = _judge_mismatches(commit_log, queues, observer.mismatches)
    for cq in queues.all():
        hole = cq.damaged_from
        key = (cq.topic, cq.queue_id)
        if hole is not None and (key not in first_bad or hole < first_bad[key]):
            first_bad[key] = hole
    # where each queue must be rebuilt from: {queue: (first queue offset, CommitLog start)}
    rebuild: dict[tuple[str, int], tuple[int, int]] = {}

    def need(key: tuple[str, int], qoff: int, phy: int, why: str | None) -> None:
        """Rebuild key's units from qoff, dispatching from phy; why: the damage (None:
        only dispatch lag, what a crash or a running writer leaves)."""
        known = rebuild.get(key)
        if known is None or qoff < known[0]:
            rebuild[key] = (qoff, phy)
        if why is not None:
            report_queues.append(f"{key[0]}:{key[1]}: {why}")

    for key, qoff in first_bad.items():
        cq = queues.find(*key)
        assert cq is not None
        log.error("ConsumeQueue %s:%d: unit %d does not point at its record: the queue is "
                  "rebuilt from there", key[0], key[1], qoff)
        if not read_only:
            cq.cut_at(qoff)
        need(key, qoff, _resume_before(commit_log, cq, qoff), f"units from {qoff} did not "
             "point at their records")
    for key, (qoff, phy) in observer.behind.items():
        cq = queues.find(*key)
        end = 0 if cq is None else cq.file_max_offset
        if key in first_bad and first_bad[key] <= qoff:
            continue
        resume = phy if qoff == end else _queue_resume(commit_log, cq)
        lag = qoff == end and abnormal      # not dispatched yet when the writer stopped
        need(key, end, resume, None if lag else
             f"ends at {end} before the CommitLog's record of offset {qoff}")
    for topic, by_queue in (expected_queue_offsets or {}).items():
        for qid, next_offset in by_queue.items():
            key = (topic, int(qid))
            cq = queues.find(*key)
            end = 0 if cq is None else cq.file_max_offset
            if end < next_offset and key not in rebuild:
                log.error("ConsumeQueue %s:%s ends at %d, %d at the last shutdown: rebuilt "
                          "from the CommitLog", topic, qid, end, next_offset)
                need(key, end, _queue_resume(commit_log, cq),
                     f"ends at {end}, {next_offset} at the last clean shutdown")
    dispatched = 0
    dispatch_s = 0.0
    low = commit_log.min_offset()
    if not read_only:
        queues.truncate_dirty(found.end_offset)
        if index is not None:
            index.truncate(found.end_offset)    # items of records given up go too
        if abnormal:
            # replay the range: what is already in a ConsumeQueue or IndexFile is skipped
            start = start_offset
        else:
            start = min(queues.max_physic_offset(), found.end_offset)
        for _qoff, phy in rebuild.values():
            start = min(start, phy)
        if reindex_from is not None:
            start = min(start, reindex_from)
        reput.reput_from_offset = _record_start(commit_log, max(low, start))
        dispatch_started = time.monotonic()
        dispatched = reput.do_reput()
        dispatch_s = time.monotonic() - dispatch_started
    else:
        reput.reput_from_offset = found.end_offset
        if rebuild:
            _overlay_queues(commit_log, queues, {k: q for k, (q, _) in rebuild.items()},
                            max(low, min(phy for _q, phy in rebuild.values())))
    queues.correct_min_offsets(low)
    table = commit_log.queue_table
    table.clear()
    for cq in queues.all():
        table.set(cq.topic, cq.queue_id, cq.max_offset)
    problems = list(commit_log.queue.problems) + list(queues.problems)
    report = RecoveryReport(
        abnormal=abnormal, start_offset=start_offset, end_offset=found.end_offset,
        records=found.records, files_scanned=found.files_scanned, truncated_bytes=truncated,
        dispatched_records=dispatched, stop_status=found.stop_status,
        stop_reason=found.stop_reason, duration_s=time.monotonic() - started,
        dispatch_s=dispatch_s,
        damaged_ranges=[r.as_dict() for r in commit_log.damage],
        damaged_bytes=commit_log.damage.total_bytes(),
        queues_repaired=list(dict.fromkeys(report_queues)), problems=problems)
    if found.stop_status == "corrupt":
        log.error("CommitLog ends with a torn tail at %d (%s): %d bytes after the last valid "
                  "record given up", found.end_offset, found.stop_reason, truncated)
    log.info("recovery %s: %s", "abnormal" if abnormal else "normal", report)
    return report


def _resume_before(commit_log: CommitLog, cq: ConsumeQueue, queue_offset: int) -> int:
    """Where dispatch must restart to rebuild cq's units from queue_offset on: the end of
    the record of the nearest unit before it that points at its record (the log's start
    when none of the 64 before it does)."""
    for q in range(queue_offset - 1, max(cq.min_offset, queue_offset - 64) - 1, -1):
        unit = cq.get_unit(q)
        if unit is not None and unit[1] != BLANK_UNIT_SIZE and \
                unit_points_at_its_record(commit_log, cq, q, unit[0], unit[1]):
            return unit[0] + unit[1]
    return commit_log.min_offset()


def _queue_resume(commit_log: CommitLog, cq: ConsumeQueue | None) -> int:
    """Where dispatch must restart to rebuild cq's missing units: the end of its newest
    unit's record (checked to point at its record), or the log's start for an empty queue."""
    if cq is None or cq.max_physic_offset < 0:
        return commit_log.min_offset()
    return cq.max_physic_offset


__all__ = ["DamagedRange", "Progress", "RecoveryReport", "first_file_to_replay", "recover"]
