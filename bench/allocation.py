"""CommitLog block allocation in chunks (issue 17) against whole-segment allocation, in one
process, interleaved, with lmdb per-record as the reference of each round.

A new CommitLog segment gets blocks on disk COMMIT_LOG_ALLOCATION_CHUNK (4 MiB) at a time, so a
small store stays small. Before issue 17 a segment was fallocated whole when it was created.
This script runs append.py's two put paths (single put_message with 100 B bodies and
put_messages with 1 KiB bodies) into fresh stores, alternating the shipped chunk with a chunk
as large as the segment (what whole-segment allocation did), and lmdb called one txn.put per
record, round after round; the median of each is reported with the ratios, so the machine's
drift between rounds hits both sides alike.

    python bench/allocation.py [--n100 200000] [--n1k 100000] [--rounds 5] [--dir DIR]
        [--json PATH]
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _common as C  # noqa: E402

C.ensure_importable()
import append as A  # noqa: E402

import rocketstore.store.commit_log as commit_log  # noqa: E402
import rocketstore.store.services.allocate as allocate  # noqa: E402
from rocketstore.store.layout import COMMIT_LOG_ALLOCATION_CHUNK  # noqa: E402


def set_chunk(chunk: int) -> None:
    """The allocation step of CommitLog segments created from now on (both places that
    create them read the module constant when they do)."""
    commit_log.COMMIT_LOG_ALLOCATION_CHUNK = chunk
    allocate.COMMIT_LOG_ALLOCATION_CHUNK = chunk


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n100", type=int, default=200_000, help="single puts of 100 B")
    p.add_argument("--n1k", type=int, default=100_000, help="put_messages of 1 KiB")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--file-size", type=int, default=1 << 30)
    p.add_argument("--dir", default=None)
    p.add_argument("--json", default=None, metavar="PATH")
    args = p.parse_args(argv)
    # what append.py's helpers read
    args.batch, args.gc_off, args.prefault_bytes, args.clock = 1000, True, 0, "wall"
    td = C.TempDirs(args.dir)
    info = C.machine_info(td.root)
    C.print_machine_info(info)
    sides = {"chunked": COMMIT_LOG_ALLOCATION_CHUNK, "whole segment": args.file_size}
    w100 = A.Workload(args.n100, 100, 8)
    w1k = A.Workload(args.n1k, 1024, 8)
    m100, m1k = w100.build(), w1k.build()
    keys = [i.to_bytes(8, "big") for i in range(args.n100)]
    vals = [bytes(b) for b in w100.bodies]
    rates: dict[str, list[float]] = {f"{s} {k}": [] for s in sides for k in ("100 B", "1 KiB")}
    rates["lmdb per-record 100 B"] = []
    loads: list[float] = []
    try:
        for rnd in range(args.rounds):
            order = list(sides.items()) if rnd % 2 == 0 else list(sides.items())[::-1]
            for name, chunk in order:
                set_chunk(chunk)
                A.strip_uniq_keys(m100)
                run = A.run_put_single(td, args, w100, m100)
                td.remove(run.store_dir)
                rates[f"{name} 100 B"].append(args.n100 / run.put_wall)
                run = A.run_put_batches(td, args, w1k, m1k)
                rates[f"{name} 1 KiB"].append(args.n1k / run.put_wall)
            secs = A.ref_lmdb(td, args, keys, vals, "put", False, 4 << 30)
            rates["lmdb per-record 100 B"].append(args.n100 / secs)
            loads.append(os.getloadavg()[0])
            print(f"round {rnd + 1}: " + ", ".join(f"{k} {v[-1]:,.0f}/s"
                                                   for k, v in rates.items()), flush=True)
    finally:
        set_chunk(COMMIT_LOG_ALLOCATION_CHUNK)
    med = {k: C.median(v) for k, v in rates.items()}
    rows = [[k, C.fmt_int(med[k]), ", ".join(f"{x / 1000:,.0f}k" for x in v)]
            for k, v in rates.items()]
    print(f"\n## msgs/s, median of {args.rounds} interleaved rounds (load average at the rounds' "
          f"ends: {', '.join(f'{x:.1f}' for x in loads)})\n")
    print(C.markdown_table(["case", "median msgs/s", "per round"], rows, "lrl"))
    lm = med["lmdb per-record 100 B"]
    print("\n| ratio | chunked | whole segment |\n|:--|--:|--:|")
    print(f"| 100 B single put_message vs lmdb per-record | {med['chunked 100 B'] / lm:.2f}x | "
          f"{med['whole segment 100 B'] / lm:.2f}x |")
    print(f"| chunked / whole segment, 100 B single | "
          f"{med['chunked 100 B'] / med['whole segment 100 B']:.2f} | |")
    print(f"| chunked / whole segment, 1 KiB put_messages | "
          f"{med['chunked 1 KiB'] / med['whole segment 1 KiB']:.2f} | |")
    if args.json:
        C.write_json(args.json, {"machine": info, "rates": rates, "medians": med,
                                 "loads": loads})


if __name__ == "__main__":
    main()
