"""One broker send's whole loop-thread path, in process: bytes in, reply bytes out.

A BrokerController (ASYNC_FLUSH, in a temp dir) gets SEND_MESSAGE_V2 frames through a
RemotingConnection's ``data_received`` on a transport that only counts what is written, 64
frames a read, as bench/broker.py's load sends them. No sockets: what is measured is the
broker's own work per send (decode, checks, append, statistics, reply, the write call).

    PYTHONPATH=$PWD python bench/broker_send_cost.py                 # CPU ns per send
    PYTHONPATH=$PWD python bench/broker_send_cost.py --callgrind     # instructions per send
    PYTHONPATH=$PWD python bench/broker_send_cost.py --batch 32      # per message of batches

``--batch N`` sends SEND_BATCH_MESSAGE (320) frames of N messages each, as RocketMQ's Java
producer encodes a MessageBatch (every message with UNIQ_KEY and WAIT, the request with WAIT):
the figures are then per message.

``--callgrind`` runs the driver twice under ``valgrind --tool=callgrind`` with different
send counts and prints the difference of their instruction counts divided by the difference
of the counts: instructions per send, all threads (the reput thread's dispatch included),
start-up and shutdown cancelled out. Deterministic to within ~1% on a busy machine.
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from broker import GROUP, TOPIC, send_block, uniq_key  # noqa: E402

from rocketstore.common.batch import encode_batch_body  # noqa: E402
from rocketstore.remoting import RequestCode, create_request, encode  # noqa: E402
from rocketstore.remoting.codes import ResponseCode  # noqa: E402
from rocketstore.remoting.eventloop import run  # noqa: E402

_CHUNK = 64
_BLOCK = 1024


class _Transport:
    """What a RemotingConnection uses of its transport; counts the bytes written."""

    def __init__(self) -> None:
        self.written = 0
        self.writes = 0
        self.last = b""

    def write(self, data: Any) -> None:
        self.written += len(data)
        self.writes += 1
        self.last = data

    def writelines(self, buffers: Any) -> None:
        for buffer in buffers:
            self.write(buffer)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40000) if name in ("peername", "sockname") else default

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass

    def abort(self) -> None:
        pass


def batch_block(body: bytes, queues: int, count: int, batch: int) -> tuple[bytes, int]:
    """``count`` SEND_BATCH_MESSAGE frames of ``batch`` messages each, of one length, back to
    back."""
    frames = []
    for i in range(count):
        entries = [(0, body, f"TAGS\x01TagA\x02UNIQ_KEY\x01{uniq_key(i * batch + j)}\x02WAIT\x01true"
                    .encode()) for j in range(batch)]
        ext = {"a": GROUP, "b": TOPIC, "c": "TBW102", "d": "8", "e": str(i % queues), "f": "0",
               "g": "1795314927483", "h": "0", "i": "WAIT\x01true\x02", "j": "0", "k": "false",
               "m": "true"}
        request = create_request(RequestCode.SEND_BATCH_MESSAGE, ext, encode_batch_body(entries))
        request.opaque = 1
        frames.append(encode(request))
    size = len(frames[0])
    assert all(len(f) == size for f in frames)
    return b"".join(frames), size


async def drive(count: int, size: int, queues: int, root: str, native: bool,
                batch: int = 0) -> tuple[float, int]:
    """CPU ns per send (per message with ``batch``) of ``count`` sends through one
    connection, and the reply bytes."""
    from rocketstore.broker import BrokerConfig, BrokerController
    from rocketstore.config import StoreConfig
    from rocketstore.remoting.connection import RemotingConnection

    body = os.urandom(size)
    # one block of frames, fed over and over: building frames is no part of what is measured
    per_frame = max(batch, 1)
    if batch:
        block, frame_size = batch_block(body, queues, _BLOCK // batch, batch)
        chunk = max(1, _CHUNK // batch)
    else:
        block, frame_size = send_block(body, queues, _BLOCK)
        chunk = _CHUNK
    reads = [block[i: i + chunk * frame_size] for i in range(0, len(block), chunk * frame_size)]
    reads = [reads[i % len(reads)] for i in range(count // (chunk * per_frame))]
    config = BrokerConfig(listen_port=0, wait_time_mills_in_send_queue=3_600_000,
                          store=StoreConfig(store_path_root_dir=os.path.join(root, "store")))
    broker = BrokerController(config, native_send=native)
    await broker.start()
    try:
        server = broker.server
        connection = RemotingConnection(server._processors, server.config.connection_limits())
        transport = _Transport()
        connection.connection_made(transport)  # type: ignore[arg-type]
        # warm-up: first pages of the commit log, caches of the send path
        connection.data_received(reads[0])
        transport.written = 0
        count = len(reads) * chunk * per_frame
        gc.collect()
        t0 = time.thread_time_ns()
        for data in reads:
            connection.data_received(data)
        ns = time.thread_time_ns() - t0
        from rocketstore.remoting import FrameDecoder

        replies = FrameDecoder().feed(transport.last)
        bad = [r for r in replies if getattr(r, "code", None) != ResponseCode.SUCCESS]
        if bad:
            raise RuntimeError(f"sends failed: {bad[0]!r}")
        if not broker.store.wait_dispatched(60):
            raise RuntimeError("not dispatched in 60 s")
        return ns / count, transport.written // (count // per_frame)
    finally:
        await broker.stop()


def _callgrind_instructions(count: int, size: int, queues: int, native: bool, batch: int) -> int:
    out_dir = tempfile.mkdtemp(prefix="send-cost-cg-")
    try:
        out_file = os.path.join(out_dir, "callgrind.out")
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_file}",
               sys.executable, os.path.abspath(__file__), "--count", str(count), "--size", str(size),
               "--queues", str(queues), "--batch", str(batch)]
        if not native:
            cmd.append("--python-send")
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        with open(out_file) as f:
            for line in f:
                match = re.match(r"(?:summary|totals): (\d+)", line)
                if match:
                    return int(match.group(1))
        raise RuntimeError("no totals in the callgrind output")
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=50_000, help="sends measured")
    parser.add_argument("--size", type=int, default=100, help="body bytes")
    parser.add_argument("--queues", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=1, help="runs (best printed)")
    parser.add_argument("--python-send", action="store_true", help="the Python SendMessageProcessor")
    parser.add_argument("--callgrind", action="store_true",
                        help="instructions per send under callgrind (two runs: --low and --count)")
    parser.add_argument("--low", type=int, default=1_000, help="the smaller run's sends (--callgrind)")
    parser.add_argument("--batch", type=int, default=0,
                        help="SEND_BATCH_MESSAGE of this many messages a frame (figures per message)")
    args = parser.parse_args()
    native = not args.python_send
    if args.callgrind:
        low = _callgrind_instructions(args.low, args.size, args.queues, native, args.batch)
        high = _callgrind_instructions(args.count, args.size, args.queues, native, args.batch)
        per_send = (high - low) / (args.count - args.low)
        what = f"message of {args.batch}-message batches" if args.batch else "send"
        print(f"{args.size} B: {per_send:,.0f} instructions per {what} "
              f"({'native SendPath' if native else 'Python entry points'}; "
              f"{args.low:,} and {args.count:,} sends: {low:,} and {high:,})")
        return
    best = float("inf")
    for _ in range(args.repeat):
        root = tempfile.mkdtemp(prefix="send-cost-")
        try:
            ns, written = run(drive(args.count, args.size, args.queues, root, native, args.batch))
        finally:
            shutil.rmtree(root, ignore_errors=True)
        best = min(best, ns)
    what = f"message of {args.batch}-message batches" if args.batch else "send"
    print(f"{args.size} B: {best:,.0f} CPU ns per {what} on the loop thread "
          f"({'native SendPath' if native else 'Python entry points'}; {args.count:,} messages, "
          f"{written:.0f} reply bytes a request)")


if __name__ == "__main__":
    main()
