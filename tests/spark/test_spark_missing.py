"""The directory source never returns less than it planned without saying so: a task whose
host lacks a segment or ConsumeQueue file (or has a shorter one) fails naming the host, the
file and the range; store paths are local or file: URIs; the default partitioning follows the
session's parallelism; the writer refuses executors that do not share the driver's store.

"A worker without the store" is simulated by planning on one copy of a store and reading the
planned partitions from another copy that lacks files."""
from __future__ import annotations

import dataclasses
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="the spark extra (pyspark) is not installed")

from pyspark.sql.types import BinaryType, StringType, StructField, StructType  # noqa: E402

from rocketstore import Message, MessageStore, StoreConfig  # noqa: E402
from rocketstore.spark.location import MissingDataError, StoreLocation  # noqa: E402
from rocketstore.spark.options import ReadOptions  # noqa: E402
from rocketstore.spark.plan import (  # noqa: E402
    CommitLogPartition,
    QueuePartition,
    plan_batch,
    read_partition,
)
from rocketstore.spark.writer import DRIVER_MARK, RocketstoreWriter, StagedPart  # noqa: E402

SEG = 64 * 1024
CQ_FILE = 20 * 100
N = 2000


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """2,000 messages of 300 bytes in two topics over ~11 64-KiB segments."""
    root = tmp_path_factory.mktemp("missing") / "store"
    config = StoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=SEG,
                         mapped_file_size_consume_queue=CQ_FILE)
    with MessageStore.open(root, config) as s:
        for i in range(0, N, 100):
            topic = "orders" if i % 200 else "audit"
            s.put_messages([Message(topic, bytes([i % 251]) * 300, tags=f"t{i % 3}")
                            for _ in range(100)], [j % 2 for j in range(100)])
        assert s.wait_dispatched(30)
    return root


