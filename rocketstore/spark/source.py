"""The ``rocketstore`` PySpark data source: batch reader, streaming reader, writer.

Schema (``SCHEMA_DDL``; ``body`` is left out with ``includeBody=false``)::

    topic string not null, queue_id int, queue_offset bigint, commitlog_offset bigint,
    store_size int, sys_flag int, flag int, born_timestamp timestamp,
    store_timestamp timestamp, born_host string, store_host string, reconsume_times int,
    msg_id string, tags string, keys array<string>, properties map<string,string>,
    body binary

Timestamps are Spark TimestampType (UTC instants; the store keeps ms). ``keys`` is an empty
array (never null) when a message has no KEYS; ``tags`` is null when it has no TAGS.
See ``rocketstore.spark.options`` for the options and ``rocketstore.spark.plan`` for how reads
are split and kept consistent.
"""
from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)

try:  # PySpark >= 4.2: admission control (read limits) and Trigger.AvailableNow
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )
except ImportError:  # pragma: no cover - PySpark 4.0/4.1: latestOffset() without a limit
    class ReadLimit:  # type: ignore[no-redef]
        pass

    class ReadAllAvailable(ReadLimit):  # type: ignore[no-redef]
        pass

    class ReadMaxRows(ReadLimit):  # type: ignore[no-redef]
        def __init__(self, max_rows: int) -> None:
            self.max_rows = max_rows

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        pass
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from rocketstore.spark.location import StoreLocation
from rocketstore.spark.options import (
    OptionError,
    ReadOptions,
    StreamOptions,
    parse_bool,
    parse_queue_key,
    queue_key,
)
from rocketstore.spark.plan import Partition, QueuePartition, plan_batch, read_partition
from rocketstore.store import commit_group_offsets, consumer_offset_path, group_offsets

log = logging.getLogger(__name__)

NAME = "rocketstore"

SCHEMA_DDL = (
    "topic string not null, queue_id int, queue_offset bigint, commitlog_offset bigint, "
    "store_size int, sys_flag int, flag int, born_timestamp timestamp, "
    "store_timestamp timestamp, born_host string, store_host string, reconsume_times int, "
    "msg_id string, tags string, keys array<string>, properties map<string,string>, "
    "body binary")


def spark_schema(include_body: bool = True) -> StructType:
    """The Spark schema of the source (the Arrow schema of the decoded batches with
    ``spark=True``, field for field)."""
    fields = [
        StructField("topic", StringType(), False),
        StructField("queue_id", IntegerType()),
        StructField("queue_offset", LongType()),
        StructField("commitlog_offset", LongType()),
        StructField("store_size", IntegerType()),
        StructField("sys_flag", IntegerType()),
        StructField("flag", IntegerType()),
        StructField("born_timestamp", TimestampType()),
        StructField("store_timestamp", TimestampType()),
        StructField("born_host", StringType()),
        StructField("store_host", StringType()),
        StructField("reconsume_times", IntegerType()),
        StructField("msg_id", StringType()),
        StructField("tags", StringType()),
        StructField("keys", ArrayType(StringType())),
        StructField("properties", MapType(StringType(), StringType())),
    ]
    if include_body:
        fields.append(StructField("body", BinaryType()))
    return StructType(fields)


def _check_schema(schema: StructType | None, include_body: bool) -> None:
    expected = spark_schema(include_body)
    if schema is not None and schema != expected:
        raise OptionError(
            "the rocketstore source has a fixed schema; do not give one with .schema(...) "
            f"(select columns instead). Expected: {expected.simpleString()}; "
            f"given: {schema.simpleString()}")


class RocketstoreDataSource(DataSource):
    """``spark.read.format("rocketstore")``, ``spark.readStream.format("rocketstore")`` and
    ``df.write.format("rocketstore")``. Register it with ``rocketstore.spark.register``."""

    #: minPartitions when the option is not given; ``register`` sets it from the session
    default_parallelism: int | None = None

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        return spark_schema(parse_bool(self.options.get("includeBody", True), "includeBody"))

    def reader(self, schema: StructType) -> RocketstoreBatchReader:
        options = ReadOptions.parse(self.options, self.default_parallelism)
        _check_schema(schema, options.include_body)
        return RocketstoreBatchReader(options)

    def streamReader(self, schema: StructType) -> RocketstoreStreamReader:
        options = StreamOptions.parse(self.options)
        _check_schema(schema, options.include_body)
        return RocketstoreStreamReader(options)

    def writer(self, schema: StructType, overwrite: bool) -> Any:
        from rocketstore.spark.writer import RocketstoreWriter
        return RocketstoreWriter(self.options, schema, overwrite)


