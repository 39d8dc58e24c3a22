"""Brokers over the wire for the ``rocketmq`` Spark source: the driver's view (queues from the
topics' routes, their min/max offsets, timestamp lookups, consumer-offset commits) and a
task's read of one queue's offset range.

A task pulls ``[start, end)`` of its queue from the broker holding it (the master; a slave when
the route has no master), ``pullConcurrency`` pulls in flight, each ``pullBatchSize`` offsets
wide (a pull that returns fewer, the broker's byte cap, is continued from its next begin
offset), and decodes the replies' records natively into Arrow (``decode_region`` over the
reply bodies, joined: a pull body is a run of CommitLog records as stored), so its rows have
the directory source's schema and values. Tags are filtered exactly after the broker's
hash-code filter. A range whose start the broker no longer has (deleted by retention), or
that ends before the planned end, raises ``DataLossError`` naming the queue unless
failOnDataLoss is false.

Nothing here imports pyspark except the InputPartition base.
"""
from __future__ import annotations

import asyncio
import collections
import heapq
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from rocketstore._native.columnar import decode_region
from rocketstore.client import AdminClient, AsyncAdmin, MessageQueue, PullStatus
from rocketstore.client.errors import MQClientError
from rocketstore.client.subscription import SubscriptionData
from rocketstore.spark.options import OptionError
from rocketstore.spark.wire_options import (
    EARLIEST,
    LATEST,
    Queue,
    WireReadOptions,
    queue_name,
)

try:
    from pyspark.sql.datasource import InputPartition
except ImportError:  # pragma: no cover - planning without Spark
    class InputPartition:  # type: ignore[no-redef]
        pass

log = logging.getLogger("rocketstore.spark")

#: reply bodies joined into one decode (and one Arrow batch) up to about this many bytes
DECODE_BYTES = 4 << 20


class DataLossError(RuntimeError):
    """Messages planned for a read are gone from the broker (retention, a lost store)."""


@dataclass(frozen=True, repr=True)
class WirePartition(InputPartition):
    """Offsets [start_offset, end_offset) of one message queue, read from its broker."""

    index: int
    namesrv_addr: str
    topic: str
    broker_name: str
    queue_id: int
    start_offset: int
    end_offset: int
    sub_expression: str = "*"
    include_body: bool = True
    fail_on_data_loss: bool = True
    pull_batch_size: int = 1024
    pull_concurrency: int = 8
    timeout_ms: int = 10_000

    @property
    def queue(self) -> Queue:
        return (self.topic, self.broker_name, self.queue_id)


def partition_of(index: int, queue: Queue, start: int, end: int, options: WireReadOptions
                 ) -> WirePartition:
    return WirePartition(index, options.namesrv_addr, queue[0], queue[1], queue[2], start, end,
                         options.sub_expression, options.include_body,
                         options.fail_on_data_loss, options.pull_batch_size,
                         options.pull_concurrency, options.timeout_ms)


def _mq(queue: Queue) -> MessageQueue:
    return MessageQueue(queue[0], queue[1], queue[2])


