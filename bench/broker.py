"""The broker over loopback, against the references measured in the same run (issue 15).

    python bench/broker.py                 # everything, 3 interleaved repeats, ~10 min
    python bench/broker.py --quick         # smaller counts and windows (~3 min)
    python bench/broker.py --only a,b,d    # some parts only

Parts (the letters of the issue):

(a) send throughput: SEND_MESSAGE_V2 (310) frames as a Java producer writes them (JSON
    header, UNIQ_KEY, WAIT, TAGS; 100 B and 1 KiB bodies), pre-encoded, sent by a pipelined
    load generator over ``--connections`` connections with ``--inflight`` requests outstanding
    on each. Replies are counted by their length field; every reply's header is checked to
    start with ``{"code":0,`` (SUCCESS), and failures are printed. The broker runs as a
    subprocess (ASYNC_FLUSH, default store geometry) on 127.0.0.1.
(b) the references of (a): a bare frame-echo server on the same event loop (uvloop when
    installed) and stack, fed the very same frames by the same load generator: it splits the
    stream into whole RocketMQ frames by their length fields and writes them back, nothing
    else (the networking ceiling on this machine); and the store's own ``put_message`` in this
    process, one call per message, messages built beforehand (as bench/append.py times it).
(c) backlog consumption: a store holding ``--backlog`` messages (100 B, ``--queues`` queues,
    written beforehand with put_messages), consumed through the broker with PULL_MESSAGE
    (``--pull-batch`` messages a pull, one pull in flight per queue, as a consumer has it,
    following nextBeginOffset), against the store's own ``get_message`` in this process at the
    same batch size over the same store.
(d) send latency at a fixed rate (``--latency-rate``, 10,000 msgs/s): sends scheduled every
    millisecond, each timed from its scheduled time (so a stall is not hidden) to its reply;
    p50/p99/p99.9/max.
(e) the official C++ client (``rocketmq`` 0.4.4 on PyPI), ``--cpp-threads`` threads doing
    ``send_sync`` through a name server, HOME in a temp dir.
(f) the broker process's CPU seconds (user + system from /proc/PID/stat) per 100,000
    messages over the measured windows of (a) and (c).
(g) where a send's CPU goes, in this process, by the calling thread's CPU time (best of
    ``--repeat``, ``--parts-count`` sends, 64 a read): the echo server's own per-frame work,
    FrameDecoder.feed (and orjson's parse of the header alone), the broker's send handler
    (the native SendPath and the processor's Python entry, on a BrokerController in this process,
    decoded requests given), the store's append_message of a prebuilt message, and the
    reply's encoding. Information: what a send costs by step, and which steps any broker that
    parses JSON headers with a library and stores the record must pay.

Targets: (a) >= 0.5 of (b)'s echo; (c) >= 0.5 of get_message; (d) p99 <= 2 ms. Every figure is
the median of ``--repeat`` runs, interleaved with its reference (echo, broker, echo, ...).
The load generator runs in this process on the same 2 cores as the server: the ratios compare
servers under the same load generator, not absolute capacity.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import re
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH_DIR)

import _common as C  # noqa: E402

C.ensure_importable()

from rocketstore.remoting import (  # noqa: E402
    FrameDecoder,
    RemotingClient,
    RequestCode,
    ResponseCode,
    create_request,
    encode,
)
from rocketstore.remoting.eventloop import run, uvloop_enabled  # noqa: E402

_LENGTH = struct.Struct(">I")
SUCCESS_PREFIX = b'{"code":0,'
TOPIC = "BenchTopic"
GROUP = "bench_producer"
CLK_TCK = os.sysconf("SC_CLK_TCK")
BROKER_BOOT = re.compile(r"The broker\[([^,\]]+), (\S+?)\] boot success")
NAMESRV_BOOT = re.compile(r"listening on (\S+):(\d+)")


def broker_available() -> bool:
    try:
        import rocketstore.broker.startup  # noqa: F401
    except ImportError:
        return False
    return True


# ---- processes ------------------------------------------------------------------------------


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a child (a broker, the C++ client) importing the rocketstore this
    script imported."""
    import rocketstore

    package_root = os.path.dirname(os.path.dirname(os.path.abspath(rocketstore.__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    env.update(extra)
    return env


@dataclass
class Server:
    name: str
    proc: subprocess.Popen[str]
    address: str
    output: list[str] = field(default_factory=list)

    @property
    def port(self) -> int:
        return int(self.address.rsplit(":", 1)[1])

    def cpu_seconds(self) -> float:
        """User + system CPU of the process so far (all its threads), from /proc."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK

    def stop(self, timeout: float = 30.0) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            if self.proc.stdin is not None:
                try:
                    self.proc.stdin.close()
                except OSError:
                    pass
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def start_server(name: str, args: list[str], boot: re.Pattern[str], address_of: Callable[[re.Match[str]], str],
                 env: dict[str, str] | None = None, timeout: float = 120.0) -> Server:
    proc = subprocess.Popen([sys.executable, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env or child_env(), cwd=BENCH_DIR)
    assert proc.stdout is not None
    output: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        output.append(line)
        match = boot.search(line)
        if match:
            server = Server(name, proc, address_of(match), output)
            threading.Thread(target=_drain, args=(proc, output), daemon=True).start()
            return server
    proc.kill()
    raise RuntimeError(f"{name} did not start:\n{''.join(output)[-3000:]}")


def _drain(proc: subprocess.Popen[str], output: list[str]) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        if len(output) < 2000:
            output.append(line)


ECHO_BOOT = re.compile(r"echo listening on (\S+):(\d+)")


def start_echo() -> Server:
    return start_server("echo", [os.path.abspath(__file__), "--serve-echo"], ECHO_BOOT,
                        lambda m: f"{m.group(1)}:{m.group(2)}")


def start_namesrv() -> Server:
    return start_server("namesrv", ["-m", "rocketstore.namesrv", "--listen-port", "0"], NAMESRV_BOOT,
                        lambda m: f"{m.group(1)}:{m.group(2)}")


def start_broker(root: str, store_dir: str, namesrv_addr: str = "", **properties: object) -> Server:
    props = {
        "brokerClusterName": "BenchCluster",
        "brokerName": "bench-broker",
        "brokerId": 0,
        "listenPort": 0,
        "storePathRootDir": store_dir,
        "flushDiskType": "ASYNC_FLUSH",
        "fastListenPortEnable": "false",
        **({"namesrvAddr": namesrv_addr} if namesrv_addr else {}),
        **properties,
    }
    path = os.path.join(root, "broker.properties")
    with open(path, "w", encoding="latin-1") as f:
        f.write("".join(f"{k}={v}\n" for k, v in props.items()))
    return start_server("broker", ["-m", "rocketstore.broker", "-c", path, "--log-level", "WARNING"],
                        BROKER_BOOT, lambda m: m.group(2))


# ---- the echo server (a child process) -------------------------------------------------------


class BareEchoProtocol(asyncio.Protocol):
    """Splits the stream into whole frames by their length fields and writes them back, one
    write per read: the least a server of this protocol can do."""

    def __init__(self) -> None:
        self.buffer = bytearray()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer
        buffer += data
        pos, size = 0, len(buffer)
        unpack = _LENGTH.unpack_from
        while size - pos >= 4:
            (length,) = unpack(buffer, pos)
            if pos + 4 + length > size:
                break
            pos += 4 + length
        if pos:
            self.transport.write(bytes(buffer[:pos]))  # type: ignore[attr-defined]
            del buffer[:pos]


async def serve_echo() -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(BareEchoProtocol, "127.0.0.1", 0)
    host, port = server.sockets[0].getsockname()[:2]
    print(f"echo listening on {host}:{port}", flush=True)
    await loop.run_in_executor(None, sys.stdin.read)  # until the parent closes our stdin


# ---- frames -----------------------------------------------------------------------------------


def uniq_key(i: int) -> str:
    return f"7F000001{os.getpid() & 0xFFFF:04X}{i:020X}"


def send_frame(body: bytes, queue_id: int, i: int, opaque: int = 1) -> bytes:
    """A SEND_MESSAGE_V2 request as RocketMQ's Java producer writes it."""
    properties = f"TAGS\x01TagA\x02UNIQ_KEY\x01{uniq_key(i)}\x02WAIT\x01true\x02"
    ext = {"a": GROUP, "b": TOPIC, "c": "TBW102", "d": "8", "e": str(queue_id), "f": "0",
           "g": "1795314927483", "h": "0", "i": properties, "j": "0", "k": "false", "m": "false"}
    request = create_request(RequestCode.SEND_MESSAGE_V2, ext, body)
    request.opaque = opaque
    return encode(request)


def send_block(body: bytes, queues: int, count: int) -> tuple[bytes, int]:
    """``count`` send frames of one length (queue ids and UNIQ_KEYs vary), back to back."""
    frames = [send_frame(body, i % queues, i) for i in range(count)]
    size = len(frames[0])
    assert all(len(f) == size for f in frames)
    return b"".join(frames), size


# ---- the pipelined load ----------------------------------------------------------------------


class PipelinedLoad(asyncio.Protocol):
    """Keeps ``inflight`` frames of ``block`` outstanding; counts whole replies and those whose
    header is not SUCCESS."""

    def __init__(self, block: bytes, frame_size: int, inflight: int, stats: list[int],
                 check_success: bool) -> None:
        self.block = block
        self.frame_size = frame_size
        self.frames = len(block) // frame_size
        self.next = 0
        self.inflight = inflight
        self.stats = stats  # [replies, failures]
        self.check = check_success
        self.buffer = bytearray()
        self.stopped = False
        self.failure_sample: bytes | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.send(self.inflight)

    def send(self, count: int) -> None:
        while count:
            n = min(count, self.frames - self.next)
            start = self.next * self.frame_size
            self.transport.write(self.block[start : start + n * self.frame_size])  # type: ignore[attr-defined]
            self.next = (self.next + n) % self.frames
            count -= n

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer
        buffer += data
        pos, size, replies, failures = 0, len(buffer), 0, 0
        unpack = _LENGTH.unpack_from
        check = self.check
        while size - pos >= 4:
            (length,) = unpack(buffer, pos)
            if pos + 4 + length > size:
                break
            if check and buffer[pos + 8 : pos + 18] != SUCCESS_PREFIX:
                failures += 1
                if self.failure_sample is None:
                    self.failure_sample = bytes(buffer[pos + 8 : pos + 4 + length][:300])
            pos += 4 + length
            replies += 1
        del buffer[:pos]
        self.stats[0] += replies
        self.stats[1] += failures
        if replies and not self.stopped:
            self.send(replies)


@dataclass
class Window:
    count: int
    seconds: float
    failures: int = 0
    cpu_seconds: float | None = None
    failure_sample: bytes | None = None

    @property
    def rate(self) -> float:
        return self.count / self.seconds if self.seconds > 0 else 0.0

    @property
    def cpu_per_100k(self) -> float | None:
        return None if self.cpu_seconds is None or not self.count else self.cpu_seconds / self.count * 100_000


async def pipelined_window(port: int, block: bytes, frame_size: int, connections: int, inflight: int,
                           seconds: float, warmup: float, check_success: bool,
                           cpu: Callable[[], float] | None = None) -> Window:
    loop = asyncio.get_running_loop()
    stats = [0, 0]
    protocols: list[PipelinedLoad] = []
    for c in range(connections):
        # each connection starts at its own place in the block
        _, protocol = await loop.create_connection(
            lambda: PipelinedLoad(block, frame_size, inflight, stats, check_success), "127.0.0.1", port)
        protocol.next = (c * len(block) // frame_size // connections)
        protocols.append(protocol)
    await asyncio.sleep(warmup)
    count0, fail0, t0 = stats[0], stats[1], time.perf_counter()
    cpu0 = cpu() if cpu else None
    await asyncio.sleep(seconds)
    count1, fail1, t1 = stats[0], stats[1], time.perf_counter()
    cpu1 = cpu() if cpu else None
    for protocol in protocols:
        protocol.stopped = True
    # let the outstanding requests drain, so the server is idle for the next row
    deadline = loop.time() + 10
    while loop.time() < deadline:
        before = stats[0]
        await asyncio.sleep(0.05)
        if stats[0] == before:
            break
    for protocol in protocols:
        protocol.transport.close()
    sample = next((p.failure_sample for p in protocols if p.failure_sample), None)
    return Window(count1 - count0, t1 - t0, fail1 - fail0,
                  None if cpu0 is None or cpu1 is None else cpu1 - cpu0, sample)


# ---- admin over the wire ---------------------------------------------------------------------


async def create_topic(address: str, topic: str, queues: int) -> None:
    async with RemotingClient() as client:
        request = create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
            "topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queues),
            "writeQueueNums": str(queues), "perm": "6", "topicFilterType": "SINGLE_TAG",
            "topicSysFlag": "0", "order": "false"})
        response = await client.invoke(address, request, timeout=10)
        if response.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"UPDATE_AND_CREATE_TOPIC {topic}: {response.code} {response.remark}")


async def wait_for_route(namesrv_address: str, topic: str, timeout: float = 60.0) -> None:
    async with RemotingClient() as client:
        deadline = time.monotonic() + timeout
        while True:
            response = await client.invoke(namesrv_address, create_request(
                RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}), timeout=10)
            if response.code == ResponseCode.SUCCESS:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"no route of {topic} at the name server after {timeout:g} s")
            await asyncio.sleep(0.2)


