"""Replication throughput: how fast a slave appends its master's CommitLog (MB/s), against a
raw loopback socket copy of the same bytes in the same run (issue 27: replication >= 0.5 of
the raw copy); and SYNC_MASTER against ASYNC_MASTER send throughput and p99 (issue 27:
SYNC_MASTER >= 0.7 of ASYNC_MASTER with 32 producers).

A master store is filled first (--mb of messages of --size bytes, 256 MiB segments by
default). Then, alternating --repeat times:
- raw: a child process sends the master's CommitLog from its mapped segments (32 KiB
  `sendall`s of memoryviews) to this process, which receives it with `recv_into` into one
  buffer and keeps nothing: the cost of moving the bytes through loopback;
- HA: a child process runs the master's HAService (on the event loop the broker uses) over
  the same store; this process runs an HAClient into an empty SLAVE store and the clock stops
  when the slave's CommitLog end reaches the master's (its dispatch is timed apart: the
  ConsumeQueues and IndexFiles built from what arrived).
Beside wall-clock rates it prints MB per CPU second, which a busy machine disturbs less: of
the master and the slave's receiving thread (its event loop: receive, append, report) until the
append was done, and of both processes with every thread (the slave's dispatch included).

Sends (``--only sends``, or both parts by default): a master broker and its slave broker as
subprocesses (ASYNC_FLUSH), once with the master a SYNC_MASTER and once an ASYNC_MASTER,
alternating ``--repeat`` times; ``--producers`` connections each send SEND_MESSAGE_V2 frames as
a Java producer writes them (WAIT=true, ``--size`` byte bodies) one at a time, the next when
the reply came (a synchronous producer), for ``--seconds``. Every reply must be SUCCESS.
Throughput (sends/s), the latency percentiles of the replies, and the CPU µs a send of the
master, of the slave (all their threads) and of the producers' process.

Failover (``--only failover``, or with the other parts by default): a name server with the
controller in it and a 3-replica SYNC_MASTER group in controller mode (subprocesses), the
project's producers sending all along; ``--kills`` times, once every replica is in the
SyncStateSet, the master is SIGKILLed at a random moment and the clock runs until the first
SEND_OK stored by the newly elected master (its port is in the offset msgId); the killed
broker then restarts and rejoins. The heartbeat settings are the README's (controller mode):
brokerHeartbeatInterval 500 ms, controllerHeartBeatTimeoutMills 2000 ms,
scanNotActiveBrokerInterval 500 ms, the producers' pollNameServerInterval 500 ms (issue 27:
median <= 5 s).

    python bench/ha.py [--only replication|sends|failover] [--mb 512] [--size 1024]
                       [--repeat 3] [--producers 32] [--seconds 5] [--kills 9]
                       [--json ha.json]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import struct
import subprocess
import sys
import time

from _common import (
    MB,
    TempDirs,
    ensure_importable,
    machine_info,
    markdown_table,
    median,
    print_machine_info,
    write_json,
)

ensure_importable()

from rocketstore import Message, MessageStore, StoreConfig  # noqa: E402
from rocketstore.ha import HAClient, HAService  # noqa: E402
from rocketstore.remoting.eventloop import loop_factory  # noqa: E402

TARGET = 0.5
SYNC_TARGET = 0.7

BATCH = 32 * 1024


def config(root: str, segment: int, **changes: object) -> StoreConfig:
    return StoreConfig(store_path_root_dir=root, mapped_file_size_commit_log=segment,
                       **changes)  # type: ignore[arg-type]


def fill(root: str, mb: int, size: int, segment: int) -> int:
    body = os.urandom(size)
    with MessageStore.open(root, config(root, segment)) as store:
        batch = [Message(topic=f"Bench{i % 4}", body=body, keys=[f"k{i}"]) for i in range(256)]
        while store.get_max_phy_offset() < mb * MB:
            result = store.put_messages(batch, [i % 8 for i in range(len(batch))])
            assert result.status_code == 0, result
        return store.get_max_phy_offset()


# ---- children ------------------------------------------------------------------------------
def write_cpu(port_file: str, cpu0: float) -> None:
    """The child's CPU seconds (every thread) since cpu0, for the parent."""
    with open(port_file + ".cpu", "w") as f:
        f.write(str(time.process_time() - cpu0))


