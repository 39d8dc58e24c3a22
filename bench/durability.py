#!/usr/bin/env python
"""Durability benchmark: SYNC_FLUSH group commit against ASYNC_FLUSH and a plain write+fsync
loop, and abnormal-exit recovery of a ~1 GiB CommitLog against a plain sequential read.

Part 1, put throughput (1 KiB bodies, topic "bench", 8 queues, the UNIQ_KEY the store adds):
  SYNC_FLUSH  N producer threads      put_message from 1, 8 and 32 threads; every put waits for
                                      the GroupCommitService's msync covering it
  ASYNC_FLUSH N producer threads      the same puts, flushed in the background
  write+fsync per batch               plain Python: os.pwrite of the same record bytes into a
                                      posix_fallocate'd file, os.fsync after every batch, the
                                      batch being what one group commit covered on average in
                                      the SYNC_FLUSH run with that many threads (bytes / msyncs)
  mmap copy+msync per batch           the same batches copied into a shared mmap of such a
                                      file and msync'ed (the store's write path, bare)
  write+fsync per message             the same with a batch of one record
Target: SYNC_FLUSH with 32 producers >= 0.3 x ASYNC_FLUSH with 32 producers.
Columns ms/msync and "in msync": for SYNC_FLUSH, the time the flush thread spent inside msync
per flush and its share of the run's wall clock (100% would be disk-bound); for the mmap
reference, the wall time per batch (copy + msync).

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

Every number is the median of --repeat runs (default 3), each on a fresh store (part 1) or a
fresh recovery of the same store (part 2). The script never asserts on targets: PASS/MISS.
Usage: python bench/durability.py [--quick] [--repeat 3] [--recovery-mib 1024] [--dir DIR]
                                  [--json out.json] [-q]
"""
from __future__ import annotations

import argparse
import os
import struct
import subprocess
import sys
import threading
import time
from typing import Any

import _common as C

C.ensure_importable()

from rocketstore import Message, MessageStore, StoreConfig  # noqa: E402
from rocketstore.message import PutMessageStatus  # noqa: E402

TOPIC = "bench"
QUEUES = 8
BODY = 1024
THREADS = (1, 8, 32)


# ---- part 1: throughput --------------------------------------------------------------------
def bodies(n: int) -> list[bytes]:
    pool = os.urandom(BODY + 4096)
    return [pool[(i * 7919) % 4096:(i * 7919) % 4096 + BODY] for i in range(n)]


def put_run(td: C.TempDirs, flush: str, threads: int, n: int) -> dict[str, Any]:
    """One timed run: n puts from `threads` threads into a fresh store."""
    d = td.new(f"{flush.lower()}-{threads}")
    store = MessageStore.open(d, StoreConfig(store_path_root_dir=d, flush_disk_type=flush,
                                             mapped_file_size_commit_log=256 << 20))
    try:
        warm = store.put_message(Message(TOPIC, b"x" * BODY), 0)   # file created outside
        assert warm.status == PutMessageStatus.PUT_OK
        per = n // threads
        msgs = [[Message(TOPIC, b, tags="t") for b in bodies(per)] for _ in range(threads)]
        flushes0 = getattr(store.commit_log.flush_service, "flushes", 0)
        group = getattr(store.commit_log.flush_service, "group", None)
        msync0 = group.msync_seconds if group is not None else 0.0
        start = threading.Barrier(threads + 1)
        bad: list[int] = []

        def produce(t: int) -> None:
            mine = msgs[t]
            put = store.put_message
            start.wait()
            for i, m in enumerate(mine):
                r = put(m, i % QUEUES)
                if r.status_code != 0:
                    bad.append(r.status_code)

        workers = [threading.Thread(target=produce, args=(t,)) for t in range(threads)]
        for w in workers:
            w.start()
        with C.Timer() as timer:
            start.wait()
            for w in workers:
                w.join()
        flushes = getattr(store.commit_log.flush_service, "flushes", 0) - flushes0
        msync_s = (group.msync_seconds - msync0) if group is not None else 0.0
        end = store.get_max_phy_offset()
        if bad:
            raise RuntimeError(f"{flush} x{threads}: {len(bad)} puts failed: {set(bad)}")
        data = store.get_commitlog_data(warm.wrote_bytes)
        record_bytes = bytes(data[:end - warm.wrote_bytes]) if data is not None else b""
        sizes = [m.store_size for m in store.scan(warm.wrote_bytes)]
    finally:
        store.shutdown()
        td.remove(d)
    return {"seconds": timer.wall, "cpu": timer.cpu, "n": per * threads,
            "bytes": len(record_bytes), "flushes": flushes, "msync_s": msync_s,
            "record_bytes": record_bytes,
            "sizes": sizes}