# ---- (a) + (b): sends ------------------------------------------------------------------------


def direct_put_rate(dirs: C.TempDirs, body: bytes, count: int, queues: int) -> Window:
    """The store's own put_message, one call per message, messages built beforehand."""
    from rocketstore import Message, MessageStore, StoreConfig

    path = dirs.new("direct-put")
    messages = [Message(TOPIC, body, tags="TagA") for _ in range(count)]
    C.prefault(count * (len(body) + 200) * 2)
    failed = 0
    with MessageStore.open(path, StoreConfig()) as store:
        put = store.put_message
        gc.collect()
        gc.disable()
        try:
            t0 = time.perf_counter()
            for i, message in enumerate(messages):
                if not put(message, i % queues).ok:
                    failed += 1
            seconds = time.perf_counter() - t0
        finally:
            gc.enable()
    if failed:
        raise RuntimeError(f"{failed} direct puts failed")
    dirs.remove(path)
    return Window(count, seconds)


@dataclass
class Row:
    part: str
    group: str
    name: str
    rates: list[float] = field(default_factory=list)
    cpu_per_100k: list[float] = field(default_factory=list)
    failures: int = 0
    note: str = ""
    reference: str | None = None  # name of the row this one is rated against
    unit: str = "msgs/s"

    @property
    def rate(self) -> float:
        return statistics.median(self.rates) if self.rates else float("nan")

    @property
    def cpu(self) -> float | None:
        return statistics.median(self.cpu_per_100k) if self.cpu_per_100k else None


