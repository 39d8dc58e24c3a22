#!/usr/bin/env python
"""What one durable flush costs on this disk, by method: the measurements behind the
SYNC_FLUSH write path (bench/README.md, "SYNC_FLUSH: what cost what").

One thread writes the same records (--record bytes each, 1168 = a 1 KiB-body message of the
durability benchmark) one after the other into a --file-mib file and makes every N of them
durable (N from --every, default 1 and 32), by each method:

  pwrite + fdatasync               the store's SYNC_FLUSH path (write-through CommitLog files)
  pwrite + fdatasync, zeroed file  the file written with zeros (and fsynced) first instead of
                                   posix_fallocate'd: its blocks are already "written", so no
                                   unwritten-extent conversion (an inode write) per flush
  pwrite + sync_file_range + fdatasync
  pwrite + sync_file_range only    NOT durable (no cache flush, no metadata): what the
                                   device's cache flush and the metadata cost, by difference
  mmap copy + msync                records copied into a shared mapping, msync of the range
                                   (how the store flushed before)
  mmap copy + fdatasync
  mmap copy + msync, zeroed file   as above on a file whose page cache holds large folios
                                   (written with pwrite first): a write fault dirties a whole
                                   folio, and msync writes back whole folios

Columns: records/s; per flush p50/p99 (ms); disk bytes written per record over record size
(/proc/diskstats of the file's device; the minimum of the repeats, since other processes'
writes only add); write requests and device cache flushes per flush (same source); minor page
faults per flush (write-protect faults after each msync, first-touch faults); with
--folios (root, Linux /proc/kpageflags) the sizes of the page-cache folios the mapping rows
left. Every combination runs --repeat times, interleaved. The load average is printed: on a
shared machine other processes' writes inflate every row.

Usage: python bench/flush_costs.py [--every 1,32] [--records 6400] [--repeat 3] [--dir DIR]
                                   [--folios] [--json out.json]
"""
from __future__ import annotations

import argparse
import collections
import ctypes
import mmap
import os
import resource
import struct
import subprocess
import sys
import time
from typing import Any

import _common as C

SFR_WAIT_BEFORE, SFR_WRITE, SFR_WAIT_AFTER = 1, 2, 4
PAGE = mmap.PAGESIZE
MADV_POPULATE_WRITE = 23

METHODS = {
    # name: (file preparation, how records are written, how a flush is made)
    "pwrite + fdatasync": ("falloc", "pwrite", "fdatasync"),
    "pwrite + fdatasync, zeroed file": ("zeroed", "pwrite", "fdatasync"),
    "pwrite + sync_file_range + fdatasync": ("falloc", "pwrite", "sfr+fdatasync"),
    "pwrite + sync_file_range only (not durable)": ("falloc", "pwrite", "sfr"),
    "mmap copy + msync": ("falloc", "mmap", "msync"),
    "mmap copy + fdatasync": ("falloc", "mmap", "fdatasync"),
    "mmap copy + msync, zeroed file": ("zeroed", "mmap", "msync"),
}


def _sync_file_range():
    libc = ctypes.CDLL(None, use_errno=True)
    fn = libc.sync_file_range
    fn.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    return fn


class Disk:
    """Sectors written, write requests and cache flushes of one device (/proc/diskstats)."""

    def __init__(self, path: str) -> None:
        source = subprocess.run(["findmnt", "-no", "SOURCE", "--target", path],
                                capture_output=True, text=True).stdout.strip()
        self.name = os.path.basename(source) if source.startswith("/dev/") else ""

    def read(self) -> tuple[int, int, int] | None:
        if not self.name:
            return None
        with open("/proc/diskstats") as f:
            for line in f:
                p = line.split()
                if len(p) > 9 and p[2] == self.name:
                    return int(p[9]) * 512, int(p[7]), int(p[18]) if len(p) > 18 else 0
        return None