class Brokers:
    """The driver's connection to the name servers and brokers (a blocking admin client,
    started on first use). Not picklable state: readers drop it when Spark pickles them."""

    def __init__(self, namesrv_addr: str, timeout_ms: int) -> None:
        self.namesrv_addr = namesrv_addr
        self.timeout = timeout_ms / 1000
        self._admin: AdminClient | None = None

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            admin = AdminClient(self.namesrv_addr, timeout=self.timeout)
            admin.start()
            self._admin = admin
        return self._admin

    def close(self) -> None:
        admin, self._admin = self._admin, None
        if admin is not None:
            admin.shutdown()

    def queues(self, topics: Iterable[str]) -> list[Queue]:
        """The readable queues of the topics, from their routes (every broker holding them)."""
        out: list[Queue] = []
        for topic in topics:
            try:
                mqs = self.admin.queues(topic)
            except MQClientError as exc:
                raise OptionError(f"option 'topics': {exc} (name servers "
                                  f"{self.namesrv_addr})") from None
            out.extend((mq.topic, mq.broker_name, mq.queue_id) for mq in mqs)
        return sorted(out)

    def ranges(self, queues: Iterable[Queue]) -> dict[Queue, tuple[int, int]]:
        """{queue: (min offset, max offset)} as the brokers report them now."""
        return {q: (self.admin.min_offset(_mq(q)), self.admin.max_offset(_mq(q)))
                for q in queues}

    def offsets_at(self, ranges: dict[Queue, tuple[int, int]], timestamp_ms: int
                   ) -> dict[Queue, int]:
        """Per queue, the first offset whose message was stored at or after the time (the
        max offset when none): SEARCH_OFFSET_BY_TIMESTAMP, then exact by the store times of
        the messages around its answer (the broker answers the last message for a time
        past the end, and an offset near the time otherwise)."""
        return {q: self._offset_at(q, lo, hi, timestamp_ms) for q, (lo, hi) in ranges.items()}

    def _offset_at(self, q: Queue, lo: int, hi: int, timestamp_ms: int) -> int:
        mq = _mq(q)
        offset = min(max(self.admin.search_offset(mq, timestamp_ms), lo), hi)
        step = 32
        # back while the messages before offset are already at/after the time
        while offset > lo:
            begin = max(lo, offset - step)
            before = [m for m in self.admin.pull(mq, begin, offset - begin)
                      if m.queue_offset < offset]
            if not before:
                break
            earlier = [m.queue_offset for m in before if m.store_timestamp < timestamp_ms]
            if earlier:
                offset = earlier[-1] + 1
                break
            offset = before[0].queue_offset
        # forward past the messages stored before the time
        while offset < hi:
            window = self.admin.pull(mq, offset, step)
            if not window:
                break
            hit = [m.queue_offset for m in window if m.store_timestamp >= timestamp_ms]
            if hit:
                return hit[0]
            offset = window[-1].queue_offset + 1
        return min(offset, hi)

    def commit(self, group: str, offsets: dict[Queue, int]) -> None:
        """UPDATE_CONSUMER_OFFSET of each queue on its master."""
        for q, offset in sorted(offsets.items()):
            self.admin.update_consumer_offset(group, _mq(q), int(offset))


def resolve(wanted: dict[Queue, int], ranges: dict[Queue, tuple[int, int]], default: str,
            what: str, fail_on_data_loss: bool, at_time: dict[Queue, int] | None = None
            ) -> dict[Queue, int]:
    """The offset of each queue for a starting/ending spec: JSON values (-2 earliest, -1
    latest), the default for queues not named, or a timestamp lookup. A start below what the
    broker still has is data loss: an error naming the queue, or the min offset with
    failOnDataLoss=false."""
    out: dict[Queue, int] = {}
    unknown = sorted(queue_name(q) for q in wanted if q not in ranges)
    if unknown:
        raise OptionError(f"option {what!r} names queue(s) {', '.join(unknown)} that the "
                          f"routes do not have (they have: "
                          f"{', '.join(queue_name(q) for q in sorted(ranges))})")
    for q, (lo, hi) in ranges.items():
        if at_time is not None:
            value = at_time[q]
        else:
            value = wanted.get(q, EARLIEST if default == "earliest" else LATEST)
        if value == EARLIEST:
            value = lo
        elif value == LATEST:
            value = hi
        if value < lo and what.startswith("starting"):
            if fail_on_data_loss:
                raise DataLossError(
                    f"queue {queue_name(q)}: {what} {value} is below the broker's min offset "
                    f"{lo} (messages deleted by retention); set failOnDataLoss=false to read "
                    f"from {lo}")
            log.warning("queue %s: %s %d was deleted; reading from %d", queue_name(q), what,
                        value, lo)
        out[q] = min(max(value, lo), hi)
    return out


# ---- packing queue ranges into Spark partitions ------------------------------------------------

@dataclass(frozen=True, repr=True)
class WireTask(InputPartition):
    """The queue ranges one Spark task reads (``pack``), one after another over one client,
    with the next range's pulls in flight while the last ones of a range are decoded."""

    index: int
    ranges: tuple[WirePartition, ...]


