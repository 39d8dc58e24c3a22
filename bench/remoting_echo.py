"""Remoting echo: requests/s through our remoting stack against a bare frame-echo server.

The reference ceiling for the broker's send benchmark: whatever a SEND costs on top of the
store, it cannot beat a server that only frames and echoes. Three servers are measured in one
run, each in its own process (one core for the server, one for the load), on the same event
loop (uvloop when installed, ``--loop asyncio`` for asyncio's own):

* ``bare echo``: splits the stream into frames by their length field and writes them back;
  no header is decoded. The reference (ratio 1.00).
* ``RemotingServer``: our server with an echo processor (a plain function returning
  ``create_response(request, body=request.body)``): decodes every header, dispatches, encodes
  the reply.
* ``RemotingServer, async def``: the same processor written ``async def`` (one task each).

"server CPU us/request" is the server process's CPU time (user + system, from /proc) over the
measured window divided by the requests served: steadier than requests/s when other processes
share the cores. "CPU ratio" is the bare echo's CPU per request over the row's.

The load comes from a pipelined generator (pre-encoded frames, ``--inflight`` per connection
kept outstanding, replies counted by their length field only), so the figures are the server's.
A last row drives our RemotingServer with our own ``RemotingClient.invoke`` from the load
process (coroutines awaiting replies), the whole client + server stack.

    python bench/remoting_echo.py                       # 100 B and 1 KiB bodies, 3 s each
    python bench/remoting_echo.py --seconds 5 --connections 8 --inflight 128
"""

from __future__ import annotations

import argparse
import asyncio
import os
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _common  # noqa: E402

_common.ensure_importable()

from rocketstore.remoting import (  # noqa: E402
    RemotingClient,
    RemotingClientConfig,
    RemotingServer,
    RemotingServerConfig,
    create_request,
    create_response,
    encode,
)
from rocketstore.remoting.eventloop import run, uvloop_enabled  # noqa: E402

_LENGTH = struct.Struct(">I")
ECHO_CODE = 10  # SEND_MESSAGE: the header a producer's send carries, roughly


# ---- servers (run in a child process) --------------------------------------------------------


class BareEchoProtocol(asyncio.Protocol):
    """Frames by length, written back in one write per read: nothing else."""

    def __init__(self) -> None:
        self.buffer = bytearray()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer
        buffer += data
        pos, size = 0, len(buffer)
        while size - pos >= 4:
            (length,) = _LENGTH.unpack_from(buffer, pos)
            if pos + 4 + length > size:
                break
            pos += 4 + length
        if pos:
            self.transport.write(bytes(buffer[:pos]))  # type: ignore[attr-defined]
            del buffer[:pos]


async def serve(kind: str) -> None:
    if kind == "bare":
        server = await asyncio.get_running_loop().create_server(BareEchoProtocol, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
    else:
        remoting = RemotingServer(RemotingServerConfig(listen_port=0))
        if kind == "remoting":
            remoting.register_processor(ECHO_CODE, lambda ctx, req: create_response(req, body=req.body))
        else:

            async def echo(ctx: object, req):  # type: ignore[no-untyped-def]
                return create_response(req, body=req.body)

            remoting.register_processor(ECHO_CODE, echo)
        await remoting.start()
        port = remoting.port
    print(port, flush=True)
    # Serve until the parent closes our stdin.
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)


# ---- load (the parent process) ---------------------------------------------------------------


class PipelinedLoad(asyncio.Protocol):
    """Keeps ``inflight`` copies of one frame outstanding; counts whole replies."""

    def __init__(self, frame: bytes, inflight: int, counter: list[int]) -> None:
        self.frame = frame
        self.inflight = inflight
        self.counter = counter
        self.pending = 0  # bytes of a reply still to come
        self.buffer = bytearray()
        self.stopped = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        transport.write(self.frame * self.inflight)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer
        buffer += data
        pos, size, replies = 0, len(buffer), 0
        while size - pos >= 4:
            (length,) = _LENGTH.unpack_from(buffer, pos)
            if pos + 4 + length > size:
                break
            pos += 4 + length
            replies += 1
        del buffer[:pos]
        self.counter[0] += replies
        if replies and not self.stopped:
            self.transport.write(self.frame * replies)  # type: ignore[attr-defined]


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of a process so far (all its threads), from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def pipelined_rate(port: int, frame: bytes, connections: int, inflight: int, seconds: float,
                         pid: int) -> tuple[float, float]:
    loop = asyncio.get_running_loop()
    counter = [0]
    protocols = []
    for _ in range(connections):
        _, protocol = await loop.create_connection(
            lambda: PipelinedLoad(frame, inflight, counter), "127.0.0.1", port
        )
        protocols.append(protocol)
    await asyncio.sleep(min(0.5, seconds / 4))  # warm up
    start_count, start, cpu = counter[0], time.perf_counter(), process_cpu(pid)
    await asyncio.sleep(seconds)
    count = counter[0] - start_count
    rate = count / (time.perf_counter() - start)
    cpu_per_request = (process_cpu(pid) - cpu) / count if count else float("nan")
    for protocol in protocols:
        protocol.stopped = True
        protocol.transport.close()
    return rate, cpu_per_request


