"""Columnar reads of a store's CommitLog: byte ranges -> pyarrow RecordBatches.

The decoding is native (``rocketstore._native.columnar``); this module walks the segment files.

The ranges follow the contract of ``rocketstore.store.record_ranges`` (align_to_record,
plan_ranges).

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
from typing import TYPE_CHECKING

from rocketstore.common.optional import import_optional

pa = import_optional("pyarrow", extra="arrow", purpose="columnar reads (read_range, export, Spark)")

from rocketstore._native.columnar import (  # noqa: E402 - after the check that pyarrow is there
    MAX_BATCH_BYTES,
    SCHEMA,
    BatchTooLargeError,
    RegionResult,
    decode_positions,
    decode_region,
    empty_batch,
    schema,
)
from rocketstore._native.record import CorruptRecordError  # noqa: E402
from rocketstore.store.record_ranges import (  # noqa: E402
    HasCommitLog,
    align_sorted,
    align_to_record,
    file_at,
    plan_ranges,
    visible_segments,
)

if TYPE_CHECKING:
    from rocketstore._native.mapped_file import MappedFile


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

log = logging.getLogger(__name__)

DEFAULT_BATCH_BYTES = 64 << 20
PARALLEL_CHUNK_BYTES = 8 << 20      # read_range(threads > 1): the unit of work per thread


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
    files, lo, hi = visible_segments(store)
    end = hi if end_offset is None else min(hi, end_offset)
    pos = max(lo, start_offset)
    if align and pos < end:
        pos = align_sorted(store, files, [pos], lo, hi)[0]
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
        mf = file_at(files, pos)
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
                raise CorruptRecordError(res.reason or "no record starts here",
                                                first)
            damaged = commit_log.find_damage(base + next_rel, res.reason)
            if damaged.end <= base + next_rel:
                raise CorruptRecordError(res.reason or "corrupt record",
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
