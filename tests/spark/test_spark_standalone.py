"""Spark on a standalone cluster started by the test: a master and two workers from pyspark's
own ``spark-class`` (1 core each, loopback). The second worker runs in a mount namespace of its
own where the store directory is covered by an empty directory: a worker without the store.

- the wire source (``rocketmq``) reads two brokers under one name server: the batch read and an
  availableNow stream restarted from its checkpoint equal the brokers' contents, each message
  once, whichever worker runs which queue;
- the directory source fails loudly on the worker without the store (never a short count);
- a wire stream through a SIGKILL of one executor JVM, restarted from its checkpoint when the
  lost task failed the query, holds every message once.

Slow (a JVM master, two workers, their executors): ``-m slow``."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="the spark extra (pyspark) is not installed")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "client"))

from cluster import Cluster, child_env, wait_for  # noqa: E402

import rocketstore  # noqa: E402
from rocketstore import Message, MessageStore, StoreConfig  # noqa: E402
from rocketstore.client import AdminClient, Producer  # noqa: E402
from rocketstore.client import Message as ClientMessage  # noqa: E402

pytestmark = pytest.mark.slow

MASTER_URL = re.compile(r"Starting Spark master at (spark://\S+)")


def _spark_home() -> Path:
    import pyspark
    return Path(pyspark.__file__).resolve().parent


def _can_unshare(tmp: Path) -> bool:
    (tmp / "probe-a").mkdir()
    (tmp / "probe-b").mkdir()
    try:
        return subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c",
             f"mount --bind {tmp / 'probe-b'} {tmp / 'probe-a'}"],
            capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _start(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen:
    with log.open("w") as out:
        return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env,
                                cwd=str(log.parent), start_new_session=True)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, 15)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait(10)


@pytest.fixture(scope="module")
def standalone(tmp_path_factory):
    """(master URL, the store path worker 2 cannot see, the brokers' Cluster)."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs Java")
    tmp = tmp_path_factory.mktemp("standalone")
    if not _can_unshare(tmp):
        pytest.skip("needs unshare --mount (root in a mount namespace) for the worker "
                    "without the store")
    store = tmp / "shared" / "store"
    empty = tmp / "empty"
    empty.mkdir()
    store.mkdir(parents=True)
    home = _spark_home()
    package_parent = str(Path(rocketstore.__file__).resolve().parents[1])
    env = child_env(SPARK_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1",
                    PYSPARK_PYTHON=sys.executable, SPARK_NO_DAEMONIZE="1",
                    PYTHONPATH=package_parent)
    procs: list[subprocess.Popen] = []
    (tmp / "brokers").mkdir()
    brokers = Cluster(tmp / "brokers")
    try:
        procs.append(_start([str(home / "bin" / "spark-class"),
                             "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                             "--port", "0", "--webui-port", "0"], tmp / "master.log", env))
        assert wait_for(lambda: MASTER_URL.search((tmp / "master.log").read_text()), 90, 0.5)
        url = MASTER_URL.search((tmp / "master.log").read_text()).group(1)
        for i in (1, 2):
            worker = [str(home / "bin" / "spark-class"), "org.apache.spark.deploy.worker.Worker",
                      "--host", "127.0.0.1", "--port", "0", "--webui-port", "0", "--cores", "1",
                      "--memory", "1g", "--work-dir", str(tmp / f"work{i}"), url]
            if i == 2:      # this worker's processes see an empty directory at the store path
                worker = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                          f'mount --bind "{empty}" "{store}" && exec "$@"', "sh", *worker]
            procs.append(_start(worker, tmp / f"worker{i}.log", env))
        assert wait_for(lambda: all("Successfully registered with master" in
                                    (tmp / f"worker{i}.log").read_text() for i in (1, 2)),
                        90, 0.5), (tmp / "worker2.log").read_text()[-2000:]
        brokers.start_namesrv()
        for name in ("broker-a", "broker-b"):
            brokers.start_broker(name)
        yield url, store, brokers
    finally:
        brokers.close()
        for proc in reversed(procs):
            _stop(proc)


@pytest.fixture(scope="module")
def cluster_spark(standalone):
    url, _store, _brokers = standalone
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    import rocketstore.spark as rs_spark
    active = SparkSession.getActiveSession()
    if active is not None:          # the module-scoped local session of other test files
        active.stop()
    package_parent = str(Path(rocketstore.__file__).resolve().parents[1])
    session = (SparkSession.builder.master(url).appName("rocketstore-standalone")
               .config("spark.executor.cores", "1").config("spark.executor.memory", "768m")
               .config("spark.cores.max", "2")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.task.maxFailures", "1")
               .config("spark.executorEnv.PYTHONPATH", package_parent)
               .config("spark.executorEnv.PYTHONSAFEPATH", "1")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    sc = session.sparkContext
    assert wait_for(lambda: sc._jsc.sc().getExecutorMemoryStatus().size() >= 3, 120, 0.5)
    rs_spark.register(session)
    yield session
    session.stop()


def test_directory_source_fails_loudly_on_a_worker_without_the_store(standalone,
                                                                       cluster_spark):
    _url, store, _brokers = standalone
    config = StoreConfig(store_path_root_dir=str(store), mapped_file_size_commit_log=64 * 1024)
    with MessageStore.open(store, config) as s:
        for i in range(0, 4000, 200):
            s.put_messages([Message("orders", bytes([i % 251]) * 200) for _ in range(200)],
                           [j % 4 for j in range(200)])
        assert s.wait_dispatched(30)
    df = cluster_spark.read.format("rocketstore").option("partitionBytes", "64k") \
        .load(str(store))
    assert df.rdd.getNumPartitions() >= 8
    with pytest.raises(Exception, match="MissingDataError: on host .*store directory is not "
                                        "here"):
        df.count()
    with pytest.raises(Exception, match="MissingDataError"):
        cluster_spark.read.format("rocketstore").option("topics", "orders") \
            .option("partitionBytes", "64k").load(str(store)).count()


def test_wire_source_on_the_cluster_equals_the_brokers(standalone, cluster_spark, tmp_path):
    _url, _store, c = standalone
    with AdminClient(c.namesrv_addr) as admin:
        assert wait_for(lambda: len(admin.masters("TestCluster")) == 2, 30)
        admin.update_topic("clicks", cluster="TestCluster", read_queue_nums=3,
                           write_queue_nums=3)
        assert wait_for(lambda: len(admin.queues("clicks")) == 6, 30, 0.2)
    bodies: list[bytes] = []
    with Producer("standalone-producer", namesrv_addr=c.namesrv_addr) as producer:
        for a in range(0, 3000, 100):
            batch = [ClientMessage("clicks", f"click-{i}".encode()) for i in range(a, a + 100)]
            producer.send_batch(batch)
            bodies += [m.body for m in batch]

    def maxes() -> int:
        with AdminClient(c.namesrv_addr) as admin:
            return sum(admin.max_offset(mq) for mq in admin.queues("clicks"))
    assert wait_for(lambda: maxes() == 3000, 30, 0.2)

    def read():
        return cluster_spark.read.format("rocketmq").option("namesrvAddr", c.namesrv_addr) \
            .option("topics", "clicks")
    got = [r.body for r in read().load().select("body").collect()]
    assert sorted(got) == sorted(bodies)
    out, chk = tmp_path / "out", tmp_path / "chk"

    def stream(limit: str | None) -> None:
        reader = cluster_spark.readStream.format("rocketmq") \
            .option("namesrvAddr", c.namesrv_addr).option("topics", "clicks") \
            .option("commitToGroup", "standalone")
        if limit:
            reader = reader.option("maxMessagesPerTrigger", limit)
        q = (reader.load().select("body").writeStream.format("parquet")
             .option("checkpointLocation", str(chk)).trigger(availableNow=True)
             .start(str(out)))
        q.awaitTermination(300)
        assert q.exception() is None

    stream("1000")
    with Producer("standalone-producer", namesrv_addr=c.namesrv_addr) as producer:
        more = [ClientMessage("clicks", f"late-{i}".encode()) for i in range(200)]
        producer.send_batch(more)
    assert wait_for(lambda: maxes() == 3200, 30, 0.2)
    stream(None)
    streamed = [r.body for r in cluster_spark.read.parquet(str(out)).collect()]
    assert sorted(streamed) == sorted([*bodies, *(m.body for m in more)])
    with AdminClient(c.namesrv_addr) as admin:
        progress = admin.consumer_progress("standalone", "clicks")
    assert progress["diffTotal"] == 0 and \
        sum(r["consumerOffset"] for r in progress["offsetTable"]) == 3200


def _executor_pids(app_id: str) -> list[int]:
    """The executor JVMs of the application (CoarseGrainedExecutorBackend ... --app-id)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"org.apache.spark.executor.CoarseGrainedExecutorBackend" in args and \
                app_id.encode() in args:
            pids.append(int(entry.name))
    return pids


def test_wire_stream_exactly_once_through_an_executor_sigkill(standalone, cluster_spark,
                                                             tmp_path):
    """An executor JVM killed with SIGKILL mid-stream: its task is lost with it (here
    spark.task.maxFailures=1, so the query fails; with retries the task runs again
    elsewhere), and the stream restarted from its checkpoint ends with every message in the
    sink once (through its _spark_metadata)."""
    _url, _store, c = standalone
    topic, total = "executor-kill", 2000
    with AdminClient(c.namesrv_addr) as admin:
        admin.update_topic(topic, cluster="TestCluster", read_queue_nums=2, write_queue_nums=2)
        assert wait_for(lambda: len(admin.queues(topic)) == 4, 30, 0.2)
    bodies: list[bytes] = []
    with Producer("standalone-producer", namesrv_addr=c.namesrv_addr) as producer:
        for a in range(0, total, 100):
            batch = [ClientMessage(topic, f"ek-{i}".encode() * 8) for i in range(a, a + 100)]
            producer.send_batch(batch)
            bodies += [m.body for m in batch]

    def stored() -> int:
        with AdminClient(c.namesrv_addr) as admin:
            return sum(admin.max_offset(mq) for mq in admin.queues(topic))
    assert wait_for(lambda: stored() == total, 30, 0.2)
    sc = cluster_spark.sparkContext
    out, chk = tmp_path / "out", tmp_path / "chk"
    commits = chk / "commits"

    def batches_done() -> int:
        return sum(1 for p in commits.iterdir() if p.name.isdigit()) if commits.is_dir() else 0

    def start():
        return (cluster_spark.readStream.format("rocketmq")
                .option("namesrvAddr", c.namesrv_addr).option("topics", topic)
                .option("maxMessagesPerTrigger", "100").load().select("body")
                .writeStream.format("parquet").option("checkpointLocation", str(chk))
                .trigger(availableNow=True).start(str(out)))

    def finish(query) -> BaseException | None:
        try:
            query.awaitTermination(300)
        except Exception as exc:            # StreamingQueryException: the lost task
            return exc
        finally:
            if query.isActive:
                query.stop()
        return query.exception()

    query = start()
    try:
        assert wait_for(lambda: batches_done() >= 2, 180, 0.05)
        victims = _executor_pids(sc.applicationId)
        assert victims, "no executor process of the application found"
        os.kill(victims[0], 9)
        killed_at = batches_done()
    finally:
        failure = finish(query)
    assert killed_at < total // 100, "the query finished before the kill"
    if failure is not None:
        assert "executor" in str(failure).lower() or "lost" in str(failure).lower(), failure
        # the worker starts a new executor for the application in place of the killed one
        assert wait_for(lambda: len(_executor_pids(sc.applicationId)) >= 2, 120, 0.5)
        assert finish(start()) is None
    got = [r.body for r in cluster_spark.read.parquet(str(out)).collect()]
    assert len(got) == total and sorted(got) == sorted(bodies)
