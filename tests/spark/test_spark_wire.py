"""The ``rocketmq`` Spark source over the wire, against rocketstore's own name server and two
brokers (subprocesses on 127.0.0.1) and local Spark: batch reads equal the brokers' contents
(counts, per-queue offsets, bodies, and every field the directory source reads from the
brokers' own store directories); offsets, timestamps and tags select exactly; streaming reads
each message once across a restart from the checkpoint; commitToGroup shows in
consumerProgress; failOnDataLoss; the writer sends through the producer."""
from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="the spark extra (pyspark) is not installed")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "client"))

from cluster import Cluster, wait_for  # noqa: E402

from rocketstore.client import AdminClient, Message, MessageQueue, Producer  # noqa: E402
from rocketstore.remoting import RequestCode  # noqa: E402
from rocketstore.spark.options import OptionError  # noqa: E402
from rocketstore.spark.wire import (  # noqa: E402
    DataLossError,
    WirePartition,
    WireTask,
    pack,
    read_wire_partition,
    read_wire_task,
)
from rocketstore.spark.wire_options import WireReadOptions, offsets_from_json  # noqa: E402

TOPIC = "orders"
QUEUES = 4
N_FIRST = 1200


def _produce(namesrv: str, topic: str, n: int, start: int = 0, size: int = 200) -> list[bytes]:
    bodies = []
    with Producer("spark-test-producer", namesrv_addr=namesrv) as producer:
        for a in range(start, start + n, 50):
            batch = [Message(topic, f"{i:06d}-".encode() + bytes([i % 251]) * (i % size),
                             tags=f"t{i % 3}", keys=[f"k{i}"],
                             properties={"seq": str(i)} if i % 2 else None)
                     for i in range(a, min(start + n, a + 50))]
            producer.send_batch(batch)
            bodies.extend(m.body for m in batch)
    return bodies


def _max_offsets(namesrv: str, topic: str) -> dict[tuple[str, str, int], int]:
    with AdminClient(namesrv) as admin:
        return {(mq.topic, mq.broker_name, mq.queue_id): admin.max_offset(mq)
                for mq in admin.queues(topic)}


@pytest.fixture(scope="module")
def brokers(tmp_path_factory):
    """A name server and brokers a and b, topic orders (4 queues on each) with 1,200
    messages of 1..200 bytes (batches spread over the 8 queues)."""
    c = Cluster(tmp_path_factory.mktemp("wire"))
    try:
        c.start_namesrv()
        for name in ("broker-a", "broker-b"):
            c.start_broker(name)
        with AdminClient(c.namesrv_addr) as admin:
            assert wait_for(lambda: len(admin.masters("TestCluster")) == 2, 30)
            admin.update_topic(TOPIC, cluster="TestCluster", read_queue_nums=QUEUES,
                               write_queue_nums=QUEUES)
            assert wait_for(lambda: len(admin.queues(TOPIC)) == 2 * QUEUES, 30, step=0.2)
        bodies = _produce(c.namesrv_addr, TOPIC, N_FIRST)
        assert wait_for(lambda: sum(_max_offsets(c.namesrv_addr, TOPIC).values()) == N_FIRST,
                        30, step=0.2)
        yield c, bodies
    finally:
        c.close()


def _wire(spark, namesrv: str, **options: Any):
    reader = spark.read.format("rocketmq").option("namesrvAddr", namesrv)
    for key, value in {"topics": TOPIC, **options}.items():
        reader = reader.option(key, value)
    return reader.load()


def _key(r: dict[str, Any]) -> tuple:
    return (r["store_host"], r["commitlog_offset"])


