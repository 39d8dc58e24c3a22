#!/usr/bin/env python
"""Spark batch ingest throughput: ``spark.read.format("rocketstore")`` against references
measured in the same SparkSession and run.

Workload: a store of --messages messages (default 2,000,000) with 100 B bodies, one topic,
8 queues, a tag and a key per message, --segment-size CommitLog segments (default 128 MiB:
several sealed segments for the export rows). Every read is forced to materialise every
column of every row with Spark's ``noop`` sink; default JIT (no TieredStopAtLevel);
local[*]; each reader is run once to warm up, then --repeat times interleaved (A B C A B C ..),
and the median is reported.

Rows:
  rocketstore               spark.read.format("rocketstore").load(store): CommitLog ranges
                            decoded natively to Arrow (17 columns)
  (a) parquet (pyarrow)     spark.read.parquet of the same rows (same schema) written once by
                            pyarrow (snappy, one file)
  (b) re-yield floor        a trivial Python data source that re-yields one prebuilt
                            RecordBatch (the first batch rocketstore decodes, same schema) for
                            the same number of rows in the same number of partitions: the cost
                            of Spark's Python data source path alone
  export                    rocketstore.export.parquet.export_parquet of the sealed
                            segments (pyarrow, no Spark; what ``rocketstore export --format
                            parquet`` runs), --repeat times into fresh directories
  parquet (exported)        spark.read.parquet of the exported directory
  rocketmq (wire)           spark.read.format("rocketmq"): the same store served by a broker
                            (a name server and a broker started on it, topic created over it):
                            the 8 queue ranges packed into the session's parallelism (the
                            default maxPartitions: 2 tasks on 2 cores), pulled by the tasks
                            over loopback
  PullConsumer (driver)     the project's PullConsumer draining the same backlog on the
                            driver (no Spark): the broker's own backlog consumption, pulls as
                            large as the broker allows (up to 1,024 messages)
The broker serves pulls of up to --broker-max-transfer messages (default 1,024, the wire
source's pullBatchSize; 32 is RocketMQ's default maxTransferCountOnMessageInMemory).
With --workers (on a machine with 2+ cores): the wire source again on a standalone cluster
started from pyspark's own spark-class (a master and 2 workers of 1 core each, loopback),
read by 1 executor (spark.cores.max=1) and then by 2: rows/s 1 -> 2 executors.
MB/s is CommitLog bytes of the rows read (the same logical bytes for every reader). CPU s is
the CPU time of the whole process tree (driver, JVM, Python workers) per run, read from /proc:
on a shared machine it shows the work done, where wall time also shows the waiting.

Targets (the script never asserts; it prints PASS/MISS):
  - rocketstore >= 0.85 x the re-yield floor (rows/s): decoding is not the bottleneck
  - export + a Parquet read beats the direct read on a second scan: for the exported rows,
    export + 2 x parquet(exported) < 2 x rocketstore
  - rocketmq (wire) >= 0.7 x rocketstore (rows/s) on one machine
  - rocketmq (wire) rows/s grows from 1 to 2 executors (--workers, 2+ cores)
Usage: python bench/spark_ingest.py [--quick] [--messages N] [--repeat 3] [--dir DIR]
                                    [--no-wire] [--broker-max-transfer N] [--workers]
                                    [--json out.json]
"""
from __future__ import annotations

import argparse
import os
import pickle
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import _common as C

C.ensure_importable()

import pyarrow.compute as pc  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from broker import (  # noqa: E402
    broker_available,
    create_topic,
    start_broker,
    start_namesrv,
    wait_for_route,
)

from rocketstore import Message, MessageStore, StoreConfig  # noqa: E402
from rocketstore.export.parquet import export_parquet  # noqa: E402
from rocketstore.store import read_range, read_range_table  # noqa: E402

TOPIC = "bench"
QUEUES = 8


def log(msg: str) -> None:
    print(f"[spark_ingest] {msg}", file=sys.stderr, flush=True)