def measure_sends(args: argparse.Namespace, dirs: C.TempDirs, rows: list[Row]) -> None:
    for size in args.sizes:
        body = os.urandom(size)
        block, frame_size = send_block(body, args.queues, 4096)
        group = f"{size} B"
        echo_row = Row("b", group, "bare frame echo (same frames, same load)")
        broker_row = Row("a", group, "broker SEND_MESSAGE_V2", reference=echo_row.name)
        put_row = Row("b", group, "store put_message (direct, in process)")
        rows += [echo_row, broker_row, put_row]
        for repeat in range(args.repeat):
            echo = start_echo()
            try:
                w = run(pipelined_window(echo.port, block, frame_size, args.connections, args.inflight,
                                         args.seconds, args.warmup, False, echo.cpu_seconds))
            finally:
                echo.stop()
            echo_row.rates.append(w.rate)
            if w.cpu_per_100k is not None:
                echo_row.cpu_per_100k.append(w.cpu_per_100k)
            print(f"  {group} echo  run {repeat + 1}: {w.rate:,.0f} frames/s", flush=True)
            if args.broker:
                root = dirs.new(f"broker-send-{size}")
                broker = start_broker(root, os.path.join(root, "store"))
                try:
                    run(create_topic(broker.address, TOPIC, args.queues))
                    w = run(pipelined_window(broker.port, block, frame_size, args.connections, args.inflight,
                                             args.seconds, args.warmup, True, broker.cpu_seconds))
                finally:
                    broker.stop()
                    dirs.remove(root)
                broker_row.rates.append(w.rate)
                broker_row.failures += w.failures
                if w.cpu_per_100k is not None:
                    broker_row.cpu_per_100k.append(w.cpu_per_100k)
                if w.failure_sample:
                    print(f"    failed reply, e.g.: {w.failure_sample[:200]!r}")
                print(f"  {group} broker run {repeat + 1}: {w.rate:,.0f} msgs/s ({w.failures} failed)", flush=True)
            w = direct_put_rate(dirs, body, args.put_count, args.queues)
            put_row.rates.append(w.rate)
            print(f"  {group} put_message run {repeat + 1}: {w.rate:,.0f} msgs/s", flush=True)
        if not args.broker:
            broker_row.note = "broker not in this checkout"


