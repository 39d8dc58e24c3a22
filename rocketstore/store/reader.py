"""The store's bulk read API: CommitLog ranges and queue ranges decoded natively to Arrow.

``ColumnarReads`` holds the reads; ``MessageStore`` (a running store) and ``StoreReader`` (a
cheap read-only view of the files, fixed at an end offset, for Spark tasks and exports) both
offer them. Nothing above the store reaches into CommitLog, ConsumeQueue or native modules:
this is the API they use.
"""
from __future__ import annotations

import bisect
import os
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from rocketstore._native import record
from rocketstore.config import StoreConfig
from rocketstore.message import queue_key
from rocketstore.store import record_ranges
from rocketstore.store.checkpoint import StoreCheckpoint
from rocketstore.store.commit_log import CommitLog
from rocketstore.store.consume_queue import BLANK_UNIT_SIZE, ConsumeQueue
from rocketstore.store.layout import StorePaths, detect_geometry

if TYPE_CHECKING:
    import pyarrow as pa

    from rocketstore._native.mapped_file import MappedFile

DEFAULT_QUEUE_BATCH_ROWS = 65_536


@dataclass(frozen=True)
class Segment:
    """A CommitLog segment file: its name (start offset), offsets, and whether it is sealed
    (the log's end lies past it, so it never changes again)."""

    name: str
    start_offset: int
    end_offset: int
    sealed: bool


class ColumnarReads:
    """Bulk reads over ``self.commit_log`` and the queues ``self._consume_queue`` finds."""

    commit_log: CommitLog

    def _consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        raise NotImplementedError

    # ---- CommitLog ranges ---------------------------------------------------------------------
    def align_to_record(self, offset: int) -> int:
        """The offset of the first record that starts at or after offset (see
        ``rocketstore.store.columnar``)."""
        return record_ranges.align_to_record(self, offset)

    def plan_ranges(self, partition_bytes: int, start_offset: int | None = None,
                    end_offset: int | None = None) -> list[tuple[int, int]]:
        """[start, end) cut into record-aligned ranges of about partition_bytes each."""
        return record_ranges.plan_ranges(self, partition_bytes, start_offset, end_offset)

    def read_range(self, start_offset: int, end_offset: int | None = None,
                   include_body: bool = True, **kwargs: Any) -> Iterator[pa.RecordBatch]:
        """RecordBatches of the records that start in [start_offset, end_offset), in
        CommitLog order (keyword options: see ``columnar.read_range``)."""
        return _columnar().read_range(self, start_offset, end_offset, include_body, **kwargs)

    def read_range_table(self, start_offset: int, end_offset: int | None = None,
                         include_body: bool = True, **kwargs: Any) -> pa.Table:
        return _columnar().read_range_table(self, start_offset, end_offset, include_body, **kwargs)

    def segments(self) -> list[Segment]:
        """The CommitLog's segment files, oldest first."""
        end = self.commit_log.max_offset()
        out = []
        for mf in list(self.commit_log.queue.files):
            stop = mf.file_from_offset + mf.file_size
            out.append(Segment(os.path.basename(mf.file_name), mf.file_from_offset, stop,
                               stop <= end))
        return out

    def offset_at_time(self, timestamp: int) -> int:
        """CommitLog offset of the first record stored at or after timestamp (ms); the max
        offset when there is none. Segments are chosen by the store time of their first
        record and only the one that straddles timestamp is walked (record headers,
        natively). Assumes store times do not decrease along the log, as RocketMQ's own time
        lookups do."""
        log = self.commit_log
        lo, hi = log.min_offset(), log.max_offset()
        firsts: list[int] = []
        kept: list[MappedFile] = []
        for mf in list(log.queue.files):
            if not (mf.file_from_offset < hi and mf.file_from_offset + mf.file_size > lo):
                continue
            found = record.scan_region(mf, 0, mf.read_position, check_crc=False,
                                      base_offset=mf.file_from_offset, max_records=1)
            if len(found):
                firsts.append(int(found.store_timestamps[0]))
                kept.append(mf)
        if not kept:
            return hi
        k = bisect.bisect_left(firsts, timestamp)    # kept[:k] start before timestamp
        if k == 0:
            return max(lo, kept[0].file_from_offset)
        mf = kept[k - 1]
        found = record.scan_region(mf, 0, mf.read_position, check_crc=False,
                                  base_offset=mf.file_from_offset)
        later = np.flatnonzero(np.asarray(found.store_timestamps) >= timestamp)
        if len(later):
            return min(hi, max(lo, mf.file_from_offset + int(found.offsets[later[0]])))
        if k < len(kept):
            return min(hi, kept[k].file_from_offset)
        return hi

    # ---- queue ranges -------------------------------------------------------------------------
    def queue_message_sizes(self, topic: str, queue_id: int, start: int, end: int
                            ) -> np.ndarray:
        """The stored sizes (int64) of the messages at logical offsets [start, end) of a
        queue, read a ConsumeQueue file at a time (0 for a blank unit)."""
        cq = self._consume_queue(topic, queue_id)
        if cq is None:
            return np.zeros(0, np.int64)
        parts = []
        off = start
        while off < end:
            units = cq.read_units(off, end - off)
            if units is None or not len(units):
                raise RuntimeError(f"ConsumeQueue {queue_key(topic, queue_id)} has no unit at "
                                   f"offset {off} (its max offset is {cq.max_offset})")
            sizes = units["size"].astype(np.int64)
            del units                       # the view pins the ConsumeQueue file
            sizes[sizes == BLANK_UNIT_SIZE] = 0
            parts.append(sizes)
            off += len(sizes)
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    def read_queue_range(self, topic: str, queue_id: int, start: int, end: int, *,
                         include_body: bool = True, batch_rows: int = DEFAULT_QUEUE_BATCH_ROWS,
                         spark: bool = True) -> Iterator[pa.RecordBatch]:
        """RecordBatches of the messages at logical offsets [start, end) of a queue, in queue
        order: its units are read batch_rows at a time, mapped to positions in the CommitLog
        segments and decoded there, one batch per segment run.

        Units whose message is no longer in the CommitLog (expired segments) are skipped; a
        missing unit below end (a queue shorter than planned) raises."""
        if start >= end:
            return
        cq = self._consume_queue(topic, queue_id)
        if cq is None:
            raise FileNotFoundError(f"ConsumeQueue {queue_key(topic, queue_id)} not found")
        files = list(self.commit_log.queue.files)
        if not files:
            return
        seg = files[0].file_size
        first_base = files[0].file_from_offset
        off = max(start, cq.min_offset)
        while off < end:
            units = cq.read_units(off, min(end - off, batch_rows))
            if units is None or not len(units):
                raise RuntimeError(f"ConsumeQueue {queue_key(topic, queue_id)} has no unit at "
                                   f"offset {off}, below the planned end {end}")
            phys = units["offset"].astype(np.int64)
            sizes = units["size"].astype(np.int64)
            del units
            off += len(phys)
            keep = (sizes != BLANK_UNIT_SIZE) & (sizes > 0) & (phys >= first_base)
            if not keep.all():
                phys = phys[keep]
            if not len(phys):
                continue
            seg_index = (phys - first_base) // seg
            cuts = np.flatnonzero(np.diff(seg_index)) + 1
            for a, b in zip(np.r_[0, cuts], np.r_[cuts, len(phys)], strict=True):
                index = int(seg_index[a])
                if index >= len(files):
                    raise RuntimeError(f"ConsumeQueue {queue_key(topic, queue_id)} points at "
                                       f"CommitLog offset {int(phys[a])}, past the last "
                                       "segment")
                mf = files[index]
                yield from _decode_positions(mf, phys[a:b] - mf.file_from_offset,
                                             include_body, spark)


