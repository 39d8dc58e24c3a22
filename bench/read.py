#!/usr/bin/env python
"""Read-side throughput of rocketstore: dispatch, get_message, key lookups and the
columnar decode, each against a reference measured in the same run on the same data.

Workload: 1,000,000 messages with 100 B bodies (--quick: 100,000), one topic "bench", 8 queues
round-robin, a tag and one key per message (plus the UNIQ_KEY the store generates), written
with put_messages in batches of 1,000 (ASYNC_FLUSH, 1 GiB CommitLog segments, default index
sizes). Every row reads that same store.

Rows:
  put_messages (batch append)   the reference for dispatch: a fresh store per run, the put loop
                                alone (the reput service runs beside it, as for a user)
  append until dispatched       from the same start until the reput service has dispatched
                                everything (information: how far dispatch trails the appends)
  dispatch, CQ + IndexFile      a full re-dispatch: the store is closed, its consumequeue/ and
                                index/ directories deleted, and opened again; recovery scans the
                                CommitLog (without CRC: check_crc_on_recover=False), then the
                                reput service re-dispatches every record. Rate =
                                recovery.dispatched_records / recovery.dispatch_s (the reput
                                service's part)
  recovery with that re-dispatch  the same open's whole recovery, scan included (information:
                                recovery.dispatched_records / recovery.duration_s)
  dispatch, CQ only             the same with message_index_enable=False
  (each read row below runs one untimed warm-up pass first)
  get_message                   one queue from offset 0 to its end, 32 messages a call,
                                following next_begin_offset (a MessageExt per message)
  query_message                 random existing keys (10,000 lookups; --quick 1,000), each
                                verified to return its one message
  columnar read_range           rocketstore.store.read_range over the whole CommitLog,
                                bodies included (pyarrow batches, no object per message);
                                reference: a plain sequential read of the same CommitLog bytes
                                (readinto 1 MiB chunks from the files into a pre-faulted
                                buffer, warm page cache). Extra rows (information): the decode
                                without the body column, the decode with body_view=True (the
                                bodies as zero-copy binary_view values into the segments
                                instead of copies), and the plain read into fresh memory
                                (f.read per segment: new pages faulted in, as a decoder's
                                output pays them)

Targets: dispatch (CQ + IndexFile) >= the batch append rate measured in the same run
(ratio >= 1.0); columnar decode >= 0.3 of the plain read. Each number is the median of --repeat
runs (default 3). The script never asserts on the targets; it prints PASS/MISS.

Usage: python bench/read.py [--quick] [--n N] [--repeat 3] [--lookups N] [--dir DIR]
                            [--clock wall|cpu] [--json out.json]
"""
from __future__ import annotations

import argparse
import gc
import logging
import os
import random
import shutil
import sys
import time
from typing import Any

import _common as C
import numpy as np

C.ensure_importable()

from rocketstore import GetMessageStatus, Message, MessageStore, StoreConfig  # noqa: E402

TOPIC = "bench"
TAGS = ("TagA", "TagB", "TagC", "TagD")
Measurement = C.Measurement


# ---- workload -------------------------------------------------------------------------------
def build_messages(n: int, body_size: int, seed: int = 42) -> list[Message]:
    pool = np.random.default_rng(seed).integers(0, 256, body_size + 4096,
                                                dtype=np.uint8).tobytes()
    return [Message(TOPIC, pool[j:j + body_size], tags=TAGS[i % len(TAGS)],
                    keys=[f"key-{i:010d}"])
            for i, j in enumerate((i * 7919) % 4096 for i in range(n))]


def strip_uniq_keys(msgs: list[Message]) -> None:
    """The store adds a UNIQ_KEY to a message without one; remove it so each run's puts
    generate their own, as a first put does."""
    for m in msgs:
        m.properties.pop("UNIQ_KEY", None)


def config(root: str, args: argparse.Namespace, **overrides: Any) -> StoreConfig:
    return StoreConfig(store_path_root_dir=root, mapped_file_size_commit_log=args.file_size,
                       flush_disk_type="ASYNC_FLUSH", **overrides)


