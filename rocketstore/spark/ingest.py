"""``rocketstore spark-ingest PATH --to parquet OUT``: the batch ingest of a store on a local
Spark, as a function the CLI calls."""
from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from typing import Any

FORMATS = ("parquet", "orc", "json")


def error_summary(exc: BaseException) -> str:
    """The line that says what went wrong in an error Spark raised: Python errors of the data
    source come wrapped in a JVM exception whose message holds the whole Python traceback;
    this picks the exception line of that traceback (e.g. "OptionError: option 'topics' ...")
    and falls back to the message's first line."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    for line in reversed(lines):
        head, sep, rest = line.partition(": ")
        name = head.rsplit(".", 1)[-1]
        if sep and rest and " " not in head and (name.endswith("Error") or
                                                 name.endswith("Exception")):
            return f"{name}: {rest}"
    return lines[0] if lines else type(exc).__name__


def local_spark(master: str = "local[*]", app_name: str = "rocketstore",
                conf: Mapping[str, str] | None = None, *, fast_start: bool = False) -> Any:
    """A local SparkSession whose Python workers run this interpreter (so they import the
    same rocketstore), bound to 127.0.0.1, UI off. fast_start adds
    ``-XX:TieredStopAtLevel=1`` (quicker JVM start, 1.4-1.8x slower throughput: tests only).
    The source is registered."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master(master).appName(app_name)
               # Python workers start with `python -m` in the driver's directory; run from a
               # source checkout, that directory would shadow the installed (compiled) package
               .config("spark.executorEnv.PYTHONSAFEPATH", "1")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.session.timeZone", "UTC"))
    if fast_start:
        builder = builder.config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1")
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    from rocketstore.spark import register
    register(spark)
    return spark


def spark_ingest(path: str, out: str, *, to: str = "parquet", mode: str = "errorifexists",
                 options: Mapping[str, str] | None = None, spark: Any = None,
                 master: str = "local[*]") -> dict[str, Any]:
    """Read the store at path with ``spark.read.format("rocketstore")`` (options as for the
    source, e.g. topics or includeBody) and write it to out in format ``to``. Starts a local
    session unless one is given (and then stops it). Returns {"rows", "seconds", "out"}."""
    if to not in FORMATS:
        raise ValueError(f"--to must be one of {', '.join(FORMATS)}, got {to!r}")
    own = spark is None
    if own:
        spark = local_spark(master, "rocketstore spark-ingest")
        spark.sparkContext.setLogLevel("ERROR")
    else:
        from rocketstore.spark import register
        register(spark)
    started = time.monotonic()
    try:
        reader = spark.read.format("rocketstore")
        for key, value in (options or {}).items():
            reader = reader.option(key, value)
        from rocketstore.spark.location import local_path
        df = reader.load(os.path.abspath(local_path(path)))
        df.write.format(to).mode(mode).save(os.path.abspath(out))
        rows = spark.read.format(to).load(os.path.abspath(out)).count() \
            if to == "parquet" else None
    finally:
        if own:
            spark.stop()
    return {"rows": rows, "seconds": time.monotonic() - started, "out": os.path.abspath(out)}
