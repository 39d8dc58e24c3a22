"""The rocketstore PySpark data source: batch reads equal the store's own decode,
filters prune the planned partitions, streaming is exactly-once across restarts while a
producer writes, group offsets are committed, the writer appends, bad options fail clearly.

One session-scoped local[2] SparkSession (Java on PATH, pyspark from the ``spark`` extra)."""
from __future__ import annotations

import json
import os
import random
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pyspark = pytest.importorskip("pyspark", reason="the spark extra (pyspark) is not installed")
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("Spark needs Java (java on PATH or JAVA_HOME)", allow_module_level=True)

import pyarrow as pa  # noqa: E402
from pyspark.sql.pandas.types import to_arrow_schema  # noqa: E402

import rocketstore.spark as rs_spark  # noqa: E402
from rocketstore import Message, MessageStore, StoreConfig  # noqa: E402
from rocketstore.spark.ingest import error_summary  # noqa: E402
from rocketstore.spark.options import OptionError, ReadOptions, StreamOptions  # noqa: E402
from rocketstore.spark.plan import (  # noqa: E402
    CommitLogPartition,
    QueuePartition,
    plan_batch,
    read_partition,
)
from rocketstore.spark.source import RocketstoreStreamReader  # noqa: E402
from rocketstore.store import columnar  # noqa: E402
from rocketstore.store import consumer_offset_file as store_offsets  # noqa: E402

SEG = 64 * 1024
CQ_FILE = 20 * 100          # 100 units per ConsumeQueue file: several files per queue
STORE_HOST = "192.168.0.10:10911"
TOPICS = {"orders": 3, "audit": 1, "clicks": 2}


def _config(root: Path | str, **changes: Any) -> StoreConfig:
    values: dict[str, Any] = dict(store_path_root_dir=str(root), mapped_file_size_commit_log=SEG,
                                  mapped_file_size_consume_queue=CQ_FILE, store_host=STORE_HOST)
    values.update(changes)
    return StoreConfig(**values)


# ---- a multi-segment store with several topics -----------------------------------------------

def _messages(rng: random.Random, topic: str, n: int, tag: str) -> list[Message]:
    out = []
    for i in range(n):
        body = bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 400)))
        kind = rng.randrange(4)
        props = {"seq": str(i), "ünï": "çødé ✓"} if kind == 0 else None
        keys = None if kind == 1 else ([f"k{i}"] if kind == 2 else [f"a{i}", f"b{i}"])
        out.append(Message(topic, body, tags=None if kind == 3 else f"{tag}{i % 3}", keys=keys,
                           properties=props, flag=i % 5,
                           born_host=(f"10.0.0.{i % 250 + 1}", 4000 + i % 7)))
    return out


@pytest.fixture(scope="session")
def multi_store(tmp_path_factory) -> tuple[Path, list[int]]:
    """~2,400 messages in 3 topics (6 queues) over ~15 64-KiB segments, written in three
    phases separated in store time. Returns (root, [t1, t2]): phase 2 is [t1, t2)."""
    root = tmp_path_factory.mktemp("spark") / "store"
    rng = random.Random(20240501)
    bounds = []
    with MessageStore.open(root, _config(root)) as store:
        for phase in range(3):
            for _ in range(4):
                for topic, nq in TOPICS.items():
                    msgs = _messages(rng, topic, 70, f"{topic[:2]}{phase}")
                    store.put_messages(msgs, [rng.randrange(nq) for _ in msgs])
            if phase < 2:
                time.sleep(0.02)
                bounds.append(int(time.time() * 1000))
                time.sleep(0.02)
        assert store.wait_dispatched(30)
    return root, bounds


def _expected(root: Path) -> list[dict[str, Any]]:
    """Every record as the store's own decoder (MessageStore.scan -> MessageExt) sees it."""
    with MessageStore.open(root, _config(root), read_only=True) as store:
        assert len(store.commit_log.queue.files) >= 8
        return [{
            "topic": m.topic, "queue_id": m.queue_id, "queue_offset": m.queue_offset,
            "commitlog_offset": m.commitlog_offset, "store_size": m.store_size,
            "sys_flag": m.sys_flag, "flag": m.flag, "born_timestamp": m.born_timestamp,
            "store_timestamp": m.store_timestamp, "born_host": m.born_host,
            "store_host": m.store_host, "reconsume_times": m.reconsume_times,
            "msg_id": m.msg_id, "tags": m.tags, "keys": list(m.keys),
            "properties": dict(m.properties), "body": bytes(m.body),
        } for m in store.scan(0)]


