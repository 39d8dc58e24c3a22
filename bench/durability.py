#!/usr/bin/env python
"""Durability benchmark: SYNC_FLUSH puts against the disk's own limit, and abnormal-exit
recovery of a ~1 GiB CommitLog against a plain sequential read.

Part 1, SYNC_FLUSH put throughput (1 KiB bodies, topic "bench", tags "t", 8 queues, the
UNIQ_KEY the store adds), for 1, 8, 32 and 128 producer threads, each putting its share of
the messages into a fresh store with put_message (every put waits for the group commit that
makes it durable). Per run: msgs/s, p50/p99 put latency, messages per flush, disk bytes
written per message (/proc/diskstats of the device holding --dir, over the timed window),
and the share of the wall time the flush rounds spent in pwrite, in fdatasync and waiting
for the producers the round before woke (fill).

Reference, in the same run on the same bytes: the disk's limit for N-deep group commit, one
thread that os.pwrite()s the records the store wrote one by one into a posix_fallocate'd file
(as the store preallocates its segments) and calls os.fdatasync() after every N of them (no
hand-off, no lock, no GIL contention); N = the producer count. Its latency columns are per
fdatasync round (first pwrite to fdatasync return: what the first record of a batch waits).

Beside them, for more than one thread: "C threads, no GIL", bench/group_commit_floor.c (built
with the system's cc at start; the row is left out, saying why, where that fails): the same
group commit as the store's (a flush thread, rounds that wait for their riders, fdatasync) on
the same records, with N C producer threads that copy each record under a mutex and wait on
a futex. No Python, no GIL, no store: what threaded producers can get from this machine and
disk at all, against the one-thread loop that hands nothing to another thread.

And "SYNC_FLUSH on tmpfs" (when /dev/shm is a tmpfs): the same puts into a store on tmpfs,
where pwrite is a copy and fdatasync returns at once: the producers' side of the hand-off
alone (their GIL hand-offs, their wake-ups, the put itself). Not a strict bound: with nothing
to wait for, the rounds are small and wake more often per message than on a disk (x128 can
make more on the disk than here).

Also per thread count, to show what each part of the SYNC_FLUSH path changed (--no-variants
skips them): "via mmap+msync", the same puts with commit_log_write_through=False (records
written through the mapping, each group commit msyncs the range: how the store flushed
before), "woken all at once", with GroupCommit.wake_chains = 0 (every producer a flush
covers is woken at once instead of in a chain), and "no wait for riders", with
GroupCommit.fill_max_s = 0 (a round starts as soon as the one before ends, without waiting
for the producers that one woke to ask again).

Targets (medians of --repeat runs, each run's ratio against the reference run beside it):
  SYNC_FLUSH x32 msgs/s >= 0.6 x the loop that fdatasyncs every 32 records;
  disk bytes written per message <= 1.5 x the record size (x32);
  SYNC_FLUSH x1 p99 put latency <= 2 x the p99 of the loop that fdatasyncs every record.

Part 2, recovery: ~1 GiB (--recovery-mib) of 1 KiB-body messages is written into a store with
256 MiB CommitLog files (put_messages, ASYNC_FLUSH) and shut down. Each timed run then makes
it look like an abnormal exit: the abort file is created and the checkpoint's timestamps are
set to 0, so recovery replays every file (magic, sizes, body CRC checked), re-dispatches every
record (ConsumeQueue units are already there and skipped; the IndexFile, newer than the
checkpoint, is dropped and rebuilt); the time of MessageStore.open is measured. Reference: a
plain sequential read (os.readv, 1 MiB buffer) of the same CommitLog files. Both cold (page
cache dropped with `sync; echo 3 > /proc/sys/vm/drop_caches` before each run; needs root) and
warm (files in the page cache). Target: recovery MB/s >= 0.3 x plain read MB/s (cold when
caches can be dropped, else warm).

Every run of part 1 uses a fresh store; the configurations are interleaved (each repeat runs
every thread count, store then loop), so a slow spell of a shared disk hits both sides of a
ratio. The script never asserts on targets: PASS/MISS. The load average (`uptime`) before
and after is printed: other processes using the disk inflate both sides and the disk bytes.
Usage: python bench/durability.py [--quick] [--repeat 3] [--recovery-mib 1024] [--dir DIR]
                                  [--threads 1,8,32,128] [--no-variants] [--json out.json] [-q]
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import struct
import subprocess
import sys
import threading
import time
import warnings
from typing import Any

import _common as C

C.ensure_importable()

from rocketstore import Message, MessageStore, StoreConfig  # noqa: E402
from rocketstore.message import PutMessageStatus  # noqa: E402

TOPIC = "bench"
QUEUES = 8
BODY = 1024
THREADS = (1, 8, 32, 128)
RAM_DIR = "/dev/shm"    # tmpfs: where fdatasync costs nothing
SEGMENT = 256 << 20


# ---- part 1: throughput --------------------------------------------------------------------
class DiskCounter:
    """Bytes written to one block device so far, from /proc/diskstats (None: not found)."""

    def __init__(self, source: str) -> None:
        self.name = os.path.basename(source) if source.startswith("/dev/") else ""
        if self.name and self.read() is None:
            self.name = ""

    def read(self) -> int | None:
        if not self.name:
            return None
        with open("/proc/diskstats") as f:
            for line in f:
                parts = line.split()
                if len(parts) > 9 and parts[2] == self.name:
                    return int(parts[9]) * 512
        return None


def dirtied_bytes() -> int | None:
    """Bytes this process has dirtied in the page cache so far (/proc/self/io write_bytes,
    counted a page or folio at a time when it becomes dirty): what it makes the kernel write
    back, whatever other processes write to the same disk. None where unavailable."""
    try:
        with open("/proc/self/io") as f:
            for line in f:
                if line.startswith("write_bytes:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * q))]


def bodies(n: int) -> list[bytes]:
    pool = os.urandom(BODY + 4096)
    return [pool[(i * 7919) % 4096:(i * 7919) % 4096 + BODY] for i in range(n)]


def put_run(td: C.TempDirs, disk: DiskCounter, threads: int, n: int, *,
            write_through: bool = True, wake_chains: int | None = None,
            fill_max_s: float | None = None, keep_records: bool = True) -> dict[str, Any]:
    """One timed run: n SYNC_FLUSH puts from `threads` threads into a fresh store."""
    d = td.new(f"sync-{threads}")
    store = MessageStore.open(d, StoreConfig(store_path_root_dir=d, flush_disk_type="SYNC_FLUSH",
                                             mapped_file_size_commit_log=SEGMENT,
                                             commit_log_write_through=write_through))
    try:
        warm = store.put_message(Message(TOPIC, b"x" * BODY), 0)   # file created outside
        assert warm.status == PutMessageStatus.PUT_OK
        per = n // threads
        msgs = [[Message(TOPIC, b, tags="t") for b in bodies(per)] for _ in range(threads)]
        group = store.commit_log.flush_service.group   # type: ignore[attr-defined]
        if wake_chains is not None:
            group.wake_chains = wake_chains
        if fill_max_s is not None:
            group.fill_max_s = fill_max_s
        start = threading.Barrier(threads + 1)
        bad: list[int] = []
        latencies: list[list[float]] = [[] for _ in range(threads)]

        def produce(t: int) -> None:
            mine = msgs[t]
            lat = latencies[t]
            put = store.put_message
            clock = time.perf_counter
            start.wait()
            for i, m in enumerate(mine):
                t0 = clock()
                r = put(m, i % QUEUES)
                lat.append(clock() - t0)
                if r.status_code != 0:
                    bad.append(r.status_code)

        workers = [threading.Thread(target=produce, args=(t,)) for t in range(threads)]
        for w in workers:
            w.start()
        time.sleep(0.05)
        flushes0, write0, sync0 = group.flushes, group.write_seconds, group.sync_seconds
        fill0 = group.fill_seconds
        disk0, dirty0 = disk.read(), dirtied_bytes()
        faults0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        with C.Timer() as timer:
            start.wait()
            for w in workers:
                w.join()
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults0
        disk1, dirty1 = disk.read(), dirtied_bytes()
        flushes = group.flushes - flushes0
        write_s = group.write_seconds - write0
        sync_s = group.sync_seconds - sync0
        fill_s = group.fill_seconds - fill0
        if bad:
            raise RuntimeError(f"SYNC_FLUSH x{threads}: {len(bad)} puts failed: {set(bad)}")
        end = store.get_max_phy_offset()
        out: dict[str, Any] = {}
        if keep_records:
            data = store.get_commitlog_data(warm.wrote_bytes)
            out["record_bytes"] = bytes(data[:end - warm.wrote_bytes]) if data is not None \
                else b""
            del data
            out["sizes"] = [m.store_size for m in store.scan(warm.wrote_bytes)]
    finally:
        store.shutdown()
        td.remove(d)
    lat = sorted(x for t in latencies for x in t)
    total = per * threads
    out.update({"seconds": timer.wall, "n": total, "bytes": end - warm.wrote_bytes,
                "flushes": flushes, "write_s": write_s, "sync_s": sync_s, "fill_s": fill_s,
                "faults": faults,
                "p50_ms": percentile(lat, 0.50) * 1e3, "p99_ms": percentile(lat, 0.99) * 1e3,
                "disk_bytes": None if disk0 is None or disk1 is None else disk1 - disk0,
                "dirtied": None if dirty0 is None or dirty1 is None else dirty1 - dirty0})
    return out


def loop_run(td: C.TempDirs, disk: DiskCounter, records: bytes, sizes: list[int],
             every: int) -> dict[str, Any]:
    """One thread: os.pwrite each record at its offset into a posix_fallocate'd file, and
    os.fdatasync after every `every` records (and after the last)."""
    d = td.new(f"loop-{every}")
    path = os.path.join(d, "plain")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    rounds: list[float] = []
    try:
        os.posix_fallocate(fd, 0, SEGMENT)
        os.fsync(fd)
        dfd = os.open(d, os.O_RDONLY)
        os.fsync(dfd)
        os.close(dfd)
        view = memoryview(records)
        pwrite, fdatasync, clock = os.pwrite, os.fdatasync, time.perf_counter
        last = len(sizes) - 1
        time.sleep(0.05)
        disk0, dirty0 = disk.read(), dirtied_bytes()
        faults0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        with C.Timer() as timer:
            pos = 0
            began = clock()
            for i, size in enumerate(sizes):
                pwrite(fd, view[pos:pos + size], pos)
                pos += size
                if (i + 1) % every == 0 or i == last:
                    fdatasync(fd)
                    now = clock()
                    rounds.append(now - began)
                    began = now
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults0
        disk1, dirty1 = disk.read(), dirtied_bytes()
    finally:
        os.close(fd)
        td.remove(d)
    rounds.sort()
    return {"seconds": timer.wall, "n": len(sizes), "bytes": len(records),
            "flushes": len(rounds), "faults": faults,
            "p50_ms": percentile(rounds, 0.50) * 1e3, "p99_ms": percentile(rounds, 0.99) * 1e3,
            "disk_bytes": None if disk0 is None or disk1 is None else disk1 - disk0,
            "dirtied": None if dirty0 is None or dirty1 is None else dirty1 - dirty0}


FLOOR_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "group_commit_floor.c")


def build_floor(td: C.TempDirs) -> tuple[str | None, str]:
    """Compile group_commit_floor.c: (path of the binary, "") or (None, why not)."""
    cc = shutil.which(os.environ.get("CC", "cc"))
    if cc is None:
        return None, "no C compiler (cc) on PATH"
    out = os.path.join(td.new("floor-bin"), "group_commit_floor")
    r = subprocess.run([cc, "-O2", "-pthread", "-o", out, FLOOR_SOURCE],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None, f"cc failed: {r.stderr.strip()[:200]}"
    return out, ""


def handoff_us(binary: str) -> tuple[float, float]:
    """One-way thread hand-off through a futex in us (group_commit_floor.c handoff): the two
    threads where the scheduler puts them, and pinned to one CPU."""
    out = subprocess.run([binary, "handoff", "100000"], capture_output=True, text=True,
                         timeout=120, check=True).stdout.split()
    return float(out[0]), float(out[1])


def floor_run(td: C.TempDirs, disk: DiskCounter, binary: str, records: bytes,
              sizes: list[int], threads: int) -> dict[str, Any]:
    """One run of group_commit_floor.c on the records: `threads` C producer threads."""
    d = td.new(f"floor-{threads}")
    rec_path, size_path = os.path.join(d, "records"), os.path.join(d, "sizes")
    with open(rec_path, "wb") as f:
        f.write(records)
    with open(size_path, "wb") as f:
        f.write(struct.pack(f"={len(sizes)}I", *sizes))
    proc = subprocess.Popen([binary, rec_path, size_path, os.path.join(d, "out"),
                             str(threads)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdin is not None and proc.stdout is not None
        if proc.stdout.readline().strip() != "ready":
            raise RuntimeError(f"group_commit_floor: {proc.communicate(timeout=60)[1]}")
        time.sleep(0.05)
        disk0 = disk.read()
        out, err = proc.communicate("go\n", timeout=600)
        disk1 = disk.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        td.remove(d)
    if proc.returncode != 0:
        raise RuntimeError(f"group_commit_floor exited {proc.returncode}: {err.strip()}")
    seconds, flushes, n = out.split()
    nan = float("nan")
    return {"seconds": float(seconds), "n": int(n), "bytes": len(records),
            "flushes": int(flushes), "faults": 0, "p50_ms": nan, "p99_ms": nan,
            "disk_bytes": None if disk0 is None or disk1 is None else disk1 - disk0,
            "dirtied": None}


def load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def summarize(case: str, kind: str, threads: int, runs: list[dict[str, Any]]) -> dict[str, Any]:
    med = C.median
    out: dict[str, Any] = {
        "case": case, "kind": kind, "threads": threads, "n": runs[0]["n"],
        "samples": [r["seconds"] for r in runs],
        "msgs_per_s": med([r["n"] / r["seconds"] for r in runs]),
        "p50_ms": med([r["p50_ms"] for r in runs]), "p99_ms": med([r["p99_ms"] for r in runs]),
        "msgs_per_flush": med([r["n"] / r["flushes"] for r in runs if r["flushes"]] or [0.0]),
        "record_size": med([r["bytes"] / r["n"] for r in runs]),
        "faults_per_msg": med([r["faults"] / r["n"] for r in runs]),
    }
    disk = [r["disk_bytes"] / r["n"] for r in runs if r["disk_bytes"] is not None]
    out["disk_per_msg"] = med(disk) if disk else None
    out["disk_per_msg_min"] = min(disk) if disk else None
    dirtied = [r["dirtied"] / r["n"] for r in runs if r.get("dirtied") is not None]
    out["dirtied_per_msg"] = med(dirtied) if dirtied else None
    if kind not in ("loop", "cfloor"):
        out["write_share"] = med([r["write_s"] / r["seconds"] for r in runs])
        out["sync_share"] = med([r["sync_s"] / r["seconds"] for r in runs])
        out["fill_share"] = med([r.get("fill_s", 0.0) / r["seconds"] for r in runs])
        out["ms_per_flush"] = med([(r["write_s"] + r["sync_s"]) * 1e3 / r["flushes"]
                                   for r in runs if r["flushes"]] or [0.0])
    return out


def bench_throughput(td: C.TempDirs, disk: DiskCounter, args: argparse.Namespace
                     ) -> dict[str, Any]:
    """Each repeat runs every thread count: the store, then the loop on the store's records
    (then the store through its mapping): interleaved and paired."""
    runs: dict[tuple[str, int], list[dict[str, Any]]] = {}
    loads = [load_average()]
    ram = None
    if os.path.isdir(RAM_DIR) and C.fs_type(RAM_DIR) == "tmpfs":
        with warnings.catch_warnings():     # on tmpfs on purpose
            warnings.simplefilter("ignore", RuntimeWarning)
            ram = C.TempDirs(RAM_DIR, prefix="rocketstore-durability-")
    for i in range(args.repeat):
        for threads in args.threads:
            n = args.n_sync[threads]
            args.log(f"run {i + 1}/{args.repeat} x{threads}: SYNC_FLUSH ({n:,} puts)")
            s_run = put_run(td, disk, threads, n)
            records, sizes = s_run.pop("record_bytes"), s_run.pop("sizes")
            runs.setdefault(("sync", threads), []).append(s_run)
            args.log(f"run {i + 1}/{args.repeat} x{threads}: pwrite + fdatasync every {threads}")
            runs.setdefault(("loop", threads), []).append(
                loop_run(td, disk, records, sizes, threads))
            if args.floor and threads > 1:
                args.log(f"run {i + 1}/{args.repeat} x{threads}: C threads, no GIL")
                runs.setdefault(("cfloor", threads), []).append(
                    floor_run(td, disk, args.floor, records, sizes, threads))
            if ram is not None and threads > 1:
                args.log(f"run {i + 1}/{args.repeat} x{threads}: SYNC_FLUSH on tmpfs")
                runs.setdefault(("ram", threads), []).append(
                    put_run(ram, DiskCounter(""), threads, n, keep_records=False))
            del records, sizes
            if args.variants:
                args.log(f"run {i + 1}/{args.repeat} x{threads}: SYNC_FLUSH via mmap+msync")
                runs.setdefault(("mmap", threads), []).append(
                    put_run(td, disk, threads, n, write_through=False, keep_records=False))
                if threads > 1:
                    args.log(f"run {i + 1}/{args.repeat} x{threads}: SYNC_FLUSH, woken all "
                             "at once")
                    runs.setdefault(("wakeall", threads), []).append(
                        put_run(td, disk, threads, n, wake_chains=0, keep_records=False))
                    args.log(f"run {i + 1}/{args.repeat} x{threads}: SYNC_FLUSH, rounds "
                             "not waiting for riders")
                    runs.setdefault(("nofill", threads), []).append(
                        put_run(td, disk, threads, n, fill_max_s=0.0, keep_records=False))
        loads.append(load_average())
    if ram is not None:
        ram.cleanup()
    rows = []
    for threads in args.threads:
        sync, loop = runs[("sync", threads)], runs[("loop", threads)]
        s_row = summarize(f"SYNC_FLUSH put_message x{threads}", "sync", threads, sync)
        l_row = summarize(f"pwrite + fdatasync every {threads} (1 thread)", "loop", threads,
                          loop)
        # ratios against the loop: medians of the per-repeat (paired) ratios
        s_row["vs_loop"] = C.median([s["n"] / s["seconds"] / (o["n"] / o["seconds"])
                                     for s, o in zip(sync, loop, strict=True)])
        s_row["p99_vs_loop"] = C.median([s["p99_ms"] / o["p99_ms"]
                                         for s, o in zip(sync, loop, strict=True)])
        rows += [s_row, l_row]
        for kind, label in (("cfloor", "C threads, no GIL (group_commit_floor.c)"),
                            ("ram", "SYNC_FLUSH on tmpfs, a flush that costs nothing"),
                            ("mmap", "SYNC_FLUSH via mmap+msync"),
                            ("wakeall", "SYNC_FLUSH woken all at once"),
                            ("nofill", "SYNC_FLUSH, no wait for riders")):
            if (kind, threads) not in runs:
                continue
            vr = runs[(kind, threads)]
            v_row = summarize(f"{label} x{threads}", kind, threads, vr)
            v_row["vs_loop"] = C.median([s["n"] / s["seconds"] / (o["n"] / o["seconds"])
                                         for s, o in zip(vr, loop, strict=True)])
            v_row["p99_vs_loop"] = None if kind in ("cfloor", "ram") else C.median(
                [s["p99_ms"] / o["p99_ms"] for s, o in zip(vr, loop, strict=True)])
            rows.append(v_row)
    return {"rows": rows, "loads": loads, "runs": {f"{k}-{t}": v for (k, t), v in runs.items()}}


# ---- part 2: recovery ----------------------------------------------------------------------
def drop_caches() -> bool:
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def plain_read(paths: list[str]) -> tuple[float, int]:
    buf = bytearray(C.MiB)
    total = 0
    with C.Timer() as timer:
        for p in paths:
            fd = os.open(p, os.O_RDONLY)
            try:
                while True:
                    n = os.readv(fd, [buf])
                    if n <= 0:
                        break
                    total += n
            finally:
                os.close(fd)
    return timer.wall, total


def make_abnormal(root: str) -> None:
    """What a kill leaves, made worst-case: the abort file, and a checkpoint whose timestamps
    are 0 so the replay starts at the first file."""
    with open(os.path.join(root, "abort"), "w"):
        pass
    with open(os.path.join(root, "checkpoint"), "r+b") as f:
        f.write(struct.pack(">qqq", 0, 0, 0))


def bench_recovery(td: C.TempDirs, args: argparse.Namespace) -> dict[str, Any]:
    root = td.new("recovery")
    cfg = dict(store_path_root_dir=root, mapped_file_size_commit_log=args.recovery_file_mib << 20,
               flush_disk_type="ASYNC_FLUSH")
    target = args.recovery_mib << 20
    args.log(f"recovery: writing ~{args.recovery_mib} MiB")
    store = MessageStore.open(root, StoreConfig(**cfg))
    try:
        batch = [Message(TOPIC, b, tags="t") for b in bodies(1000)]
        n = 0
        while store.get_max_phy_offset() < target:
            for m in batch:
                m.properties.pop("UNIQ_KEY", None)   # a fresh UNIQ_KEY (index key) each time
            r = store.put_messages(batch, [i % QUEUES for i in range(len(batch))])
            if r.status != PutMessageStatus.PUT_OK:
                raise RuntimeError(f"put_messages: {r.status.name}")
            n += len(batch)
        store.wait_dispatched(600)
        log_bytes = store.get_max_phy_offset()
    finally:
        store.shutdown()
    paths = sorted(os.path.join(root, "commitlog", p) for p in os.listdir(
        os.path.join(root, "commitlog")) if p.isdigit())
    file_bytes = sum(os.path.getsize(p) for p in paths)
    can_drop = drop_caches()
    modes = ["cold", "warm"] if can_drop else ["warm"]
    out: dict[str, Any] = {"messages": n, "log_bytes": log_bytes, "file_bytes": file_bytes,
                           "files": len(paths), "cold_possible": can_drop, "modes": {}}
    for mode in modes:
        rec, rd, reports, progress_calls = [], [], [], []
        for i in range(args.repeat):
            # plain read of the same files
            if mode == "cold":
                drop_caches()
            else:
                plain_read(paths)       # make sure they are cached
            secs, total = plain_read(paths)
            rd.append(secs)
            # recovery
            make_abnormal(root)
            if mode == "cold":
                drop_caches()
            else:
                plain_read(paths)
            calls: list[tuple[int, int]] = []
            args.log(f"recovery ({mode}) run {i + 1}/{args.repeat}")
            with C.Timer() as timer:
                store = MessageStore.open(root, StoreConfig(**cfg), progress=lambda d, t,
                                          calls=calls: calls.append((d, t)))
            rep = store.recovery
            store.shutdown()
            if not rep.abnormal or rep.records != n or rep.start_offset != 0:
                raise RuntimeError(f"unexpected recovery: {rep}")
            rec.append(timer.wall)
            reports.append(rep.as_dict())
            progress_calls.append(len(calls))
        med_rec, med_rd = C.median(rec), C.median(rd)
        out["modes"][mode] = {
            "recovery_samples": rec, "read_samples": rd,
            "recovery_s": med_rec, "read_s": med_rd,
            "recovery_mb_per_s": log_bytes / C.MB / med_rec,
            "read_mb_per_s": file_bytes / C.MB / med_rd,
            "report_duration_s": C.median([r["duration_s"] for r in reports]),
            "reports": reports, "progress_calls": progress_calls,
        }
        m = out["modes"][mode]
        m["ratio"] = m["recovery_mb_per_s"] / m["read_mb_per_s"]
    td.remove(root)
    out["target_mode"] = "cold" if can_drop else "warm"
    out["target_ratio"] = out["modes"][out["target_mode"]]["ratio"]
    return out


# ---- output --------------------------------------------------------------------------------
def verdict(ratio: float, goal: float, at_most: bool = False) -> str:
    ok = ratio <= goal if at_most else ratio >= goal
    return f"{ratio:.2f} {'PASS' if ok else 'MISS'} ({'<=' if at_most else '>='} {goal})"


def print_report(info: dict[str, Any], args: argparse.Namespace, tp: dict[str, Any] | None,
                 rc: dict[str, Any] | None, elapsed: float) -> None:
    print("# rocketstore durability benchmark (bench/durability.py)\n")
    C.print_machine_info(info)
    print(f"\nMedians of {args.repeat} runs, wall clock; 1 KiB bodies; "
          f"{'--quick; ' if args.quick else ''}total {elapsed:.0f} s.")
    if tp is not None:
        print(f"Load average (1/5/15 min) before and after each repeat: "
              f"{' | '.join(tp['loads'])}.\n")
        rows = []
        for r in tp["rows"]:
            disk = r["disk_per_msg"]
            rows.append([
                r["case"], C.fmt_int(r["n"]), C.fmt_int(r["msgs_per_s"]),
                "n/a" if r["p50_ms"] != r["p50_ms"] else f"{r['p50_ms']:.3f}",
                "n/a" if r["p99_ms"] != r["p99_ms"] else f"{r['p99_ms']:.3f}",
                f"{r['msgs_per_flush']:.1f}",
                "" if r.get("ms_per_flush") is None else f"{r['ms_per_flush']:.3f}",
                "" if r.get("write_share") is None else
                f"{100 * r['write_share']:.0f}% / {100 * r['sync_share']:.0f}%"
                f" / {100 * r['fill_share']:.0f}%",
                f"{r['record_size']:.0f}",
                "n/a" if disk is None else f"{disk:,.0f} ({disk / r['record_size']:.2f}x)",
                "n/a" if r["dirtied_per_msg"] is None else
                f"{r['dirtied_per_msg']:,.0f} ({r['dirtied_per_msg'] / r['record_size']:.2f}x)",
                f"{r['faults_per_msg']:.2f}",
                C.fmt_ratio(r.get("vs_loop")), C.fmt_ratio(r.get("p99_vs_loop"))])
        print(C.markdown_table(
            ["case", "msgs", "msgs/s", "p50 ms", "p99 ms", "msgs/flush", "ms/flush",
             "in write / sync / fill", "record B", "disk B/msg", "dirtied B/msg", "faults/msg",
             "vs loop", "p99 vs loop"], rows, "lrrrrrrrrrrrrr"))
        by = {(r["kind"], r["threads"]): r for r in tp["rows"]}
        print()
        if ("sync", 32) in by:
            s32 = by[("sync", 32)]
            print(f"Target SYNC_FLUSH x32 / pwrite+fdatasync every 32: "
                  f"{verdict(s32['vs_loop'], 0.6)}")
            if s32["disk_per_msg"] is not None:
                print(f"Target disk bytes per message x32 / record size: "
                      f"{verdict(s32['disk_per_msg'] / s32['record_size'], 1.5, True)}"
                      f" (/proc/diskstats: every process's writes to the device; lowest "
                      f"repeat {s32['disk_per_msg_min'] / s32['record_size']:.2f})")
            if s32["dirtied_per_msg"] is not None:
                print(f"  the store's own page-cache bytes dirtied per message x32 "
                      f"(/proc/self/io, no metadata, no other process): "
                      f"{s32['dirtied_per_msg'] / s32['record_size']:.2f} x the record size")
        if ("cfloor", 32) in by:
            print(f"  reference, C threads (no GIL) x32 / the same loop: "
                  f"{by[('cfloor', 32)]['vs_loop']:.2f}; SYNC_FLUSH x32 / C threads x32: "
                  f"{by[('sync', 32)]['msgs_per_s'] / by[('cfloor', 32)]['msgs_per_s']:.2f}")
        elif args.floor_missing:
            print(f"  (no C-threads reference: {args.floor_missing})")
        if ("ram", 32) in by:
            print(f"  the producers' side alone: SYNC_FLUSH x32 with a flush that costs nothing "
                  f"(the store on tmpfs) / the same loop: {by[('ram', 32)]['vs_loop']:.2f}")
        if tp.get("handoff_us"):
            h = tp["handoff_us"]
            print(f"  one thread waking another through a futex (group_commit_floor.c handoff): "
                  f"{h['scheduler_placed']:.1f} us placed by the scheduler, "
                  f"{h['one_cpu']:.1f} us on one CPU")
        if ("sync", 1) in by:
            print(f"Target SYNC_FLUSH x1 p99 / p99 of pwrite+fdatasync every record: "
                  f"{verdict(by[('sync', 1)]['p99_vs_loop'], 2.0, True)}")
    if rc is None:
        return
    print(f"\nRecovery of {rc['log_bytes'] / C.MiB:,.0f} MiB of CommitLog "
          f"({rc['messages']:,} messages, {rc['files']} files of "
          f"{args.recovery_file_mib} MiB) after an abnormal exit (abort file, checkpoint 0: "
          "full replay with CRC, re-dispatch, IndexFile rebuilt):\n")
    rows = []
    for mode, m in rc["modes"].items():
        rows.append([mode, f"{m['recovery_s']:.2f}", f"{m['report_duration_s']:.2f}",
                     C.fmt_rate(m["recovery_mb_per_s"]), f"{m['read_s']:.2f}",
                     C.fmt_rate(m["read_mb_per_s"]), f"{m['ratio']:.2f}"])
    print(C.markdown_table(["cache", "MessageStore.open s", "report duration_s",
                            "recovery MB/s", "plain read s", "plain read MB/s",
                            "recovery / read"], rows, "lrrrrrr"))
    if not rc["cold_possible"]:
        print("\n(page cache could not be dropped: warm only)")
    print(f"\nTarget recovery / plain read ({rc['target_mode']}): "
          f"{verdict(rc['target_ratio'], 0.3)}")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="fewer puts, 256 MiB of CommitLog in 64 MiB files, 1 run each")
    p.add_argument("--repeat", type=int, default=None, help="runs per number (default 3)")
    p.add_argument("--recovery-mib", type=int, default=None,
                   help="CommitLog MiB written for the recovery test (default 1024; 0 skips)")
    p.add_argument("--recovery-file-mib", type=int, default=None,
                   help="CommitLog file size for the recovery test (default 256)")
    p.add_argument("--dir", default=None, help="where temp stores go (default: the repo's "
                   "parent directory; never tmpfs)")
    p.add_argument("--threads", default="1,8,32,128",
                   help="producer thread counts, comma-separated (default 1,8,32,128; 0 "
                   "skips the throughput part)")
    p.add_argument("--no-variants", dest="variants", action="store_false",
                   help="skip the 'via mmap+msync' and 'woken all at once' rows")
    p.add_argument("--json", default=None, metavar="PATH", help="also write results as JSON")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    args = p.parse_args(argv)
    scale = 4 if args.quick else 1
    args.repeat = args.repeat or (1 if args.quick else 3)
    args.recovery_mib = (256 if args.quick else 1024) if args.recovery_mib is None \
        else args.recovery_mib
    args.recovery_file_mib = args.recovery_file_mib or (64 if args.quick else 256)
    args.threads = tuple(int(t) for t in args.threads.split(",") if int(t) > 0)
    # puts per run (x1 is bound by one fdatasync per put); at least 20 per thread
    args.n_sync = {t: max(20 * t, {1: 4000, 8: 16000, 32: 48000}.get(t, 96000) // scale)
                   for t in args.threads}
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    args.log = (lambda *a: None) if args.quiet else (
        lambda msg: print(f"[{time.perf_counter() - started:6.1f}s] {msg}", file=sys.stderr,
                          flush=True))
    with C.TempDirs(args.dir, prefix="rocketstore-durability-") as td:
        disk = ""
        try:
            disk = subprocess.run(["findmnt", "-no", "SOURCE", "--target", td.base],
                                  capture_output=True, text=True).stdout.strip()
        except OSError:
            pass
        info = C.machine_info(td.base, {"bench_device": disk} if disk else None)
        args.floor, args.floor_missing = build_floor(td) if args.threads else (None, "")
        info_handoff = handoff_us(args.floor) if args.floor else None
        tp = bench_throughput(td, DiskCounter(disk), args) if args.threads else None
        rc = bench_recovery(td, args) if args.recovery_mib > 0 else None
    elapsed = time.perf_counter() - started
    if tp is not None and info_handoff is not None:
        tp["handoff_us"] = {"scheduler_placed": info_handoff[0], "one_cpu": info_handoff[1]}
    print_report(info, args, tp, rc, elapsed)
    if args.json:
        C.write_json(args.json, {"machine": info, "args": {k: v for k, v in vars(args).items()
                                                           if k not in ("log", "floor")},
                                 "throughput": tp, "recovery": rc, "elapsed_s": elapsed})
    return 0


if __name__ == "__main__":
    sys.exit(main())