# ---- the store -------------------------------------------------------------------------------
def build_store(root: str, n: int, segment_size: int) -> dict[str, Any]:
    config = StoreConfig(store_path_root_dir=root, mapped_file_size_commit_log=segment_size)
    body = bytes(range(100))
    batch = 2000
    t0 = time.perf_counter()
    with MessageStore.open(root, config) as store:
        for start in range(0, n, batch):
            k = min(batch, n - start)
            msgs = [Message(TOPIC, body, tags=f"Tag{(start + i) % 4}",
                            keys=[f"key-{start + i:010d}"]) for i in range(k)]
            store.put_messages(msgs, [(start + i) % QUEUES for i in range(k)])
        store.wait_dispatched(300)
        info = {"max_offset": store.get_max_phy_offset(),
                "segments": len(store.segments())}
    info["build_s"] = time.perf_counter() - t0
    return info


def open_ro(root: str, segment_size: int) -> MessageStore:
    return MessageStore.open(root, StoreConfig(store_path_root_dir=root,
                                               mapped_file_size_commit_log=segment_size),
                             read_only=True)


# ---- the re-yield data source ----------------------------------------------------------------
def reyield_source(batch_blob: bytes, rows_per_partition: list[int]) -> type:
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    from rocketstore.spark import spark_schema

    class Part(InputPartition):
        def __init__(self, rows: int) -> None:
            self.rows = rows

    class Reader(DataSourceReader):
        def partitions(self) -> list[Part]:
            return [Part(r) for r in rows_per_partition]

        def read(self, partition: Part):
            batch = pickle.loads(batch_blob)
            left = partition.rows
            while left > 0:
                k = min(left, batch.num_rows)
                yield batch if k == batch.num_rows else batch.slice(0, k)
                left -= k

    class ReyieldSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "reyield"

        def schema(self):
            return spark_schema(True)

        def reader(self, schema):
            return Reader()

    return ReyieldSource


# ---- the wire: a broker serving the same store ------------------------------------------------
def serve_store(td: C.TempDirs, root: str, segment_size: int, max_transfer: int
                ) -> tuple[Any, Any]:
    """A name server and a broker on the bench store, the topic created: (namesrv, broker).
    max_transfer: the broker's maxTransferCountOnMessageInMemory, with 4 KiB of
    maxTransferBytesOnMessageInMemory per message (at least RocketMQ's 256 KiB)."""
    import asyncio
    namesrv = start_namesrv()
    extra = {"maxTransferCountOnMessageInMemory": max_transfer,
             "maxTransferBytesOnMessageInMemory": max(max_transfer * 4096, 256 << 10)}
    broker = start_broker(td.new("broker"), root, namesrv.address,
                          mappedFileSizeCommitLog=segment_size, **extra)
    asyncio.run(create_topic(broker.address, TOPIC, QUEUES))
    asyncio.run(wait_for_route(namesrv.address, TOPIC))
    return namesrv, broker


def pull_consumer_rows_per_s(namesrv: str, total: int, batch: int) -> float:
    """The project's PullConsumer draining the backlog from the first offsets (driver only),
    batch messages a pull."""
    from rocketstore.client import PullConsumer
    with PullConsumer(f"BenchSparkPoll{time.monotonic_ns()}", namesrv_addr=namesrv,
                      pull_batch_size=batch, consume_from_where="CONSUME_FROM_FIRST_OFFSET"
                      ) as consumer:
        consumer.assign(consumer.fetch_message_queues(TOPIC))
        got = 0
        began = time.perf_counter()
        deadline = began + 600
        while got < total and time.perf_counter() < deadline:
            got += len(consumer.poll(timeout=1.0))
        if got < total:
            raise RuntimeError(f"PullConsumer drained {got} of {total} in 600 s")
        return got / (time.perf_counter() - began)


# ---- 1 -> 2 executors: a standalone cluster -----------------------------------------------
MASTER_URL = re.compile(r"Starting Spark master at (spark://\S+)")


def _wait_log(path: Path, pattern: re.Pattern[str] | str, count: int = 1,
              timeout: float = 120) -> re.Match[str] | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = path.read_text(errors="replace") if path.exists() else ""
        found = list(re.finditer(pattern, text))
        if len(found) >= count:
            return found[0]
        time.sleep(0.5)
    return None