def stored_count(s: MessageStore, queues: int) -> int:
    return sum(s.get_max_offset_in_queue(TOPIC, q) for q in range(queues))


# ---- 1. batch append (and the data every other row reads) ------------------------------------
def run_append(td: C.TempDirs, args: argparse.Namespace, msgs: list[Message],
               qids: list[int], keep: bool
               ) -> tuple[float, float, float, float, float, str, int]:
    """(put seconds, put wall, put cpu, wall and cpu until dispatched, store dir, max
    offset)."""
    d = td.new("append")
    s = MessageStore.open(d, config(d, args))
    b = args.batch
    batches = [(msgs[i:i + b], qids[i:i + b]) for i in range(0, len(msgs), b)]
    strip_uniq_keys(msgs)
    try:
        with C.Timer(prefault=args.prefault_bytes) as t:
            put = s.put_messages
            for bm, bq in batches:
                put(bm, bq)
        deadline = time.perf_counter() + 600
        while s.dispatch_behind_bytes() > 0:
            if time.perf_counter() > deadline:
                raise RuntimeError("dispatch did not catch up within 600 s")
            time.sleep(0.0002)
        dispatched = time.perf_counter() - t.t0
        dispatched_cpu = time.process_time() - t.c0
        n = stored_count(s, args.queues)
        if n != len(msgs):
            raise RuntimeError(f"the store holds {n} messages, expected {len(msgs)}")
        max_off = s.get_max_phy_offset()
    finally:
        s.close()
    if not keep:
        td.remove(d)
    return t.seconds, t.wall, t.cpu, dispatched, dispatched_cpu, d, max_off


# ---- 2. dispatch --------------------------------------------------------------------------
def run_redispatch(args: argparse.Namespace, d: str, n: int, index: bool
                   ) -> tuple[float, float, float, float]:
    """Delete consumequeue/ and index/, open: recovery re-dispatches everything.
    Returns (re-dispatch seconds, recovery seconds (scan included), wall and cpu seconds of
    the whole open)."""
    for sub in ("consumequeue", "index"):
        shutil.rmtree(os.path.join(d, sub), ignore_errors=True)
    C.prefault(args.prefault_bytes)
    gc.collect()
    c0, t0 = time.process_time(), time.perf_counter()
    s = MessageStore.open(d, config(d, args, message_index_enable=index,
                                    check_crc_on_recover=False))
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    try:
        rep = s.recovery
        assert rep is not None
        if rep.dispatched_records != n:
            raise RuntimeError(f"re-dispatched {rep.dispatched_records} records, expected {n}")
        if stored_count(s, args.queues) != n:
            raise RuntimeError("re-dispatch lost units")
        seconds, recovery = rep.dispatch_s, rep.duration_s
    finally:
        s.close()
    return seconds, recovery, wall, cpu


# ---- 3. get_message -------------------------------------------------------------------------
def run_get_message(s: MessageStore, qid: int) -> tuple[float, int]:
    end = s.get_max_offset_in_queue(TOPIC, qid)
    got = 0
    with C.Timer() as t:
        get = s.get_message
        offset = 0
        while offset < end:
            r = get("bench-group", TOPIC, qid, offset, 32)
            if r.status != GetMessageStatus.FOUND:
                raise RuntimeError(f"get_message at {offset}: {r.status.name}")
            got += len(r.messages)
            offset = r.next_begin_offset
    if got != end:
        raise RuntimeError(f"pulled {got} messages of queue {qid}, expected {end}")
    return t.seconds, got


# ---- 4. key lookups -------------------------------------------------------------------------
def run_lookups(s: MessageStore, keys: list[str]) -> float:
    with C.Timer() as t:
        q = s.query_message
        for k in keys:
            res = q(TOPIC, k, 32)
            if len(res.messages) != 1:
                raise RuntimeError(f"query_message({k!r}) returned {len(res.messages)} messages")
    return t.seconds


