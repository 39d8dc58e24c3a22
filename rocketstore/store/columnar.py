"""Columnar reads of a store's CommitLog: byte ranges -> pyarrow RecordBatches.

The decoding is native (``rocketstore._native.columnar``); this module walks the segment files.

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

Batches: each holds the records of at most ``batch_bytes`` bytes of CommitLog (by start
offset) within one segment, so no batch crosses a segment; none is empty. A column never holds
more than 2 GiB of data (the native decoder stops a batch short and the walk continues). The
same range of the same store gives the same batches, so a replayed Spark task reads identical
data. ``spark=True`` gives timestamps as ``timestamp[us, tz=UTC]`` (see ``schema``).
``body_view=True`` gives the body as zero-copy ``binary_view`` values pointing into the
segment files (the batch holds its segment, as ``MappedFile.view`` does; see
``decode_region``).
"""
from __future__ import annotations

import collections
import logging
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Protocol

import numpy as np
import pyarrow as pa

from rocketstore._native import record
from rocketstore._native.columnar import (
    MAX_BATCH_BYTES,
    SCHEMA,
    BatchTooLargeError,
    RegionResult,
    decode_positions,
    decode_region,
    empty_batch,
    schema,
)

if TYPE_CHECKING:
    from rocketstore._native.mapped_file import MappedFile
    from rocketstore.store.commit_log import CommitLog


class HasCommitLog(Protocol):
    """What these functions read from: a MessageStore or a StoreReader."""

    @property
    def commit_log(self) -> CommitLog: ...

__all__ = [
    "MAX_BATCH_BYTES",
    "SCHEMA",
    "BatchTooLargeError",
    "RegionResult",
    "align_to_record",
    "decode_positions",
    "decode_region",
    "empty_batch",
    "plan_ranges",
    "read_range",
    "read_range_table",
    "schema",
]

log = logging.getLogger("rocketstore.store")

DEFAULT_BATCH_BYTES = 64 << 20
PARALLEL_CHUNK_BYTES = 8 << 20      # read_range(threads > 1): the unit of work per thread


def _visible(store: HasCommitLog) -> tuple[list[MappedFile], int, int]:
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


def _file_at(files: list[MappedFile], offset: int) -> MappedFile | None:
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


def _align_sorted(store: HasCommitLog, files: list[MappedFile], offsets: list[int], lo: int,
                  hi: int) -> list[int]:
    """align_to_record for ascending offsets, each segment scanned at most once."""
    scans: dict[int, np.ndarray] = {}
    out = []
    for offset in offsets:
        off = min(max(offset, lo), hi)
        mf = _file_at(files, off) if off < hi else None
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
    files, lo, hi = _visible(store)
    return _align_sorted(store, files, [offset], lo, hi)[0]


def plan_ranges(store: HasCommitLog, partition_bytes: int, start_offset: int | None = None,
                end_offset: int | None = None) -> list[tuple[int, int]]:
    """Split [start_offset, end_offset) (default: the whole log) into record-aligned
    CommitLog ranges of about partition_bytes each: [(a0, a1), (a1, a2), ...], every a_i a
    record start (or the end). Reading each with ``read_range(..., align=False)`` returns
    every record starting in the span exactly once. Empty ranges are dropped."""
    if partition_bytes <= 0:
        raise ValueError(f"partition_bytes must be positive, got {partition_bytes}")
    files, lo, hi = _visible(store)
    start = lo if start_offset is None else max(lo, start_offset)
    end = hi if end_offset is None else min(hi, end_offset)
    if start >= end:
        return []
    cuts = [*range(start, end, partition_bytes), end]
    aligned = _align_sorted(store, files, cuts, lo, hi)
    return [(a, b) for a, b in zip(aligned[:-1], aligned[1:], strict=True) if b > a]