def batch_bounds(sizes: list[int], batch_msgs: float) -> list[int]:
    """Byte offsets of batch edges on record boundaries, batch_msgs records apart on average
    (a fractional batch_msgs alternates batch lengths); the last edge is the end."""
    bounds = [0]
    acc = 0.0
    pos = 0
    for i, s in enumerate(sizes):
        pos += s
        acc += 1
        if acc >= batch_msgs or i == len(sizes) - 1:
            bounds.append(pos)
            acc -= batch_msgs if batch_msgs >= 1 else acc
    return bounds


def fsync_run(td: C.TempDirs, records: bytes, sizes: list[int], batch_msgs: float) -> float:
    """os.pwrite + os.fsync of the same records, batch_msgs records per fsync; seconds."""
    d = td.new("fsync")
    path = os.path.join(d, "plain")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.posix_fallocate(fd, 0, max(len(records), 1))
        os.fsync(fd)
        bounds = batch_bounds(sizes, batch_msgs)
        view = memoryview(records)
        with C.Timer() as timer:
            for a, b in zip(bounds, bounds[1:], strict=False):
                os.pwrite(fd, view[a:b], a)
                os.fsync(fd)
    finally:
        os.close(fd)
        td.remove(d)
    return timer.wall


def msync_run(td: C.TempDirs, records: bytes, sizes: list[int], batch_msgs: float) -> float:
    """The same batches copied into a posix_fallocate'd shared mmap and msync'ed (the store's
    own write path, minus everything else); seconds."""
    import mmap
    d = td.new("msync")
    path = os.path.join(d, "plain")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    size = max(len(records), 1)
    try:
        os.posix_fallocate(fd, 0, size)
        os.fsync(fd)
        mm = mmap.mmap(fd, size)
        bounds = batch_bounds(sizes, batch_msgs)
        view = memoryview(records)
        page = mmap.PAGESIZE
        with C.Timer() as timer:
            flushed = 0
            for a, b in zip(bounds, bounds[1:], strict=False):
                mm[a:b] = view[a:b]
                start = flushed - flushed % page
                mm.flush(start, b - start)
                flushed = b
        mm.close()
    finally:
        os.close(fd)
        td.remove(d)
    return timer.wall