class RocketstoreBatchReader(DataSourceReader):
    """Batch reads; ``partitions()`` plans CommitLog ranges, or ConsumeQueue ranges when the
    query names topics or queue offsets (see ``rocketstore.spark.plan``)."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options

    def partitions(self) -> list[Partition]:
        return plan_batch(self.options)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(partition)


def _sorted(offsets: dict[str, int]) -> dict[str, int]:
    """Offsets with sorted keys: Spark compares offsets as JSON text."""
    return {k: int(offsets[k]) for k in sorted(offsets)}


class RocketstoreStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Streaming reads by ConsumeQueue offsets.

    An offset is ``{"topic:queueId": next logical offset}`` (sorted keys). A micro-batch
    ``(start, end]`` reads, per queue, the messages at logical offsets ``[start, end)``: one
    partition per queue with new messages. Queues that appear later (a new topic, more
    queues) are read from their first offset. ``read()`` of a range returns the same rows every
    time, so a batch Spark replays after a crash is identical; Spark's checkpoint is the source
    of truth, and ``commitToGroup`` only mirrors it into the store's consumer offsets."""

    def __init__(self, options: StreamOptions) -> None:
        self.options = options
        self.location = StoreLocation.detect(
            options.path, commit_log_file_size=options.commit_log_file_size,
            consume_queue_file_size=options.consume_queue_file_size)
        self._target: dict[str, int] | None = None    # availableNow: the offsets to stop at
        self._committed: dict[str, int] | None = None  # what commitToGroup last wrote

    # ---- offsets ---------------------------------------------------------------------------
    def _queues(self) -> dict[str, tuple[int, int]]:
        """{"topic:queueId": (min, max)} of the queues this query reads, from a read-only
        open of the store now (dispatched messages only: a consistent prefix)."""
        with self.location.open_read_only() as store:
            wanted = self.options.topics or store.topics()
            present = set(store.topics())
            return {queue_key(t, q): (store.get_min_offset_in_queue(t, q),
                                      store.get_max_offset_in_queue(t, q))
                    for t in wanted if t in present for q in store.queues(t)}

    def initialOffset(self) -> dict[str, int]:
        queues = self._queues()
        how = self.options.starting
        if how == "latest":
            return _sorted({k: hi for k, (_lo, hi) in queues.items()})
        if how == "earliest":
            return _sorted({k: lo for k, (lo, _hi) in queues.items()})
        if how == "json":
            given = {queue_key(*k): v for k, v in self.options.starting_offsets.items()}
        else:
            assert self.options.starting_group is not None
            given = group_offsets(self.location.root, self.options.starting_group)
            if self.options.topics:
                given = {k: v for k, v in given.items()
                         if parse_queue_key(k)[0] in self.options.topics}
            if not given:
                log.warning("consumer group %r has no committed offsets in %s: starting from "
                            "the earliest offsets", self.options.starting_group,
                            consumer_offset_path(self.location.root))
        out = {k: lo for k, (lo, _hi) in queues.items()}
        for k, v in given.items():
            lo, hi = queues.get(k, (v, v))
            out[k] = min(max(v, lo), hi)
        return _sorted(out)

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.options.max_messages_per_trigger
        return ReadAllAvailable() if n is None else ReadMaxRows(n)

    def latestOffset(self, start: dict[str, int] | None = None,
                     limit: ReadLimit | None = None) -> dict[str, int]:
        queues = self._queues()
        if start is None:            # PySpark < 4.2 calls latestOffset() without arguments
            return _sorted({k: hi for k, (_lo, hi) in queues.items()})
        ends: dict[str, int] = {}
        for k in set(start) | set(queues):
            s = int(start.get(k, 0))
            e = max(s, queues[k][1]) if k in queues else s
            if self._target is not None:
                e = max(s, min(e, self._target.get(k, s)))
            ends[k] = e
        if isinstance(limit, ReadMaxRows):
            ends = _apply_max_rows(start, ends, queues, limit.max_rows)
        if all(e == int(start.get(k, 0)) for k, e in ends.items()):
            # Nothing new: Spark plans no batch, so it would not commit the last one (it
            # commits batch n-1 while planning batch n). Spark asks between batches, so
            # everything before ``start`` is processed: commit it now, which is what lets an
            # availableNow query (and an idle one) leave its group at its end.
            self.commit({k: int(v) for k, v in start.items()})
        return _sorted(ends)

    def reportLatestOffset(self) -> dict[str, int] | None:
        queues = self._queues()
        return _sorted({k: hi for k, (_lo, hi) in queues.items()}) if queues else None

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {k: hi for k, (_lo, hi) in self._queues().items()}

    # ---- batches ---------------------------------------------------------------------------
    def partitions(self, start: dict[str, int], end: dict[str, int]
                   ) -> Sequence[InputPartition]:
        parts: list[InputPartition] = []
        for k in sorted(end):
            s, e = int(start.get(k, 0)), int(end[k])
            if e <= s:
                continue
            topic, qid = parse_queue_key(k, "offset")
            parts.append(QueuePartition(len(parts), self.location, topic, qid, s, e, -1,
                                        self.options.include_body, None, None,
                                        self.options.batch_rows))
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(partition)

    def commit(self, end: dict[str, int]) -> None:
        """Spark has processed everything before ``end``: with ``commitToGroup``, the group's
        offsets become ``end`` (written only when they change)."""
        group = self.options.commit_to_group
        if group is not None and end and end != self._committed:
            commit_group_offsets(self.location.root, group, end)
            self._committed = dict(end)

    def stop(self) -> None:
        pass

    def __repr__(self) -> str:
        return f"RocketstoreStreamReader({self.location.root!r})"


def _apply_max_rows(start: dict[str, int], ends: dict[str, int],
                    queues: dict[str, tuple[int, int]], max_rows: int) -> dict[str, int]:
    """Cap the total new messages at max_rows, shared among queues in proportion to what
    each has waiting (the remainder one by one in key order); at least one message moves."""
    begin = {k: max(int(start.get(k, 0)), queues.get(k, (0, 0))[0]) for k in ends}
    avail = {k: max(0, ends[k] - begin[k]) for k in ends}
    total = sum(avail.values())
    if total <= max_rows:
        return ends
    take = {k: avail[k] * max_rows // total for k in avail}
    left = max_rows - sum(take.values())
    for k in sorted(avail):
        if left <= 0:
            break
        if take[k] < avail[k]:
            take[k] += 1
            left -= 1
    return {k: (begin[k] + take[k]) if avail[k] else ends[k] for k in ends}


def offsets_json(offsets: dict[str, int]) -> str:
    return json.dumps(_sorted(offsets))