def serve_raw(root: str, segment: int, port_file: str) -> None:
    with MessageStore.open(root, config(root, segment), read_only=True) as store, \
            socket.create_server(("127.0.0.1", 0)) as server:
        with open(port_file, "w") as f:
            f.write(str(server.getsockname()[1]))
        conn, _ = server.accept()
        cpu0 = time.process_time()
        with conn:
            end = store.get_max_phy_offset()
            offset = 0
            while offset < end:
                view = store.get_commitlog_data(offset)
                assert view is not None
                for start in range(0, len(view), BATCH):
                    conn.sendall(view[start:start + BATCH])
                offset += len(view)
        write_cpu(port_file, cpu0)


def serve_ha(root: str, segment: int, port_file: str) -> None:
    async def main() -> None:
        store = MessageStore.open(root, config(root, segment))
        service = HAService(store, port=0)
        await service.start()
        with open(port_file, "w") as f:
            f.write(str(service.port))
        cpu0 = time.process_time()
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        parent = os.getppid()
        try:
            while not stop.is_set() and os.getppid() == parent:     # not orphaned
                try:
                    await asyncio.wait_for(stop.wait(), 1.0)
                except asyncio.TimeoutError:
                    pass
            write_cpu(port_file, cpu0)
        finally:
            await service.stop()
            store.shutdown()

    loop = loop_factory()()
    loop.run_until_complete(main())


def child_cpu(port_file: str) -> float:
    with open(port_file + ".cpu") as f:
        return float(f.read())


def child(mode: str, root: str, segment: int, dirs: TempDirs
          ) -> tuple[subprocess.Popen, int, str]:
    port_file = os.path.join(dirs.new("port"), "port")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), os.environ.get("PYTHONPATH")])))
    proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child", mode, root,
                             str(segment), port_file], env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if os.path.exists(port_file) and os.path.getsize(port_file):
            return proc, int(open(port_file).read()), port_file
        if proc.poll() is not None:
            raise RuntimeError(f"{mode} child exited {proc.returncode}")
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"{mode} child did not start")


# ---- measurements --------------------------------------------------------------------------
def run_raw(root: str, segment: int, end: int, dirs: TempDirs) -> tuple[float, float]:
    """(wall seconds, CPU seconds of both ends)."""
    proc, port, port_file = child("raw", root, segment, dirs)
    buffer = bytearray(1 << 20)
    got = 0
    try:
        with socket.create_connection(("127.0.0.1", port)) as sock:
            t0 = time.perf_counter()
            cpu0 = time.process_time()
            view = memoryview(buffer)
            while True:
                n = sock.recv_into(view)
                if not n:
                    break
                got += n
            seconds = time.perf_counter() - t0
            cpu = time.process_time() - cpu0
    finally:
        proc.wait(30)
    assert got == end, (got, end)
    return seconds, cpu + child_cpu(port_file)