def folio_sizes(path: str, length: int) -> dict[int, int]:
    """Page-cache folio sizes (in pages: count) over the file's first `length` bytes, from
    /proc/self/pagemap and /proc/kpageflags (root only; empty when unreadable)."""
    import numpy as np
    hist: collections.Counter[int] = collections.Counter()
    npages = length // PAGE
    if npages == 0:
        return {}
    fd = os.open(path, os.O_RDONLY)
    try:
        mm = mmap.mmap(fd, npages * PAGE, prot=mmap.PROT_READ)
    finally:
        os.close(fd)
    try:
        arr = np.frombuffer(mm, dtype=np.uint8)
        int(arr[::PAGE].sum())              # map every page (all are in the page cache)
        with open("/proc/self/pagemap", "rb") as pm, open("/proc/kpageflags", "rb") as kf:
            pm.seek(arr.ctypes.data // PAGE * 8)
            entries = struct.unpack(f"{npages}Q", pm.read(8 * npages))
            run = 0
            for e in entries:
                if not e >> 63:
                    continue
                kf.seek((e & ((1 << 55) - 1)) * 8)
                flags = struct.unpack("Q", kf.read(8))[0]
                if flags & (1 << 16):       # a tail page: same folio as the one before
                    run += 1
                    continue
                if run:
                    hist[run] += 1
                run = 1
            if run:
                hist[run] += 1
        del arr
    except OSError:
        return {}
    finally:
        mm.close()
    return dict(sorted(hist.items()))


def prepare(path: str, how: str, size: int) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    if how == "zeroed":
        zeros = bytes(1 << 20)
        for pos in range(0, size, 1 << 20):
            os.pwrite(fd, zeros, pos)
    else:
        os.posix_fallocate(fd, 0, size)
    os.fsync(fd)
    dfd = os.open(os.path.dirname(path), os.O_RDONLY)
    os.fsync(dfd)
    os.close(dfd)
    return fd


def run_once(d: str, disk: Disk, method: str, every: int, records: int, record: int,
             size: int, folios: bool) -> dict[str, Any]:
    prep, write, flush = METHODS[method]
    path = os.path.join(d, "probe")
    fd = prepare(path, prep, size)
    data = os.urandom(record)
    sfr = _sync_file_range()
    mm = mmap.mmap(fd, size) if write == "mmap" else None
    rounds: list[float] = []
    try:
        time.sleep(0.05)
        ru0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        d0 = disk.read()
        t0 = time.perf_counter()
        pos = flushed = 0
        done = 0
        while done < records:
            began = time.perf_counter()
            for _ in range(min(every, records - done)):
                if mm is not None:
                    mm[pos:pos + record] = data
                else:
                    os.pwrite(fd, data, pos)
                pos += record
                done += 1
            start = flushed - flushed % PAGE
            if flush == "fdatasync":
                os.fdatasync(fd)
            elif flush == "msync":
                assert mm is not None
                mm.flush(start, pos - start)
            else:
                if sfr(fd, start, pos - start, SFR_WAIT_BEFORE | SFR_WRITE | SFR_WAIT_AFTER):
                    raise OSError(ctypes.get_errno(), "sync_file_range failed")
                if flush == "sfr+fdatasync":
                    os.fdatasync(fd)
            flushed = pos
            rounds.append(time.perf_counter() - began)
        wall = time.perf_counter() - t0
        d1 = disk.read()
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - ru0
        sizes = folio_sizes(path, pos - pos % PAGE) if folios and mm is not None else {}
    finally:
        if mm is not None:
            mm.close()
        os.close(fd)
        os.remove(path)
    rounds.sort()
    out = {"rate": records / wall, "p50_ms": rounds[len(rounds) // 2] * 1e3,
           "p99_ms": rounds[min(len(rounds) - 1, int(len(rounds) * 0.99))] * 1e3,
           "faults_per_flush": faults / len(rounds), "folios": sizes}
    if d0 is not None and d1 is not None:
        out["disk_per_record"] = (d1[0] - d0[0]) / records / record
        out["writes_per_flush"] = (d1[1] - d0[1]) / len(rounds)
        out["cache_flushes_per_flush"] = (d1[2] - d0[2]) / len(rounds)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--every", default="1,32", help="records per flush, comma-separated")
    p.add_argument("--records", type=int, default=6400, help="records per run")
    p.add_argument("--record", type=int, default=1168, help="bytes per record")
    p.add_argument("--file-mib", type=int, default=64)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--methods", default=None, help="comma-separated subset of the methods")
    p.add_argument("--folios", action="store_true", help="folio sizes of the mapping rows")
    p.add_argument("--dir", default=None, help="where the files go (default: the repo's "
                   "parent directory; never tmpfs)")
    p.add_argument("--json", default=None, metavar="PATH")
    args = p.parse_args(argv)
    every = [int(x) for x in args.every.split(",")]
    methods = list(METHODS) if args.methods is None else [
        m.strip() for m in args.methods.split(",")]
    size = args.file_mib << 20
    if args.records * args.record > size:
        p.error("--records x --record does not fit --file-mib")
    results: dict[tuple[int, str], list[dict[str, Any]]] = collections.defaultdict(list)
    loads = [" ".join(f"{x:.2f}" for x in os.getloadavg())]
    with C.TempDirs(args.dir, prefix="rocketstore-flush-costs-") as td:
        d = td.new("probe")
        disk = Disk(d)
        info = C.machine_info(td.base, {"bench_device": disk.name} if disk.name else None)
        for i in range(args.repeat):
            for n in every:
                for m in methods:
                    print(f"[{i + 1}/{args.repeat}] every {n}: {m}", file=sys.stderr,
                          flush=True)
                    results[(n, m)].append(run_once(d, disk, m, n, args.records, args.record,
                                                    size, args.folios))
        loads.append(" ".join(f"{x:.2f}" for x in os.getloadavg()))
    print("# rocketstore flush costs (bench/flush_costs.py)\n")
    C.print_machine_info(info)
    print(f"\n{args.records:,} records of {args.record} B per run, medians of {args.repeat} "
          f"(disk bytes: the minimum); load average before {loads[0]}, after {loads[1]}.\n")
    rows = []
    for (n, m), runs in results.items():
        med = {k: C.median([r[k] for r in runs]) for k in ("rate", "p50_ms", "p99_ms",
                                                           "faults_per_flush")}
        disk_rows = [r for r in runs if "disk_per_record" in r]
        rows.append([
            n, m, C.fmt_int(med["rate"]), f"{med['p50_ms']:.3f}", f"{med['p99_ms']:.3f}",
            f"{min(r['disk_per_record'] for r in disk_rows):.2f}x" if disk_rows else "n/a",
            f"{C.median([r['writes_per_flush'] for r in disk_rows]):.1f}" if disk_rows else "",
            f"{C.median([r['cache_flushes_per_flush'] for r in disk_rows]):.2f}"
            if disk_rows else "",
            f"{med['faults_per_flush']:.1f}",
            " ".join(f"{k}:{v}" for k, v in runs[-1]["folios"].items())])
    print(C.markdown_table(["every", "method", "records/s", "p50 ms", "p99 ms",
                            "disk B / record B", "writes/flush", "cache flushes/flush",
                            "minor faults/flush", "folios (pages:count)"], rows,
                           "rlrrrrrrrl"))
    if args.json:
        C.write_json(args.json, {"args": vars(args), "loads": loads,
                                 "results": {f"{n}|{m}": v for (n, m), v in results.items()}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