# ---- (g): where a send's CPU goes, in process ----------------------------------------------


class _Sink:
    """A transport that only counts what is written to it."""

    def __init__(self) -> None:
        self.written = 0

    def write(self, data: bytes) -> None:
        self.written += len(data)


class _Ctx:
    """What a send processor reads of its connection."""

    def __init__(self, now: float) -> None:
        self.remote_address = "127.0.0.1:40000"
        self.received_at = now
        self.attributes: dict[str, Any] = {}


def _per_op_ns(count: int, once: Callable[[], None], repeat: int,
               setup: Callable[[], None] | None = None) -> float:
    """The calling thread's CPU ns per op of once() (which does ``count`` ops), best of repeat;
    setup() runs before each, untimed."""
    best = float("inf")
    for _ in range(repeat):
        if setup is not None:
            setup()
        gc.collect()
        gc.disable()
        try:
            t0 = time.thread_time_ns()
            once()
            best = min(best, time.thread_time_ns() - t0)
        finally:
            gc.enable()
    return best / count


async def _send_parts(args: argparse.Namespace, dirs: C.TempDirs, size: int) -> list[tuple[str, float]]:
    import orjson

    from rocketstore import Message
    from rocketstore.broker import BrokerConfig, BrokerController
    from rocketstore.config import StoreConfig
    from rocketstore.remoting import FrameWriter

    body = os.urandom(size)
    count = args.parts_count
    chunk = 64
    block, frame_size = send_block(body, args.queues, count)
    header_length = _LENGTH.unpack_from(block, 4)[0] & 0xFFFFFF
    headers = [bytes(block[i * frame_size + 8: i * frame_size + 8 + header_length]) for i in range(count)]
    reads = [block[i: i + chunk * frame_size] for i in range(0, len(block), chunk * frame_size)]
    out: list[tuple[str, float]] = []

    def echo_split() -> None:
        echo = BareEchoProtocol()
        echo.connection_made(_Sink())  # type: ignore[arg-type]
        for data in reads:
            echo.data_received(data)
    out.append(("bare echo: split a read into frames and write them (the echo server's Python work)",
                _per_op_ns(count, echo_split, args.repeat)))

    def decode() -> None:
        decoder = FrameDecoder()
        for data in reads:
            decoder.feed(data)
    out.append(("FrameDecoder.feed: frame -> RemotingCommand (the header's parse included: msgspec's typed SEND decode)",
                _per_op_ns(count, decode, args.repeat)))

    def parse() -> None:
        loads = orjson.loads
        for header in headers:
            loads(header)
    out.append(("  for reference: orjson.loads of the JSON header alone", _per_op_ns(count, parse, args.repeat)))

    root = dirs.new(f"send-parts-{size}")
    # a run is descheduled on a busy machine: no send may count as waiting too long in the queue
    config = BrokerConfig(listen_port=0, wait_time_mills_in_send_queue=3_600_000,
                          store=StoreConfig(store_path_root_dir=os.path.join(root, "store")))
    broker = BrokerController(config)
    await broker.start()
    try:
        loop = asyncio.get_running_loop()
        server = broker.server
        native = server._processors.handlers[RequestCode.SEND_MESSAGE_V2]
        python = broker.send_processor.send_message_v2
        replies: list[Any] = []
        requests: list[Any] = []

        def decode_requests() -> None:
            decoder = FrameDecoder()
            requests[:] = [r for data in reads for r in decoder.feed(data)]
            replies.clear()

        def sends(handler: Callable[[Any, Any], Any]) -> Callable[[], None]:
            def once() -> None:
                ctx = _Ctx(loop.time())
                for start in range(0, len(requests), chunk):
                    ctx.received_at = loop.time()
                    for request in requests[start:start + chunk]:
                        replies.append(handler(ctx, request))
            return once
        for name, handler in (("broker SEND_MESSAGE_V2, native SendPath (checks, properties, Message, put, stats, reply)", native),
                              ("broker SEND_MESSAGE_V2, Python entry point (header from the ext fields, the same rules)", python)):
            ns = _per_op_ns(count, sends(handler), args.repeat, decode_requests)
            bad = [r for r in replies if getattr(r, "code", None) != ResponseCode.SUCCESS]
            if bad:
                raise RuntimeError(f"{len(bad)} sends failed, e.g. {bad[0]!r}")
            out.append((name, ns))
        store = broker.store
        messages = [Message(TOPIC, body, tags="TagA") for _ in range(count)]

        def put() -> None:
            append = store.append_message
            for i, message in enumerate(messages):
                append(message, i % args.queues)
        out.append(("  of which the store's append_message (message built beforehand)",
                    _per_op_ns(count, put, args.repeat)))
        reply_list = list(replies)

        def encode_replies() -> None:
            writer = FrameWriter()
            for start in range(0, len(reply_list), chunk):
                for reply in reply_list[start:start + chunk]:
                    writer.add(reply)
                writer.take()
        out.append(("FrameWriter.add: a reply encoded by the generic encoder (orjson for its ext fields; "
                    "the native path writes it from a template instead)",
                    _per_op_ns(count, encode_replies, args.repeat)))
    finally:
        await broker.stop()
        dirs.remove(root)
    return out


