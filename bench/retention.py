#!/usr/bin/env python
"""Put latency while retention deletes old CommitLog segments, and how long deleting a
1 GiB segment takes (issue 17).

Latency: a steady producer calls put_message at a fixed rate (--rate, 1 KiB bodies, 4
queues, ASYNC_FLUSH) and the latency of every put is recorded. Each run is one store with
--old segments already written (--segment bytes each); the producer runs for --seconds
twice, interleaved:
  quiet        nothing else happens (the reference)
  deleting     a cleanup run deletes the old segments meanwhile (file_reserved_time 0, the
               run started by hand as `rocketstore clean` does, delete_commit_log_files_interval
               100 ms between files, RocketMQ's default), with ConsumeQueue and IndexFile
               files following; only the puts made while the run ran are counted, and
               in the quiet phase those of the same stretch of time from its start
The ratio p99(deleting) / p99(quiet) is the target (<= 2). Runs alternate the order of the
two phases; the median of --repeat runs is reported.

Delete time: a 1 GiB CommitLog segment full of records (written by put_messages) is deleted
by the cleanup (unmap and unlink), timed; the reference is os.remove of a plain 1 GiB file
written with os.write in the same run (--delete-gib to change the size).

The script never asserts on the targets; it prints PASS/MISS.
Usage: python bench/retention.py [--quick] [--rate 5000] [--seconds 4] [--repeat 3]
                                 [--segment 67108864] [--old 10] [--delete-gib 1]
                                 [--dir DIR] [--json out.json]
"""
from __future__ import annotations

import argparse
import gc
import os
import sys
import threading
import time
from typing import Any

import _common as C
import numpy as np

C.ensure_importable()

from rocketstore import Message, MessageStore, StoreConfig  # noqa: E402
from rocketstore.message import PutMessageStatus  # noqa: E402

BODY = b"r" * 1024
QUEUES = 4


def config(root: str, segment: int, **changes: Any) -> StoreConfig:
    values: dict[str, Any] = {"store_path_root_dir": root,
                              "mapped_file_size_commit_log": segment,
                              "file_reserved_time": 0, "delete_when": "04",
                              "clean_resource_interval": 3_600_000}
    values.update(changes)
    return StoreConfig(**values)


def prefill(store: MessageStore, nbytes: int) -> None:
    """Write about nbytes of records with put_messages (1 KiB bodies)."""
    batch = [Message(topic="old", body=BODY, keys=["k"]) for _ in range(1000)]
    start = store.get_max_phy_offset()
    while store.get_max_phy_offset() - start < nbytes:
        r = store.put_messages(batch, 0)
        assert r.status == PutMessageStatus.PUT_OK, r
        for m in batch:     # the store added a UNIQ_KEY: the next batch gets new ones
            m.properties.pop("UNIQ_KEY", None)
    assert store.wait_dispatched(120)
    # and flushed: a file being flushed is held, and a deletion waits for its holders
    deadline = time.monotonic() + 300
    queue = store.commit_log.queue
    while queue.flushed_where < queue.max_wrote_offset() and time.monotonic() < deadline:
        store.commit_log.flush_service.wakeup()
        time.sleep(0.05)


def produce(store: MessageStore, rate: float, seconds: float) -> tuple[np.ndarray, np.ndarray]:
    """put_message at a fixed rate for seconds; (start time, latency) of each put (ns)."""
    n = int(rate * seconds)
    msgs = [Message(topic="live", body=BODY, keys=[f"k{i}"]) for i in range(n)]
    lat = np.empty(n, np.int64)
    starts = np.empty(n, np.int64)
    interval = 1e9 / rate
    gc.collect()
    gc.disable()
    try:
        t0 = time.perf_counter_ns()
        for i, m in enumerate(msgs):
            due = t0 + int(i * interval)
            while True:
                now = time.perf_counter_ns()
                if now >= due:
                    break
                if due - now > 200_000:
                    time.sleep((due - now - 100_000) / 1e9)
            s = time.perf_counter_ns()
            r = store.put_message(m, i % QUEUES)
            lat[i] = time.perf_counter_ns() - s
            starts[i] = s
            if r.status != PutMessageStatus.PUT_OK:
                raise RuntimeError(f"put failed: {r.status.name} {r.reason}")
    finally:
        gc.enable()
    return starts, lat


