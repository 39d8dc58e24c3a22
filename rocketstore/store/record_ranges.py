"""Record-aligned CommitLog ranges: where records start, and splitting the log into ranges
that Spark partitions, exports and columnar reads can read independently. Needs no Arrow.

Range contract (what Spark's batch partitions stand on):

- A range ``[a, b)`` of CommitLog offsets owns exactly the records whose first byte is in
  ``[a, b)``. A record that starts before ``b`` is returned whole even if it ends after ``b``;
  one that starts before ``a`` is never returned. ``b`` may be any offset.
- ``a`` must be a record start for the bytes at ``a`` to be read as a record: use
  ``align_to_record(store, a)`` (``read_range(..., align=True)``, the default, does it for you)
  to move an arbitrary offset to the first record that starts at or after it. No record starts
  in ``[x, align_to_record(store, x))``, so splitting ``[lo, hi)`` at ANY sorted offsets
  ``lo = x0 <= x1 <= ... <= xn = hi`` and reading every ``[xi, xi+1)`` with alignment returns
  every record starting in ``[lo, hi)`` exactly once, in CommitLog order.
- END_FILE blanks (and the unwritten tail of a segment) are skipped: reading moves on to the
  next segment. Reads stop at the end of the log as it is when the read starts: the store's
  ``max_offset()``, or the end of the first segment that is not full if that comes first (a
  consistent prefix: records are published only after they are written).
- Damaged ranges of the log (README "Integrity": known, or found on the way) are skipped,
  each logged at ERROR: every valid record around them is returned. Alignment finds record
  boundaries across them too.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import numpy as np

from rocketstore._native import record

if TYPE_CHECKING:
    from rocketstore._native.mapped_file import MappedFile
    from rocketstore.store.commit_log import CommitLog

__all__ = ["HasCommitLog", "align_to_record", "plan_ranges", "visible_segments", "align_sorted", "file_at"]


class HasCommitLog(Protocol):
    """What these functions read from: a MessageStore or a StoreReader."""

    @property
    def commit_log(self) -> CommitLog: ...


def visible_segments(store: HasCommitLog) -> tuple[list[MappedFile], int, int]:
    """(segments, min offset, end offset) of the readable log, snapshotted: it ends at the
    first segment that is not full (a read-only CommitLog cut with set_end keeps later files
    in its list; they are not part of the log)."""
    commit_log = store.commit_log
    files = list(commit_log.queue.files)
    lo, hi = commit_log.min_offset(), commit_log.max_offset()
    for i, mf in enumerate(files):
        if mf.read_position < mf.file_size:
            files = files[:i + 1]
            hi = min(hi, mf.file_from_offset + mf.read_position)
            break
    return files, lo, hi


def file_at(files: list[MappedFile], offset: int) -> MappedFile | None:
    """The segment holding offset, from a snapshot of the file list."""
    if not files:
        return None
    size = files[0].file_size
    index = (offset - files[0].file_from_offset) // size
    if 0 <= index < len(files):
        mf = files[index]
        if mf.file_from_offset <= offset < mf.file_from_offset + size:
            return mf
    return None


def _record_starts(store: HasCommitLog, mf: MappedFile) -> np.ndarray:
    """File-relative positions of every valid record of mf, walked natively across damage
    (CommitLog.batches), ascending."""
    base = mf.file_from_offset
    found = record.scan_region(mf, 0, mf.read_position, check_crc=False, base_offset=base)
    if found.stop_status in ("end", "blank") and not store.commit_log.damage.overlapping(
            base, base + mf.file_size):
        return found.offsets
    parts = [np.asarray(b.positions) for b in store.commit_log.batches(
        base, base + mf.file_size, tags_codes=False) if b.mapped_file is mf]
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def align_sorted(store: HasCommitLog, files: list[MappedFile], offsets: list[int], lo: int,
                  hi: int) -> list[int]:
    """align_to_record for ascending offsets, each segment scanned at most once."""
    scans: dict[int, np.ndarray] = {}
    out = []
    for offset in offsets:
        off = min(max(offset, lo), hi)
        mf = file_at(files, off) if off < hi else None
        if mf is None:
            out.append(hi)
            continue
        base = mf.file_from_offset
        rel = off - base
        if rel == 0 and store.commit_log.damage.covering(off) is None:
            out.append(off)             # a segment starts with a record (or is empty)
            continue
        starts = scans.get(base)
        if starts is None:
            starts = scans[base] = _record_starts(store, mf)
        k = int(np.searchsorted(starts, rel, side="left"))
        if k < len(starts):
            res = base + int(starts[k])
        elif mf is not files[-1]:
            res = base + mf.file_size   # nothing more starts in this segment: the next one
        else:
            res = hi                    # the end of the data
        out.append(min(res, hi))
    return out


def align_to_record(store: HasCommitLog, offset: int) -> int:
    """The CommitLog offset of the first record that starts at or after offset.

    offset may be anything: below the store's min offset it gives the min offset (the first
    record), at or past the max offset it gives the max offset. Inside a segment, the segment
    is scanned from its start (record headers only) to find the boundary; when no record
    starts at or after offset in that segment (offset is in its END_FILE blank or unwritten
    tail), the result is the next segment's start (or, in the last segment, the end of the
    data). Monotonic: a <= b implies align(a) <= align(b); no record starts in
    [offset, align_to_record(offset)). Raises CorruptRecordError if a corrupt record precedes
    offset in its segment."""
    files, lo, hi = visible_segments(store)
    return align_sorted(store, files, [offset], lo, hi)[0]


def plan_ranges(store: HasCommitLog, partition_bytes: int, start_offset: int | None = None,
                end_offset: int | None = None) -> list[tuple[int, int]]:
    """Split [start_offset, end_offset) (default: the whole log) into record-aligned
    CommitLog ranges of about partition_bytes each: [(a0, a1), (a1, a2), ...], every a_i a
    record start (or the end). Reading each with ``read_range(..., align=False)`` returns
    every record starting in the span exactly once. Empty ranges are dropped."""
    if partition_bytes <= 0:
        raise ValueError(f"partition_bytes must be positive, got {partition_bytes}")
    files, lo, hi = visible_segments(store)
    start = lo if start_offset is None else max(lo, start_offset)
    end = hi if end_offset is None else min(hi, end_offset)
    if start >= end:
        return []
    cuts = [*range(start, end, partition_bytes), end]
    aligned = align_sorted(store, files, cuts, lo, hi)
    return [(a, b) for a, b in zip(aligned[:-1], aligned[1:], strict=True) if b > a]