def measure_send_parts(args: argparse.Namespace, dirs: C.TempDirs) -> dict[int, list[tuple[str, float]]]:
    results = {}
    for size in args.sizes:
        results[size] = run(_send_parts(args, dirs, size))
        for name, ns in results[size]:
            print(f"  {size} B  {ns:8.0f} ns  {name}", flush=True)
    return results


# ---- (c): backlog ----------------------------------------------------------------------------


def write_backlog(path: str, count: int, queues: int, size: int) -> None:
    from rocketstore import Message, MessageStore, StoreConfig

    body = os.urandom(size)
    with MessageStore.open(path, StoreConfig()) as store:
        batch = 1000
        for start in range(0, count, batch):
            n = min(batch, count - start)
            messages = [Message(TOPIC, body, tags="TagA") for _ in range(n)]
            result = store.put_messages(messages, [(start + i) % queues for i in range(n)])
            if not result.ok:
                raise RuntimeError(f"backlog put failed: {result.status} {result.reason}")
        if not store.wait_dispatched(120):
            raise RuntimeError("backlog not dispatched in 120 s")


def direct_get_rate(path: str, count: int, queues: int, batch: int) -> Window:
    """The store's own get_message over every queue, ``batch`` messages a call."""
    from rocketstore import GetMessageStatus, MessageStore, StoreConfig

    with MessageStore.open(path, StoreConfig()) as store:
        got = 0
        t0 = time.perf_counter()
        for queue_id in range(queues):
            offset = 0
            while True:
                result = store.get_message("bench_consumer", TOPIC, queue_id, offset, batch)
                if result.status != GetMessageStatus.FOUND:
                    break
                got += len(result.messages)
                offset = result.next_begin_offset
        seconds = time.perf_counter() - t0
    if got != count:
        raise RuntimeError(f"get_message read {got} of {count} messages")
    return Window(got, seconds)


class PullConsumerLoad(asyncio.Protocol):
    """One pull in flight per queue (as a consumer has it), each following nextBeginOffset,
    until every queue answers PULL_NOT_FOUND."""

    def __init__(self, queues: list[int], batch: int, group: str, done: asyncio.Future[None],
                 stats: dict[str, int]) -> None:
        self.queues = queues
        self.batch = batch
        self.group = group
        self.done = done
        self.stats = stats
        self.decoder = FrameDecoder()
        self.offsets = {q: 0 for q in queues}
        self.open = set(queues)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        for queue_id in self.queues:
            self.pull(queue_id)

    def pull(self, queue_id: int) -> None:
        request = create_request(RequestCode.PULL_MESSAGE, {
            "consumerGroup": self.group, "topic": TOPIC, "queueId": str(queue_id),
            "queueOffset": str(self.offsets[queue_id]), "maxMsgNums": str(self.batch), "sysFlag": "4",
            "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0"})
        request.opaque = queue_id
        self.transport.write(encode(request))  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        for reply in self.decoder.feed(data):
            queue_id = reply.opaque  # type: ignore[union-attr]
            if reply.code == ResponseCode.SUCCESS:  # type: ignore[union-attr]
                next_offset = int(reply.ext_fields["nextBeginOffset"])  # type: ignore[union-attr]
                self.stats["messages"] += next_offset - self.offsets[queue_id]
                self.stats["bytes"] += reply.body_length  # type: ignore[union-attr]
                self.offsets[queue_id] = next_offset
                self.pull(queue_id)
            else:
                if reply.code != ResponseCode.PULL_NOT_FOUND:  # type: ignore[union-attr]
                    self.stats["errors"] += 1
                self.open.discard(queue_id)
                if not self.open and not self.done.done():
                    self.done.set_result(None)


async def consume_backlog(port: int, queues: int, batch: int, group: str, connections: int,
                          cpu: Callable[[], float]) -> Window:
    loop = asyncio.get_running_loop()
    stats = {"messages": 0, "bytes": 0, "errors": 0}
    futures = []
    cpu0, t0 = cpu(), time.perf_counter()
    transports = []
    for c in range(connections):
        done: asyncio.Future[None] = loop.create_future()
        mine = [q for q in range(queues) if q % connections == c]
        transport, _ = await loop.create_connection(
            lambda mine=mine, done=done: PullConsumerLoad(mine, batch, group, done, stats), "127.0.0.1", port)
        transports.append(transport)
        futures.append(done)
    await asyncio.wait_for(asyncio.gather(*futures), 600)
    seconds, cpu1 = time.perf_counter() - t0, cpu()
    for transport in transports:
        transport.close()
    return Window(stats["messages"], seconds, stats["errors"], cpu1 - cpu0)