def _columnar() -> ModuleType:
    """The columnar module, imported on first use: it needs pyarrow (the ``arrow`` extra)."""
    from rocketstore.store import columnar
    return columnar


def _decode_positions(mf: MappedFile, positions: np.ndarray, include_body: bool, spark: bool
                      ) -> Iterator[pa.RecordBatch]:
    columnar = _columnar()
    while len(positions):
        try:
            yield columnar.decode_positions(mf, positions, base_offset=mf.file_from_offset,
                                            include_body=include_body, spark=spark)
            return
        except columnar.BatchTooLargeError as exc:     # > 2 GiB in a column: split
            fits = max(1, exc.fits)
            yield columnar.decode_positions(mf, positions[:fits],
                                            base_offset=mf.file_from_offset,
                                            include_body=include_body, spark=spark)
            positions = positions[fits:]


class StoreReader(ColumnarReads):
    """A read-only view of a store's files with the end fixed at ``end_offset`` (the
    consistent prefix a planner captured): the CommitLog segments mapped read-only, and
    ConsumeQueues on demand. Unlike ``MessageStore.open(read_only=True)`` it runs no recovery
    scan: the caller already validated everything below end_offset (records below a published
    offset never change), so opening costs a few mmaps, not a pass over the log. Without an
    end_offset every segment counts as full: use it so for queue reads, whose units say where
    their records are."""

    def __init__(self, root: str | os.PathLike[str], config: StoreConfig | None = None,
                 end_offset: int | None = None) -> None:
        """config: the store's file sizes (as StoreLocation.config() gives them); without one
        they are read from the files."""
        self.paths = StorePaths.of(root, None if config is None else config.store_path_commit_log)
        if config is None:      # a given config already fits the files (StoreLocation's does)
            config = StoreConfig(store_path_root_dir=self.paths.root,
                                 **detect_geometry(self.paths.root))
        self.config = config.replace(read_only=True)
        checkpoint = StoreCheckpoint(self.paths.checkpoint, read_only=True)
        self.commit_log = CommitLog(self.config, self.paths.root, checkpoint, read_only=True)
        self.commit_log.load()
        if end_offset is not None:
            # positions only (read-only): nothing past end_offset is readable
            self.commit_log.set_end(max(end_offset, self.commit_log.min_offset()),
                                    zero_tail=False)
        self._queues: dict[tuple[str, int], ConsumeQueue] = {}

    def _consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        key = (topic, queue_id)
        cq = self._queues.get(key)
        if cq is None:
            if not os.path.isdir(self.paths.consume_queue(topic, queue_id)):
                return None
            cq = ConsumeQueue(topic, queue_id, self.paths.consume_queue_root,
                              self.config.mapped_file_size_consume_queue, read_only=True)
            cq.load()
            self._queues[key] = cq
        return cq

    def close(self) -> None:
        for cq in self._queues.values():
            cq.close()
        self._queues.clear()
        self.commit_log.queue.close()

    def __enter__(self) -> StoreReader:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
