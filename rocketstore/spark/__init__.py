"""PySpark data source for rocketstore directories (install with the ``spark`` extra).

    import rocketstore.spark
    rocketstore.spark.register(spark)

    df = spark.read.format("rocketstore").load("/data/store")              # batch
    df = (spark.read.format("rocketstore").option("topics", "orders")       # by queue
          .option("startTimestamp", "2024-05-01T00:00:00Z").load("/data/store"))
    q = (spark.readStream.format("rocketstore")                             # streaming
         .option("startingOffsets", "group:billing").option("commitToGroup", "billing")
         .load("/data/store").writeStream.format("parquet")
         .option("checkpointLocation", "/chk").trigger(availableNow=True).start("/out"))
    df.select("topic", "body").write.format("rocketstore").mode("append").save("/data/store")

    df = (spark.read.format("rocketmq").option("namesrvAddr", "127.0.0.1:9876")   # brokers
          .option("topics", "orders").load())

See ``rocketstore.spark.source`` (schema, readers), ``rocketstore.spark.options`` (options),
``rocketstore.spark.plan`` (partitions) and ``rocketstore.spark.writer``; the ``rocketmq``
format (brokers over the wire): ``rocketstore.spark.wire_source``, ``rocketstore.spark.wire``
and ``rocketstore.spark.wire_options``.
"""
from __future__ import annotations

from typing import Any

try:
    import pyspark  # noqa: F401
except ImportError as exc:  # pragma: no cover
    raise ImportError("rocketstore.spark needs PySpark >= 4.0: pip install 'rocketstore[spark]'"
                      ) from exc

from rocketstore.spark.ingest import spark_ingest
from rocketstore.spark.location import MissingDataError, StoreLocation
from rocketstore.spark.options import OptionError, ReadOptions, StreamOptions, WriteOptions
from rocketstore.spark.plan import (
    CommitLogPartition,
    QueuePartition,
    plan_batch,
    read_partition,
)
from rocketstore.spark.source import (
    NAME,
    SCHEMA_DDL,
    RocketstoreBatchReader,
    RocketstoreDataSource,
    RocketstoreStreamReader,
    spark_schema,
)
from rocketstore.spark.wire import (
    Brokers,
    DataLossError,
    WirePartition,
    WireTask,
    read_wire_partition,
    read_wire_task,
)
from rocketstore.spark.wire_options import WireReadOptions, WireWriteOptions
from rocketstore.spark.wire_source import (
    WIRE_NAME,
    RocketmqBatchReader,
    RocketmqDataSource,
    RocketmqStreamReader,
    RocketmqWriter,
)

__all__ = [
    "NAME", "SCHEMA_DDL", "WIRE_NAME", "Brokers", "CommitLogPartition", "DataLossError",
    "MissingDataError", "OptionError", "QueuePartition", "ReadOptions", "RocketmqBatchReader",
    "RocketmqDataSource", "RocketmqStreamReader", "RocketmqWriter", "RocketstoreBatchReader",
    "RocketstoreDataSource", "RocketstoreStreamReader", "StoreLocation", "StreamOptions",
    "WireReadOptions", "WirePartition", "WireTask", "WireWriteOptions", "WriteOptions",
    "plan_batch", "read_partition", "read_wire_partition", "read_wire_task", "register",
    "spark_ingest", "spark_schema",
]


def session_parallelism(spark: Any) -> int | None:
    """The session's ``spark.default.parallelism`` (its default: the cores of the executors
    registered so far, at least 2); None where the SparkContext is not reachable (Connect)."""
    try:
        return int(spark.sparkContext.defaultParallelism)
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext
        return None


def register(spark: Any) -> None:
    """Register the ``rocketstore`` and ``rocketmq`` formats with a SparkSession
    (idempotent). The directory source's default ``minPartitions`` and the wire source's
    default ``maxPartitions`` are the session's parallelism now: subclasses carry it (Spark
    pickles the registered class by value)."""
    parallelism = session_parallelism(spark)
    source = type("RocketstoreDataSource", (RocketstoreDataSource,),
                  {"default_parallelism": parallelism, "__doc__": RocketstoreDataSource.__doc__,
                   "__qualname__": "RocketstoreDataSource.for_session"})
    spark.dataSource.register(source)
    wire = type("RocketmqDataSource", (RocketmqDataSource,),
                {"default_parallelism": parallelism, "__doc__": RocketmqDataSource.__doc__,
                 "__qualname__": "RocketmqDataSource.for_session"})
    spark.dataSource.register(wire)