@pytest.fixture(scope="session")
def expected(multi_store) -> list[dict[str, Any]]:
    return _expected(multi_store[0])


def _rows(table: pa.Table) -> list[dict[str, Any]]:
    """Arrow rows in the shape of _expected (timestamps as ms, maps as dicts)."""
    cols = {}
    for name in table.column_names:
        col = table.column(name)
        if pa.types.is_timestamp(col.type):
            mult = {"ms": 1, "us": 1000, "ns": 1_000_000}[col.type.unit]
            cols[name] = [None if v is None else v // mult
                          for v in col.cast(pa.int64()).to_pylist()]
        elif pa.types.is_map(col.type):
            cols[name] = [None if v is None else dict(v) for v in col.to_pylist()]
        else:
            cols[name] = col.to_pylist()
    return [{k: cols[k][i] for k in cols} for i in range(table.num_rows)]


def _by_offset(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: r["commitlog_offset"])


def _read(spark, root: Path, **options: Any):
    reader = spark.read.format("rocketstore")
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load(str(root))


# ---- schema ----------------------------------------------------------------------------------

@pytest.mark.parametrize("include_body", [True, False])
def test_spark_schema_is_the_native_arrow_schema(include_body):
    """What the readers yield must equal Spark's Arrow form of the declared schema exactly
    (types, order, nullability): PySpark checks the first batch against it."""
    spark_arrow = to_arrow_schema(rs_spark.spark_schema(include_body), timezone="UTC")
    assert spark_arrow.equals(columnar.schema(include_body, spark=True))
    assert rs_spark.spark_schema(include_body).fieldNames() == \
        columnar.schema(include_body).names


# ---- batch -----------------------------------------------------------------------------------

def test_batch_read_equals_store_decode(spark, multi_store, expected):
    """Every column of every record, on a multi-segment store with several topics, with
    partitions that start and end inside segments."""
    root, _ = multi_store
    df = _read(spark, root, partitionBytes=50_000)
    assert df.schema == rs_spark.spark_schema(True)
    got = _rows(df.toArrow())
    assert len(got) == len(expected)
    assert _by_offset(got) == expected


def test_reads_apache_rocketmq_store(spark, rocketmq_store, fixture_messages):
    """The store Apache RocketMQ 4.9.8 wrote (64 KiB segments, 2000-byte ConsumeQueue files,
    a %RETRY% topic, a 127-character topic), read through Spark, equals what RocketMQ
    recorded for every message."""
    import base64
    got = {r["commitlog_offset"]: r for r in _rows(_read(spark, rocketmq_store,
                                                         partitionBytes="100k").toArrow())}
    assert len(got) == len(fixture_messages)
    for m in fixture_messages:
        r = got[m["commitLogOffset"]]
        assert (r["topic"], r["queue_id"], r["queue_offset"], r["store_size"], r["msg_id"],
                r["tags"], r["flag"], r["sys_flag"], r["born_timestamp"],
                r["store_timestamp"], r["born_host"], r["store_host"]) == (
            m["topic"], m["queueId"], m["queueOffset"], m["storeSize"], m["msgId"],
            m["tags"], m["flag"], m["sysFlag"], m["bornTimestamp"], m["storeTimestamp"],
            m["bornHost"], m["storeHost"])
        assert r["keys"] == (m["keys"] or "").split()
        assert r["properties"] == m["properties"]
        assert r["body"] == base64.b64decode(m["body_b64"])
    # through the ConsumeQueues: the messages RocketMQ put in them
    queued = [m for m in fixture_messages if m["inConsumeQueue"] and m["topic"] == "orders"]
    parts = plan_batch(ReadOptions.parse({"path": str(rocketmq_store), "topics": "orders"}))
    offsets = sorted(o for p in parts for b in read_partition(p)
                     for o in b.column("commitlog_offset").to_pylist())
    assert offsets == sorted(m["commitLogOffset"] for m in queued)


def test_full_scan_partitions_tile_the_log(multi_store, expected):
    root, _ = multi_store
    parts = plan_batch(ReadOptions.parse({"path": str(root), "partitionBytes": "50000"}))
    assert all(isinstance(p, CommitLogPartition) for p in parts)
    assert len(parts) > 5
    assert parts[0].start == expected[0]["commitlog_offset"]
    last = expected[-1]
    assert parts[-1].end == last["commitlog_offset"] + last["store_size"]
    record_starts = {r["commitlog_offset"] for r in expected}
    for a, b in zip(parts, parts[1:], strict=False):
        assert a.end == b.start and a.start in record_starts
        assert a.snapshot_end == parts[-1].end
    # reading the partitions outside Spark gives every record once, in log order
    offsets = [o for p in parts for b in read_partition(p)
               for o in b.column("commitlog_offset").to_pylist()]
    assert offsets == [r["commitlog_offset"] for r in expected]