def pack(ranges: Iterable[WirePartition], max_partitions: int | None) -> list[WireTask]:
    """The non-empty ranges in at most max_partitions tasks (None: a task per range), balanced
    by message count (the largest range first into the lightest task); a range is never
    split, and each task reads its ranges in queue order. Spark's Python data source costs
    tens of ms of CPU per task (its runner on both sides), so a task per queue on a cluster
    with fewer cores than queues pays that for nothing."""
    todo = [p for p in ranges if p.end_offset > p.start_offset]
    n = len(todo) if max_partitions is None else max(1, min(len(todo), max_partitions))
    if not todo:
        return []
    bins: list[list[WirePartition]] = [[] for _ in range(n)]
    heap = [(0, i) for i in range(n)]
    for p in sorted(todo, key=lambda p: (p.start_offset - p.end_offset, p.queue)):
        load, i = heapq.heappop(heap)
        bins[i].append(p)
        heapq.heappush(heap, (load + p.end_offset - p.start_offset, i))
    groups = sorted((sorted(b, key=lambda p: p.queue) for b in bins), key=lambda g: g[0].queue)
    return [WireTask(i, tuple(g)) for i, g in enumerate(groups)]


# ---- a task's read ---------------------------------------------------------------------------

def read_wire_partition(p: WirePartition) -> Iterator[pa.RecordBatch]:
    """The messages of the partition's range, in queue order, as RecordBatches in the Spark
    schema (``rocketstore.spark.source.spark_schema``)."""
    return read_wire_task(WireTask(p.index, (p,)))


def read_wire_task(task: WireTask) -> Iterator[pa.RecordBatch]:
    """The messages of the task's ranges, each range in queue order, the ranges in the
    task's order, as RecordBatches in the Spark schema."""
    ranges = [p for p in task.ranges if p.start_offset < p.end_offset]
    if not ranges:
        return
    loop = asyncio.new_event_loop()
    admin = AsyncAdmin(ranges[0].namesrv_addr, timeout=max(p.timeout_ms for p in ranges) / 1000)
    try:
        loop.run_until_complete(admin.start())
        yield from _TaskRead(loop, [_QueueRead(admin, p) for p in ranges]).batches()
    finally:
        try:
            loop.run_until_complete(admin.shutdown())
        finally:
            loop.close()


class _TaskRead:
    """Pulls over the windows of every range in order, ``pullConcurrency`` in flight (so the
    next range's first pulls overlap the last ones of a range), decoded in order: reply
    bodies lying whole in their windows are joined up to DECODE_BYTES per decode, within one
    range."""

    def __init__(self, loop: asyncio.AbstractEventLoop, reads: list[_QueueRead]) -> None:
        self.loop = loop
        self.reads = reads

    def _windows(self) -> Iterator[tuple[_QueueRead, int, int]]:
        for read in self.reads:
            p = read.p
            for start in range(p.start_offset, p.end_offset, p.pull_batch_size):
                yield read, start, min(p.end_offset, start + p.pull_batch_size)

    def batches(self) -> Iterator[pa.RecordBatch]:
        loop = self.loop
        concurrency = self.reads[0].p.pull_concurrency
        windows = self._windows()
        pending: collections.deque[tuple[_QueueRead, asyncio.Task[list[tuple[Any, int, int]]]]] \
            = collections.deque()
        current: _QueueRead | None = None
        joined: list[Any] = []
        joined_bytes = 0
        try:
            while True:
                while len(pending) < concurrency:
                    window = next(windows, None)
                    if window is None:
                        break
                    read, start, end = window
                    pending.append((read, loop.create_task(read.window(start, end))))
                if not pending:
                    break
                read, task = pending.popleft()
                replies = loop.run_until_complete(task)
                if read is not current:
                    if current is not None:
                        yield from current.decode(joined)
                    current, joined, joined_bytes = read, [], 0
                for body, lo, hi in replies:
                    if lo < 0:          # the whole reply lies inside its window
                        joined.append(body)
                        joined_bytes += len(body)
                        continue
                    yield from read.decode(joined)
                    joined, joined_bytes = [], 0
                    yield from read.decode([body], lo, hi)
                if joined_bytes >= DECODE_BYTES:
                    yield from read.decode(joined)
                    joined, joined_bytes = [], 0
            if current is not None:
                yield from current.decode(joined)
        finally:
            for _read, task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(
                    asyncio.gather(*(task for _read, task in pending), return_exceptions=True))