def read_range(store: HasCommitLog, start_offset: int, end_offset: int | None = None,
               include_body: bool = True, *, align: bool = True,
               batch_bytes: int = DEFAULT_BATCH_BYTES, check_crc: bool = False,
               spark: bool = False, threads: int = 1,
               body_view: bool = False) -> Iterator[pa.RecordBatch]:
    """RecordBatches of the records that start in [start_offset, end_offset) of the
    CommitLog (end_offset None: the end of the log), crossing segment files.

    align=True first moves start_offset to a record boundary (``align_to_record``); with
    align=False start_offset must already be one (a segment start, an offset that
    ``align_to_record``/``plan_ranges`` returned, or a record's commitlog_offset), else the
    bytes there are reported corrupt. threads > 1 decodes record-aligned chunks of
    min(batch_bytes, 8 MiB) on that many threads (the decoder runs without the GIL) and still
    yields them in log order. body_view=True: the body as zero-copy ``binary_view`` (not with
    spark=True). See the module docstring for the whole contract."""
    if batch_bytes <= 0:
        raise ValueError(f"batch_bytes must be positive, got {batch_bytes}")
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    if spark and body_view:
        raise ValueError("body_view=True is not for spark=True (Spark reads binary)")
    files, lo, hi = _visible(store)
    end = hi if end_offset is None else min(hi, end_offset)
    pos = max(lo, start_offset)
    if align and pos < end:
        pos = _align_sorted(store, files, [pos], lo, hi)[0]
    options = (include_body, batch_bytes, check_crc, spark, body_view)
    if threads == 1:
        yield from _read_serial(store, files, pos, end, *options)
        return
    # chunks of at most PARALLEL_CHUNK_BYTES: a few big chunks leave threads idle while the
    # first one decodes (64 MiB chunks made 2 threads slower than 1 on 270 MB)
    ranges = plan_ranges(store, min(batch_bytes, PARALLEL_CHUNK_BYTES), pos, end)
    with ThreadPoolExecutor(threads, thread_name_prefix="rocketstore-decode") as pool:
        pending: collections.deque = collections.deque()
        for a, b in ranges:
            pending.append(pool.submit(lambda a=a, b=b: list(
                _read_serial(store, files, a, b, *options))))
            if len(pending) > threads:       # bounded look-ahead: memory stays small
                yield from pending.popleft().result()
        while pending:
            yield from pending.popleft().result()


def _read_serial(store: HasCommitLog, files: list[MappedFile], pos: int, end: int,
                 include_body: bool, batch_bytes: int, check_crc: bool, spark: bool,
                 body_view: bool) -> Iterator[pa.RecordBatch]:
    """read_range's walk from a record boundary pos to end, one thread; damaged ranges are
    skipped (logged at ERROR)."""
    commit_log = store.commit_log
    first = pos         # the caller's start: no record there is their error, not damage
    while pos < end:
        damaged = commit_log.damage.covering(pos) if commit_log.damage.ranges else None
        if damaged is not None:
            log.error("read_range skips damaged CommitLog range %s", damaged)
            pos = damaged.end
            continue
        mf = _file_at(files, pos)
        if mf is None:
            return
        base = mf.file_from_offset
        rel = pos - base
        rel_end = min(end - base, mf.file_size)
        ahead = commit_log.damage.overlapping(pos, base + rel_end) if commit_log.damage.ranges else []
        chunk_end = min(rel_end, rel + batch_bytes,
                        *(r.start - base for r in ahead[:1]))
        res = decode_region(mf, rel, chunk_end, base_offset=base, include_body=include_body,
                            check_crc=check_crc, spark=spark, body_view=body_view)
        batch, next_rel, status = res
        if batch.num_rows:
            yield batch
        if status == "corrupt" or (status == "end" and next_rel < min(chunk_end,
                                                                      mf.read_position)):
            # bad bytes, or zeros where published data should be: damage
            if base + next_rel == first and rel != 0:
                raise record.CorruptRecordError(res.reason or "no record starts here",
                                                first)
            damaged = commit_log.find_damage(base + next_rel, res.reason)
            if damaged.end <= base + next_rel:
                raise record.CorruptRecordError(res.reason or "corrupt record",
                                                base + next_rel)
            log.error("read_range skips damaged CommitLog range %s", damaged)
            pos = damaged.end
            continue
        if ahead and next_rel >= chunk_end and chunk_end == ahead[0].start - base:
            pos = ahead[0].start
            continue
        if status == "blank" or (status == "end" and next_rel < chunk_end):
            if mf is files[-1]:
                return                        # the end of the data
            pos = base + mf.file_size         # the rest of this segment is unused
        else:                                 # 'end' of the chunk, or 'limit'
            pos = base + next_rel


def read_range_table(store: HasCommitLog, start_offset: int, end_offset: int | None = None,
                     include_body: bool = True, *, align: bool = True,
                     batch_bytes: int = DEFAULT_BATCH_BYTES, check_crc: bool = False,
                     spark: bool = False, threads: int = 1,
                     body_view: bool = False) -> pa.Table:
    """read_range gathered into one pa.Table (with the schema even when empty)."""
    batches = list(read_range(store, start_offset, end_offset, include_body, align=align,
                              batch_bytes=batch_bytes, check_crc=check_crc, spark=spark,
                              threads=threads, body_view=body_view))
    return pa.Table.from_batches(batches, schema=schema(include_body, spark=spark,
                                                        body_view=body_view))