def _copy(store: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "worker-copy"
    shutil.copytree(store, dst)
    return dst


def _moved(part, root: Path):
    """The partition as a task on a host whose store is at root would read it."""
    return dataclasses.replace(part, location=dataclasses.replace(part.location, root=str(root)))


def _rows(parts) -> int:
    return sum(b.num_rows for p in parts for b in read_partition(p))


def _segments(root: Path) -> list[Path]:
    return sorted((root / "commitlog").iterdir())


def test_complete_copy_reads_everything(store, tmp_path):
    parts = plan_batch(ReadOptions(str(store), partition_bytes=128 << 10))
    copy = _copy(store, tmp_path)
    assert _rows([_moved(p, copy) for p in parts]) == N


@pytest.mark.parametrize("damage", ["missing", "short", "zeros"])
def test_full_scan_partition_over_a_damaged_copy_fails_naming_host_path_range(
        store, tmp_path, damage):
    parts = plan_batch(ReadOptions(str(store), partition_bytes=128 << 10))
    copy = _copy(store, tmp_path)
    last = _segments(copy)[-1]
    if damage == "missing":
        last.unlink()
    elif damage == "short":
        os.truncate(last, 1000)
    else:       # full size, but the records are gone (a copy cut short, zero-filled)
        with open(last, "r+b") as f:
            f.write(bytes(os.path.getsize(last)))
    victims = [p for p in parts if p.end > int(last.name)]
    assert victims and all(isinstance(p, CommitLogPartition) for p in victims)
    for p in victims:
        with pytest.raises(MissingDataError) as info:
            list(read_partition(_moved(p, copy)))
        text = str(info.value)
        assert socket.gethostname() in text
        assert str(last) in text
        assert f"CommitLog [{p.start}, {p.end})" in text
    # the partitions before the damage still read in full
    intact = [p for p in parts if p.end <= int(last.name)]
    assert _rows([_moved(p, copy) for p in intact]) == _rows(intact)


def test_queue_partitions_over_a_damaged_copy_fail(store, tmp_path):
    parts = plan_batch(ReadOptions(str(store), topics=("orders",)))
    assert parts and all(isinstance(p, QueuePartition) for p in parts)
    p = next(p for p in parts if p.queue_id == 1)
    copy = _copy(store, tmp_path)
    cq = copy / "consumequeue" / "orders" / "1"
    files = sorted(cq.iterdir())
    os.truncate(files[-1], 20 * 3)      # the queue's last file is cut to 3 units
    with pytest.raises(MissingDataError, match=r"ConsumeQueue is shorter") as info:
        list(read_partition(_moved(p, copy)))
    assert socket.gethostname() in str(info.value) and str(cq) in str(info.value)
    assert f"orders:1 offsets [{p.start_offset}, {p.end_offset})" in str(info.value)
    shutil.rmtree(cq)
    with pytest.raises(MissingDataError, match="ConsumeQueue"):
        list(read_partition(_moved(p, copy)))
    # the queue is whole but the CommitLog segments its units point into are not here
    copy2 = tmp_path / "copy2"
    shutil.copytree(store, copy2)
    for seg in _segments(copy2)[:-1]:
        seg.unlink()
    with pytest.raises(MissingDataError, match="not in the CommitLog segments here"):
        list(read_partition(_moved(p, copy2)))


def test_a_host_without_the_store_fails(store, tmp_path):
    for part in (plan_batch(ReadOptions(str(store)))[0],
                 plan_batch(ReadOptions(str(store), topics=("audit",)))[0]):
        with pytest.raises(MissingDataError, match="store directory is not here") as info:
            list(read_partition(_moved(part, tmp_path / "nowhere")))
        assert socket.gethostname() in str(info.value)


def test_file_uris_work_and_other_schemes_are_refused(spark, store):
    df = spark.read.format("rocketstore").load(store.as_uri())
    assert df.count() == N
    assert StoreLocation.detect(f"file://localhost{store}").root == str(store)
    for uri in ("hdfs://namenode:8020/data/store", "s3://bucket/store", "s3a://b/s"):
        with pytest.raises(ValueError, match="must be a local or mounted path"):
            StoreLocation.detect(uri)
    with pytest.raises(Exception, match="must be a local or mounted path"):
        spark.read.format("rocketstore").load("hdfs://namenode:8020/data/store").count()


def test_default_partitioning_follows_the_parallelism(spark, store):
    size = sum(p.bytes for p in plan_batch(ReadOptions(str(store))))
    assert size < 256 << 20
    assert len(plan_batch(ReadOptions(str(store)))) == 1
    four = plan_batch(ReadOptions(str(store), min_partitions=4))
    assert len(four) >= 4 and sum(p.bytes for p in four) == size
    assert ReadOptions.parse({"path": str(store), "minPartitions": "3"}).min_partitions == 3
    # the session fixture sets spark.default.parallelism=2: register() captured it
    df = spark.read.format("rocketstore").load(str(store))
    assert df.rdd.getNumPartitions() == 2 and df.count() == N
    assert spark.read.format("rocketstore").option("minPartitions", 4).load(str(store)) \
        .rdd.getNumPartitions() == len(four)


def test_spark_ingest_exits_non_zero_on_a_refused_path(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "rocketstore", "spark-ingest",
                           "hdfs://nn:8020/store", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=120,
                          # not the checkout: its rocketstore/ may be an unbuilt source tree
                          cwd=str(tmp_path), env=_child_env())
    assert proc.returncode != 0
    assert "local or mounted path" in proc.stdout + proc.stderr


def _child_env() -> dict[str, str]:
    """The environment of a child Python importing the rocketstore this test imported."""
    import rocketstore

    root = str(Path(rocketstore.__file__).resolve().parents[1])
    return dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p))


_SCHEMA = StructType([StructField("topic", StringType()), StructField("body", BinaryType())])


def test_writer_task_on_a_host_without_the_drivers_store(tmp_path):
    root = tmp_path / "store"
    writer = RocketstoreWriter({"path": str(root)}, _SCHEMA, False)
    marker = Path(writer.staging) / DRIVER_MARK
    assert marker.is_file()
    marker.unlink()         # the executor's disk: the driver's staging directory is not there
    with pytest.raises(FileNotFoundError, match="shared by the driver and every executor") as e:
        writer.write(iter([]))
    assert socket.gethostname() in str(e.value)
    assert list(Path(writer.staging).iterdir()) == []    # the task staged nothing
    # the commit of parts the driver cannot see fails clearly and leaves no staging
    with pytest.raises(FileNotFoundError, match="not visible here.*Nothing was appended"):
        writer.commit([StagedPart(0, str(tmp_path / "elsewhere" / "part-0.arrow"), 5, "w1")])
    assert not (root / ".spark-staging").exists()


def test_writer_task_failure_leaves_no_staged_file(tmp_path):
    import pyarrow as pa
    writer = RocketstoreWriter({"path": str(tmp_path / "store")}, _SCHEMA, False)

    def batches():
        yield pa.RecordBatch.from_pydict({"topic": ["t"], "body": [b"x"]})
        raise RuntimeError("upstream failure")

    with pytest.raises(RuntimeError, match="upstream failure"):
        writer.write(batches())
    assert [p.name for p in Path(writer.staging).iterdir()] == [DRIVER_MARK]
    writer.abort([])
    assert not (tmp_path / "store" / ".spark-staging").exists()
