"""The Spark session shared by the Spark tests (session-scoped local[2])."""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

import rocketstore

# ---- Spark session ---------------------------------------------------------------------------

@pytest.fixture(scope="session")
def spark():
    """local[2], UI off, fast JVM start (TieredStopAtLevel=1: tests only). Python workers run
    this interpreter and import the same rocketstore (PYTHONPATH = its parent directory; in CI
    the package is installed anyway)."""
    package_parent = str(Path(rocketstore.__file__).resolve().parents[1])
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    paths = [package_parent, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    pytest.importorskip("pyspark", reason="the spark extra (pyspark) is not installed")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs Java (java on PATH or JAVA_HOME)")
    from pyspark.sql import SparkSession

    import rocketstore.spark as rs_spark

    session = (SparkSession.builder.master("local[2]").appName("rocketstore-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.default.parallelism", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1")
               .config("spark.executorEnv.PYTHONPATH", os.environ["PYTHONPATH"])
               # workers start with `python -m` in the driver's directory (the repository
               # root here): keep it off sys.path so they import the installed package
               .config("spark.executorEnv.PYTHONSAFEPATH", "1")
               .config("spark.sql.streaming.pollingDelay", "50ms")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    rs_spark.register(session)
    yield session
    session.stop()


def pytest_collection_modifyitems(config, items):
    """The standalone-cluster tests run last: a process has one SparkContext, and theirs
    replaces the local session the other Spark tests share."""
    items.sort(key=lambda item: "test_spark_standalone" in item.nodeid)