def pct(lat: np.ndarray, q: float) -> float:
    return float(np.percentile(lat, q)) / 1000.0       # us


def latency_run(dirs: C.TempDirs, args: argparse.Namespace, order: int) -> dict[str, Any]:
    root = dirs.new("latency")
    store = MessageStore.open(root, config(root, args.segment))
    try:
        prefill(store, args.segment * args.old)
        old = len(store.segments()) - 1
        out: dict[str, Any] = {"old_segments": old}
        phases = ["quiet", "deleting"] if order % 2 == 0 else ["deleting", "quiet"]
        window: tuple[int, int] | None = None      # the deletion, from its phase's start
        samples: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for phase in phases:
            cleaner = None
            report: dict[str, Any] = {}
            if phase == "deleting":
                def clean(report: dict[str, Any] = report) -> None:
                    time.sleep(0.2)             # the producer is at its pace by then
                    report["start"] = time.perf_counter_ns()
                    r = store.clean_files()
                    report["end"] = time.perf_counter_ns()
                    report["deleted"] = r.deleted
                cleaner = threading.Thread(target=clean)
                cleaner.start()
            starts, lat = produce(store, args.rate, args.seconds)
            samples[phase] = (starts, lat)
            if cleaner is not None:
                cleaner.join()
                out["deleted_files"] = len(report["deleted"])
                out["deleted_commitlog"] = sum(d.kind == "commitlog" for d in report["deleted"])
                out["delete_seconds"] = (report["end"] - report["start"]) / 1e9
                window = (report["start"] - int(starts[0]), report["end"] - int(starts[0]))
        # the puts made while the cleanup ran, against those made in the same stretch of
        # the quiet phase (same length, same offset from the phase's start)
        assert window is not None
        for phase, (starts, lat) in samples.items():
            rel = starts - starts[0]
            part = lat[(rel >= window[0]) & (rel <= window[1])]
            out[phase] = {"p50": pct(part, 50), "p99": pct(part, 99), "p999": pct(part, 99.9),
                          "max": float(part.max()) / 1000.0, "n": len(part),
                          "p99_whole_phase": pct(lat, 99)}
        return out
    finally:
        store.shutdown()
        dirs.remove(root)