async def client_rate(port: int, body: bytes, connections: int, inflight: int, seconds: float,
                      pid: int) -> tuple[float, float]:
    address = f"127.0.0.1:{port}"
    client = RemotingClient(RemotingClientConfig(connections_per_address=connections))
    for _ in range(connections):  # open them all before timing
        await client._connect(address, None)  # noqa: SLF001 - a bench may pre-open
    count = 0
    stop = False

    async def worker() -> None:
        nonlocal count
        ext = {"producerGroup": "bench", "topic": "TopicTest", "queueId": "0"}
        while not stop:
            await client.invoke(address, create_request(ECHO_CODE, dict(ext), body))
            count += 1

    workers = [asyncio.ensure_future(worker()) for _ in range(connections * inflight)]
    await asyncio.sleep(min(0.5, seconds / 4))
    start_count, start, cpu = count, time.perf_counter(), process_cpu(pid)
    await asyncio.sleep(seconds)
    done = count - start_count
    rate = done / (time.perf_counter() - start)
    cpu_per_request = (process_cpu(pid) - cpu) / done if done else float("nan")
    stop = True
    await asyncio.gather(*workers, return_exceptions=True)
    await client.close()
    return rate, cpu_per_request


def start_server(kind: str, loop_name: str) -> tuple[subprocess.Popen[str], int]:
    env = dict(os.environ)
    if loop_name == "asyncio":
        env["ROCKETSTORE_NO_UVLOOP"] = "1"
    proc = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "--serve", kind],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.strip().isdigit():
        proc.kill()
        raise RuntimeError(f"server {kind} did not start: {line!r}")
    return proc, int(line)


def stop_server(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None
    proc.stdin.close()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0, help="measured seconds per row")
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--inflight", type=int, default=64, help="requests outstanding per connection")
    parser.add_argument("--sizes", default="100,1024", help="body sizes in bytes")
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop" if uvloop_enabled() else "asyncio")
    parser.add_argument("--serve", choices=("bare", "remoting", "remoting-async"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.loop == "asyncio":
        os.environ["ROCKETSTORE_NO_UVLOOP"] = "1"
    if args.serve:
        run(serve(args.serve))
        return

    print(
        f"loop: {args.loop}, {args.connections} connections x {args.inflight} in flight, "
        f"{args.seconds:g} s per row, Python {sys.version.split()[0]}, {os.cpu_count()} cores"
    )
    print()
    print("| body | server | load | requests/s | ratio to bare echo | server CPU us/request | CPU ratio |")
    print("|---:|---|---|---:|---:|---:|---:|")
    for size in (int(s) for s in args.sizes.split(",")):
        body = os.urandom(size)
        ext = {"producerGroup": "bench", "topic": "TopicTest", "queueId": "0"}
        request = create_request(ECHO_CODE, ext, body)
        frame = encode(request)
        reference = reference_cpu = None
        rows = [
            ("bare echo", "bare", "pipelined"),
            ("RemotingServer", "remoting", "pipelined"),
            ("RemotingServer, async def", "remoting-async", "pipelined"),
            ("RemotingServer", "remoting", "RemotingClient.invoke"),
        ]
        for label, kind, load in rows:
            proc, port = start_server(kind, args.loop)
            try:
                if load == "pipelined":
                    rate, cpu = run(pipelined_rate(port, frame, args.connections, args.inflight, args.seconds,
                                                   proc.pid))
                else:
                    rate, cpu = run(client_rate(port, body, args.connections, args.inflight, args.seconds,
                                                proc.pid))
            finally:
                stop_server(proc)
            if reference is None:
                reference, reference_cpu = rate, cpu
            print(f"| {size} B | {label} | {load} | {rate:,.0f} | {rate / reference:.2f} | {cpu * 1e6:.2f} | "
                  f"{reference_cpu / cpu:.2f} |", flush=True)


if __name__ == "__main__":
    main()