def test_include_body_false(spark, multi_store, expected):
    root, _ = multi_store
    df = _read(spark, root, includeBody="false")
    assert "body" not in df.columns
    got = _rows(df.toArrow())
    assert _by_offset(got) == [{k: v for k, v in r.items() if k != "body"} for r in expected]


def test_topic_filter_plans_only_that_topics_queues(spark, multi_store, expected):
    root, _ = multi_store
    full = plan_batch(ReadOptions.parse({"path": str(root)}))
    parts = plan_batch(ReadOptions.parse({"path": str(root), "topics": "audit"}))
    want = [r for r in expected if r["topic"] == "audit"]
    assert parts and all(isinstance(p, QueuePartition) and p.topic == "audit" for p in parts)
    planned = sum(p.bytes for p in parts)
    assert planned == sum(r["store_size"] for r in want)
    assert planned < sum(p.bytes for p in full) / 2
    got = _rows(_read(spark, root, topics="audit").toArrow())
    assert _by_offset(got) == want


def test_queue_offsets_filter(spark, multi_store, expected):
    root, _ = multi_store
    start = {"orders:1": 10, "clicks:0": 5}
    end = {"orders:1": 60}
    opts = {"path": str(root), "startOffsets": json.dumps(start), "endOffsets": json.dumps(end)}
    parts = plan_batch(ReadOptions.parse(opts))
    assert {(p.topic, p.queue_id) for p in parts} == {("orders", 1), ("clicks", 0)}
    want = [r for r in expected
            if (r["topic"], r["queue_id"]) == ("orders", 1) and 10 <= r["queue_offset"] < 60
            or (r["topic"], r["queue_id"]) == ("clicks", 0) and r["queue_offset"] >= 5]
    assert sum(p.bytes for p in parts) == sum(r["store_size"] for r in want)
    got = _rows(_read(spark, root, startOffsets=json.dumps(start),
                      endOffsets=json.dumps(end)).toArrow())
    assert _by_offset(got) == want
    # a small partitionBytes splits a queue's range; the rows stay the same
    small = plan_batch(ReadOptions.parse({**opts, "partitionBytes": "4000"}))
    assert len(small) > len(parts)
    assert [o for p in small for b in read_partition(p)
            for o in b.column("commitlog_offset").to_pylist()] == \
        [o for p in parts for b in read_partition(p)
         for o in b.column("commitlog_offset").to_pylist()]


def test_time_filter_is_pushed_into_planning(spark, multi_store, expected):
    root, (t1, t2) = multi_store
    want = [r for r in expected if t1 <= r["store_timestamp"] < t2]
    assert 0 < len(want) < len(expected) / 2
    full = plan_batch(ReadOptions.parse({"path": str(root)}))
    parts = plan_batch(ReadOptions.parse({"path": str(root), "startTimestamp": str(t1),
                                          "endTimestamp": str(t2)}))
    planned = sum(p.bytes for p in parts)
    # exactly the span of phase 2's records (with the segments' END_FILE blanks inside it)
    assert parts[0].start == want[0]["commitlog_offset"]
    assert planned == want[-1]["commitlog_offset"] + want[-1]["store_size"] - parts[0].start
    assert planned < sum(p.bytes for p in full) / 2
    got = _rows(_read(spark, root, startTimestamp=t1, endTimestamp=t2).toArrow())
    assert _by_offset(got) == want
    # ISO-8601 bounds, and time + topic (ConsumeQueue ranges found by binary search)
    iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t1 // 1000)) + \
        f".{t1 % 1000:03d}Z"
    assert ReadOptions.parse({"path": "x", "startTimestamp": iso}).start_timestamp == t1
    qparts = plan_batch(ReadOptions.parse({"path": str(root), "topics": "orders,clicks",
                                           "startTimestamp": str(t1),
                                           "endTimestamp": str(t2)}))
    want_q = [r for r in want if r["topic"] in ("orders", "clicks")]
    assert sum(p.bytes for p in qparts) == sum(r["store_size"] for r in want_q)
    got = [r for p in qparts for b in read_partition(p) for r in _rows(pa.Table.from_batches([b]))]
    assert _by_offset(got) == want_q


def test_empty_plan_reads_no_rows(spark, multi_store):
    """A window after the last message plans no partition (Spark then runs one placeholder
    partition, which must read nothing)."""
    root, _ = multi_store
    future = int(time.time() * 1000) + 3_600_000
    assert plan_batch(ReadOptions.parse({"path": str(root), "startTimestamp": future})) == []
    assert _read(spark, root, startTimestamp=future).count() == 0
    assert _read(spark, root, topics="audit", startTimestamp=future).count() == 0