def measure_backlog(args: argparse.Namespace, dirs: C.TempDirs, rows: list[Row]) -> None:
    group = f"{args.backlog:,} x 100 B"
    get_row = Row("c", group, f"store get_message (direct, {args.pull_batch} a call)")
    pull_row = Row("c", group, f"broker PULL_MESSAGE ({args.pull_batch} a pull, {args.queues} queues)",
                   reference=get_row.name)
    rows += [pull_row, get_row]
    root = dirs.new("backlog")
    store = os.path.join(root, "store")
    print(f"  writing the backlog: {args.backlog:,} messages ...", flush=True)
    write_backlog(store, args.backlog, args.queues, 100)
    for repeat in range(args.repeat):
        w = direct_get_rate(store, args.backlog, args.queues, args.pull_batch)
        get_row.rates.append(w.rate)
        print(f"  get_message run {repeat + 1}: {w.rate:,.0f} msgs/s", flush=True)
        if not args.broker:
            pull_row.note = "broker not in this checkout"
            continue
        broker = start_broker(root, store)
        try:
            run(create_topic(broker.address, TOPIC, args.queues))
            w = run(consume_backlog(broker.port, args.queues, args.pull_batch, f"bench_consumer_{repeat}",
                                    args.pull_connections, broker.cpu_seconds))
        finally:
            broker.stop()
        if w.count != args.backlog or w.failures:
            print(f"    consumed {w.count:,} of {args.backlog:,}, {w.failures} error replies")
        pull_row.rates.append(w.rate)
        pull_row.failures += w.failures
        if w.cpu_per_100k is not None:
            pull_row.cpu_per_100k.append(w.cpu_per_100k)
        print(f"  broker pull run {repeat + 1}: {w.rate:,.0f} msgs/s", flush=True)
    dirs.remove(root)


# ---- (d): latency at a fixed rate -------------------------------------------------------------


class LatencyLoad(asyncio.Protocol):
    def __init__(self, sent_at: dict[int, float], latencies: list[float], failures: list[int],
                 check_success: bool) -> None:
        self.check = check_success
        self.sent_at = sent_at
        self.latencies = latencies
        self.failures = failures
        self.buffer = bytearray()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        buffer = self.buffer
        buffer += data
        pos, size = 0, len(buffer)
        while size - pos >= 4:
            (length,) = _LENGTH.unpack_from(buffer, pos)
            if pos + 4 + length > size:
                break
            header = bytes(buffer[pos + 8 : pos + 4 + length])
            # the opaque is in the reply's JSON header: "opaque":N
            start = header.find(b'"opaque":') + 9
            end = start
            while header[end : end + 1].isdigit():
                end += 1
            scheduled = self.sent_at.pop(int(header[start:end]), None)
            if scheduled is not None:
                self.latencies.append(now - scheduled)
            if self.check and not header.startswith(SUCCESS_PREFIX):
                self.failures[0] += 1
            pos += 4 + length
        del buffer[:pos]


async def latency_run(port: int, body: bytes, rate: int, seconds: float, warmup: float,
                      connections: int, queues: int, check_success: bool
                      ) -> tuple[list[float], int, int, float]:
    """Sends at ``rate`` (the due ones every millisecond); each latency runs from the moment
    its request was written to the moment its reply was read. Also returns how far the
    generator fell behind its schedule at worst (the machine's scheduling noise)."""
    loop = asyncio.get_running_loop()
    sent_at: dict[int, float] = {}
    latencies: list[float] = []
    failures = [0]
    protocols = []
    for _ in range(connections):
        _, protocol = await loop.create_connection(lambda: LatencyLoad(sent_at, latencies, failures, check_success),
                                                   "127.0.0.1", port)
        protocols.append(protocol)
    total = int(rate * (seconds + warmup))
    # frames made beforehand: encoding is not part of the latency
    frames = [send_frame(body, i % queues, i, opaque=i + 1) for i in range(total)]
    start = time.perf_counter() + 0.05
    interval = 1.0 / rate
    sent = 0
    worst_lag = 0.0
    skip = int(rate * warmup)
    while sent < total:
        now = time.perf_counter()
        due = min(total, int((now - start) / interval) + 1) if now >= start else 0
        if due > sent and sent >= skip:
            worst_lag = max(worst_lag, now - (start + sent * interval))
        while sent < due:
            sent_at[sent + 1] = time.perf_counter()
            protocols[sent % connections].transport.write(frames[sent])
            sent += 1
        await asyncio.sleep(0.001)
    deadline = time.perf_counter() + 10
    while sent_at and time.perf_counter() < deadline:
        await asyncio.sleep(0.01)
    for protocol in protocols:
        protocol.transport.close()
    # latencies are in arrival order; drop those of the warm-up by count
    return latencies[skip:], len(sent_at), failures[0], worst_lag


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def latency_summary(latencies: list[float], lost: int, failures: int, worst_lag: float) -> dict[str, Any]:
    return {"generator_lag_ms": worst_lag * 1e3,
        "p50_ms": percentile(latencies, 0.50) * 1e3, "p99_ms": percentile(latencies, 0.99) * 1e3,
        "p999_ms": percentile(latencies, 0.999) * 1e3, "max_ms": max(latencies) * 1e3,
        "samples": len(latencies), "unanswered": lost, "failures": failures}


def measure_latency(args: argparse.Namespace, dirs: C.TempDirs, rows: list[Row]) -> dict[str, Any]:
    """The broker's send latency at a fixed rate, and the same load against the echo server
    (what the load generator and the loop alone add)."""
    results: dict[str, Any] = {"broker": {"runs": []}, "echo": {"runs": []}}
    body = os.urandom(100)
    for repeat in range(args.repeat):
        echo = start_echo()
        try:
            run_result = latency_summary(*run(latency_run(echo.port, body, args.latency_rate, args.latency_seconds,
                                                          1.0, 4, args.queues, False)))
        finally:
            echo.stop()
        results["echo"]["runs"].append(run_result)
        print(f"  echo latency run {repeat + 1}: p50 {run_result['p50_ms']:.3f} ms, "
              f"p99 {run_result['p99_ms']:.3f} ms, max {run_result['max_ms']:.1f} ms", flush=True)
        if not args.broker:
            continue
        root = dirs.new("latency")
        broker = start_broker(root, os.path.join(root, "store"))
        try:
            run(create_topic(broker.address, TOPIC, args.queues))
            run_result = latency_summary(*run(latency_run(broker.port, body, args.latency_rate,
                                                          args.latency_seconds, 1.0, 4, args.queues, True)))
        finally:
            broker.stop()
            dirs.remove(root)
        results["broker"]["runs"].append(run_result)
        print(f"  broker latency run {repeat + 1}: p50 {run_result['p50_ms']:.3f} ms, "
              f"p99 {run_result['p99_ms']:.3f} ms, max {run_result['max_ms']:.1f} ms, "
              f"{run_result['unanswered']} unanswered, {run_result['failures']} failed", flush=True)
    for entry in results.values():
        if entry["runs"]:
            for key in ("p50_ms", "p99_ms", "p999_ms", "max_ms", "generator_lag_ms"):
                entry[key] = statistics.median(r[key] for r in entry["runs"])
    return results