def run_ha(root: str, segment: int, end: int, dirs: TempDirs
           ) -> tuple[float, float, float, float]:
    """(wall seconds to append, to append and dispatch, CPU seconds of both ends, the
    slave's dispatch included, CPU seconds of the master and of the slave's receiving thread
    (its event loop: receive, append, report) until the append was done)."""
    proc, port, port_file = child("ha", root, segment, dirs)
    slave_root = dirs.new("slave")
    try:
        async def follow() -> tuple[float, float, float, float]:
            slave = MessageStore.open(slave_root, config(slave_root, segment, broker_role="SLAVE"))
            client = HAClient(slave, f"127.0.0.1:{port}")
            try:
                t0 = time.perf_counter()
                cpu0 = time.process_time()
                thread0 = time.thread_time()
                await client.start()
                while slave.get_replica_offset() < end:
                    await asyncio.sleep(0.001)
                appended = time.perf_counter() - t0
                receiving = time.thread_time() - thread0
                await client.stop()
                await asyncio.get_running_loop().run_in_executor(None, slave.wait_dispatched, 600)
                return (appended, time.perf_counter() - t0, time.process_time() - cpu0,
                        receiving)
            finally:
                await client.stop()
                slave.shutdown()

        loop = loop_factory()()
        try:
            appended, done, cpu, receiving = loop.run_until_complete(follow())
        finally:
            loop.close()
        proc.terminate()
        proc.wait(30)
        master_cpu = child_cpu(port_file)
        print(f"  HA run: {end / appended / MB:,.0f} MB/s appended; CPU seconds master "
              f"{master_cpu:.3f}, slave {cpu:.3f} (its dispatch threads included), the slave's "
              f"receiving thread {receiving:.3f}", flush=True)
        return appended, done, cpu + master_cpu, master_cpu + receiving
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        dirs.remove(slave_root)


# ---- SYNC_MASTER against ASYNC_MASTER --------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_pair(dirs: TempDirs, role: str) -> tuple[object, object]:
    """A master broker (role) and a slave following it; both running, the slave connected."""
    import broker as B

    master_ha = free_port()
    master_root, slave_root = dirs.new(f"{role}-master"), dirs.new(f"{role}-slave")
    master = B.start_broker(master_root, os.path.join(master_root, "store"), brokerRole=role,
                            haListenPort=master_ha)
    try:
        slave = B.start_broker(slave_root, os.path.join(slave_root, "store"), brokerRole="SLAVE",
                               brokerId=1, haListenPort=free_port(),
                               haMasterAddress=f"127.0.0.1:{master_ha}")
    except BaseException:
        master.stop()
        raise
    return master, slave