def test_batch_read_equals_the_brokers(spark, brokers, tmp_path):
    c, bodies = brokers
    df = _wire(spark, c.namesrv_addr)
    maxes = _max_offsets(c.namesrv_addr, TOPIC)
    filled = sum(1 for v in maxes.values() if v)
    # the queue ranges packed into the session's parallelism (2), or a partition each
    assert df.rdd.getNumPartitions() == min(2, filled)
    assert _wire(spark, c.namesrv_addr, maxPartitions=100).rdd.getNumPartitions() == filled
    assert _wire(spark, c.namesrv_addr, maxPartitions=100).count() == N_FIRST
    rows = [r.asDict(recursive=True) for r in df.collect()]
    assert len(rows) == N_FIRST
    assert sorted(r["body"] for r in rows) == sorted(bodies)
    # per queue: offsets 0..max-1, each once (queues named by their broker's store host)
    hosts = {}
    for name in ("broker-a", "broker-b"):
        hosts[name] = c.brokers[name].address
    per_queue: dict[tuple[str, int], list[int]] = {}
    for r in rows:
        per_queue.setdefault((r["store_host"], r["queue_id"]), []).append(r["queue_offset"])
    for (_topic, broker, qid), hi in maxes.items():
        host = hosts[broker]
        got = sorted(per_queue.get((host, qid), []))
        assert got == list(range(hi)), (broker, qid)
    # every field equals what the directory source reads from the brokers' store dirs
    copies = []
    for name in ("broker-a", "broker-b"):
        copy = tmp_path / name
        shutil.copytree(c.root / name, copy, ignore=shutil.ignore_patterns("lock"))
        copies.append(copy)
    local = [r.asDict(recursive=True) for copy in copies
             for r in spark.read.format("rocketstore").option("topics", TOPIC)
             .load(str(copy)).collect()]
    assert len(local) == N_FIRST
    by_key = {_key(r): r for r in local}
    for r in rows:
        assert r == by_key[_key(r)]
    assert df.schema == spark.read.format("rocketstore").load(str(copies[0])).schema


def test_offsets_timestamps_and_tags(spark, brokers):
    c, _bodies = brokers
    maxes = _max_offsets(c.namesrv_addr, TOPIC)
    (qa, qb) = sorted(q for q, hi in maxes.items() if hi >= 10)[:2]
    start = {qa[0]: {f"{qa[1]}:{qa[2]}": 3, f"{qb[1]}:{qb[2]}": -1}}
    end = {qa[0]: {f"{qa[1]}:{qa[2]}": 8}}
    rows = _wire(spark, c.namesrv_addr, startingOffsets=json.dumps(start),
                 endingOffsets=json.dumps(end)).collect()
    # qa: [3, 8); qb: from latest = nothing; the others: from earliest to latest
    expected = 5 + sum(hi for q, hi in maxes.items() if q not in (qa, qb))
    assert len(rows) == expected
    assert sorted(r.queue_offset for r in rows if r.queue_id == qa[2]
                  and r.store_host == c.brokers[qa[1]].address) == [3, 4, 5, 6, 7]
    # tags: the broker's hash filter, then the exact tag
    tagged = _wire(spark, c.namesrv_addr, subExpression="t1 || t2").collect()
    assert len(tagged) == sum(1 for i in range(N_FIRST) if i % 3) and \
        {r.tags for r in tagged} == {"t1", "t2"}
    # a timestamp: each queue from its first message stored at/after it
    later = int(time.time() * 1000) + 60_000
    assert _wire(spark, c.namesrv_addr, startingTimestamp=str(later)).count() == 0
    assert _wire(spark, c.namesrv_addr, startingTimestamp="0").count() == N_FIRST
    assert _wire(spark, c.namesrv_addr, endingTimestamp="0").count() == 0


def test_malformed_wire_options():
    base = {"namesrvAddr": "127.0.0.1:9876", "topics": "orders"}
    for options, match in [
        ({"topics": "orders"}, "namesrvAddr.*required"),
        ({"namesrvAddr": "nohost"}, "not host:port"),
        ({"namesrvAddr": "h:1"}, "'topics' is required"),
        ({**base, "startingOffsets": "soon"}, "startingOffsets"),
        ({**base, "startingOffsets": '{"orders": {"0": 1}}'}, "brokerName:queueId"),
        ({**base, "startingOffsets": '{"other": {"b:0": 1}}'}, "not in 'topics'"),
        ({**base, "endingOffsets": "earliest"}, "read nothing"),
        ({**base, "startingOffsets": "latest", "startingTimestamp": "0"}, "not both"),
        ({**base, "topic": "x"}, "unknown"),
        ({**base, "failOnDataLoss": "maybe"}, "failOnDataLoss"),
        ({**base, "maxPartitions": "0"}, "maxPartitions"),
    ]:
        with pytest.raises(OptionError, match=match):
            WireReadOptions.parse(options)
    with pytest.raises(OptionError, match="unknown"):
        WireReadOptions.parse({**base, "commitToGroup": "g"})       # streaming only
    assert WireReadOptions.parse({**base, "commitToGroup": "g"}, streaming=True) \
        .commit_to_group == "g"