class Standalone:
    """A Spark master and workers (1 core each) from pyspark's spark-class, loopback; stop()
    ends their process groups."""

    def __init__(self, root: str, workers: int) -> None:
        import pyspark
        home = Path(pyspark.__file__).resolve().parent
        env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1",
               "PYSPARK_PYTHON": sys.executable, "SPARK_NO_DAEMONIZE": "1"}
        self.procs: list[subprocess.Popen[bytes]] = []
        self.root = Path(root)
        try:
            master_log = self._start([str(home / "bin" / "spark-class"),
                                      "org.apache.spark.deploy.master.Master", "--host",
                                      "127.0.0.1", "--port", "0", "--webui-port", "0"],
                                     "master", env)
            found = _wait_log(master_log, MASTER_URL)
            if found is None:
                raise RuntimeError(f"no Spark master: {master_log.read_text()[-2000:]}")
            self.url = found.group(1)
            for i in range(workers):
                wlog = self._start([str(home / "bin" / "spark-class"),
                                    "org.apache.spark.deploy.worker.Worker", "--host",
                                    "127.0.0.1", "--port", "0", "--webui-port", "0",
                                    "--cores", "1", "--memory", "2g", "--work-dir",
                                    str(self.root / f"work{i}"), self.url], f"worker{i}", env)
                if _wait_log(wlog, "Successfully registered with master") is None:
                    raise RuntimeError(f"Spark worker {i}: {wlog.read_text()[-2000:]}")
        except BaseException:
            self.stop()
            raise

    def _start(self, args: list[str], name: str, env: dict[str, str]) -> Path:
        path = self.root / f"{name}.log"
        with path.open("wb") as out:
            self.procs.append(subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT,
                                               env=env, cwd=str(self.root),
                                               start_new_session=True))
        return path

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(10)
        self.procs = []


def executor_scaling(args: argparse.Namespace, td: C.TempDirs, namesrv: str, n: int
                     ) -> dict[int, list[float]]:
    """{executors: [wall s of each timed run]} of the wire source on a standalone cluster of
    2 one-core workers, read with spark.cores.max 1 and then 2 (a session each)."""
    from rocketstore.spark.ingest import local_spark
    cluster = Standalone(td.new("standalone"), 2)
    out: dict[int, list[float]] = {}
    try:
        for executors in (1, 2):
            spark = local_spark(cluster.url, f"rocketstore bench {executors} executors", {
                "spark.cores.max": str(executors), "spark.executor.cores": "1",
                "spark.executor.memory": "1g", "spark.driver.memory": "2g",
                "spark.executorEnv.PYTHONPATH": os.environ["PYTHONPATH"]})
            spark.sparkContext.setLogLevel("ERROR")
            sc = spark.sparkContext
            deadline = time.monotonic() + 120
            while sc._jsc.sc().getExecutorMemoryStatus().size() < executors + 1:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{executors} executor(s) did not register in 120 s")
                time.sleep(0.5)

            def df(spark: Any = spark) -> Any:
                return (spark.read.format("rocketmq").option("namesrvAddr", namesrv)
                        .option("topics", TOPIC).load())
            got = df().count()
            if got != n:
                raise RuntimeError(f"{executors} executor(s) read {got} rows, expected {n}")
            for i in range(args.warmup):
                log(f"warm-up {i + 1}/{args.warmup} wire, {executors} executor(s): "
                    f"{noop(df())[0]:.2f}s")
            out[executors] = []
            for i in range(args.repeat):
                out[executors].append(noop(df())[0])
                log(f"run {i + 1}/{args.repeat} wire, {executors} executor(s): "
                    f"{out[executors][-1]:.2f}s")
            spark.stop()
    finally:
        cluster.stop()
    return out