def bench_throughput(td: C.TempDirs, args: argparse.Namespace) -> dict[str, Any]:
    """Per thread count, each repeat runs SYNC, ASYNC and the fsync loops back to back
    (interleaved, so a slow spell of a shared disk hits all of them alike)."""
    rows: list[dict[str, Any]] = []
    per_msg: list[tuple[float, int, int]] = []      # (seconds, msgs, bytes)
    ratio32 = None
    for threads in THREADS:
        n = args.n_sync[threads]
        sync, asyn, batch_runs, msync_runs, full_runs = [], [], [], [], []
        for i in range(args.repeat):
            args.log(f"x{threads} run {i + 1}/{args.repeat}: SYNC_FLUSH ({n:,} puts)")
            s_run = put_run(td, "SYNC_FLUSH", threads, n)
            args.log(f"x{threads} run {i + 1}/{args.repeat}: ASYNC_FLUSH")
            a_run = put_run(td, "ASYNC_FLUSH", threads, n)
            batch = s_run["n"] / s_run["flushes"] if s_run["flushes"] else 1.0
            args.log(f"x{threads} run {i + 1}/{args.repeat}: write+fsync per {batch:.1f} msgs")
            b_secs = fsync_run(td, s_run["record_bytes"], s_run["sizes"], batch)
            args.log(f"x{threads} run {i + 1}/{args.repeat}: copy+msync per {batch:.1f} msgs")
            m_secs = msync_run(td, s_run["record_bytes"], s_run["sizes"], batch)
            if threads == THREADS[-1]:
                # the most a group commit of `threads` producers can share: every one of them
                args.log(f"x{threads} run {i + 1}/{args.repeat}: copy+msync per {threads} msgs")
                f_secs = msync_run(td, s_run["record_bytes"], s_run["sizes"], threads)
                full_runs.append({"seconds": f_secs, "batch": float(threads), "n": s_run["n"],
                                  "bytes": s_run["bytes"],
                                  "ms_per_msync": f_secs * 1e3 / max(1.0, s_run["n"] / threads)})
            if threads == THREADS[0]:
                args.log(f"x{threads} run {i + 1}/{args.repeat}: write+fsync per message")
                per_msg.append((fsync_run(td, s_run["record_bytes"], s_run["sizes"], 1),
                                len(s_run["sizes"]), len(s_run["record_bytes"])))
            for run in (s_run, a_run):
                run.pop("record_bytes")
                run.pop("sizes")
            sync.append(s_run)
            asyn.append(a_run)
            batch_runs.append({"seconds": b_secs, "batch": batch, "n": s_run["n"],
                               "bytes": s_run["bytes"]})
            msync_runs.append({"seconds": m_secs, "batch": batch, "n": s_run["n"],
                               "bytes": s_run["bytes"],
                               "ms_per_msync": m_secs * 1e3 / max(1.0, s_run["n"] / batch)})

        def row(case: str, flush: str, runs: list[dict[str, Any]],
                threads: int = threads) -> dict[str, Any]:
            secs = [r["seconds"] for r in runs]
            med = C.median(secs)
            msgs = C.median([r["n"] / r["seconds"] for r in runs])
            out = {"case": case, "flush": flush, "threads": threads, "n": runs[0]["n"],
                   "samples": secs, "median_s": med, "msgs_per_s": msgs,
                   "mb_per_s": C.median([r["bytes"] / C.MB / r["seconds"] for r in runs])}
            if flush == "SYNC_FLUSH":
                out["msgs_per_flush"] = C.median([r["n"] / r["flushes"] for r in runs
                                                  if r["flushes"]] or [0.0])
                # time inside msync per flush, and the share of the wall clock it took
                out["ms_per_msync"] = C.median([r["msync_s"] * 1e3 / r["flushes"]
                                                for r in runs if r["flushes"]] or [0.0])
                out["msync_share"] = C.median([r["msync_s"] / r["seconds"] for r in runs])
            if "ms_per_msync" in runs[0]:
                out["ms_per_msync"] = C.median([r["ms_per_msync"] for r in runs])
            if flush == "reference":
                out["batch"] = C.median([r["batch"] for r in runs])
            return out

        s_row = row(f"SYNC_FLUSH put_message x{threads}", "SYNC_FLUSH", sync)
        a_row = row(f"ASYNC_FLUSH put_message x{threads}", "ASYNC_FLUSH", asyn)
        b_row = row("", "reference", batch_runs)
        b_row["case"] = (f"write+fsync per batch of {b_row['batch']:.1f} msgs "
                         f"(SYNC x{threads}'s msgs/msync)")
        m_row = row("", "reference", msync_runs)
        m_row["case"] = f"mmap copy+msync per batch of {m_row['batch']:.1f} msgs"
        # ratios of medians of per-run ratios (runs are paired)
        s_row["vs_async"] = C.median([s["n"] / s["seconds"] / (a["n"] / a["seconds"])
                                      for s, a in zip(sync, asyn, strict=True)])
        s_row["vs_fsync_batch"] = C.median([b["seconds"] / s["seconds"]
                                            for s, b in zip(sync, batch_runs, strict=True)])
        s_row["per_msg_runs"] = per_msg if threads == THREADS[0] else None
        s_row["vs_msync_batch"] = C.median([m["seconds"] / s["seconds"]
                                            for s, m in zip(sync, msync_runs, strict=True)])
        rows += [s_row, a_row, b_row, m_row]
        if full_runs:
            f_row = row("", "reference", full_runs)
            f_row["case"] = (f"mmap copy+msync per batch of {threads} msgs (all producers: "
                             "the msync-bound ceiling)")
            # in the SYNC / ASYNC column: this loop's rate against ASYNC_FLUSH, paired
            f_row["vs_async"] = C.median([f["n"] / f["seconds"] / (a["n"] / a["seconds"])
                                          for f, a in zip(full_runs, asyn, strict=True)])
            rows.append(f_row)
        if threads == 32:
            ratio32 = s_row["vs_async"]
    secs = [p[0] for p in per_msg]
    pm = {"case": "write+fsync per message (SYNC x1's records)", "flush": "reference",
          "threads": 1, "n": per_msg[0][1], "samples": secs, "median_s": C.median(secs),
          "msgs_per_s": C.median([m / t for t, m, _ in per_msg]),
          "mb_per_s": C.median([b / C.MB / t for t, _, b in per_msg])}
    rows.append(pm)
    for r in rows:
        r.pop("per_msg_runs", None)
        if r["flush"] == "SYNC_FLUSH":
            r["vs_fsync_msg"] = r["msgs_per_s"] / pm["msgs_per_s"]
    return {"rows": rows, "target_ratio": ratio32}


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
def verdict(ratio: float, goal: float) -> str:
    return f"{ratio:.2f} {'PASS' if ratio >= goal else 'MISS'} (>= {goal})"