# ---- (e): the C++ client ---------------------------------------------------------------------


CPP_WORKER = r'''
import os, sys, threading, time
from rocketmq.client import Message, Producer, SendStatus
namesrv, topic, threads, seconds, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
producer = Producer("bench_cpp_producer", timeout=10000)
producer.set_namesrv_addr(namesrv)
producer.start()
body = os.urandom(size)
counts = [0] * threads
errors = [0] * threads
first_error = []
stop = threading.Event()
def work(n):
    while not stop.is_set():
        msg = Message(topic)
        msg.set_body(body)
        msg.set_tags("TagA")
        try:
            result = producer.send_sync(msg)
        except Exception as exc:
            errors[n] += 1
            first_error.append(repr(exc)[:200])
            continue
        if result.status == SendStatus.OK:
            counts[n] += 1
        else:
            errors[n] += 1
# warm up: routes, connection, first heartbeat
for _ in range(50):
    m = Message(topic); m.set_body(body); producer.send_sync(m)
workers = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
for w in workers: w.start()
time.sleep(1.0)
c0, t0 = sum(counts), time.perf_counter()
time.sleep(seconds)
c1, t1 = sum(counts), time.perf_counter()
stop.set()
for w in workers: w.join(30)
producer.shutdown()
print(f"RESULT {(c1 - c0) / (t1 - t0):.1f} {sum(errors)}", flush=True)
if first_error:
    print("FIRST_ERROR", first_error[0], flush=True)
'''


def cpp_client_available() -> bool:
    try:
        import rocketmq.client  # noqa: F401
    except Exception:
        return False
    return True


def measure_cpp(args: argparse.Namespace, dirs: C.TempDirs, rows: list[Row]) -> None:
    row = Row("e", "100 B", f"C++ client send_sync, {args.cpp_threads} threads")
    rows.append(row)
    if not args.broker:
        row.note = "broker not in this checkout"
        return
    if not cpp_client_available():
        row.note = "the rocketmq package (C++ client) is not installed"
        return
    for repeat in range(args.repeat):
        root = dirs.new("cpp")
        namesrv = start_namesrv()
        broker = None
        try:
            broker = start_broker(root, os.path.join(root, "store"), namesrv_addr=namesrv.address)
            run(create_topic(broker.address, TOPIC, args.queues))
            run(wait_for_route(namesrv.address, "TBW102"))  # else the client's first sends fail
            home = tempfile.mkdtemp(prefix="cpp-home-", dir=root)
            cpu0, wall0 = broker.cpu_seconds(), time.perf_counter()
            proc = subprocess.run([sys.executable, "-c", CPP_WORKER, namesrv.address, TOPIC,
                                   str(args.cpp_threads), str(args.cpp_seconds), "100"],
                                  capture_output=True, text=True, timeout=args.cpp_seconds + 120,
                                  env=child_env(HOME=home), cwd=root)
            line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
            if line is None:
                row.note = f"the C++ client run failed: {(proc.stdout + proc.stderr)[-500:]}"
                print(f"  {row.note}")
                return
            busy = (broker.cpu_seconds() - cpu0) / (time.perf_counter() - wall0)
            _, rate, errors = line.split()
            first = next((ln for ln in proc.stdout.splitlines() if ln.startswith("FIRST_ERROR ")), None)
            if first:
                print(f"    {first}")
            row.rates.append(float(rate))
            row.failures += int(errors)
            row.note = f"broker busy {busy:.0%} of a core meanwhile"
            print(f"  C++ client run {repeat + 1}: {float(rate):,.0f} msgs/s ({errors} errors), "
                  f"broker CPU {busy:.0%} of a core", flush=True)
        finally:
            if broker is not None:
                broker.stop()
            namesrv.stop()
            dirs.remove(root)


# ---- report ----------------------------------------------------------------------------------


