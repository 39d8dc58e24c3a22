#!/usr/bin/env python
"""Filtered pulls: a backlog read through an SQL92 subscription matching 1% of it, against a
tag subscription matching 1% of the same backlog, same run, same store.

Workload: 1,000,000 messages (--quick: 100,000), 100 B bodies, one topic, 4 queues, tag
``Tag00``..``Tag99`` (message i has tag i % 100) and properties ``a`` = i % 100 and
``region`` (eu/us). The store is written once (put_messages, batches of 1,000) and every row
drains all 4 queues with MessageStore.get_message (32 messages a call, following
next_begin_offset, exactly as a broker's pull does) after one untimed warm-up pass.

Rows:
  tag "Tag07"                     the reference: the ConsumeQueue's tags codes skip 99% of
                                  the units without reading the CommitLog
  SQL92 "a = 7"                   every record is read and its properties evaluated
  SQL92 "a = 7 AND region = 'eu'" (0.5%) a second expression, for the evaluation's cost
  SQL92 with the bloom filter     not built (see README "SQL92 filters"): printed as n/a

Target (issue 28): SQL92 with the bloom filter >= 0.5 of the tag filter's rate. The script
never asserts; it prints PASS/MISS/n/a.

Usage: python bench/filter.py [--quick] [--n N] [--repeat 3] [--dir DIR]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

import _common as C

C.ensure_importable()

from rocketstore import GetMessageStatus, Message, MessageStore, StoreConfig  # noqa: E402

TOPIC = "filtered"
QUEUES = 4


def build(td: C.TempDirs, n: int) -> str:
    d = td.new("filter")
    store = MessageStore.open(d, StoreConfig(store_path_root_dir=d, flush_disk_type="ASYNC_FLUSH",
                                             mapped_file_size_commit_log=1 << 30))
    body = b"x" * 100
    try:
        for start in range(0, n, 1000):
            batch = [Message(TOPIC, body, tags=f"Tag{i % 100:02d}",
                             properties={"a": str(i % 100), "region": ("eu", "us")[(i // 100) % 2]})
                     for i in range(start, min(n, start + 1000))]
            store.put_messages(batch, [i % QUEUES for i in range(start, start + len(batch))])
        deadline = time.monotonic() + 600
        while store.dispatch_behind_bytes() > 0 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        store.close()
    return d


def drain(store: MessageStore, expression: str, expression_type: str | None) -> tuple[float, int]:
    """Seconds to read every queue to its end through the subscription; messages matched."""
    matched = 0
    began = time.perf_counter()
    for q in range(QUEUES):
        offset, end = 0, store.get_max_offset_in_queue(TOPIC, q)
        for _ in range(end + 1):
            if offset >= end:
                break
            r = store.get_message("bench", TOPIC, q, offset, 32, expression, expression_type)
            if r.status not in (GetMessageStatus.FOUND, GetMessageStatus.NO_MATCHED_MESSAGE):
                raise RuntimeError(f"get_message at {offset} of queue {q}: {r.status.name}")
            matched += r.message_count
            offset = r.next_begin_offset
    return time.perf_counter() - began, matched


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100,000 messages")
    parser.add_argument("--n", type=int, default=None)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    n = args.n or (100_000 if args.quick else 1_000_000)
    rows = [
        ("tag \"Tag07\"", "Tag07", None, n // 100),
        ("SQL92 \"a = 7\"", "a = 7", "SQL92", n // 100),
        ("SQL92 \"a = 7 AND region = 'eu'\"", "a = 7 AND region = 'eu'", "SQL92", None),
    ]
    with C.TempDirs(args.dir) as td:
        d = build(td, n)
        store = MessageStore.open(d, StoreConfig(store_path_root_dir=d, flush_disk_type="ASYNC_FLUSH",
                                                 mapped_file_size_commit_log=1 << 30))
        results = []
        try:
            for label, expression, kind, expected in rows:
                drain(store, expression, kind)           # warm-up
                times = []
                for _ in range(args.repeat):
                    seconds, matched = drain(store, expression, kind)
                    if expected is not None and matched != expected:
                        raise RuntimeError(f"{label}: {matched} matched, expected {expected}")
                    times.append(seconds)
                results.append((label, statistics.median(times), matched))
        finally:
            store.close()
    tag_rate = n / results[0][1]
    print(f"\n{n:,} messages in {QUEUES} queues, median of {args.repeat}\n")
    print("| subscription | matched | s | backlog msgs/s | vs tag |")
    print("|---|---:|---:|---:|---:|")
    for label, seconds, matched in results:
        rate = n / seconds
        print(f"| {label} | {matched:,} | {seconds:.3f} | {rate:,.0f} | {rate / tag_rate:.2f} |")
    print("| SQL92 \"a = 7\" with the bloom filter | n/a | | | n/a |")
    print("\ntarget: SQL92 with the bloom filter >= 0.5 x tag: n/a (the bloom filter is not built)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