def print_report(info: dict[str, Any], args: argparse.Namespace, tp: dict[str, Any],
                 rc: dict[str, Any] | None, elapsed: float) -> None:
    print("# rocketstore durability benchmark (bench/durability.py)\n")
    C.print_machine_info(info)
    print(f"\nMedians of {args.repeat} runs, wall clock; 1 KiB bodies; "
          f"{'--quick; ' if args.quick else ''}total {elapsed:.0f} s.\n")
    rows = []
    for r in tp["rows"]:
        rows.append([r["case"], C.fmt_int(r["n"]), C.fmt_int(r["msgs_per_s"]),
                     C.fmt_rate(r["mb_per_s"]),
                     "" if r.get("msgs_per_flush") is None else f"{r['msgs_per_flush']:.1f}",
                     "" if not r.get("ms_per_msync") else f"{r['ms_per_msync']:.2f}",
                     "" if r.get("msync_share") is None else f"{100 * r['msync_share']:.0f}%",
                     C.fmt_ratio(r.get("vs_async")), C.fmt_ratio(r.get("vs_fsync_batch")),
                     C.fmt_ratio(r.get("vs_msync_batch")), C.fmt_ratio(r.get("vs_fsync_msg"))])
    print(C.markdown_table(["case", "msgs", "msgs/s", "MB/s", "msgs/msync", "ms/msync",
                            "in msync", "SYNC / ASYNC", "SYNC / fsync per batch", "SYNC / msync per batch",
                            "SYNC / fsync per msg"], rows, "lrrrrrrrrrr"))
    print(f"\nTarget SYNC_FLUSH x32 / ASYNC_FLUSH x32: {verdict(tp['target_ratio'], 0.3)}")
    pm = next(r for r in tp["rows"] if r["case"].startswith("write+fsync per message"))
    a32 = next(r for r in tp["rows"] if r["case"] == "ASYNC_FLUSH put_message x32")
    ceiling = 32 * pm["msgs_per_s"]
    print(f"Ceiling for 32 producers on this disk: at most 32 messages per flush, one flush per "
          f"fsync latency ({1e3 / pm['msgs_per_s']:.2f} ms, the write+fsync per message row): "
          f"{C.fmt_int(ceiling)} msgs/s = {ceiling / a32['msgs_per_s']:.2f} x ASYNC_FLUSH x32.")
    full = next((r for r in tp["rows"] if "msync-bound ceiling" in r["case"]), None)
    if full is not None:
        print(f"msync-bound ceiling (an msync of 32 records costs more than one of 1): the bare "
              f"copy+msync loop with 32 messages per msync runs {C.fmt_int(full['msgs_per_s'])} "
              f"msgs/s = {full['vs_async']:.2f} x ASYNC_FLUSH x32 (paired), with nothing "
              "else running; SYNC_FLUSH x32 cannot beat it.")
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
    p.add_argument("--json", default=None, metavar="PATH", help="also write results as JSON")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    args = p.parse_args(argv)
    scale = 4 if args.quick else 1
    args.repeat = args.repeat or (1 if args.quick else 3)
    args.recovery_mib = (256 if args.quick else 1024) if args.recovery_mib is None \
        else args.recovery_mib
    args.recovery_file_mib = args.recovery_file_mib or (64 if args.quick else 256)
    # puts per run: SYNC x1 is bound by one msync per put
    args.n_sync = {1: 3000 // scale, 8: 8000 // scale, 32: 16000 // scale}
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
        tp = bench_throughput(td, args)
        rc = bench_recovery(td, args) if args.recovery_mib > 0 else None
    elapsed = time.perf_counter() - started
    print_report(info, args, tp, rc, elapsed)
    if args.json:
        C.write_json(args.json, {"machine": info, "args": {k: v for k, v in vars(args).items()
                                                           if k != "log"},
                                 "throughput": tp, "recovery": rc, "elapsed_s": elapsed})
    return 0


if __name__ == "__main__":
    sys.exit(main())
