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

See ``rocketstore.spark.source`` (schema, readers), ``rocketstore.spark.options`` (options),
``rocketstore.spark.plan`` (partitions) and ``rocketstore.spark.writer``.
"""
from __future__ import annotations

from typing import Any

try:
    import pyspark  # noqa: F401
except ImportError as exc:  # pragma: no cover
    raise ImportError("rocketstore.spark needs PySpark >= 4.0: pip install 'rocketstore[spark]'"
                      ) from exc

from rocketstore.spark.ingest import spark_ingest
from rocketstore.spark.location import StoreLocation
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

__all__ = [
    "NAME", "SCHEMA_DDL", "CommitLogPartition", "OptionError", "QueuePartition", "ReadOptions",
    "RocketstoreBatchReader", "RocketstoreDataSource", "RocketstoreStreamReader",
    "StoreLocation", "StreamOptions", "WriteOptions", "plan_batch",
    "read_partition", "register", "spark_ingest", "spark_schema",
]


def register(spark: Any) -> None:
    """Register the ``rocketstore`` format with a SparkSession (idempotent)."""
    spark.dataSource.register(RocketstoreDataSource)