def test_consistent_prefix_while_writing(multi_store, tmp_path):
    """Planning captures the end; records written afterwards are not read, and reads never
    see a torn record although a writer keeps appending."""
    src, _ = multi_store
    root = tmp_path / "store"
    shutil.copytree(src, root)
    store = MessageStore.open(root, _config(root))
    try:
        parts = plan_batch(ReadOptions.parse({"path": str(root), "partitionBytes": "100000"}))
        planned_end = parts[-1].end
        before = sum(b.num_rows for p in parts for b in read_partition(p))
        for _ in range(5):
            store.put_messages([Message("orders", b"x" * 300) for _ in range(200)], 0)
        after = sum(b.num_rows for p in parts for b in read_partition(p))
        assert after == before                                  # the plan's prefix only
        assert store.get_max_phy_offset() > planned_end
        again = plan_batch(ReadOptions.parse({"path": str(root)}))
        assert sum(b.num_rows for p in again for b in read_partition(p)) == before + 1000
    finally:
        store.shutdown()


# ---- malformed options -----------------------------------------------------------------------

@pytest.mark.parametrize("options, match", [
    ({}, "option 'path' is required"),
    ({"path": "P", "topic": "orders"}, "unknown rocketstore read option.*topic"),
    ({"path": "P", "startOffsets": "{orders:0: 1}"}, "'startOffsets' must be JSON"),
    ({"path": "P", "startOffsets": '["orders:0"]'}, "must be a JSON object"),
    ({"path": "P", "startOffsets": '{"orders-0": 1}'}, "is not 'topic:queueId'"),
    ({"path": "P", "endOffsets": '{"orders:0": -3}'}, "must be a non-negative integer"),
    ({"path": "P", "startOffsets": '{"orders:0": 9}', "endOffsets": '{"orders:0": 3}'},
     "endOffsets 3 is before startOffsets 9"),
    ({"path": "P", "includeBody": "maybe"}, "'includeBody' must be true or false"),
    ({"path": "P", "partitionBytes": "lots"}, "'partitionBytes' must be a byte count"),
    ({"path": "P", "partitionBytes": "0"}, "'partitionBytes' must be positive"),
    ({"path": "P", "startTimestamp": "yesterday"}, "'startTimestamp' must be ms"),
    ({"path": "P", "startTimestamp": "20", "endTimestamp": "10"}, "is before 'startTimestamp'"),
    ({"path": "P", "topics": "orders,,audit"}, "has an empty entry"),
    ({"path": "P", "topics": "or ders"}, "not a valid topic name"),
    ({"path": "P", "topics": "audit", "startOffsets": '{"orders:0": 1}'},
     "of topics not in 'topics'"),
])
def test_malformed_read_options(options, match):
    with pytest.raises(OptionError, match=match):
        ReadOptions.parse(options)


@pytest.mark.parametrize("options, match", [
    ({"path": "P", "startingOffsets": "beginning"}, "'startingOffsets' must be 'earliest'"),
    ({"path": "P", "startingOffsets": "group:"}, "not a valid consumer group name"),
    ({"path": "P", "maxMessagesPerTrigger": "-5"}, "must be a positive integer"),
    ({"path": "P", "commitToGroup": "a@b"}, "not a valid consumer group name"),
    ({"path": "P", "startOffsets": "{}"}, "unknown rocketstore streaming option"),
])
def test_malformed_stream_options(options, match):
    with pytest.raises(OptionError, match=match):
        StreamOptions.parse(options)


def test_bad_store_paths_and_topics(multi_store, tmp_path):
    root, _ = multi_store
    with pytest.raises(FileNotFoundError, match="does not exist"):
        plan_batch(ReadOptions.parse({"path": str(tmp_path / "nope")}))
    with pytest.raises(ValueError, match="give the store root"):
        plan_batch(ReadOptions.parse({"path": str(root / "commitlog")}))
    with pytest.raises(OptionError, match="topic.*payments.*not found.*audit, clicks, orders"):
        plan_batch(ReadOptions.parse({"path": str(root), "topics": "payments"}))
    with pytest.raises(OptionError, match="queue orders:7 does not exist"):
        plan_batch(ReadOptions.parse({"path": str(root), "startOffsets": '{"orders:7": 0}'}))


