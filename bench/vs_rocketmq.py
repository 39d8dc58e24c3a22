"""rocketstore's broker beside Apache RocketMQ 4.9.8's Java broker, same clients, same settings
(issue 32).

    python bench/vs_rocketmq.py                      # every row, 3 interleaved pairs (long)
    python bench/vs_rocketmq.py --quick              # small counts, 1 pair (development)
    python bench/vs_rocketmq.py --rows sync1k,syncflush1k --pairs 3 --json out.json --png out.png

Each run starts a fresh name server and broker, RocketMQ 4.9.8's (``../shared/rocketmq-4.9.8-java``,
ports below 32768, ``user.home`` in the run's temp dir, loopback traffic only) or rocketstore's,
with the same settings: ASYNC_FLUSH unless the row says otherwise, default CommitLog geometry,
one topic of 8 queues created with UPDATE_AND_CREATE_TOPIC, a fresh store. The two alternate
(Java, rocketstore, then rocketstore, Java, ...), ``--pairs`` pairs per row; every figure is the
median of its runs.

The clients are the same against either broker: RocketMQ 4.9.8's Java client (``VsRocketmqLoad.java``
beside this script, compiled at run time with javac against ``rmq-java classpath``), and the C++
client (``rocketmq`` 0.4.4 on PyPI, ../shared/CPP_CLIENT.md). Rows (``--rows``, comma-separated):

    sync100, sync1k   Java client, 32 threads each doing send() (sync), 100 B / 1 KiB bodies
    async100          Java client, send(msg, callback) with 1,000 in flight, 100 B
    batch100          Java client, 32 threads each doing send(List) of 32 x 100 B
    syncflush1k       sync1k with flushDiskType=SYNC_FLUSH on both brokers
    push, litepull    Java client's DefaultMQPushConsumer / DefaultLitePullConsumer reading a
                      backlog of --backlog messages (100 B, written beforehand with batches, not
                      timed) from the first offset
    e2e               Java client: a producer at --e2e-rate msgs/s (async sends at scheduled times)
                      and a push consumer in one JVM; each message timed from its scheduled send to
                      its delivery
    cpp8, cpp32       C++ client, 8 / 32 threads doing send_sync, 100 B
    cpppush           C++ client's PushConsumer reading a backlog of --cpp-backlog messages

Each client prints WINDOW_START when its measured window opens (after its warm-up) and a RESULT
line when it closes; at both moments the broker process is sampled from /proc: CPU seconds
(user + system, every thread, /proc/PID/stat), bytes written (/proc/PID/io write_bytes: what it
dirtied in the page cache or wrote, i.e. what reaches the disk) and, at the end, RSS. Per row:
msgs/s, broker CPU seconds per 100,000 messages, disk bytes per message, latency percentiles
where timed (each send for the sync/async/batch rows: a batch's is the whole batch's), RSS, and
the load average when the run began. Targets (issue 32) are printed as PASS or MISS; the
machine is shared, so every figure comes with its load average.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH_DIR)

import _common as C  # noqa: E402

C.ensure_importable()

from broker import (  # noqa: E402
    CLK_TCK,
    Server,
    _drain,
    broker_available,
    child_env,
    cpp_client_available,
    create_topic,
    start_broker,
    start_namesrv,
    wait_for_route,
)

from rocketstore.remoting.eventloop import run  # noqa: E402

RMQ_JAVA_DIR = os.path.realpath(os.environ.get(
    "ROCKETSTORE_RMQ_JAVA_DIR", os.path.join(C.REPO_ROOT, "..", "shared", "rocketmq-4.9.8-java")))
RMQ_JAVA = os.path.join(RMQ_JAVA_DIR, "bin", "rmq-java")
DRIVER = os.path.join(BENCH_DIR, "VsRocketmqLoad.java")
TOPIC = "VsBench"
QUEUES = 8
JAVA_NAMESRV_BOOT = re.compile(r"The Name Server boot success")
JAVA_BROKER_BOOT = re.compile(r"The broker\[[^\]]+\] boot success")
#: what the Java client adds to every message's properties: UNIQ_KEY (32 hex digits), WAIT, TAGS
_JAVA_PROPERTIES = len("UNIQ_KEY\x01" + "0" * 32 + "\x02WAIT\x01true\x02TAGS\x01TagA")


def record_bytes(body: int) -> int:
    """The CommitLog record of one Java-client message (FORMAT.md: 91 fixed bytes with IPv4
    hosts, the body, the topic, the properties)."""
    return 91 + body + len(TOPIC) + _JAVA_PROPERTIES


@dataclass(frozen=True)
class RowSpec:
    key: str
    label: str
    client: str                      # java | cpp
    mode: str                        # the driver's mode
    opts: dict[str, Any] = field(default_factory=dict)
    flush: str = "ASYNC_FLUSH"
    backlog: str = ""                # "backlog" / "cpp_backlog": written before the window
    target: str = "send"             # send | consume | e2e | cpp


ROWS = [
    RowSpec("sync100", "sync send x32, 100 B", "java", "sync", {"threads": 32, "size": 100}),
    RowSpec("sync1k", "sync send x32, 1 KiB", "java", "sync", {"threads": 32, "size": 1024}),
    RowSpec("async100", "async send, 1,000 in flight, 100 B", "java", "async", {"inflight": 1000, "size": 100}),
    RowSpec("batch100", "batch send x32, 32 x 100 B a batch", "java", "batch",
            {"threads": 32, "batch": 32, "size": 100}),
    RowSpec("syncflush1k", "SYNC_FLUSH sync send x32, 1 KiB", "java", "sync", {"threads": 32, "size": 1024},
            flush="SYNC_FLUSH"),
    RowSpec("push", "push consume, backlog", "java", "push", backlog="backlog", target="consume"),
    RowSpec("litepull", "lite pull consume, backlog", "java", "litepull", backlog="backlog", target="consume"),
    RowSpec("e2e", "end to end, fixed rate", "java", "e2e", {"size": 100}, target="e2e"),
    RowSpec("cpp8", "C++ client send_sync x8, 100 B", "cpp", "sync", {"threads": 8, "size": 100}, target="cpp"),
    RowSpec("cpp32", "C++ client send_sync x32, 100 B", "cpp", "sync", {"threads": 32, "size": 100}, target="cpp"),
    RowSpec("cpppush", "C++ client push consume, backlog", "cpp", "push", backlog="cpp_backlog", target="consume"),
]
ROW_KEYS = [r.key for r in ROWS]


# ---- the brokers' processes ------------------------------------------------------------------


def proc_sample(pid: int) -> dict[str, float]:
    """CPU seconds, bytes written and RSS of a process (all its threads), from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read().rsplit(")", 1)[1].split()
    written = 0
    with open(f"/proc/{pid}/io") as f:
        for line in f:
            if line.startswith("write_bytes:"):
                written = int(line.split()[1])
    rss = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024
    return {"cpu": (int(stat[11]) + int(stat[12])) / CLK_TCK, "written": written, "rss": rss,
            "t": time.perf_counter()}