# ---- runs ------------------------------------------------------------------------------------
def tree_cpu_seconds() -> float:
    """CPU time (user + sys, with reaped children) of this process and all its descendants:
    the driver, Spark's JVM and its Python workers. Robust to other processes on the cores."""
    procs: dict[int, tuple[int, int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        procs[int(name)] = (int(fields[1]), sum(int(x) for x in fields[11:15]))
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0, [os.getpid()]
    while todo:
        pid = todo.pop()
        total += procs.get(pid, (0, 0))[1]
        todo += children.get(pid, [])
    return total / os.sysconf("SC_CLK_TCK")


def noop(df) -> tuple[float, float]:
    """(wall s, CPU s of the whole process tree) of materialising df with the noop sink."""
    c0 = tree_cpu_seconds()
    t0 = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - t0, tree_cpu_seconds() - c0


def spark_session(args: argparse.Namespace):
    from rocketstore.spark.ingest import local_spark
    os.environ.setdefault("PYTHONPATH", C.REPO_ROOT)
    if C.REPO_ROOT not in os.environ["PYTHONPATH"].split(os.pathsep):
        os.environ["PYTHONPATH"] = os.pathsep.join([C.REPO_ROOT, os.environ["PYTHONPATH"]])
    spark = local_spark(args.master, "rocketstore bench", {
        "spark.driver.memory": "2g",
        "spark.executorEnv.PYTHONPATH": os.environ["PYTHONPATH"],
    })
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--messages", type=int, default=2_000_000)
    p.add_argument("--quick", action="store_true", help="300,000 messages")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--warmup", type=int, default=2,
                   help="untimed runs per reader first (the JIT compiles Spark's Arrow-to-row "
                        "code over the first runs)")
    p.add_argument("--segment-size", type=int, default=128 << 20)
    p.add_argument("--master", default="local[*]")
    p.add_argument("--dir", default=None, help="where the temp store goes (not tmpfs)")
    p.add_argument("--json", default=None, metavar="PATH")
    p.add_argument("--broker-max-transfer", type=int, default=1024, metavar="N",
                   help="the broker's maxTransferCountOnMessageInMemory (messages a pull "
                        "reply; default 1024, the wire source's pullBatchSize; RocketMQ's "
                        "default is 32)")
    p.add_argument("--workers", action="store_true",
                   help="also the wire source on a standalone cluster, 1 then 2 executors "
                        "(needs 2+ cores)")
    p.add_argument("--no-wire", action="store_true",
                   help="leave out the rocketmq (wire) and PullConsumer rows")
    args = p.parse_args(argv)
    wire = not args.no_wire and broker_available()
    n = 300_000 if args.quick else args.messages
    if args.quick:
        args.segment_size = min(args.segment_size, 16 << 20)

    load_start = [round(x, 2) for x in os.getloadavg()]
    td = C.TempDirs(args.dir)
    root = td.new("store")
    log(f"building a store of {n:,} messages in {root}")
    built = build_store(root, n, args.segment_size)
    log(f"built in {built['build_s']:.1f}s: {built['max_offset'] / C.MB:,.1f} MB, "
        f"{built['segments']} segments")

    # the references' inputs: the same rows, decoded once
    with open_ro(root, args.segment_size) as store:
        table = read_range_table(store, 0, spark=True)
        first_batch = next(read_range(store, 0, spark=True, batch_bytes=8 << 20))
    assert table.num_rows == n, table.num_rows
    total_bytes = int(pc.sum(table.column("store_size")).as_py())
    parquet_ref = os.path.join(td.new("parquet-ref"), "rows.parquet")
    pq.write_table(table, parquet_ref)
    del table

    spark = spark_session(args)
    from rocketstore.spark.options import ReadOptions
    from rocketstore.spark.plan import plan_batch

    parts = plan_batch(ReadOptions.parse({"path": root}))
    rows_per_part = []
    with open_ro(root, args.segment_size) as store:
        for part in parts:
            t = read_range_table(store, part.start, part.end, include_body=False)
            rows_per_part.append(t.num_rows)
    assert sum(rows_per_part) == n
    spark.dataSource.register(reyield_source(pickle.dumps(first_batch), rows_per_part))
    log(f"{len(parts)} rocketstore partitions; re-yield batch {first_batch.num_rows:,} rows")

    # the export (timed --repeat times into fresh directories) and its Parquet read
    export_times: list[float] = []
    export_cpu: list[float] = []
    export_dir = ""
    for _ in range(args.repeat):
        if export_dir:
            td.remove(export_dir)
        export_dir = td.new("export")
        with open_ro(root, args.segment_size) as store:
            with C.Timer(gc_off=False) as t_exp:
                report = export_parquet(store, export_dir, progress=None)
        export_times.append(t_exp.wall)
        export_cpu.append(t_exp.cpu)
    export_s, export_cpu_s = C.median(export_times), C.median(export_cpu)
    exported_rows = report.rows
    exported_bytes = report.commitlog_bytes
    log(f"exported {len(report.exported)} segments, {exported_rows:,} rows in "
        f"{', '.join(f'{x:.2f}' for x in export_times)}s")

    readers = {
        "rocketstore": lambda: spark.read.format("rocketstore").load(root),
        "(a) parquet (pyarrow)": lambda: spark.read.parquet(parquet_ref),
        "(b) re-yield floor": lambda: spark.read.format("reyield").load(),
        "parquet (exported)": lambda: spark.read.parquet(export_dir),
    }
    servers: list[Any] = []
    pull_rates: list[float] = []
    if wire:
        servers = list(serve_store(td, root, args.segment_size, args.broker_max_transfer))
        ns = servers[0].address
        log(f"broker {servers[1].address} serves the store; name server {ns}")
        readers["rocketmq (wire)"] = lambda: (spark.read.format("rocketmq")
                                              .option("namesrvAddr", ns)
                                              .option("topics", TOPIC).load())
    counts = {name: n for name in readers}
    counts["parquet (exported)"] = exported_rows
    for name, make in readers.items():
        got = make().count()
        if got != counts[name]:
            raise RuntimeError(f"{name} read {got} rows, expected {counts[name]}")
    for i in range(args.warmup):                  # JIT, page cache, Python workers
        for name, make in readers.items():
            log(f"warm-up {i + 1}/{args.warmup} {name}: {noop(make())[0]:.2f}s")
    samples: dict[str, list[float]] = {name: [] for name in readers}
    cpu: dict[str, list[float]] = {name: [] for name in readers}
    for i in range(args.repeat):
        for name, make in readers.items():
            wall, used = noop(make())
            samples[name].append(wall)
            cpu[name].append(used)
            log(f"run {i + 1}/{args.repeat} {name}: {wall:.2f}s (CPU {used:.2f}s)")
        if wire:
            pull_rates.append(pull_consumer_rows_per_s(servers[0].address, n,
                                                       min(1024, args.broker_max_transfer)))
            log(f"run {i + 1}/{args.repeat} PullConsumer (driver): {pull_rates[-1]:,.0f} rows/s")
    spark.stop()
    scaling: dict[int, list[float]] = {}
    try:
        if wire and args.workers and (os.cpu_count() or 1) >= 2:
            scaling = executor_scaling(args, td, servers[0].address, n)
        elif wire and args.workers:
            log("--workers: this machine has one core; 1 -> 2 executors not measured")
    finally:
        for server in reversed(servers):
            server.stop()

    med = {name: C.median(v) for name, v in samples.items()}
    med_cpu = {name: C.median(v) for name, v in cpu.items()}
    rate = {name: counts[name] / med[name] for name in readers}
    byte_count = {name: total_bytes for name in readers}
    byte_count["parquet (exported)"] = exported_bytes
    floor = rate["(b) re-yield floor"]
    pq_rate = rate["(a) parquet (pyarrow)"]
    rows = []
    for name in readers:
        rows.append([name, C.fmt_int(counts[name]), f"{med[name]:.2f}",
                     C.fmt_int(rate[name]), C.fmt_rate(byte_count[name] / C.MB / med[name]),
                     f"{rate[name] / floor:.2f}", f"{rate[name] / pq_rate:.2f}",
                     f"{med_cpu[name]:.2f}",
                     C.fmt_int(counts[name] / med_cpu[name]) if med_cpu[name] > 0 else "-"])
    export_rate = exported_rows / export_s
    rows.append(["export (pyarrow)", C.fmt_int(exported_rows), f"{export_s:.2f}",
                 C.fmt_int(export_rate), C.fmt_rate(exported_bytes / C.MB / export_s),
                 "", "", f"{export_cpu_s:.2f}", C.fmt_int(exported_rows / export_cpu_s)])
    if pull_rates:
        pull_rate = C.median(pull_rates)
        rows.append(["PullConsumer (driver)", C.fmt_int(n), f"{n / pull_rate:.2f}",
                     C.fmt_int(pull_rate), C.fmt_rate(total_bytes / C.MB * pull_rate / n),
                     "", "", "", ""])
    table_md = C.markdown_table(
        ["reader", "rows", "median s", "rows/s", "MB/s", "vs re-yield", "vs parquet",
         "CPU s", "rows/CPU s"], rows)

    info = C.machine_info(td.root, {"messages": n, "partitions": len(parts),
                                    "segment_size": args.segment_size,
                                    "store_mb": round(built["max_offset"] / C.MB, 1),
                                    "broker_max_transfer": args.broker_max_transfer,
                                    "loadavg_start": load_start,
                                    "loadavg_end": [round(x, 2) for x in os.getloadavg()]})
    C.print_machine_info(info)
    print()
    print(table_md)
    print()
    ratio = rate["rocketstore"] / floor
    cpu_ratio = med_cpu["(b) re-yield floor"] / med_cpu["rocketstore"]
    print(f"- rocketstore vs re-yield floor: {ratio:.2f} (target >= 0.85): "
          f"{'PASS' if ratio >= 0.85 else 'MISS'}  (by CPU time of the process tree: "
          f"{cpu_ratio:.2f})")
    # per exported row: two scans each way
    direct_2 = 2 * exported_rows / rate["rocketstore"]
    export_2 = export_s + 2 * exported_rows / rate["parquet (exported)"]
    saving = exported_rows / rate["rocketstore"] - exported_rows / rate["parquet (exported)"]
    breakeven = export_s / saving if saving > 0 else float("inf")
    print(f"- export + 2 Parquet scans {export_2:.2f}s vs 2 direct scans {direct_2:.2f}s "
          f"(of the {exported_rows:,} exported rows; break-even after {breakeven:.2f} scans) "
          f"(target: export wins by the second scan): "
          f"{'PASS' if export_2 < direct_2 else 'MISS'}")
    wire_ratio = None
    if wire:
        wire_ratio = rate["rocketmq (wire)"] / rate["rocketstore"]
        print(f"- rocketmq (wire) vs rocketstore (directory): {wire_ratio:.2f} (target >= 0.7): "
              f"{'PASS' if wire_ratio >= 0.7 else 'MISS'}; vs PullConsumer on the driver: "
              f"{rate['rocketmq (wire)'] / C.median(pull_rates):.2f}")
    scale_rates = {k: n / C.median(v) for k, v in scaling.items()}
    if scale_rates:
        growth = scale_rates[2] / scale_rates[1]
        print(f"- rocketmq (wire) on a standalone cluster: 1 executor {scale_rates[1]:,.0f} "
              f"rows/s, 2 executors {scale_rates[2]:,.0f} rows/s: x{growth:.2f} "
              f"(target > 1): {'PASS' if growth > 1 else 'MISS'}")
    if args.json:
        C.write_json(args.json, {"wire_vs_directory": wire_ratio,
                                 "pull_consumer_rows_per_s": pull_rates,
                                 "executor_scaling_s": scaling, "machine": info, "samples": samples, "median_s": med,
                                 "cpu_samples": cpu, "median_cpu_s": med_cpu,
                                 "rows_per_s": rate, "export_s": export_times,
                                 "export_cpu_s": export_cpu,
                                 "exported_rows": exported_rows, "ratio_vs_floor": ratio,
                                 "export_two_scans_s": export_2, "direct_two_scans_s": direct_2})
    td.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