def test_malformed_option_error_reaches_spark_user(spark, multi_store):
    root, _ = multi_store
    with pytest.raises(Exception, match="'startOffsets' must be JSON"):
        _read(spark, root, startOffsets="{oops").collect()
    with pytest.raises(Exception, match="unknown rocketstore read option.*topic"):
        _read(spark, root, topic="orders").collect()
    with pytest.raises(Exception, match="fixed schema"):
        spark.read.format("rocketstore").schema("topic string").load(str(root)).collect()


def test_spark_ingest_helper(spark, multi_store, expected, tmp_path):
    """What `rocketstore spark-ingest PATH --to parquet OUT` runs."""
    root, _ = multi_store
    report = rs_spark.spark_ingest(str(root), str(tmp_path / "out"), spark=spark,
                                   options={"topics": "audit"})
    assert report["rows"] == sum(r["topic"] == "audit" for r in expected)
    read_back = spark.read.parquet(str(tmp_path / "out")).schema    # (files: all nullable)
    assert [(f.name, f.dataType) for f in read_back] == \
        [(f.name, f.dataType) for f in rs_spark.spark_schema(True)]
    with pytest.raises(Exception) as info:
        rs_spark.spark_ingest(str(root), str(tmp_path / "out2"), spark=spark,
                              options={"topic": "audit"})
    assert error_summary(info.value).startswith("OptionError: unknown rocketstore read option")


# ---- writer ----------------------------------------------------------------------------------

def test_writer_appends_dataframe(spark, tmp_path):
    root = tmp_path / "w"
    rows = [(f"t{i % 2}", f"body-{i}".encode(), f"tag{i % 3}" if i % 4 else None,
             [f"k{i}", "shared"], {"n": str(i)}, i % 3 if i % 5 else None) for i in range(120)]
    df = spark.createDataFrame(rows, "topic string, body binary, tags string, "
                                     "keys array<string>, properties map<string,string>, "
                                     "queue_id int").repartition(3)
    df.write.format("rocketstore").mode("append").save(str(root))
    df.select("topic", "body").write.format("rocketstore").mode("append").save(str(root))
    assert not (root / ".spark-staging").exists()
    with MessageStore.open(root, StoreConfig(store_path_root_dir=str(root)),
                           read_only=True) as store:
        msgs = list(store.scan(0))
    assert len(msgs) == 240
    first = {bytes(m.body): m for m in msgs[:120]}
    assert set(first) == {r[1] for r in rows}
    for topic, body, tags, keys, props, qid in rows:
        m = first[body]
        assert (m.topic, m.tags, list(m.keys)) == (topic, tags, keys)
        assert m.properties["n"] == props["n"]
        if qid is not None:
            assert m.queue_id == qid
        else:
            assert 0 <= m.queue_id < 4
    assert {bytes(m.body) for m in msgs[120:]} == {r[1] for r in rows}
    # and the source reads back what the writer wrote
    assert _read(spark, root).count() == 240


def test_writer_errors(spark, tmp_path):
    root = tmp_path / "locked"
    df = spark.createDataFrame([("t", b"x")], "topic string, body binary")
    with MessageStore.open(root, StoreConfig(store_path_root_dir=str(root))):
        with pytest.raises(Exception, match="StoreLockedError.*locked by another writer"):
            df.write.format("rocketstore").mode("append").save(str(root))
    with pytest.raises(Exception, match="append-only"):
        df.write.format("rocketstore").mode("overwrite").save(str(root))
    with pytest.raises(Exception, match="cannot write column.*extra"):
        spark.createDataFrame([("t", b"x", 1)], "topic string, body binary, extra int") \
            .write.format("rocketstore").mode("append").save(str(root))
    with pytest.raises(Exception, match="needs a 'body' column"):
        spark.createDataFrame([("t",)], "topic string") \
            .write.format("rocketstore").mode("append").save(str(root))


# ---- offsets ---------------------------------------------------------------------------------