# ---- 5. columnar decode vs plain read -------------------------------------------------------
def columnar_reader():
    try:
        from rocketstore.store import read_range
    except ImportError as e:      # being written by another engineer: report, do not fail
        return None, f"rocketstore.store.read_range unavailable ({e})"
    return read_range, ""


def run_columnar(args: argparse.Namespace, s: MessageStore, read_range, n: int,
                 include_body: bool = True, threads: int = 1, body_view: bool = False
                 ) -> float:
    lo, hi = s.get_min_phy_offset(), s.get_max_phy_offset()
    rows = 0
    extra: dict[str, Any] = {} if threads == 1 else {"threads": threads}
    if body_view:
        extra["body_view"] = True
    with C.Timer(prefault=args.prefault_bytes) as t:
        for batch in read_range(s, lo, hi, include_body, **extra):
            rows += batch.num_rows
    if rows != n:
        raise RuntimeError(f"read_range decoded {rows} rows, expected {n}")
    return t.seconds


def run_plain_read(args: argparse.Namespace, d: str, nbytes: int) -> float:
    """The CommitLog bytes [0, nbytes) read sequentially from the segment files into one
    buffer (readinto, 1 MiB chunks): what any reader of the same bytes must at least do."""
    out = np.empty(nbytes, dtype=np.uint8)
    out.fill(0)                   # fault the destination in outside the timing
    view = memoryview(out)
    cl = os.path.join(d, "commitlog")
    names = sorted(os.listdir(cl))
    with C.Timer(prefault=args.prefault_bytes) as t:
        for name in names:
            start = int(name)
            if start >= nbytes:
                break
            end = min(start + args.file_size, nbytes)
            with open(os.path.join(cl, name), "rb", buffering=0) as f:
                pos = start
                while pos < end:
                    k = f.readinto(view[pos:min(end, pos + C.MiB)])
                    if not k:
                        raise RuntimeError(f"short read in {name}")
                    pos += k
    del view, out
    return t.seconds


def run_plain_read_fresh(args: argparse.Namespace, d: str, nbytes: int) -> float:
    """The same bytes read with f.read() per segment: new memory, first-touch faults
    included, as a decoder's output pays them (information only)."""
    cl = os.path.join(d, "commitlog")
    names = sorted(os.listdir(cl))
    got = 0
    with C.Timer(prefault=args.prefault_bytes) as t:
        for name in names:
            start = int(name)
            if start >= nbytes:
                break
            with open(os.path.join(cl, name), "rb", buffering=0) as f:
                data = f.read(min(args.file_size, nbytes - start))
                got += len(data)
                del data
    if got != nbytes:
        raise RuntimeError(f"read {got} bytes, expected {nbytes}")
    return t.seconds


# ---- report ---------------------------------------------------------------------------------
def plain_mb(rows: list[Measurement]) -> float:
    return next(r for r in rows if r.kind == "read-reference").mb_per_s