class _QueueRead:
    """One queue range of a task: its pulls and its decode."""

    def __init__(self, admin: AsyncAdmin, p: WirePartition) -> None:
        self.admin = admin
        self.p = p
        self.mq = _mq(p.queue)
        self.subscription = SubscriptionData.build(p.topic, p.sub_expression)
        self.name = queue_name(p.queue)

    async def window(self, start: int, end: int) -> list[tuple[Any, int, int]]:
        """The reply bodies covering offsets [start, end): (body, -1, -1) when every record in
        it lies in the window, else (body, start, end) to cut it to the window."""
        out: list[tuple[Any, int, int]] = []
        offset = start
        while offset < end:
            result, body = await self.admin.pull_records(self.mq, offset, end - offset,
                                                         self.subscription)
            status = result.pull_status
            nxt = result.next_begin_offset
            if status is PullStatus.FOUND or status is PullStatus.NO_MATCHED_MSG:
                if nxt <= offset:
                    raise MQClientError(f"queue {self.name}: the broker's next begin offset "
                                        f"{nxt} does not advance past {offset}")
                if status is PullStatus.FOUND:      # decode_region copies what it keeps
                    out.append((body, -1, -1) if nxt <= end else (body, start, end))
                offset = nxt
            elif status is PullStatus.OFFSET_ILLEGAL and result.min_offset > offset:
                self._lost(f"offsets [{offset}, {min(end, result.min_offset)}) were deleted "
                           f"(the broker's min offset is {result.min_offset})")
                offset = result.min_offset
            else:       # NO_NEW_MSG, or an offset past the max: the queue ends too early
                self._lost(f"the broker's queue ends at {result.max_offset}, before the "
                           f"planned end {self.p.end_offset}")
                break
        return out

    def _lost(self, what: str) -> None:
        p = self.p
        if p.fail_on_data_loss:
            raise DataLossError(f"queue {self.name} ({p.namesrv_addr}): {what}; the partition "
                                f"planned offsets [{p.start_offset}, {p.end_offset}). Set "
                                "failOnDataLoss=false to skip lost messages")
        log.warning("queue %s: %s (failOnDataLoss=false: skipped)", self.name, what)

    def decode(self, bodies: list[Any], lo: int = -1, hi: int = -1
               ) -> Iterator[pa.RecordBatch]:
        if not bodies:
            return
        data = bodies[0] if len(bodies) == 1 else b"".join(bodies)
        pos = 0
        while pos < len(data):
            res = decode_region(data, pos, base_offset=None, include_body=self.p.include_body,
                                spark=True)
            batch, pos, status = res[0], res[1], res[2]
            if status == "corrupt":
                raise MQClientError(f"queue {self.name}: a pulled record is corrupt at byte "
                                    f"{pos} of a reply: {getattr(res, 'reason', '')}")
            batch = self._filter(batch, lo, hi)
            if batch.num_rows:
                yield batch
            if status != "limit":
                break

    def _filter(self, batch: pa.RecordBatch, lo: int, hi: int) -> pa.RecordBatch:
        mask = None
        if lo >= 0:
            offsets = batch.column("queue_offset")
            mask = pc.and_(pc.greater_equal(offsets, lo), pc.less(offsets, hi))
        if not self.subscription.matches_all:
            tags = pc.is_in(batch.column("tags"),
                            value_set=pa.array(sorted(self.subscription.tags_set)))
            mask = tags if mask is None else pc.and_(mask, tags)
        return batch if mask is None else batch.filter(mask)
