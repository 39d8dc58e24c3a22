"""Partition planning and partition reads for the rocketstore data source.

Two kinds of partition, both small frozen dataclasses that carry everything a task needs (the
reader object is pickled before ``partitions()`` runs, so nothing computed there may live on
it):

- ``CommitLogPartition``: the records that START in a CommitLog byte range ``[start, end)``,
  ``start`` a record boundary. A full scan splits the log into ranges of about
  ``partitionBytes`` (``MessageStore.plan_ranges``); a time filter first moves the two ends to the
  first record stored at/after each bound (whole segments outside the window are never read).
- ``QueuePartition``: the ConsumeQueue logical offsets ``[start_offset, end_offset)`` of one
  queue. Used when a query names topics or queue offsets (only that queue's records are read:
  its units are mapped to CommitLog positions and decoded in place, so other topics' bytes are
  never touched), and by the streaming reader (one partition per queue and micro-batch).

Consistency: planning opens the store read-only once and captures the CommitLog's max offset
(``snapshot_end``) and each queue's max offset; partitions never reach past them, so a store
being written by another process is read as the prefix that existed at planning time, never a
torn record. Tasks do not open the store (no recovery scan per task): they map the segment
files read-only (``StoreReader``) and decode natively to Arrow (``ColumnarReads``),
yielding ``pyarrow.RecordBatch``es in Spark's schema (timestamps as
``timestamp[us, UTC]``), never a Python object per row.

Reads are deterministic: the same partition returns the same rows in the same order (CommitLog
order; queue order), which the streaming reader relies on when Spark replays a batch.
"""
from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketstore.spark.location import StoreLocation, missing_data
from rocketstore.spark.options import (
    DEFAULT_BATCH_BYTES,
    DEFAULT_BATCH_ROWS,
    OptionError,
    ReadOptions,
    queue_key,
)
from rocketstore.store import ColumnarReads

try:  # the partitions are Spark InputPartitions when pyspark is there
    from pyspark.sql.datasource import InputPartition
except ImportError:  # pragma: no cover - planning without Spark
    class InputPartition:  # type: ignore[no-redef]
        pass

if TYPE_CHECKING:
    from rocketstore.store import MessageStore

log = logging.getLogger(__name__)

_STORE_TS = "store_timestamp"


@dataclass(frozen=True, repr=True)
class CommitLogPartition(InputPartition):
    """Records starting in CommitLog offsets [start, end)."""

    index: int
    location: StoreLocation
    start: int
    end: int
    snapshot_end: int               # the CommitLog max offset captured at planning
    include_body: bool = True
    start_timestamp: int | None = None   # ms, inclusive (rows filtered exactly)
    end_timestamp: int | None = None     # ms, exclusive
    batch_bytes: int = DEFAULT_BATCH_BYTES

    @property
    def bytes(self) -> int:
        """CommitLog bytes this partition reads."""
        return self.end - self.start


@dataclass(frozen=True, repr=True)
class QueuePartition(InputPartition):
    """Messages of one ConsumeQueue at logical offsets [start_offset, end_offset)."""

    index: int
    location: StoreLocation
    topic: str
    queue_id: int
    start_offset: int
    end_offset: int
    bytes: int = -1                 # CommitLog bytes of those records (-1: not computed)
    include_body: bool = True
    start_timestamp: int | None = None
    end_timestamp: int | None = None
    batch_rows: int = DEFAULT_BATCH_ROWS

    @property
    def key(self) -> str:
        return queue_key(self.topic, self.queue_id)

    @property
    def count(self) -> int:
        return self.end_offset - self.start_offset


Partition = CommitLogPartition | QueuePartition


# ---- planning --------------------------------------------------------------------------------

def plan_batch(options: ReadOptions) -> list[Partition]:
    """The partitions of a batch read (see the module docstring)."""
    location = StoreLocation.detect(options.path,
                                    commit_log_file_size=options.commit_log_file_size,
                                    consume_queue_file_size=options.consume_queue_file_size)
    with location.open_read_only() as store:
        if options.by_queue:
            return _plan_queues(store, location, options)
        return _plan_commit_log(store, location, options)


def _plan_commit_log(store: MessageStore, location: StoreLocation, options: ReadOptions
                     ) -> list[CommitLogPartition]:
    lo, hi = store.get_min_phy_offset(), store.get_max_phy_offset()
    snapshot_end = hi
    if options.start_timestamp is not None:
        lo = store.offset_at_time(options.start_timestamp)
    if options.end_timestamp is not None:
        hi = store.offset_at_time(options.end_timestamp)
    if hi <= lo:
        return []
    ranges = store.plan_ranges(options.split_bytes(hi - lo), lo, hi)
    return [CommitLogPartition(i, location, a, b, snapshot_end, options.include_body,
                               options.start_timestamp, options.end_timestamp,
                               options.batch_bytes)
            for i, (a, b) in enumerate(ranges)]


