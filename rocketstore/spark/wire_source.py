"""The ``rocketmq`` PySpark data source: topics read from the brokers over the wire, as Spark's
Kafka connector reads Kafka, and a writer that sends through the project's producer.

    df = (spark.read.format("rocketmq").option("namesrvAddr", "ns1:9876;ns2:9876")
          .option("topics", "orders").load())
    q = (spark.readStream.format("rocketmq").option("namesrvAddr", "ns1:9876")
         .option("topics", "orders").option("commitToGroup", "billing").load()
         .writeStream.format("parquet").option("checkpointLocation", "/chk").start("/out"))
    df.select("topic", "body").write.format("rocketmq").option("namesrvAddr", "ns1:9876").save()

Rows have the ``rocketstore`` source's schema (``rocketstore.spark.source.SCHEMA_DDL``). Each
queue's offset range is pulled by an executor from the broker holding it
(``rocketstore.spark.wire``); the ranges are packed into at most ``maxPartitions`` partitions
(default: the session's parallelism), a range never split. Streaming offsets are ``{"topic": {"broker:queueId": next}}``
in Spark's checkpoint, the source of truth: a batch is replayed from them after a restart and
reads the same messages, so an idempotent or transactional sink sees each message once.
``commitToGroup`` mirrors finished batches into the brokers' consumer offsets. Options:
``rocketstore.spark.wire_options``.
"""
from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import StringType, StructField, StructType

from rocketstore.spark.options import OptionError, parse_bool
from rocketstore.spark.source import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
    _apply_max_rows,
    _check_schema,
    spark_schema,
)
from rocketstore.spark.wire import (
    Brokers,
    WirePartition,
    WireTask,
    pack,
    partition_of,
    read_wire_partition,
    read_wire_task,
    resolve,
)
from rocketstore.spark.wire_options import (
    Queue,
    WireReadOptions,
    WireWriteOptions,
    offsets_from_json,
    offsets_to_json,
)

log = logging.getLogger("rocketstore.spark")

WIRE_NAME = "rocketmq"


class RocketmqDataSource(DataSource):
    """``format("rocketmq")``: read and write topics through name servers and brokers."""

    #: maxPartitions when the option is not given; ``register`` sets it from the session
    default_parallelism: int | None = None

    @classmethod
    def name(cls) -> str:
        return WIRE_NAME

    def schema(self) -> StructType:
        return spark_schema(parse_bool(self.options.get("includeBody", True), "includeBody"))

    def reader(self, schema: StructType) -> RocketmqBatchReader:
        options = WireReadOptions.parse(self.options,
                                        default_max_partitions=self.default_parallelism)
        _check_schema(schema, options.include_body)
        return RocketmqBatchReader(options)

    def streamReader(self, schema: StructType) -> RocketmqStreamReader:
        options = WireReadOptions.parse(self.options, streaming=True,
                                        default_max_partitions=self.default_parallelism)
        _check_schema(schema, options.include_body)
        return RocketmqStreamReader(options)

    def writer(self, schema: StructType, overwrite: bool) -> RocketmqWriter:
        return RocketmqWriter(WireWriteOptions.parse(self.options), schema)


class _WithBrokers:
    """A reader's lazily opened Brokers, left out when Spark pickles the reader."""

    options: WireReadOptions
    _brokers: Brokers | None = None

    @property
    def brokers(self) -> Brokers:
        if self._brokers is None:
            self._brokers = Brokers(self.options.namesrv_addr, self.options.timeout_ms)
        return self._brokers

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_brokers"] = None
        return state

    def _close(self) -> None:
        brokers, self._brokers = self._brokers, None
        if brokers is not None:
            brokers.close()

    def _starting(self, ranges: dict[Queue, tuple[int, int]]) -> dict[Queue, int]:
        o = self.options
        at = (self.brokers.offsets_at(ranges, o.starting_timestamp)
              if o.starting_timestamp is not None else None)
        return resolve(o.starting_offsets, ranges, "latest" if o.starting == "latest"
                       else "earliest", "startingOffsets", o.fail_on_data_loss, at)


class RocketmqBatchReader(_WithBrokers, DataSourceReader):
    """A batch read: the queues' ranges [starting, ending) with messages, packed into at most
    maxPartitions partitions."""

    def __init__(self, options: WireReadOptions) -> None:
        self.options = options

    def partitions(self) -> list[WireTask]:
        o = self.options
        try:
            ranges = self.brokers.ranges(self.brokers.queues(o.topics))
            start = self._starting(ranges)
            at = (self.brokers.offsets_at(ranges, o.ending_timestamp)
                  if o.ending_timestamp is not None else None)
            end = resolve(o.ending_offsets, ranges, "latest", "endingOffsets", True, at)
        finally:
            self._close()
        parts: list[WirePartition] = []
        for q in sorted(ranges):
            if end[q] > start[q]:
                parts.append(partition_of(len(parts), q, start[q], end[q], o))
        return pack(parts, o.max_partitions)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(partition)


def _read(partition: InputPartition) -> Iterator[pa.RecordBatch]:
    if isinstance(partition, WireTask):
        return read_wire_task(partition)
    if isinstance(partition, WirePartition):
        return read_wire_partition(partition)
    return iter(())         # Spark's placeholder partition of an empty plan reads nothing