def result(ok: bool | None) -> str:
    return "n/a" if ok is None else ("PASS" if ok else "MISS")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=1_000_000, help="messages (100 B bodies)")
    p.add_argument("--body", type=int, default=100, help="body size in bytes")
    p.add_argument("--quick", action="store_true", help="divide --n and --lookups by 10")
    p.add_argument("--queues", type=int, default=8)
    p.add_argument("--batch", type=int, default=1000, help="put_messages batch size")
    p.add_argument("--lookups", type=int, default=10_000, help="query_message calls per run")
    p.add_argument("--repeat", type=int, default=3, help="runs per measurement (median)")
    p.add_argument("--file-size", type=int, default=1 << 30, help="CommitLog segment size")
    p.add_argument("--dir", default=None,
                   help="where temp stores go (default: the repo's parent dir; not tmpfs)")
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    p.add_argument("--no-prefault", dest="prefault", action="store_false",
                   help="do not touch+free ~2x the data's bytes of memory before timed runs")
    p.add_argument("--json", default=None, metavar="PATH", help="also write results as JSON")
    p.add_argument("-q", "--quiet", action="store_true")
    args = p.parse_args(argv)
    if args.quick:
        args.n //= 10
        args.lookups //= 10
    if min(args.n, args.repeat, args.batch, args.queues, args.lookups) < 1:
        p.error("--n, --repeat, --batch, --queues and --lookups must be >= 1")
    C.CLOCK = args.clock
    started = time.perf_counter()
    # a re-dispatch at open logs each rebuilt queue as a warning: expected here
    logging.getLogger("rocketstore.store").setLevel(logging.ERROR)

    def log(msg: str) -> None:
        if not args.quiet:
            print(f"[{time.perf_counter() - started:6.1f}s] {msg}", file=sys.stderr, flush=True)

    R, n = args.repeat, args.n
    rows: list[Measurement] = []
    notes: list[str] = []
    with C.TempDirs(args.dir) as td:
        info = C.machine_info(td.base)
        log(f"building {n:,} messages ...")
        with C.Timer() as tb:
            msgs = build_messages(n, args.body)
        qids = [i % args.queues for i in range(n)]
        args.prefault_bytes = 0
        if args.prefault:
            args.prefault_bytes = 2 * n * (args.body + 120)

        # 1. batch append; the last run's store is the data of every other row
        put_s, disp_s = C.Samples(), C.Samples()
        data = ""
        max_off = 0
        for i in range(R):
            log(f"append run {i + 1}/{R} ...")
            _sec, wall, cpu, dwall, dcpu, d, max_off = run_append(td, args, msgs, qids,
                                                                  keep=i == R - 1)
            C.add_times(put_s, wall, cpu)
            C.add_times(disp_s, dwall, dcpu)
            data = d
        del msgs
        gc.collect()
        record_bytes = max_off
        body_bytes = n * args.body
        append = Measurement(f"{args.body} B", f"put_messages ({args.batch:,}/batch)", n,
                             record_bytes, body_bytes, put_s, kind="reference")
        rows.append(append)
        rows.append(Measurement(f"{args.body} B", "append until dispatched (CQ + IndexFile)", n,
                                record_bytes, body_bytes, disp_s, kind="extra",
                                note="from the first put until dispatch_behind_bytes() == 0"))

        # 2. dispatch
        for index in (True, False):
            samples, recovery = C.Samples(), C.Samples()
            for i in range(R):
                log(f"re-dispatch ({'CQ + index' if index else 'CQ only'}) {i + 1}/{R} ...")
                sec, rec_s, wall, cpu = run_redispatch(args, data, n, index)
                samples.append(sec if C.CLOCK == "wall" else cpu)  # cpu/wall: whole open
                samples.wall.append(wall)
                samples.cpu.append(cpu)
                recovery.append(rec_s)
                recovery.wall.append(wall)
                recovery.cpu.append(cpu)
            what = "ConsumeQueue + IndexFile" if index else "ConsumeQueue only"
            rows.append(Measurement(
                f"{args.body} B", "dispatch, full re-dispatch: " + what,
                n, record_bytes, body_bytes, samples, kind="dispatch",
                note="recovery.dispatched_records / recovery.dispatch_s"))
            if index:
                rows.append(Measurement(
                    f"{args.body} B", "recovery with that re-dispatch (scan included)",
                    n, record_bytes, body_bytes, recovery, kind="extra",
                    note="recovery.dispatched_records / recovery.duration_s"))
        log("rebuilding the index for the read rows ...")
        run_redispatch(args, data, n, True)

        # 3-5 on the data store
        s = MessageStore.open(data, config(data, args))
        try:
            qn = s.get_max_offset_in_queue(TOPIC, 0)
            samples = C.Samples()
            for i in range(R):
                log(f"get_message {i + 1}/{R} ...")
                sec, got = run_get_message(s, 0)
                C.add_sample(samples, sec)
            rows.append(Measurement(f"{args.body} B", "get_message, 32/call, one queue", qn,
                                    record_bytes * qn // n, body_bytes * qn // n, samples,
                                    kind="read", note=f"queue 0: {qn:,} messages"))

            rng = random.Random(7)
            samples = C.Samples()
            for i in range(R):
                log(f"query_message {i + 1}/{R} ...")
                keys = [f"key-{rng.randrange(n):010d}" for _ in range(args.lookups)]
                C.add_sample(samples, run_lookups(s, keys))
            rows.append(Measurement(f"{args.body} B", "query_message, random existing key",
                                    args.lookups, 0, 0, samples, kind="lookup",
                                    note="lookups/s; each returns its one message"))

            read_range, why = columnar_reader()
            # one untimed pass of each read first (imports, allocator pools, page cache)
            run_plain_read(args, data, max_off)
            if read_range is not None:
                try:
                    run_columnar(args, s, read_range, n)
                except Exception:  # noqa: BLE001 - reported below
                    pass
            plain = C.Samples()
            for i in range(R):
                log(f"plain read {i + 1}/{R} ...")
                C.add_sample(plain, run_plain_read(args, data, max_off))
            plain_row = Measurement(f"{args.body} B", "plain sequential read of the CommitLog",
                                    n, record_bytes, body_bytes, plain, kind="read-reference",
                                    note="readinto 1 MiB chunks into a pre-faulted buffer, "
                                         "warm page cache")
            fresh = C.Samples()
            for i in range(R):
                log(f"plain read into fresh memory {i + 1}/{R} ...")
                C.add_sample(fresh, run_plain_read_fresh(args, data, max_off))
            fresh_row = Measurement(f"{args.body} B",
                                    "plain read into fresh memory (f.read per segment)", n,
                                    record_bytes, body_bytes, fresh, kind="read-extra",
                                    note="information: first-touch faults of new memory "
                                         "included, as a decoder's output pays them")
            col_rows = []
            if read_range is not None:
                try:
                    threads = os.cpu_count() or 1
                    for include_body, nthreads, view in ((True, 1, False), (False, 1, False),
                                                         (True, 1, True),
                                                         (True, threads, False)):
                        if nthreads > 1 and threads == 1:
                            break                   # one core: no parallel row
                        samples = C.Samples()
                        for i in range(R):
                            log(f"columnar read_range (body={include_body}, threads="
                                f"{nthreads}, body_view={view}) {i + 1}/{R} ...")
                            C.add_sample(samples, run_columnar(args, s, read_range, n,
                                                               include_body, nthreads, view))
                        label = ("bodies included" if include_body else "no body column")
                        if view:
                            label = "body_view=True: zero-copy binary_view bodies"
                        if nthreads > 1:
                            label += f", {nthreads} threads"
                        col_rows.append(Measurement(
                            f"{args.body} B", f"columnar read_range (pyarrow, {label})", n,
                            record_bytes, body_bytes, samples,
                            kind="read" if include_body and nthreads == 1 and not view else
                            "read-parallel" if nthreads > 1 else "read-extra"))
                except Exception as e:  # noqa: BLE001 - a module in progress: note it, go on
                    why = f"read_range failed: {type(e).__name__}: {e}"
            if col_rows:
                for r in (*col_rows, fresh_row):
                    r.ratios["plain read"] = r.mb_per_s / plain_row.mb_per_s
                rows.extend(col_rows)
            else:
                notes.append(f"columnar decode not measured: {why}")
            rows += [plain_row, fresh_row]
        finally:
            s.close()

    for r in rows:
        if r.kind in ("dispatch", "extra"):
            r.ratios["batch append"] = r.msgs_per_s / append.msgs_per_s
    full = next(r for r in rows if r.name.endswith("ConsumeQueue + IndexFile"))
    cq_only = next(r for r in rows if r.name.endswith("ConsumeQueue only"))
    col = next((r for r in rows if r.name.startswith("columnar") and r.kind == "read"), None)
    par = next((r for r in rows if r.kind == "read-parallel"), None)
    targets = [
        {"target": "dispatch (CQ + IndexFile) keeps up with batch appends",
         "measured": f"{full.ratios['batch append']:.2f}x", "goal": ">= 1.00x",
         "result": result(full.ratios["batch append"] >= 1.0)},
        {"target": "dispatch (CQ only) keeps up with batch appends",
         "measured": f"{cq_only.ratios['batch append']:.2f}x", "goal": ">= 1.00x",
         "result": result(cq_only.ratios["batch append"] >= 1.0)},
        {"target": "columnar decode >= 0.3 of a plain read of the same bytes",
         "measured": "-" if col is None else f"{col.ratios['plain read']:.2f}",
         "goal": ">= 0.30",
         "result": result(None if col is None else col.ratios["plain read"] >= 0.3)},
    ]
    if par is not None:
        # not a target: how the decode scales, shown beside them
        targets.append(
            {"target": "columnar decode on all cores vs a plain (one-stream) read, information",
             "measured": f"{par.ratios['plain read']:.2f}", "goal": "",
             "result": "n/a"})
    elapsed = time.perf_counter() - started

    print("# rocketstore read benchmark (bench/read.py)\n")
    C.print_machine_info(info)
    print(f"\nWorkload: {n:,} messages of {args.body} B bodies ({record_bytes / n:.1f} B/record, "
          f"{record_bytes / C.MB:,.1f} MB of CommitLog), topic {TOPIC!r}, {args.queues} queues "
          f"round-robin, one tag + one key per message (+ UNIQ_KEY), put_messages in batches of "
          f"{args.batch:,}, ASYNC_FLUSH, CommitLog segments of {args.file_size:,} B, default "
          f"index sizes. Message construction ({tb.wall:.1f} s) is outside every timing. Each "
          f"number is the median of {R} runs ({args.clock} clock). MB = 10^6 bytes of CommitLog "
          f"(records as stored). cpu/wall = median process CPU time / median wall time (all "
          f"threads; well below 1 means the run waited, e.g. for cores taken by other "
          f"processes; above 1, threads ran in parallel).\n")
    table = []
    for r in rows:
        unit = "lookups/s" if r.kind == "lookup" else "msgs/s"
        ratio, ref = "", ""
        if "batch append" in r.ratios:
            ratio, ref = f"{r.ratios['batch append']:.2f}", "batch append"
        elif "plain read" in r.ratios:
            ratio, ref = f"{r.ratios['plain read']:.2f}", "plain read (MB/s)"
        share = r.cpu_share
        table.append([r.name, f"{C.fmt_int(r.msgs_per_s)} {unit}",
                      C.fmt_rate(r.mb_per_s) if r.record_bytes else "",
                      f"{r.seconds:.3f}", ref, ratio, "" if share is None else f"{share:.2f}"])
    print(C.markdown_table(["measurement", "rate", "MB/s", "median s", "vs", "ratio",
                            "cpu/wall"], table, "lrrrlrr"))
    print("\n## Targets\n")
    print(C.markdown_table(["target", "measured", "goal", "result"],
                           [[t["target"], t["measured"], t["goal"], t["result"]]
                            for t in targets], "llll"))
    fresh = next((r for r in rows if r.name.startswith("plain read into fresh")), None)
    if col is not None and fresh is not None:
        notes.append(
            f"the target's reference is the strict one (a memcpy-speed read into a pre-faulted "
            f"buffer, {plain_mb(rows):,.0f} MB/s); against a plain read into fresh memory "
            f"(f.read, {fresh.mb_per_s:,.0f} MB/s) the columnar decode is "
            f"{col.mb_per_s / fresh.mb_per_s:.2f}x.")
    for note in notes:
        print(f"\nNote: {note}")
    print(f"\n(total wall time {elapsed:.0f}s)")

    if args.json:
        C.write_json(args.json, {
            "machine": info,
            "args": vars(args),
            "n": n,
            "record_bytes": record_bytes,
            "rows": [r.to_json() for r in rows],
            "targets": targets,
            "notes": notes,
            "wall_s": elapsed,
        })
    return 0


if __name__ == "__main__":
    sys.exit(main())