def _ranges(*sizes: int, start: int = 0) -> list[WirePartition]:
    return [WirePartition(i, "127.0.0.1:9876", "t", f"b{i % 2}", i // 2, start, start + n)
            for i, n in enumerate(sizes)]


def test_pack_balances_whole_ranges_into_tasks():
    ranges = _ranges(100, 90, 10, 10, 10, 0, 60, 40)
    tasks = pack(ranges, 3)
    assert len(tasks) == 3 and [t.index for t in tasks] == [0, 1, 2]
    packed = [p for t in tasks for p in t.ranges]
    # every range with messages exactly once, whole; the empty one left out
    assert sorted(packed, key=lambda p: p.queue) == \
        sorted((p for p in ranges if p.end_offset > p.start_offset), key=lambda p: p.queue)
    loads = sorted(sum(p.end_offset - p.start_offset for p in t.ranges) for t in tasks)
    assert loads == [100, 110, 110]           # 320 messages: largest first, lightest task
    for t in tasks:                         # a task reads its ranges in queue order
        assert [p.queue for p in t.ranges] == sorted(p.queue for p in t.ranges)
    # None: a task per range; more tasks than ranges: a range each
    assert [len(t.ranges) for t in pack(ranges, None)] == [1] * 7
    assert len(pack(ranges, 100)) == 7 and pack(_ranges(0, 0), 2) == []


def test_a_task_reads_its_ranges_in_order(brokers):
    c, bodies = brokers
    maxes = _max_offsets(c.namesrv_addr, TOPIC)
    parts = [WirePartition(i, c.namesrv_addr, topic, broker, qid, 0, hi, pull_batch_size=7,
                           pull_concurrency=3)
             for i, ((topic, broker, qid), hi) in enumerate(sorted(maxes.items()))]
    (task,) = pack(parts, 1)
    rows = [r for b in read_wire_task(task) for r in b.select(["queue_id", "queue_offset",
                                                                "store_host", "body"]).to_pylist()]
    assert sorted(r["body"] for r in rows) == sorted(bodies)
    hosts = {address: name for name, address in
             ((n, b.address) for n, b in c.brokers.items())}
    order = [((TOPIC, hosts[r["store_host"]], r["queue_id"]), r["queue_offset"]) for r in rows]
    expected = [(q, o) for q, hi in sorted(maxes.items()) for o in range(hi)]
    assert order == expected                # range after range, each in queue order
    # a task of one range cut mid-way: the same as read_wire_partition
    q, hi = max(maxes.items(), key=lambda kv: kv[1])
    part = WirePartition(0, c.namesrv_addr, *q, 3, hi - 2, pull_batch_size=5)
    one = [r for b in read_wire_task(WireTask(0, (part,))) for r in b.to_pylist()]
    assert [r["queue_offset"] for r in one] == list(range(3, hi - 2))
    assert one == [r for b in read_wire_partition(part) for r in b.to_pylist()]


def test_unknown_topic_is_named(spark, brokers):
    c, _ = brokers
    with pytest.raises(Exception, match="nosuchtopic"):
        spark.read.format("rocketmq").option("namesrvAddr", c.namesrv_addr) \
            .option("topics", "nosuchtopic").load().count()


def _progress(namesrv: str, group: str) -> dict[str, Any]:
    with AdminClient(namesrv) as admin:
        return admin.consumer_progress(group, TOPIC)


def test_streaming_reads_each_message_once_across_a_restart(spark, brokers, tmp_path):
    c, bodies = brokers
    out, chk = tmp_path / "out", tmp_path / "chk"

    def run(**extra: Any) -> None:
        reader = spark.readStream.format("rocketmq").option("namesrvAddr", c.namesrv_addr) \
            .option("topics", TOPIC).option("commitToGroup", "spark-wire")
        for key, value in extra.items():
            reader = reader.option(key, value)
        q = (reader.load().writeStream.format("parquet")
             .option("checkpointLocation", str(chk)).trigger(availableNow=True)
             .start(str(out)))
        q.awaitTermination(180)
        assert q.exception() is None

    run(maxMessagesPerTrigger=500)          # 1,200 messages: three batches
    batches = sorted(int(p.name) for p in (chk / "offsets").iterdir() if p.name.isdigit())
    assert len(batches) >= 3
    more = _produce(c.namesrv_addr, TOPIC, 300, start=N_FIRST)
    total = N_FIRST + 300
    assert wait_for(lambda: sum(_max_offsets(c.namesrv_addr, TOPIC).values()) == total, 30)
    run()                                   # restart from the checkpoint
    got = spark.read.parquet(str(out))
    got_bodies = [r.body for r in got.select("body").collect()]
    assert len(got_bodies) == total                         # no duplicate
    assert sorted(got_bodies) == sorted([*bodies, *more])   # no gap
    # the checkpoint's offsets are the brokers' ends, and so are the group's
    last = max(int(p.name) for p in (chk / "offsets").iterdir() if p.name.isdigit())
    text = (chk / "offsets" / str(last)).read_text().splitlines()[-1]
    assert offsets_from_json(text, "checkpoint") == _max_offsets(c.namesrv_addr, TOPIC)
    assert wait_for(lambda: _progress(c.namesrv_addr, "spark-wire")["diffTotal"] == 0, 15,
                    step=0.5), _progress(c.namesrv_addr, "spark-wire")
    progress = _progress(c.namesrv_addr, "spark-wire")
    assert sum(r["consumerOffset"] for r in progress["offsetTable"]) == total


def test_consumer_progress_cli_shows_the_jobs_group(brokers):
    from click.testing import CliRunner

    from rocketstore.cli import main
    c, _ = brokers
    with AdminClient(c.namesrv_addr) as admin:
        for mq in admin.queues(TOPIC):
            admin.update_consumer_offset("spark-cli", mq, 1)
    result = CliRunner().invoke(main, ["admin", "consumerProgress", "-n", c.namesrv_addr,
                                       "-g", "spark-cli", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)["offsetTable"]
    assert {r["consumerOffset"] for r in rows} == {1} and len(rows) == 2 * QUEUES


def test_task_reads_past_the_brokers_end_are_data_loss(brokers):
    c, _ = brokers
    maxes = _max_offsets(c.namesrv_addr, TOPIC)
    (topic, broker, qid), hi = max(maxes.items(), key=lambda kv: kv[1])
    part = WirePartition(0, c.namesrv_addr, topic, broker, qid, hi - 5, hi + 10)
    with pytest.raises(DataLossError, match=f"{topic}/{broker}:{qid}.*ends at {hi}"):
        list(read_wire_partition(part))
    lenient = WirePartition(0, c.namesrv_addr, topic, broker, qid, hi - 5, hi + 10,
                            fail_on_data_loss=False)
    assert sum(b.num_rows for b in read_wire_partition(lenient)) == 5


def test_writer_sends_through_the_producer(spark, brokers):
    c, _ = brokers
    with AdminClient(c.namesrv_addr) as admin:
        admin.update_topic("written", cluster="TestCluster", read_queue_nums=2,
                           write_queue_nums=2)
    rows = [(f"w{i}".encode(), f"tag{i % 2}", [f"key{i}"]) for i in range(300)]
    df = spark.createDataFrame(rows, "body binary, tags string, keys array<string>") \
        .repartition(3)
    df.write.format("rocketmq").option("namesrvAddr", c.namesrv_addr) \
        .option("topic", "written").option("batchSize", 40).mode("append").save()
    assert wait_for(lambda: sum(_max_offsets(c.namesrv_addr, "written").values()) == 300, 30)
    back = spark.read.format("rocketmq").option("namesrvAddr", c.namesrv_addr) \
        .option("topics", "written").load().collect()
    assert sorted(r.body for r in back) == sorted(r[0] for r in rows)
    assert {(r.body, r.tags, tuple(r["keys"])) for r in back} == \
        {(b, t, tuple(k)) for b, t, k in rows}
    with pytest.raises(Exception, match="'topic' column or option"):
        df.write.format("rocketmq").option("namesrvAddr", c.namesrv_addr) \
            .mode("append").save()


@pytest.fixture(scope="module")
def aging(tmp_path_factory):
    """One broker with 64 KiB segments and no file reservation: deleteExpiredCommitLog
    removes every sealed segment, so a queue's first offsets are gone."""
    c = Cluster(tmp_path_factory.mktemp("aging"))
    try:
        c.start_namesrv()
        c.start_broker("broker-x", mappedFileSizeCommitLog=65536, fileReservedTime=0,
                       cleanResourceInterval=200)
        with AdminClient(c.namesrv_addr) as admin:
            assert wait_for(lambda: len(admin.masters("TestCluster")) == 1, 30)
            admin.update_topic(TOPIC, cluster="TestCluster", read_queue_nums=1,
                               write_queue_nums=1)
        _produce(c.namesrv_addr, TOPIC, 800, size=400)
        mq = MessageQueue(TOPIC, "broker-x", 0)
        with AdminClient(c.namesrv_addr) as admin:
            assert wait_for(lambda: admin.max_offset(mq) == 800, 30)
            address = c.brokers["broker-x"].address
            admin._run(admin.core.instance.api.invoke_broker(
                address, RequestCode.DELETE_EXPIRED_COMMITLOG))
            if not wait_for(lambda: admin.min_offset(mq) > 0, 30, step=0.5):
                pytest.skip("the broker did not delete expired segments in 30 s")
            # the deletion goes on a file at a time: wait for the min offset to settle
            seen = [admin.min_offset(mq)]

            def settled() -> bool:
                seen.append(admin.min_offset(mq))
                return len(seen) >= 5 and len(set(seen[-5:])) == 1
            assert wait_for(settled, 60, step=0.5), seen
            low = seen[-1]
        yield c, low
    finally:
        c.close()


def test_fail_on_data_loss(spark, aging):
    c, low = aging
    start = json.dumps({TOPIC: {"broker-x:0": 0}})
    with pytest.raises(Exception, match=f"{TOPIC}/broker-x:0.*below the broker's min offset"):
        _wire(spark, c.namesrv_addr, startingOffsets=start).count()
    assert _wire(spark, c.namesrv_addr, startingOffsets=start,
                 failOnDataLoss="false").count() == 800 - low
    assert _wire(spark, c.namesrv_addr).count() == 800 - low       # earliest: what is left
    # a task whose planned start was deleted since planning
    part = WirePartition(0, c.namesrv_addr, TOPIC, "broker-x", 0, 0, 800)
    with pytest.raises(DataLossError, match=r"offsets \[0, \d+\) were deleted"):
        list(read_wire_partition(part))
    lenient = WirePartition(0, c.namesrv_addr, TOPIC, "broker-x", 0, 0, 800,
                            fail_on_data_loss=False)
    assert sum(b.num_rows for b in read_wire_partition(lenient)) == 800 - low


_DRIVER = """
import sys, time
from rocketstore.spark.ingest import local_spark
ns, out, chk, trigger = sys.argv[1:5]
spark = local_spark("local[2]", "wire-driver")
spark.sparkContext.setLogLevel("ERROR")
reader = (spark.readStream.format("rocketmq").option("namesrvAddr", ns)
          .option("topics", "killed").option("maxMessagesPerTrigger", 150))
w = reader.load().select("body").writeStream.format("parquet")
w = w.option("checkpointLocation", chk)
if trigger == "now":
    w.trigger(availableNow=True).start(out).awaitTermination(240)
else:
    q = w.trigger(processingTime="100 milliseconds").start(out)
    print("STARTED", flush=True)
    q.awaitTermination(240)
"""


@pytest.mark.slow
def test_streaming_exactly_once_through_a_driver_sigkill(spark, brokers, tmp_path):
    """A driver process killed with SIGKILL mid-stream, then a new driver on the same
    checkpoint: the sink (through its _spark_metadata) holds every message once."""
    import os
    import signal
    import subprocess

    from cluster import child_env
    c, _ = brokers
    with AdminClient(c.namesrv_addr) as admin:
        admin.update_topic("killed", cluster="TestCluster", read_queue_nums=2,
                           write_queue_nums=2)
    bodies = _produce(c.namesrv_addr, "killed", 1500)
    assert wait_for(lambda: sum(_max_offsets(c.namesrv_addr, "killed").values()) == 1500, 30)
    out, chk = tmp_path / "out", tmp_path / "chk"
    args = [sys.executable, "-c", _DRIVER, c.namesrv_addr, str(out), str(chk)]
    env = child_env(PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    driver = subprocess.Popen([*args, "loop"], env=env, cwd=str(tmp_path),
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                              start_new_session=True)
    try:
        commits = chk / "commits"
        assert wait_for(lambda: commits.is_dir() and len(
            [p for p in commits.iterdir() if p.name.isdigit()]) >= 3, 180, 0.1)
    finally:
        os.killpg(driver.pid, signal.SIGKILL)       # the driver, its JVM and Python workers
        driver.wait(30)
    done = sum(1 for p in commits.iterdir() if p.name.isdigit())
    assert done < 10, "the query finished before the kill"       # 1,500 / 150 batches
    again = subprocess.run([*args, "now"], env=env, cwd=str(tmp_path), timeout=300,
                           capture_output=True, text=True)
    assert again.returncode == 0, again.stderr[-3000:]
    got = [r.body for r in spark.read.parquet(str(out)).collect()]   # through _spark_metadata
    assert len(got) == len(bodies) and sorted(got) == sorted(bodies)