def delete_run(dirs: C.TempDirs, gib: float) -> dict[str, float]:
    size = int(gib * (1 << 30))
    root = dirs.new("delete")
    # the reference: a plain file of the same size, written with os.write, then removed
    plain = os.path.join(root, "plain")
    fd = os.open(plain, os.O_WRONLY | os.O_CREAT, 0o644)
    chunk = b"p" * (1 << 20)
    for _ in range(size >> 20):
        os.write(fd, chunk)
    os.fsync(fd)
    os.close(fd)
    t = time.perf_counter()
    os.remove(plain)
    ref = time.perf_counter() - t
    # a store whose first segment is full of records, deleted by the cleanup
    store_root = os.path.join(root, "store")
    store = MessageStore.open(store_root, config(store_root, size,
                                                 delete_commit_log_files_interval=0))
    try:
        prefill(store, size + (1 << 20))
        store.commit_log.queue.flush_all()
        first = store.commit_log.queue.files[0]
        t = time.perf_counter()
        gone = store.clean_commit_log.queue.delete_expired_by_time(0, int(time.time() * 1000)
                                                                     + 1000, True, limit=1)
        took = time.perf_counter() - t
        assert gone == [first] and not os.path.exists(first.file_name), gone
    finally:
        store.shutdown()
        dirs.remove(root)
    return {"store": took, "plain": ref}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--quick", action="store_true", help="2 s phases, 4 old segments, 1 run")
    ap.add_argument("--rate", type=float, default=5000.0, help="puts per second")
    ap.add_argument("--seconds", type=float, default=4.0, help="length of each phase")
    ap.add_argument("--segment", type=int, default=64 << 20, help="CommitLog segment bytes")
    ap.add_argument("--old", type=int, default=10,
                    help="old segments written first (a run deletes at most 10)")
    ap.add_argument("--delete-gib", type=float, default=1.0,
                    help="size of the segment whose deletion is timed (0 skips)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.quick:
        args.seconds, args.old, args.repeat = 2.0, 4, 1
    dirs = C.TempDirs(args.dir)
    info = C.machine_info(dirs.root, {"load_avg": os.getloadavg()})
    C.print_machine_info(info)
    runs = []
    for i in range(args.repeat):
        r = latency_run(dirs, args, i)
        runs.append(r)
        print(f"run {i + 1}: quiet p99 {r['quiet']['p99']:.1f} us, deleting p99 "
              f"{r['deleting']['p99']:.1f} us ({r['deleted_commitlog']} segments deleted in "
              f"{r['delete_seconds']:.2f} s)", file=sys.stderr)
    deletes = [delete_run(dirs, args.delete_gib) for _ in range(args.repeat)] \
        if args.delete_gib > 0 else []

    def med(phase: str, key: str) -> float:
        return C.median([r[phase][key] for r in runs])

    ratios = [r["deleting"]["p99"] / r["quiet"]["p99"] for r in runs]
    print(f"\n## Put latency while retention deletes ({args.rate:,.0f} puts/s, 1 KiB bodies, "
          f"{args.seconds:g} s a phase, {args.old} old segments of "
          f"{args.segment / C.MiB:,.0f} MiB, median of {len(runs)})\n")
    rows = []
    for phase in ("quiet", "deleting"):
        rows.append([phase, f"{med(phase, 'n'):,.0f}", f"{med(phase, 'p50'):.1f}",
                     f"{med(phase, 'p99'):.1f}", f"{med(phase, 'p999'):.1f}",
                     f"{med(phase, 'max'):.1f}"])
    print(C.markdown_table(["phase", "puts", "p50 us", "p99 us", "p99.9 us", "max us"], rows))
    ratio = C.median(ratios)
    took = ", ".join(f"{r['delete_seconds']:.2f}" for r in runs)
    deleted = ", ".join(str(r["deleted_commitlog"]) for r in runs)
    print(f"\nper-run p99 ratios: {', '.join(f'{x:.2f}' for x in ratios)}; segments deleted "
          f"per run: {deleted}, in {took} s")
    targets = [("p99 put latency while deleting <= 2x the quiet p99", f"{ratio:.2f}x",
                "<= 2.00x", ratio <= 2.0)]
    if deletes:
        store_s = C.median([d["store"] for d in deletes])
        plain_s = C.median([d["plain"] for d in deletes])
        print(f"\n## Deleting a {args.delete_gib:g} GiB segment (median of {len(deletes)})\n")
        print(C.markdown_table(
            ["what", "seconds", "ratio vs os.remove"],
            [["CommitLog segment (unmap + unlink, by the cleanup)", f"{store_s:.4f}",
              f"{store_s / plain_s:.2f}x" if plain_s > 0 else "-"],
             ["os.remove of a plain file of the same size", f"{plain_s:.4f}", "1.00x"]]))
    print("\n## Targets\n")
    print(C.markdown_table(["target", "measured", "goal", "result"],
                           [[t, m, g, "PASS" if ok else "MISS"] for t, m, g, ok in targets]))
    if args.json:
        C.write_json(args.json, {"machine": info, "args": vars(args), "runs": runs,
                                 "deletes": deletes})


if __name__ == "__main__":
    main()