def java_missing() -> str | None:
    if not os.path.isfile(RMQ_JAVA):
        return f"Apache RocketMQ 4.9.8 (Java) is not at {RMQ_JAVA_DIR}"
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            return f"{tool} (Java 17) is not installed"
    return None


def java_env(home: str, **extra: str) -> dict[str, str]:
    os.makedirs(home, exist_ok=True)
    env = dict(os.environ)
    env["JAVA_OPT_EXT"] = " ".join(filter(None, (f"-Duser.home={home}", extra.pop("JAVA_OPT_EXT", ""))))
    env.update(extra)
    return env


def free_low_port(also: tuple[int, ...] = ()) -> int:
    """A port below 32768 (RocketMQ's servers bind every interface: free there) with port + d
    free for every d in ``also``."""
    import random
    rng = random.Random()
    for _ in range(500):
        port = rng.randrange(12_000, 32_000)
        ok = True
        for d in (0, *also):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                try:
                    s.bind(("0.0.0.0", port + d))
                except OSError:
                    ok = False
                    break
        if ok:
            return port
    raise RuntimeError("no free port below 32768 found in 500 tries")


def start_java(name: str, args: list[str], boot: re.Pattern[str], address: str, home: str,
               timeout: float = 180.0) -> Server:
    proc = subprocess.Popen([RMQ_JAVA, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=java_env(home))
    output: list[str] = []
    threading.Thread(target=_drain, args=(proc, output), daemon=True).start()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if any(boot.search(line) for line in list(output)):
            return Server(name, proc, address, output)
        time.sleep(0.1)
    proc.kill()
    proc.wait(30)
    raise RuntimeError(f"RocketMQ 4.9.8 {name} did not start:\n{''.join(output)[-3000:]}")


def start_pair(kind: str, root: str, flush: str) -> tuple[Server, Server, str]:
    """A name server and a broker (RocketMQ's Java ones, or rocketstore's); the store dir."""
    store = os.path.join(root, "store")
    if kind == "java":
        port = free_low_port()
        conf = os.path.join(root, "namesrv.properties")
        with open(conf, "w") as f:
            f.write(f"listenPort={port}\n")
        namesrv = start_java("namesrv", ["namesrv", "-c", conf], JAVA_NAMESRV_BOOT, f"127.0.0.1:{port}",
                             os.path.join(root, "namesrv-home"))
        try:
            bport = free_low_port(also=(-2, 1))
            props = {"brokerClusterName": "BenchCluster", "brokerName": "bench-broker", "brokerId": 0,
                     "namesrvAddr": namesrv.address, "listenPort": bport, "brokerIP1": "127.0.0.1",
                     "storePathRootDir": store, "storePathCommitLog": os.path.join(store, "commitlog"),
                     "flushDiskType": flush, "autoCreateTopicEnable": "true", "diskMaxUsedSpaceRatio": 99}
            conf = os.path.join(root, "broker.conf")
            with open(conf, "w") as f:
                f.write("".join(f"{k}={v}\n" for k, v in props.items()))
            broker = start_java("broker", ["broker", "-c", conf], JAVA_BROKER_BOOT, f"127.0.0.1:{bport}",
                                os.path.join(root, "broker-home"))
        except BaseException:
            namesrv.stop()
            raise
    else:
        namesrv = start_namesrv()
        try:
            broker = start_broker(root, store, namesrv_addr=namesrv.address, flushDiskType=flush)
        except BaseException:
            namesrv.stop()
            raise
    try:
        run(create_topic(broker.address, TOPIC, QUEUES))
        run(wait_for_route(namesrv.address, TOPIC))
        run(wait_for_route(namesrv.address, "TBW102"))       # the C++ client asks for it first
    except BaseException:
        broker.stop()
        namesrv.stop()
        raise
    return namesrv, broker, store


# ---- the clients -----------------------------------------------------------------------------

CPP_SYNC = r'''
import json, sys, threading, time
from rocketmq.client import Message, Producer, SendStatus
namesrv, topic, threads, seconds, warmup, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6])
producer = Producer("VsCppProducer", timeout=10000)
producer.set_namesrv_addr(namesrv)
producer.start()
body = b"x" * size
measuring = threading.Event(); stop = threading.Event()
counts = [0] * threads; errors = [0] * threads; lats = [[] for _ in range(threads)]; first_error = []
def work(n):
    while not stop.is_set():
        msg = Message(topic); msg.set_body(body); msg.set_tags("TagA")
        t0 = time.perf_counter()
        try:
            ok = producer.send_sync(msg).status == SendStatus.OK
        except Exception as exc:
            ok = False
            if measuring.is_set() and not first_error:
                first_error.append(repr(exc)[:300])
        t1 = time.perf_counter()
        if measuring.is_set():
            if ok:
                counts[n] += 1; lats[n].append(t1 - t0)
            else:
                errors[n] += 1
for _ in range(20):
    m = Message(topic); m.set_body(body); producer.send_sync(m)
workers = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
for w in workers: w.start()
time.sleep(warmup)
print("WINDOW_START", flush=True)
measuring.set(); t0 = time.perf_counter()
time.sleep(seconds)
measuring.clear(); took = time.perf_counter() - t0
count, errs = sum(counts), sum(errors)
lat = sorted(x for l in lats for x in l)
out = {"count": count, "seconds": took, "errors": errs}
if first_error:
    out["first_error"] = first_error[0]
if lat:
    out.update(p50_ms=lat[int(0.5 * (len(lat) - 1))] * 1e3, p99_ms=lat[int(0.99 * (len(lat) - 1))] * 1e3,
               p999_ms=lat[int(0.999 * (len(lat) - 1))] * 1e3, max_ms=lat[-1] * 1e3)
print("RESULT " + json.dumps(out), flush=True)
stop.set()
for w in workers: w.join(30)
producer.shutdown()
'''

CPP_PUSH = r'''
import json, sys, threading, time
from rocketmq.client import PushConsumer
namesrv, topic, count, timeout = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
got = [0]; lock = threading.Lock(); done = threading.Event()
def on_message(msg):
    with lock:
        got[0] += 1
        if got[0] >= count:
            done.set()
consumer = PushConsumer("VsCppPush")
consumer.set_namesrv_addr(namesrv)
consumer.subscribe(topic, on_message)
print("WINDOW_START", flush=True)
t0 = time.perf_counter()
consumer.start()
done.wait(timeout)
took = time.perf_counter() - t0
n = got[0]
print("RESULT " + json.dumps({"count": n, "seconds": took, "errors": max(0, count - n)}), flush=True)
consumer.shutdown()
'''


def compile_driver(out: str) -> str:
    classpath = subprocess.run([RMQ_JAVA, "classpath"], capture_output=True, text=True, check=True,
                               timeout=60).stdout.strip()
    result = subprocess.run(["javac", "-nowarn", "-encoding", "UTF-8", "-cp", classpath, "-d", out, DRIVER],
                            capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        raise SystemExit(f"javac {DRIVER} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return out


def client_command(spec: RowSpec, mode: str, opts: dict[str, Any], namesrv: str, classes: str,
                   root: str) -> tuple[list[str], dict[str, str]]:
    if spec.client == "java" or mode == "fill":
        env = java_env(os.path.join(root, "client-home"), EXTRA_CP=classes)
        return [RMQ_JAVA, "run", "VsRocketmqLoad", mode, namesrv, TOPIC,
                *(f"{k}={v}" for k, v in opts.items())], env
    home = tempfile.mkdtemp(prefix="cpp-home-", dir=root)
    if mode == "sync":
        argv = [str(opts[k]) for k in ("threads", "seconds", "warmup", "size")]
        return [sys.executable, "-c", CPP_SYNC, namesrv, TOPIC, *argv], child_env(HOME=home)
    return [sys.executable, "-c", CPP_PUSH, namesrv, TOPIC, str(opts["count"]), str(opts["timeout"])], \
        child_env(HOME=home)


def run_client(argv: list[str], env: dict[str, str], cwd: str, broker_pid: int, timeout: float
               ) -> tuple[dict[str, Any], dict[str, float] | None, dict[str, float] | None]:
    """Runs a client to its end; the broker's /proc samples at WINDOW_START and at RESULT."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=cwd)
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    before = after = None
    result: dict[str, Any] = {}
    tail: list[str] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=1.0)
            except queue.Empty:
                continue
            if line is None:
                break
            if line.startswith("WINDOW_START"):
                before = proc_sample(broker_pid)
            elif line.startswith("RESULT "):
                after = proc_sample(broker_pid)
                result = json.loads(line[len("RESULT "):])
            else:
                tail = (tail + [line])[-40:]
        proc.wait(max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        pass
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    if not result:
        raise RuntimeError(f"{argv[2:5]} gave no RESULT (exit {proc.returncode}):\n{''.join(tail)[-3000:]}")
    return result, before, after


@dataclass
class Run:
    broker: str
    rate: float
    count: int
    errors: int
    cpu_per_100k: float
    disk_per_msg: float
    rss_mb: float
    load: float
    store_mb: float = 0.0
    latency: dict[str, float] = field(default_factory=dict)


def du_bytes(path: str) -> int:
    total = 0
    for dirpath, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
            except OSError:
                pass
    return total


def one_run(args: argparse.Namespace, spec: RowSpec, kind: str, dirs: C.TempDirs, classes: str) -> Run:
    root = dirs.new(f"{spec.key}-{kind}")
    load = os.getloadavg()[0]
    namesrv, broker, store = start_pair(kind, root, spec.flush)
    try:
        if spec.backlog:
            count = getattr(args, spec.backlog)
            argv, env = client_command(spec, "fill", {"count": count, "size": 100}, namesrv.address, classes, root)
            fill, _, _ = run_client(argv, env, root, broker.proc.pid, timeout=args.timeout)
            if fill.get("errors"):
                print(f"    fill: {fill['errors']} sends failed")
            opts = {"count": count, "timeout": args.timeout}
        else:
            opts = {**spec.opts, "seconds": args.seconds, "warmup": args.warmup}
            if spec.mode == "e2e":
                opts.update(rate=args.e2e_rate, queues=QUEUES)
        argv, env = client_command(spec, spec.mode, opts, namesrv.address, classes, root)
        result, before, after = run_client(argv, env, root, broker.proc.pid, timeout=args.timeout + 120)
        if before is None or after is None:
            raise RuntimeError(f"{spec.key}: the client printed no WINDOW_START")
        if result.get("first_error"):
            print(f"    {spec.key} {kind}: first failed send: {result['first_error']}")
        count = int(result["count"])
        if count <= 0:
            raise RuntimeError(f"{spec.key}: no message made it ({result})")
        per = count
        latency = {k: float(result[k]) for k in ("p50_ms", "p99_ms", "p999_ms", "max_ms") if k in result}
        return Run(kind, count / result["seconds"] if result["seconds"] > 0 else 0.0, count, int(result["errors"]),
                   (after["cpu"] - before["cpu"]) / per * 1e5, (after["written"] - before["written"]) / per,
                   after["rss"] / 1e6, load, du_bytes(store) / 1e6, latency)
    finally:
        broker.stop()
        namesrv.stop()
        dirs.remove(root)


# ---- report ----------------------------------------------------------------------------------


def med(runs: list[Run], attr: str) -> float | None:
    values = [getattr(r, attr) for r in runs]
    return statistics.median(values) if values else None


def med_latency(runs: list[Run], key: str) -> float | None:
    values = [r.latency[key] for r in runs if key in r.latency]
    return statistics.median(values) if values else None


def verdict(spec: RowSpec, java: list[Run], rs: list[Run]) -> str:
    jr, rr = med(java, "rate"), med(rs, "rate")
    jc, rc = med(java, "cpu_per_100k"), med(rs, "cpu_per_100k")
    if not jr or not rr or jc is None or rc is None or jc <= 0:
        return ""
    ratio, cpu = rr / jr, rc / jc
    if spec.target == "e2e":
        return ""
    if spec.key == "batch100":
        ok = ratio >= 1.5 and cpu <= 0.5
        return f"{'PASS' if ok else 'MISS'} (>= 1.5x at <= 0.5x CPU)"
    if spec.target == "send":
        ok = ratio >= 1.5 and (spec.flush != "ASYNC_FLUSH" or cpu <= 0.3)
        return f"{'PASS' if ok else 'MISS'} (>= 1.5x{', <= 0.3x CPU' if spec.flush == 'ASYNC_FLUSH' else ''})"
    if spec.target == "consume":
        ok = ratio >= 1.5 or (ratio >= 0.95 and cpu <= 0.5)
        return f"{'PASS' if ok else 'MISS'} (>= 1.5x, or = at <= 0.5x CPU)"
    ok = ratio >= 1.5 or (ratio >= 0.95 and cpu <= 0.5)
    return f"{'PASS' if ok else 'MISS'} (>= 1.5x, or = at <= 0.5x CPU)"


def fmt(x: float | None, spec: str = ",.0f") -> str:
    return "-" if x is None else format(x, spec)


def report(args: argparse.Namespace, results: dict[str, dict[str, list[Run]]]) -> str:
    table = []
    for spec in ROWS:
        if spec.key not in results:
            continue
        java, rs = results[spec.key]["java"], results[spec.key]["rocketstore"]
        jr, rr = med(java, "rate"), med(rs, "rate")
        jc, rc = med(java, "cpu_per_100k"), med(rs, "cpu_per_100k")
        jp, rp = med_latency(java, "p99_ms"), med_latency(rs, "p99_ms")
        loads = [r.load for r in java + rs]
        label = spec.label
        if spec.backlog:
            label += f" of {getattr(args, spec.backlog):,}"
        if spec.mode == "e2e":
            label += f" at {args.e2e_rate:,} msgs/s"
        table.append([
            spec.key, label, fmt(jr), fmt(rr), fmt(rr / jr if jr and rr else None, ".2f"),
            fmt(jc, ".2f"), fmt(rc, ".2f"), fmt(rc / jc if jc and rc is not None else None, ".2f"),
            fmt(med(java, "disk_per_msg")), fmt(med(rs, "disk_per_msg")),
            f"{fmt(jp, '.1f')} / {fmt(rp, '.1f')}" if jp is not None or rp is not None else "",
            f"{fmt(med(java, 'rss_mb'))} / {fmt(med(rs, 'rss_mb'))}",
            f"{min(loads):.1f}-{max(loads):.1f}" if loads else "",
            verdict(spec, java, rs)])
    out = [C.markdown_table(
        ["row", "workload", "Java msgs/s", "rocketstore msgs/s", "ratio", "Java CPU-s/100k",
         "rocketstore CPU-s/100k", "CPU ratio", "Java disk B/msg", "rocketstore disk B/msg",
         "p99 ms (Java / rs)", "RSS MB (Java / rs)", "load avg", "target"],
        table, align="llrrrrrrrrrrrl", title="rocketstore vs RocketMQ 4.9.8's Java broker")]
    if "e2e" in results:
        lines = []
        for kind in ("java", "rocketstore"):
            runs = results["e2e"][kind]
            lines.append([kind, *(fmt(med_latency(runs, k), ".2f") for k in ("p50_ms", "p99_ms", "p999_ms", "max_ms")),
                          fmt(med(runs, "rss_mb"))])
        out += ["", C.markdown_table(["broker", "p50 ms", "p99 ms", "p99.9 ms", "max ms", "RSS MB"], lines,
                                     title=f"end to end at {args.e2e_rate:,} msgs/s")]
    if "syncflush1k" in results and "sync1k" in results:
        sf, af = med(results["syncflush1k"]["rocketstore"], "rate"), med(results["sync1k"]["rocketstore"], "rate")
        disk = med(results["syncflush1k"]["rocketstore"], "disk_per_msg")
        if sf and af and disk is not None:
            ok = sf / af >= 0.8 and disk <= 1.5 * record_bytes(1024)
            out.append(f"\nrocketstore SYNC_FLUSH / ASYNC_FLUSH, sync x32 1 KiB, same client, same run: "
                       f"{sf:,.0f} / {af:,.0f} = {sf / af:.2f}; disk {disk:,.0f} B/msg = "
                       f"{disk / record_bytes(1024):.2f}x the {record_bytes(1024)} B record: "
                       f"{'PASS' if ok else 'MISS'} (>= 0.8, <= 1.5x)")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", default=",".join(ROW_KEYS), help=f"rows to run, of {','.join(ROW_KEYS)}")
    parser.add_argument("--pairs", type=int, default=3, help="interleaved Java/rocketstore pairs per row")
    parser.add_argument("--quick", action="store_true", help="small counts and windows, 1 pair")
    parser.add_argument("--seconds", type=float, default=10.0, help="measured window of a send row")
    parser.add_argument("--warmup", type=float, default=5.0,
                        help="seconds of load before a send row's window (a JVM broker compiles its hot paths)")
    parser.add_argument("--backlog", type=int, default=1_000_000)
    parser.add_argument("--cpp-backlog", type=int, default=200_000)
    parser.add_argument("--e2e-rate", type=int, default=5_000)
    parser.add_argument("--timeout", type=float, default=600.0, help="bound of a consumer's run, seconds")
    parser.add_argument("--brokers", default="java,rocketstore",
                        help="which brokers run (one alone: no ratio; for development)")
    parser.add_argument("--dir", help="where temporary stores go (default: the repository's parent)")
    parser.add_argument("--json", help="write every run here")
    args = parser.parse_args(argv)
    if args.quick:
        args.pairs, args.seconds, args.warmup = 1, 3.0, 2.0
        args.backlog, args.cpp_backlog = 100_000, 20_000
    wanted = [k for k in args.rows.split(",") if k]
    unknown = sorted(set(wanted) - set(ROW_KEYS))
    if unknown:
        raise SystemExit(f"--rows: unknown {','.join(unknown)} (known: {','.join(ROW_KEYS)})")
    brokers = set(args.brokers.split(","))
    if not brokers or brokers - {"java", "rocketstore"}:
        raise SystemExit("--brokers: java, rocketstore or both")
    missing = java_missing()
    if missing:
        raise SystemExit(missing)
    if not broker_available():
        raise SystemExit("rocketstore.broker is not importable")
    info = C.machine_info(extra={"load_before": " ".join(f"{x:.2f}" for x in os.getloadavg())})
    C.print_machine_info(info)
    results: dict[str, dict[str, list[Run]]] = {}
    with C.TempDirs(args.dir) as dirs:
        classes = compile_driver(dirs.new("classes"))
        for spec in ROWS:
            if spec.key not in wanted:
                continue
            if spec.client == "cpp" and not cpp_client_available():
                print(f"{spec.key}: skipped, the rocketmq package (C++ client) is not installed")
                continue
            results[spec.key] = {"java": [], "rocketstore": []}
            for pair in range(args.pairs):
                order = ("java", "rocketstore") if pair % 2 == 0 else ("rocketstore", "java")
                for kind in (k for k in order if k in brokers):
                    try:
                        r = one_run(args, spec, kind, dirs, classes)
                    except RuntimeError as exc:
                        print(f"  {spec.key} {kind}: FAILED {str(exc)[:1500]}", flush=True)
                        continue
                    results[spec.key][kind].append(r)
                    lat = f", p99 {r.latency['p99_ms']:.1f} ms" if "p99_ms" in r.latency else ""
                    print(f"  {spec.key} {kind:11s} pair {pair + 1}: {r.rate:,.0f} msgs/s ({r.errors} failed), "
                          f"CPU {r.cpu_per_100k:.2f} s/100k, disk {r.disk_per_msg:,.0f} B/msg{lat}, "
                          f"RSS {r.rss_mb:,.0f} MB, load {r.load:.1f}", flush=True)
    info["load_after"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print()
    print(f"load average before {info['load_before']}, after {info['load_after']}; {args.pairs} pair(s) a row, "
          f"medians; windows {args.seconds:g} s after {args.warmup:g} s warm-up")
    print()
    print(report(args, results))
    if args.json:
        C.write_json(args.json, {"machine": info, "args": vars(args),
                                 "runs": {k: {kind: [r.__dict__ for r in runs] for kind, runs in v.items()}
                                          for k, v in results.items()}})


if __name__ == "__main__":
    main()