def test_consumer_offsets_file(tmp_path):
    root = tmp_path
    assert store_offsets.load_offset_table(root) == {}
    assert store_offsets.commit_group_offsets(root, "g1", {"orders:0": 5, "orders:1": 7})
    path = Path(store_offsets.consumer_offset_path(root))
    text = path.read_text()
    mtime = path.stat().st_mtime_ns
    assert not store_offsets.commit_group_offsets(root, "g1", {"orders:1": 7, "orders:0": 5})
    assert path.read_text() == text and path.stat().st_mtime_ns == mtime   # idempotent
    assert store_offsets.commit_group_offsets(root, "g2", {("audit", 0): 3})
    assert store_offsets.group_offsets(root, "g1") == {"orders:0": 5, "orders:1": 7}
    assert store_offsets.all_group_offsets(root) == {"g1": {"orders:0": 5, "orders:1": 7},
                                                     "g2": {"audit:0": 3}}
    assert json.loads(path.read_text())["offsetTable"]["orders@g1"] == {"0": 5, "1": 7}
    assert Path(str(path) + ".bak").exists()
    # RocketMQ (fastjson) writes integer keys unquoted
    path.write_text('{\n\t"offsetTable":{\n\t\t"TopicTest@cg":{0:250,1:251},'
                    '"%RETRY%cg@cg":{0:0}\n\t}\n}')
    assert store_offsets.group_offsets(root, "cg") == {"%RETRY%cg:0": 0, "TopicTest:0": 250,
                                                       "TopicTest:1": 251}
    path.write_text("{broken")     # the .bak holds the file before the last write
    assert store_offsets.group_offsets(root, "g1") == {"orders:0": 5, "orders:1": 7}
    assert store_offsets.group_offsets(root, "g2") == {}


def test_export_offsets(multi_store, expected, tmp_path):
    src, _ = multi_store
    root = tmp_path / "store"
    shutil.copytree(src, root)
    store_offsets.commit_group_offsets(root, "billing", {"orders:0": 4})
    with MessageStore.open(root, _config(root), read_only=True) as store:
        exported = store_offsets.export_offsets(store)
    assert json.loads(json.dumps(exported)) == exported
    counts: dict[str, int] = {}
    for r in expected:
        key = f"{r['topic']}:{r['queue_id']}"
        counts[key] = counts.get(key, 0) + 1
    assert exported["queues"] == {k: {"min": 0, "max": counts[k]} for k in sorted(counts)}
    assert list(exported["queues"]) == sorted(exported["queues"])
    assert exported["groups"] == {"billing": {"orders:0": 4}}
    assert exported["commitlog"]["max_offset"] == \
        expected[-1]["commitlog_offset"] + expected[-1]["store_size"]


# ---- streaming -------------------------------------------------------------------------------

class Producer(threading.Thread):
    """Writes numbered messages to two topics (3 queues) in small batches until stopped (or
    `total` are written); the store stays open (locked) the whole time."""

    def __init__(self, store: MessageStore, total: int, start: int = 0,
                 pause: float = 0.01) -> None:
        super().__init__(daemon=True)
        self.store, self.total, self.next, self.pause = store, total, start, pause
        self.produced: list[bytes] = []
        self.error: BaseException | None = None
        self.stopped = threading.Event()

    def run(self) -> None:
        rng = random.Random(self.next)
        try:
            end = self.next + self.total
            while self.next < end and not self.stopped.is_set():
                n = min(end - self.next, rng.randrange(1, 40))
                msgs, qids = [], []
                for i in range(self.next, self.next + n):
                    topic = "s1" if i % 3 else "s2"
                    msgs.append(Message(topic, f"m-{i}".encode(), tags="t", keys=[f"k{i}"]))
                    qids.append(i % 2 if topic == "s1" else 0)
                result = self.store.put_messages(msgs, qids)
                assert result.stored == n, result.status
                self.produced += [m.body for m in msgs]
                self.next += n
                time.sleep(self.pause)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc


def _stream(spark, root: Path, out: Path, chk: Path, trigger: dict[str, Any], **options: Any):
    reader = spark.readStream.format("rocketstore")
    for k, v in options.items():
        reader = reader.option(k, v)
    df = reader.load(str(root)).select("topic", "queue_id", "queue_offset", "body")
    return (df.writeStream.format("parquet").option("checkpointLocation", str(chk))
            .trigger(**trigger).start(str(out)))


def _checkpoint_offsets(chk: Path, batch: int) -> dict[str, int]:
    """The source offset Spark logged for a batch (offsets/<n>: v1, metadata, offset)."""
    lines = (chk / "offsets" / str(batch)).read_text().splitlines()
    return json.loads(lines[2])