class RocketmqStreamReader(_WithBrokers, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Streaming reads by queue offsets; see the module docstring. Queues that appear later
    (more queues, another broker) are read from offset 0 (a lost start is data loss)."""

    def __init__(self, options: WireReadOptions) -> None:
        self.options = options
        self._target: dict[Queue, int] | None = None
        self._committed: dict[Queue, int] | None = None

    def _ranges(self) -> dict[Queue, tuple[int, int]]:
        return self.brokers.ranges(self.brokers.queues(self.options.topics))

    def initialOffset(self) -> dict[str, Any]:
        return offsets_to_json(self._starting(self._ranges()))

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.options.max_messages_per_trigger
        return ReadAllAvailable() if n is None else ReadMaxRows(n)

    def latestOffset(self, start: dict[str, Any] | None = None,
                     limit: ReadLimit | None = None) -> dict[str, Any]:
        ranges = self._ranges()
        if start is None:
            return offsets_to_json({q: hi for q, (_lo, hi) in ranges.items()})
        begin = offsets_from_json(start, "offset")
        # Spark plans a batch once the one before it is done: its start is finished work
        self._commit_group(begin)
        ends: dict[Queue, int] = {}
        for q in set(begin) | set(ranges):
            s = begin.get(q, 0)
            e = max(s, ranges[q][1]) if q in ranges else s
            if self._target is not None:
                e = max(s, min(e, self._target.get(q, s)))
            ends[q] = e
        if isinstance(limit, ReadMaxRows):
            ends = _apply_max_rows(begin, ends, ranges, limit.max_rows)
        return offsets_to_json(ends)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        ranges = self._ranges()
        return offsets_to_json({q: hi for q, (_lo, hi) in ranges.items()}) if ranges else None

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {q: hi for q, (_lo, hi) in self._ranges().items()}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]
                   ) -> Sequence[InputPartition]:
        s_map = offsets_from_json(start, "offset")
        parts: list[WirePartition] = []
        for q, e in sorted(offsets_from_json(end, "offset").items()):
            s = s_map.get(q, 0)
            if e > s:
                parts.append(partition_of(len(parts), q, s, e, self.options))
        return pack(parts, self.options.max_partitions)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(partition)

    def commit(self, end: dict[str, Any]) -> None:
        self._commit_group(offsets_from_json(end, "offset"))

    def _commit_group(self, offsets: dict[Queue, int]) -> None:
        group = self.options.commit_to_group
        if group is None or not offsets or offsets == self._committed:
            return
        self.brokers.commit(group, offsets)
        self._committed = dict(offsets)

    def stop(self) -> None:
        self._close()


# ---- writer ----------------------------------------------------------------------------------

@dataclass
class SentPart(WriterCommitMessage):
    partition_id: int
    messages: int


_WRITABLE = ("topic", "body", "tags", "keys", "properties", "flag")


class RocketmqWriter(DataSourceArrowWriter):
    """Each task sends its rows through one producer (sync batch sends of ``batchSize``
    messages of one topic). Messages are sent as the task runs: a failed job leaves what its
    tasks sent (at least once, as Kafka's sink)."""

    def __init__(self, options: WireWriteOptions, schema: StructType) -> None:
        from rocketstore.spark.writer import check_write_schema
        self.options = options
        names = schema.fieldNames()
        extra = [n for n in names if n not in _WRITABLE]
        if extra:
            raise OptionError(f"cannot send column(s) {', '.join(extra)} to RocketMQ: the "
                              f"columns are {', '.join(_WRITABLE)} (select them first)")
        if "topic" not in names and options.topic is None:
            raise OptionError("writing to RocketMQ needs a 'topic' column or option('topic', ...)")
        if "topic" in names:
            check_write_schema(schema)
        else:
            check_write_schema(StructType([*schema.fields, StructField("topic", StringType())]))

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SentPart:
        from pyspark import TaskContext

        from rocketstore.client import Message, Producer
        ctx = TaskContext.get()
        pid = ctx.partitionId() if ctx is not None else 0
        o = self.options
        sent = 0
        with Producer(o.producer_group, namesrv_addr=o.namesrv_addr,
                      send_msg_timeout=o.send_timeout_ms) as producer:
            pending: dict[str, list[Message]] = {}
            for batch in iterator:
                cols = {n: batch.column(i).to_pylist() for i, n in enumerate(batch.schema.names)}
                for i in range(batch.num_rows):
                    topic = cols["topic"][i] if "topic" in cols else o.topic
                    body = cols["body"][i]
                    if topic is None or body is None:
                        raise ValueError(f"a row has a null {'topic' if topic is None else 'body'}"
                                         " (both are required)")
                    keys = cols["keys"][i] if "keys" in cols else None
                    props = cols["properties"][i] if "properties" in cols else None
                    msg = Message(topic, body.encode() if isinstance(body, str) else body,
                                  tags=cols["tags"][i] if "tags" in cols else None,
                                  keys=keys.split() if isinstance(keys, str) else keys,
                                  flag=int(cols["flag"][i] or 0) if "flag" in cols else 0,
                                  properties=dict(props) if props else None)
                    group = pending.setdefault(topic, [])
                    group.append(msg)
                    if len(group) >= o.batch_size:
                        sent += _send(producer, group)
                        pending[topic] = []
            for group in pending.values():
                if group:
                    sent += _send(producer, group)
        return SentPart(pid, sent)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        total = sum(m.messages for m in messages if isinstance(m, SentPart))
        log.info("rocketmq writer: %d messages sent", total)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        sent = sum(m.messages for m in messages if isinstance(m, SentPart))
        log.warning("rocketmq write aborted; %d messages were already sent", sent)


def _send(producer: Any, messages: list[Any]) -> int:
    from rocketstore.client import SendStatus
    result = producer.send_batch(messages)
    if result.send_status is not SendStatus.SEND_OK:    # stored, not yet flushed/replicated
        log.warning("a batch of %d messages to %r was stored with %s", len(messages),
                    messages[0].topic, result.send_status.name)
    return len(messages)
