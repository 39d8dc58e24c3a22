"""Replication throughput: how fast a slave appends its master's CommitLog (MB/s), against a
raw loopback socket copy of the same bytes in the same run (issue 27: replication >= 0.5 of
the raw copy).

A master store is filled first (--mb of messages of --size bytes, 256 MiB segments by
default). Then, alternating --repeat times:
- raw: a child process sends the master's CommitLog from its mapped segments (32 KiB
  `sendall`s of memoryviews) to this process, which receives it with `recv_into` into one
  buffer and keeps nothing: the cost of moving the bytes through loopback;
- HA: a child process runs the master's HAService (on the event loop the broker uses) over
  the same store; this process runs an HAClient into an empty SLAVE store and the clock stops
  when the slave's CommitLog end reaches the master's (its dispatch is timed apart: the
  ConsumeQueues and IndexFiles built from what arrived).
Beside wall-clock rates it prints MB per CPU second of both ends (every thread: the slave's
dispatch included), which a busy machine disturbs less.

    python bench/ha.py [--mb 512] [--size 1024] [--repeat 3] [--json ha.json]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
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


def run_ha(root: str, segment: int, end: int, dirs: TempDirs) -> tuple[float, float, float]:
    """(wall seconds to append, to append and dispatch, CPU seconds of both ends, the
    slave's dispatch included)."""
    proc, port, port_file = child("ha", root, segment, dirs)
    slave_root = dirs.new("slave")
    try:
        async def follow() -> tuple[float, float, float]:
            slave = MessageStore.open(slave_root, config(slave_root, segment, broker_role="SLAVE"))
            client = HAClient(slave, f"127.0.0.1:{port}")
            try:
                t0 = time.perf_counter()
                cpu0 = time.process_time()
                await client.start()
                while slave.get_replica_offset() < end:
                    await asyncio.sleep(0.001)
                appended = time.perf_counter() - t0
                await client.stop()
                await asyncio.get_running_loop().run_in_executor(None, slave.wait_dispatched, 600)
                return appended, time.perf_counter() - t0, time.process_time() - cpu0
            finally:
                await client.stop()
                slave.shutdown()

        loop = loop_factory()()
        try:
            appended, done, cpu = loop.run_until_complete(follow())
        finally:
            loop.close()
        proc.terminate()
        proc.wait(30)
        master_cpu = child_cpu(port_file)
        print(f"  HA run: CPU seconds master {master_cpu:.3f}, slave {cpu:.3f} "
              f"(its dispatch threads included)")
        return appended, done, cpu + master_cpu
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        dirs.remove(slave_root)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=512, help="CommitLog MB to replicate")
    parser.add_argument("--size", type=int, default=1024, help="message body bytes")
    parser.add_argument("--segment-mb", type=int, default=256, help="CommitLog segment MiB")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", help="where the stores go (default: beside the repository)")
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--quick", action="store_true", help="--mb 64 --repeat 1")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        mode, root, segment, port_file = args.child
        (serve_raw if mode == "raw" else serve_ha)(root, int(segment), port_file)
        return
    if args.quick:
        args.mb, args.repeat = 64, 1
    segment = args.segment_mb << 20
    with TempDirs(args.dir) as dirs:
        info = machine_info(dirs.root)
        print_machine_info(info)
        master = dirs.new("master")
        end = fill(master, args.mb, args.size, segment)
        print(f"master CommitLog: {end / MB:,.0f} MB of {args.size} B messages")
        raw, raw_cpu, ha, dispatched, ha_cpu = [], [], [], [], []
        for _ in range(args.repeat):
            seconds, cpu = run_raw(master, segment, end, dirs)
            raw.append(seconds)
            raw_cpu.append(cpu)
            appended, done, cpu = run_ha(master, segment, end, dirs)
            ha.append(appended)
            dispatched.append(done)
            ha_cpu.append(cpu)
        raw_rate = end / median(raw) / MB
        ha_rate = end / median(ha) / MB
        done_rate = end / median(dispatched) / MB
        ratio = ha_rate / raw_rate
        raw_per_cpu = end / median(raw_cpu) / MB
        ha_per_cpu = end / median(ha_cpu) / MB
        print(markdown_table(
            ["path", "MB/s (median)", "ratio to raw", "target", "MB per CPU second",
             "ratio to raw"],
            [["raw loopback copy (recv_into)", f"{raw_rate:,.0f}", "1.00", "",
              f"{raw_per_cpu:,.0f}", "1.00"],
             ["HA: slave appended", f"{ha_rate:,.0f}", f"{ratio:.2f}",
              f">= {TARGET}: {'PASS' if ratio >= TARGET else 'MISS'}", "", ""],
             ["HA: slave appended and dispatched", f"{done_rate:,.0f}",
              f"{done_rate / raw_rate:.2f}", "", f"{ha_per_cpu:,.0f}",
              f"{ha_per_cpu / raw_per_cpu:.2f}"]]))
        print(f"load average after the run: {os.getloadavg()[0]:.1f} "
              f"({os.cpu_count()} CPUs): wall-clock ratios need a quiet machine")
        if args.json:
            write_json(args.json, {"machine": info, "bytes": end, "raw_s": raw,
                                   "raw_cpu_s": raw_cpu, "ha_s": ha,
                                   "dispatched_s": dispatched, "ha_cpu_s": ha_cpu,
                                   "ratio": ratio})


if __name__ == "__main__":
    main()