def _wait_progress(query, batches: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = [p for p in query.recentProgress if p.get("numInputRows", 0) > 0]
        if len(done) >= batches:
            return
        if query.exception() is not None:
            raise query.exception()
        time.sleep(0.1)
    raise AssertionError(f"no {batches} non-empty batches in {timeout}s: "
                         f"{query.recentProgress[-3:]}")


@pytest.mark.slow
def test_streaming_exactly_once_across_restarts(spark, tmp_path):
    """A processing-time query while a producer writes, stopped and restarted from its
    checkpoint (twice: processing-time again, then availableNow after the producer
    stopped): the sink, read through _spark_metadata, holds exactly the produced set; the
    offsets committed to the group (the last batch's end once the query has nothing more
    to read) are visible through the store's offset export and consumerOffset.json."""
    root, out, chk = tmp_path / "store", tmp_path / "out", tmp_path / "chk"
    store = MessageStore.open(root, _config(root))
    try:
        store.put_messages([Message("s1", b"m-pre-0"), Message("s2", b"m-pre-1")], [0, 0])
        store.wait_dispatched()
        producer = Producer(store, total=50_000, pause=0.03)
        producer.start()
        opts = dict(commitToGroup="sparkgrp", maxMessagesPerTrigger="300", batchRows="64")
        written = [producer.next]
        for _ in range(2):          # run, stop, restart: while the producer writes
            q = _stream(spark, root, out, chk, {"processingTime": "200 milliseconds"}, **opts)
            _wait_progress(q, 3)
            q.stop()
            written.append(producer.next)
        producer.stopped.set()
        producer.join(60)
        assert written[0] < written[1] < written[2], written
        opts.pop("maxMessagesPerTrigger")
        assert not producer.is_alive() and producer.error is None, producer.error
        assert store.wait_dispatched(30)
        q3 = _stream(spark, root, out, chk, {"availableNow": True}, **opts)
        q3.awaitTermination(180)
        assert q3.exception() is None
        produced = [b"m-pre-0", b"m-pre-1", *producer.produced]
        got = spark.read.parquet(str(out))
        bodies = [r.body for r in got.select("body").collect()]
        assert len(bodies) == len(produced)                       # no duplicate
        assert sorted(bodies) == sorted(produced)                 # no gap
        # queue order is kept per queue
        rows = got.select("topic", "queue_id", "queue_offset").collect()
        per_queue: dict[tuple[str, int], list[int]] = {}
        for r in rows:
            per_queue.setdefault((r.topic, r.queue_id), []).append(r.queue_offset)
        for (topic, qid), offs in per_queue.items():
            assert sorted(offs) == list(range(store.get_max_offset_in_queue(topic, qid)))
        # the group's offsets, through the store API and consumerOffset.json: the end of the
        # last batch once the availableNow query is done (Spark itself commits batch n-1 only
        # while planning batch n; the source commits the last one when no batch follows)
        maxes = {f"{t}:{q}": store.get_max_offset_in_queue(t, q)
                 for t in ("s1", "s2") for q in store.queues(t)}
        batches = sorted(int(p.name) for p in (chk / "offsets").iterdir() if p.name.isdigit())
        assert _checkpoint_offsets(chk, batches[-1]) == maxes
        assert store_offsets.group_offsets(root, "sparkgrp") == maxes
        # one more message, one more run: the group follows to the new end
        store.put_message(Message("s2", b"m-last"), 0)
        assert store.wait_dispatched(30)
        q4 = _stream(spark, root, out, chk, {"availableNow": True}, **opts)
        q4.awaitTermination(120)
        assert q4.exception() is None
        maxes["s2:0"] += 1
        assert store_offsets.export_offsets(store)["groups"]["sparkgrp"] == maxes
        raw = json.loads(Path(store_offsets.consumer_offset_path(root)).read_text())
        assert raw["offsetTable"]["s1@sparkgrp"] == {"0": maxes["s1:0"], "1": maxes["s1:1"]}
        bodies = [r.body for r in spark.read.parquet(str(out)).select("body").collect()]
        assert sorted(bodies) == sorted([*produced, b"m-last"])
    finally:
        store.shutdown()


def test_streaming_available_now_and_group_start(spark, tmp_path):
    """availableNow reads everything there at start (also beyond maxMessagesPerTrigger, in
    several batches) and then stops; a new query with startingOffsets=group:<g> starts at
    the group's committed offsets (and picks up a topic created later)."""
    root = tmp_path / "store"
    with MessageStore.open(root, _config(root)) as store:
        for i in range(300):
            store.put_message(Message("s1", f"a-{i}".encode()), i % 2)
        store.wait_dispatched()
    q = _stream(spark, root, tmp_path / "out1", tmp_path / "chk1", {"availableNow": True},
                commitToGroup="g", maxMessagesPerTrigger="70")
    q.awaitTermination(120)
    assert q.exception() is None
    assert len([p for p in q.recentProgress if p["numInputRows"]]) >= 5
    got = spark.read.parquet(str(tmp_path / "out1")).select("body").collect()
    assert sorted(r.body for r in got) == sorted(f"a-{i}".encode() for i in range(300))
    batches = sorted(int(p.name) for p in (tmp_path / "chk1" / "offsets").iterdir()
                     if p.name.isdigit())
    assert _checkpoint_offsets(tmp_path / "chk1", batches[-1]) == {"s1:0": 150, "s1:1": 150}
    committed = store_offsets.group_offsets(root, "g")     # the last batch's end
    assert committed == _checkpoint_offsets(tmp_path / "chk1", batches[-1])
    with MessageStore.open(root, _config(root)) as store:
        for i in range(50):
            store.put_message(Message("s1", f"b-{i}".encode()), i % 2)
        store.put_message(Message("s3", b"new-topic"), 0)
        store.wait_dispatched()
    q = _stream(spark, root, tmp_path / "out2", tmp_path / "chk2", {"availableNow": True},
                startingOffsets="group:g")
    q.awaitTermination(120)
    assert q.exception() is None
    got = spark.read.parquet(str(tmp_path / "out2")).select("body").collect()
    rest = [f"a-{i}".encode() for i in range(300) if i // 2 >= committed[f"s1:{i % 2}"]]
    assert sorted(r.body for r in got) == sorted(rest + [f"b-{i}".encode() for i in range(50)]
                                                 + [b"new-topic"])


def test_stream_reader_offsets_without_spark(multi_store):
    """Offsets are sorted JSON-able dicts; latestOffset respects maxMessagesPerTrigger and
    the availableNow target; partitions are one per queue and read the exact range."""
    root, _ = multi_store
    reader = RocketstoreStreamReader(StreamOptions.parse(
        {"path": str(root), "topics": "orders,audit", "maxMessagesPerTrigger": "100"}))
    start = reader.initialOffset()
    assert list(start) == sorted(start) and set(start) == {"orders:0", "orders:1", "orders:2",
                                                           "audit:0"}
    assert all(v == 0 for v in start.values())
    limit = reader.getDefaultReadLimit()
    end = reader.latestOffset(start, limit)
    assert sum(end.values()) == 100 and list(end) == sorted(end)
    parts = reader.partitions(start, end)
    assert [p.key for p in parts] == [k for k in sorted(end) if end[k] > 0]
    rows = [r for p in parts for b in reader.read(p) for r in _rows(pa.Table.from_batches([b]))]
    assert len(rows) == 100
    for p in parts:
        offs = [r["queue_offset"] for r in rows if (r["topic"], r["queue_id"]) ==
                (p.topic, p.queue_id)]
        assert offs == list(range(p.start_offset, p.end_offset))
    # read() of a range is deterministic
    again = [r for p in parts for b in reader.read(p) for r in _rows(pa.Table.from_batches([b]))]
    assert again == rows
    from pyspark.sql.streaming.datasource import ReadAllAvailable
    everything = reader.latestOffset(start, ReadAllAvailable())
    reader.prepareForTriggerAvailableNow()
    assert reader.latestOffset(everything, ReadAllAvailable()) == everything
    latest = RocketstoreStreamReader(StreamOptions.parse(
        {"path": str(root), "startingOffsets": "latest"})).initialOffset()
    assert {k: v for k, v in latest.items() if k in everything} == everything
    given = RocketstoreStreamReader(StreamOptions.parse(
        {"path": str(root), "topics": "audit",
         "startingOffsets": '{"audit:0": 7}'})).initialOffset()
    assert given == {"audit:0": 7}


def test_reads_start_at_the_min_offset_after_retention(spark, tmp_path):
    """Once retention deleted the oldest segments, a batch read covers exactly what is left
    (from the minimum CommitLog offset) and a stream starting 'earliest' starts each queue at
    its new minimum offset."""
    root = tmp_path / "retained"
    config = _config(root, file_reserved_time=0, commit_log_prefault_ahead=0)
    with MessageStore.open(root, config) as store:
        for i in range(300):
            store.put_message(Message("orders", b"b" * 600, keys=[f"k{i}"]), i % 3)
        assert store.wait_dispatched()
        store.clean_files()
        min_phy = store.get_min_phy_offset()
        mins = {f"orders:{q}": store.get_min_offset_in_queue("orders", q) for q in range(3)}
        left = sorted(m.commitlog_offset for m in store.scan())
    assert min_phy > 0 and all(v > 0 for v in mins.values()) and left[0] >= min_phy
    got = _rows(_read(spark, root, partitionBytes=20_000).toArrow())
    assert sorted(r["commitlog_offset"] for r in got) == left
    reader = RocketstoreStreamReader(StreamOptions.parse({"path": str(root)}))
    start = reader.initialOffset()
    assert start == mins
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    rows = [r for p in reader.partitions(start, end) for b in reader.read(p)
            for r in _rows(pa.Table.from_batches([b]))]
    assert sorted(r["commitlog_offset"] for r in rows) == left