def report(args: argparse.Namespace, rows: list[Row], latency: dict[str, Any], info: dict[str, Any]) -> str:
    by_name = {(r.group, r.name): r for r in rows}
    out = []
    table = []
    for row in rows:
        reference = by_name.get((row.group, row.reference)) if row.reference else None
        ratio = row.rate / reference.rate if reference and reference.rates and row.rates else None
        target = ""
        if row.part == "a" and ratio is not None:
            target = f"{'PASS' if ratio >= 0.5 else 'MISS'} (>= 0.5)"
        if row.part == "c" and ratio is not None:
            target = f"{'PASS' if ratio >= 0.5 else 'MISS'} (>= 0.5)"
        runs = ", ".join(f"{r:,.0f}" for r in row.rates)
        cpu = "" if row.cpu is None else f"{row.cpu:.2f}"
        table.append([f"({row.part})", row.group, row.name,
                      "-" if not row.rates else f"{row.rate:,.0f}", runs,
                      C.fmt_ratio(ratio), cpu, str(row.failures) if row.rates else "", target or row.note])
    out.append(C.markdown_table(
        ["part", "workload", "what", "msgs/s (median)", "runs", "ratio", "server CPU s / 100k msgs",
         "failed", "target"], table, align="lllrrrrrl"))
    for group in dict.fromkeys(r.group for r in rows if r.part == "b"):
        echo = by_name.get((group, "bare frame echo (same frames, same load)"))
        put = by_name.get((group, "store put_message (direct, in process)"))
        if echo and put and echo.rates and put.rates:
            both = 1.0 / (1.0 / echo.rate + 1.0 / put.rate)
            out.append(f"\n{group}: the echo's work and the store's put_message in series on one "
                       f"thread, at their measured rates, would make {both:,.0f} msgs/s, "
                       f"{both / echo.rate:.2f} of the echo: what a broker whose loop decoded "
                       "nothing and encoded no reply could reach.")
    latency_rows = []
    for key, label in (("echo", "bare frame echo (reference)"), ("broker", "broker SEND_MESSAGE_V2")):
        entry = latency.get(key, {})
        if not entry.get("runs"):
            continue
        target = ""
        if key == "broker":
            target = f"{'PASS' if entry['p99_ms'] <= 2.0 else 'MISS'} (p99 <= 2 ms)"
        latency_rows.append(["(d)", f"{label} at {args.latency_rate:,} msgs/s, 100 B, 4 connections",
                             f"{entry['p50_ms']:.3f}", f"{entry['p99_ms']:.3f}", f"{entry['p999_ms']:.3f}",
                             f"{entry['max_ms']:.1f}", f"{entry['generator_lag_ms']:.1f}", target])
    if latency_rows:
        out.append("")
        out.append(C.markdown_table(["part", "what", "p50 ms", "p99 ms", "p99.9 ms", "max ms",
                                     "generator's worst lag ms", "target"], latency_rows, align="llrrrrrl"))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="a,b,c,d,e,g", help="parts to run (a and b run together)")
    parser.add_argument("--parts-count", type=int, default=50_000, help="sends of (g)")
    parser.add_argument("--quick", action="store_true", help="smaller counts and windows")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0, help="measured window of (a)/(b)")
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--inflight", type=int, default=64, help="requests outstanding per connection")
    parser.add_argument("--sizes", default="100,1024")
    parser.add_argument("--queues", type=int, default=8)
    parser.add_argument("--put-count", type=int, default=300_000, help="messages of the direct put_message row")
    parser.add_argument("--backlog", type=int, default=1_000_000)
    parser.add_argument("--pull-batch", type=int, default=32)
    parser.add_argument("--pull-connections", type=int, default=2)
    parser.add_argument("--latency-rate", type=int, default=10_000)
    parser.add_argument("--latency-seconds", type=float, default=5.0)
    parser.add_argument("--cpp-threads", type=int, default=8)
    parser.add_argument("--cpp-seconds", type=float, default=5.0)
    parser.add_argument("--dir", help="where temporary stores go (default: the repository's parent)")
    parser.add_argument("--json", help="write every sample here")
    parser.add_argument("--serve-echo", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_echo:
        run(serve_echo())
        return
    if args.quick:
        args.seconds, args.put_count, args.backlog = 2.0, 100_000, 200_000
        args.latency_seconds, args.cpp_seconds = 3.0, 3.0
    args.sizes = [int(s) for s in args.sizes.split(",")]
    parts = set(args.only.split(","))
    args.broker = broker_available()
    info = C.machine_info(extra={"loop": "uvloop" if uvloop_enabled() else "asyncio",
                                 "load_before": " ".join(f"{x:.2f}" for x in os.getloadavg())})
    C.print_machine_info(info)
    if not args.broker:
        print("NOTE: rocketstore.broker is not in this checkout: only the references run")
    rows: list[Row] = []
    latency: dict[str, Any] = {}
    with C.TempDirs(args.dir) as dirs:
        if parts & {"a", "b"}:
            print("(a)/(b) sends ...", flush=True)
            measure_sends(args, dirs, rows)
        if "c" in parts:
            print("(c) backlog ...", flush=True)
            measure_backlog(args, dirs, rows)
        if "d" in parts:
            print("(d) latency ...", flush=True)
            latency = measure_latency(args, dirs, rows)
        if "e" in parts:
            print("(e) C++ client ...", flush=True)
            measure_cpp(args, dirs, rows)
        send_parts = {}
        if "g" in parts and args.broker:
            print("(g) a send's CPU by step, in process (calling thread's CPU, best of --repeat) ...", flush=True)
            send_parts = measure_send_parts(args, dirs)
    info["load_after"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print()
    print(f"load average before {info['load_before']}, after {info['load_after']}; "
          f"{args.connections} connections x {args.inflight} in flight; {args.repeat} runs each")
    print()
    if rows or latency:
        print(report(args, rows, latency, info))
    if send_parts:
        print()
        print(C.markdown_table(["part", "body", "step", "CPU ns per send"],
                               [["(g)", f"{size} B", name, f"{ns:,.0f}"]
                                for size, steps in send_parts.items() for name, ns in steps],
                               align="lllr"))
    if args.json:
        C.write_json(args.json, {
            "machine": info, "args": {k: v for k, v in vars(args).items() if k != "serve_echo"},
            "rows": [row.__dict__ | {"median": row.rate, "cpu_median": row.cpu} for row in rows],
            "latency": latency,
            "send_parts": {str(size): dict(steps) for size, steps in send_parts.items()}})


if __name__ == "__main__":
    main()