def _plan_queues(store: MessageStore, location: StoreLocation, options: ReadOptions
                 ) -> list[QueuePartition]:
    present = set(store.topics())
    if options.topics:
        missing = [t for t in options.topics if t not in present]
        if missing:
            raise OptionError(f"option 'topics': topic(s) {', '.join(missing)} not found in "
                              f"the store at {location.root} (it has: "
                              f"{', '.join(sorted(present)) or 'no topics'})")
        queues = [(t, q) for t in options.topics for q in store.queues(t)]
    else:
        queues = sorted(set(options.start_offsets) | set(options.end_offsets))
    for topic, qid in (*options.start_offsets, *options.end_offsets):
        if topic not in present or qid not in store.queues(topic):
            raise OptionError(f"options 'startOffsets'/'endOffsets': queue "
                              f"{queue_key(topic, qid)} does not exist in the store at "
                              f"{location.root}")
    ranges: list[tuple[str, int, int, int, np.ndarray]] = []
    for topic, qid in queues:
        lo = store.get_min_offset_in_queue(topic, qid)
        hi = store.get_max_offset_in_queue(topic, qid)
        start = min(hi, max(lo, options.start_offsets.get((topic, qid), lo)))
        end = max(start, min(hi, options.end_offsets.get((topic, qid), hi)))
        if options.start_timestamp is not None and start < end:
            start = max(start, queue_offset_at_time(store, topic, qid, options.start_timestamp,
                                                    start, end))
        if options.end_timestamp is not None and start < end:
            end = min(end, queue_offset_at_time(store, topic, qid, options.end_timestamp,
                                                start, end))
        if start >= end:
            continue
        ranges.append((topic, qid, start, end,
                       store.queue_message_sizes(topic, qid, start, end)))
    split = options.split_bytes(sum(int(r[4].sum()) for r in ranges))
    parts: list[QueuePartition] = []
    for topic, qid, start, _end, sizes in ranges:
        for a, b, nbytes in _split_queue(sizes, start, split):
            parts.append(QueuePartition(len(parts), location, topic, qid, a, b, nbytes,
                                        options.include_body, options.start_timestamp,
                                        options.end_timestamp, options.batch_rows))
    return parts


def queue_offset_at_time(store: MessageStore, topic: str, queue_id: int, timestamp: int,
                         lo: int, hi: int) -> int:
    """First logical offset in [lo, hi) whose message was stored at or after timestamp (hi
    when none): a binary search over the queue, reading each probe's store time."""
    while lo < hi:
        mid = (lo + hi) // 2
        ts = store.get_message_store_timestamp(topic, queue_id, mid)
        if ts < timestamp:      # also -1: a message already gone lies before the window
            lo = mid + 1
        else:
            hi = mid
    return lo


def _split_queue(sizes: np.ndarray, start: int, partition_bytes: int
                 ) -> list[tuple[int, int, int]]:
    """The offsets [start, start + len(sizes)) cut into ranges of about partition_bytes of
    CommitLog each, with their exact byte counts (sizes: the message sizes, from
    ``queue_message_sizes``)."""
    cum = np.cumsum(sizes)
    out = []
    a = 0
    n = len(sizes)
    base = 0
    while a < n:
        # the first unit index after which this partition holds >= partition_bytes
        b = int(np.searchsorted(cum, base + partition_bytes, side="left")) + 1
        b = max(a + 1, min(n, b))
        nbytes = int(cum[b - 1] - base)
        out.append((start + a, start + b, nbytes))
        base = int(cum[b - 1])
        a = b
    return out


# ---- reading ---------------------------------------------------------------------------------

def read_partition(partition: object) -> Iterator[pa.RecordBatch]:
    """The RecordBatches of a planned partition (an empty iterator for Spark's placeholder
    partition of an empty plan). A task that finds less than was planned (a segment or
    ConsumeQueue file missing or shorter here than where the driver planned) raises
    ``MissingDataError`` naming this host, the file and the range: never fewer rows."""
    if isinstance(partition, CommitLogPartition):
        _check_store_dir(partition.location, f"CommitLog [{partition.start}, {partition.end})")
        yield from _read_commit_log(partition)
    elif isinstance(partition, QueuePartition):
        _check_store_dir(partition.location, f"{partition.key} offsets "
                                             f"[{partition.start_offset}, {partition.end_offset})")
        yield from _read_queue_partition(partition)


def _check_store_dir(location: StoreLocation, planned: str) -> None:
    commit_log = os.path.join(location.root, "commitlog")
    if not os.path.isdir(commit_log):
        raise missing_data(location.root, "the store directory is not here (no commitlog/)",
                           commit_log, planned)


def _segment_path(location: StoreLocation, base: int) -> str:
    return os.path.join(location.root, "commitlog", f"{base:020d}")