async def one_producer(port: int, frames: list[bytes], until: float,
                       latencies: list[float], failures: list[bytes]) -> int:
    """Sends frames one at a time until ``until``; the number answered SUCCESS."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    done = 0
    loop = asyncio.get_running_loop()
    try:
        i = 0
        while loop.time() < until:
            began = time.perf_counter()
            writer.write(frames[i % len(frames)])
            i += 1
            (length,) = struct.unpack(">i", await reader.readexactly(4))
            reply = await reader.readexactly(length)
            latencies.append(time.perf_counter() - began)
            if not reply.startswith(b'{"code":0,', 4):
                failures.append(reply[4:200])
            else:
                done += 1
    finally:
        writer.close()
    return done


async def send_window(address: str, producers: int, seconds: float, size: int,
                      servers: tuple[object, ...] = ()
                      ) -> tuple[float, list[float], list[bytes], list[float]]:
    """(sends/s, latencies in s, failed replies' headers, CPU µs per send of each of
    ``servers`` and of this process) of ``producers`` synchronous producers over
    ``seconds``."""
    import broker as B

    port = int(address.rsplit(":", 1)[1])
    body = os.urandom(size)
    frames = [B.send_frame(body, i % 8, i) for i in range(256)]
    await B.create_topic(address, B.TOPIC, 8)
    warm_lat: list[float] = []
    warm_fail: list[bytes] = []
    loop = asyncio.get_running_loop()
    await asyncio.gather(*(one_producer(port, frames, loop.time() + 0.5, warm_lat, warm_fail)
                           for _ in range(producers)))
    latencies: list[float] = []
    failures: list[bytes] = []
    cpu0 = [s.cpu_seconds() for s in servers] + [time.process_time()]  # type: ignore[attr-defined]
    t0 = time.perf_counter()
    until = loop.time() + seconds
    counts = await asyncio.gather(*(one_producer(port, frames, until, latencies, failures)
                                    for _ in range(producers)))
    elapsed = time.perf_counter() - t0
    cpu1 = [s.cpu_seconds() for s in servers] + [time.process_time()]  # type: ignore[attr-defined]
    sends = max(1, sum(counts))
    return (sum(counts) / elapsed, latencies, failures,
            [(b - a) / sends * 1e6 for a, b in zip(cpu0, cpu1, strict=True)])


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))]


def measure_sends(args: argparse.Namespace, dirs: TempDirs) -> dict[str, object]:
    rates: dict[str, list[float]] = {"SYNC_MASTER": [], "ASYNC_MASTER": []}
    p99: dict[str, list[float]] = {"SYNC_MASTER": [], "ASYNC_MASTER": []}
    p50: dict[str, list[float]] = {"SYNC_MASTER": [], "ASYNC_MASTER": []}
    #: CPU µs per send: the master, the slave, the producers' process
    cpu: dict[str, list[list[float]]] = {"SYNC_MASTER": [], "ASYNC_MASTER": []}
    for _ in range(args.repeat):
        for role in ("SYNC_MASTER", "ASYNC_MASTER"):
            master, slave = start_pair(dirs, role)
            try:
                time.sleep(1.0)     # the slave connects
                rate, latencies, failures, per_send = loop_factory()().run_until_complete(
                    send_window(master.address, args.producers,  # type: ignore[attr-defined]
                                args.seconds, args.size, (master, slave)))
            finally:
                slave.stop()    # type: ignore[attr-defined]
                master.stop()   # type: ignore[attr-defined]
            if failures:
                raise RuntimeError(f"{role}: {len(failures)} sends failed, first {failures[0]!r}")
            rates[role].append(rate)
            p50[role].append(percentile(latencies, 50) * 1000)
            p99[role].append(percentile(latencies, 99) * 1000)
            cpu[role].append(per_send)
            print(f"  {role}: {rate:,.0f} sends/s, p50 {p50[role][-1]:.2f} ms, "
                  f"p99 {p99[role][-1]:.2f} ms; CPU µs a send: master {per_send[0]:.1f}, "
                  f"slave {per_send[1]:.1f}, producers {per_send[2]:.1f}", flush=True)
    sync, async_ = median(rates["SYNC_MASTER"]), median(rates["ASYNC_MASTER"])
    ratio = sync / async_

    def cpu_cells(role: str) -> list[str]:
        return [f"{median([c[i] for c in cpu[role]]):.1f}" for i in range(3)]

    print(markdown_table(
        ["master", "sends/s (median)", "p50 ms", "p99 ms", "ratio to ASYNC_MASTER", "target",
         "CPU µs a send: master", "slave", "producers"],
        [["ASYNC_MASTER", f"{async_:,.0f}", f"{median(p50['ASYNC_MASTER']):.2f}",
          f"{median(p99['ASYNC_MASTER']):.2f}", "1.00", "", *cpu_cells("ASYNC_MASTER")],
         ["SYNC_MASTER", f"{sync:,.0f}", f"{median(p50['SYNC_MASTER']):.2f}",
          f"{median(p99['SYNC_MASTER']):.2f}", f"{ratio:.2f}",
          f">= {SYNC_TARGET}: {'PASS' if ratio >= SYNC_TARGET else 'MISS'}",
          *cpu_cells("SYNC_MASTER")]]))
    print(f"({args.producers} synchronous producers, {args.size} B bodies, {args.seconds:g} s "
          f"windows, master and slave on this machine; load average {os.getloadavg()[0]:.1f})")
    return {"producers": args.producers, "rates": rates, "p50_ms": p50, "p99_ms": p99,
            "cpu_us_per_send": cpu, "ratio": ratio}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=512, help="CommitLog MB to replicate")
    parser.add_argument("--size", type=int, default=1024, help="message body bytes")
    parser.add_argument("--segment-mb", type=int, default=256, help="CommitLog segment MiB")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", help="where the stores go (default: beside the repository)")
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--quick", action="store_true", help="--mb 64 --repeat 1 --seconds 3 --kills 3")
    parser.add_argument("--only", choices=["replication", "sends", "failover"],
                        help="one part only")
    parser.add_argument("--kills", type=int, default=9, help="failover: masters killed")
    parser.add_argument("--producers", type=int, default=32, help="synchronous producers")
    parser.add_argument("--seconds", type=float, default=5.0, help="each send window")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        mode, root, segment, port_file = args.child
        (serve_raw if mode == "raw" else serve_ha)(root, int(segment), port_file)
        return
    if args.quick:
        args.mb, args.repeat, args.seconds, args.kills = 64, 1, 3.0, 3
    segment = args.segment_mb << 20
    with TempDirs(args.dir) as dirs:
        info = machine_info(dirs.root)
        print_machine_info(info)
        figures: dict[str, object] = {"machine": info}
        if args.only in (None, "sends"):
            figures["sends"] = measure_sends(args, dirs)
        if args.only in (None, "replication"):
            figures.update(measure_replication(args, dirs, segment))
        if args.only in (None, "failover"):
            from _failover import measure_failover
            figures["failover"] = measure_failover(args.kills, dirs)
        if args.json:
            write_json(args.json, figures)


def measure_replication(args: argparse.Namespace, dirs: TempDirs, segment: int
                        ) -> dict[str, object]:
    master = dirs.new("master")
    end = fill(master, args.mb, args.size, segment)
    print(f"master CommitLog: {end / MB:,.0f} MB of {args.size} B messages")
    raw, raw_cpu, ha, dispatched, ha_cpu, append_cpu = [], [], [], [], [], []
    for _ in range(args.repeat):
        seconds, cpu = run_raw(master, segment, end, dirs)
        raw.append(seconds)
        raw_cpu.append(cpu)
        print(f"  raw run: {end / seconds / MB:,.0f} MB/s; CPU seconds of both ends {cpu:.3f}",
              flush=True)
        appended, done, cpu, sending_receiving = run_ha(master, segment, end, dirs)
        ha.append(appended)
        dispatched.append(done)
        ha_cpu.append(cpu)
        append_cpu.append(sending_receiving)
    raw_rate = end / median(raw) / MB
    ha_rate = end / median(ha) / MB
    done_rate = end / median(dispatched) / MB
    ratio = ha_rate / raw_rate
    raw_per_cpu = end / median(raw_cpu) / MB
    ha_per_cpu = end / median(ha_cpu) / MB
    append_per_cpu = end / median(append_cpu) / MB
    print(markdown_table(
        ["path", "MB/s (median)", "ratio to raw", "target", "MB per CPU second",
         "ratio to raw"],
        [["raw loopback copy (recv_into)", f"{raw_rate:,.0f}", "1.00", "",
          f"{raw_per_cpu:,.0f}", "1.00"],
         ["HA: slave appended", f"{ha_rate:,.0f}", f"{ratio:.2f}",
          f">= {TARGET}: {'PASS' if ratio >= TARGET else 'MISS'}", f"{append_per_cpu:,.0f}",
          f"{append_per_cpu / raw_per_cpu:.2f}"],
         ["HA: slave appended and dispatched", f"{done_rate:,.0f}",
          f"{done_rate / raw_rate:.2f}", "", f"{ha_per_cpu:,.0f}",
          f"{ha_per_cpu / raw_per_cpu:.2f}"]]))
    print("(MB per CPU second: raw, both ends; appended, the master and the slave's "
          "receiving thread; appended and dispatched, both processes, every thread)")
    print(f"load average after the run: {os.getloadavg()[0]:.1f} "
          f"({os.cpu_count()} CPUs): wall-clock ratios need a quiet machine")
    return {"bytes": end, "raw_s": raw, "raw_cpu_s": raw_cpu, "ha_s": ha,
            "dispatched_s": dispatched, "ha_cpu_s": ha_cpu, "append_cpu_s": append_cpu,
            "ratio": ratio}


if __name__ == "__main__":
    main()