def _check_segments(p: CommitLogPartition) -> None:
    """Every segment file the range [start, end) lies in is here at its full size."""
    seg = p.location.commit_log_file_size
    planned = f"CommitLog [{p.start}, {p.end})"
    base = p.start - p.start % seg
    while base < p.end:
        path = _segment_path(p.location, base)
        try:
            size = os.path.getsize(path)
        except OSError:
            raise missing_data(p.location.root, "a CommitLog segment is missing", path,
                               planned) from None
        need = min(seg, p.end - base)
        if size < need:
            raise missing_data(p.location.root, f"a CommitLog segment is {size:,} bytes, "
                               f"shorter than the {need:,} planned", path, planned)
        base += seg


def _read_commit_log(p: CommitLogPartition) -> Iterator[pa.RecordBatch]:
    _check_segments(p)
    reached = p.start       # where the last record read ends
    # fixed at the partition's end (a record boundary): later segments are not needed here
    with p.location.snapshot(min(p.snapshot_end, p.end)) as snap:
        for batch in snap.read_range(p.start, p.end, p.include_body, align=False,
                                     batch_bytes=p.batch_bytes, spark=True):
            if batch.num_rows:
                last = batch.num_rows - 1
                reached = int(batch.column("commitlog_offset")[last].as_py()) + \
                    int(batch.column("store_size")[last].as_py())
            batch = filter_time(batch, p.start_timestamp, p.end_timestamp)
            if batch.num_rows:
                yield batch
    seg = p.location.commit_log_file_size
    # a segment ends in blank padding: the records of [start, end) end at end, or at the
    # segment boundary when end is one
    padded_to = -(-reached // seg) * seg if reached % seg else reached
    if reached < p.end and padded_to < p.end:
        path = _segment_path(p.location, padded_to - padded_to % seg)
        raise missing_data(p.location.root, f"the CommitLog's records stop at offset "
                           f"{reached} (zeros or damage where records were planned)", path,
                           f"CommitLog [{p.start}, {p.end})")


def _read_queue_partition(p: QueuePartition) -> Iterator[pa.RecordBatch]:
    queue_dir = os.path.join(p.location.root, "consumequeue", p.topic, str(p.queue_id))
    planned = f"{p.key} offsets [{p.start_offset}, {p.end_offset})"
    with p.location.snapshot() as snap:
        try:
            sizes = snap.queue_message_sizes(p.topic, p.queue_id, p.start_offset, p.end_offset)
        except RuntimeError as exc:
            raise missing_data(p.location.root, f"the ConsumeQueue is shorter: {exc}",
                               queue_dir, planned) from None
        if not os.path.isdir(queue_dir):
            raise missing_data(p.location.root, "the ConsumeQueue is missing", queue_dir,
                               planned)
        expected = int(np.count_nonzero(sizes))
        got = 0
        try:
            for batch in snap.read_queue_range(
                    p.topic, p.queue_id, p.start_offset, p.end_offset,
                    include_body=p.include_body, batch_rows=p.batch_rows, spark=True):
                got += batch.num_rows
                batch = filter_time(batch, p.start_timestamp, p.end_timestamp)
                if batch.num_rows:
                    yield batch
        except (RuntimeError, ValueError) as exc:
            raise missing_data(p.location.root, f"reading the queue's messages failed: {exc}",
                               os.path.join(p.location.root, "commitlog"), planned) from None
    if got < expected:
        raise missing_data(p.location.root, f"{expected - got} of the {expected} messages "
                           "are not in the CommitLog segments here",
                           os.path.join(p.location.root, "commitlog"), planned)


def filter_time(batch: pa.RecordBatch, start: int | None, end: int | None) -> pa.RecordBatch:
    """Rows with start <= store_timestamp (ms) < end; the batch itself when no bound."""
    if start is None and end is None:
        return batch
    ts = batch.column(batch.schema.get_field_index(_STORE_TS))
    unit = ts.type.unit
    scale = {"s": 0.001, "ms": 1, "us": 1000, "ns": 1_000_000}[unit]
    values = ts.cast(pa.int64())
    mask = None
    if start is not None:
        mask = pc.greater_equal(values, int(start * scale))
    if end is not None:
        below = pc.less(values, int(end * scale))
        mask = below if mask is None else pc.and_(mask, below)
    if pc.all(mask).as_py():
        return batch
    return batch.filter(mask)


def read_queue_range(reader: ColumnarReads, topic: str, queue_id: int, start: int, end: int,
                     *, include_body: bool = True, batch_rows: int = DEFAULT_BATCH_ROWS,
                     start_timestamp: int | None = None, end_timestamp: int | None = None,
                     spark: bool = True) -> Iterator[pa.RecordBatch]:
    """RecordBatches of the messages at logical offsets [start, end) of a queue, in queue
    order (``ColumnarReads.read_queue_range``), within the time window."""
    for batch in reader.read_queue_range(topic, queue_id, start, end, include_body=include_body,
                                         batch_rows=batch_rows, spark=spark):
        batch = filter_time(batch, start_timestamp, end_timestamp)
        if batch.num_rows:
            yield batch
