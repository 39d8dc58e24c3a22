"""The put path alone, for deterministic measures (callgrind, strace, perf record).

`python bench/put_probe.py N [single|batch]`: builds PROBE_BUILD (default N) messages of
bench/append.py's 100 B workload (topic `bench`, 8 queues round-robin, a tag and a key),
opens a fresh store with append.py's config (ASYNC_FLUSH, 1 GiB CommitLog segments, the
default StoreConfig otherwise: dispatch, flush and prefault services running), then puts
the first N, one `put_message` each (single) or `put_messages` of 1,000 (batch). It prints
the wall, calling-thread CPU and process CPU time per put.

Instructions per put, independent of the machine's load: run it under callgrind at two N
with the same PROBE_BUILD, so that only the puts differ, and divide the difference:

    for n in 20000 60000; do PROBE_BUILD=60000 PROBE_NO_PREFAULT=1 valgrind --tool=callgrind \\
        --separate-threads=yes --callgrind-out-file=cg.$n.%p python bench/put_probe.py $n; done

(cg.N.PID-01 is the calling thread, the others the store's services.) PROBE_THREADS=1
prints each thread's user/system CPU and context switches over the puts (from /proc);
PROBE_PERF=FILE runs `perf record -e cpu-clock -g` on the process over the puts alone.
"""
from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from itertools import islice

import numpy as np

from rocketstore import Message, MessageStore, StoreConfig

TICK = os.sysconf("SC_CLK_TCK")


def thread_stats() -> dict[int, tuple[float, float, int, int, int]]:
    """tid -> (user s, system s, voluntary switches, involuntary switches, minor faults)."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                st = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/self/task/{tid}/status") as f:
                status = f.read().splitlines()
        except OSError:
            continue
        sw = {k: int(v) for k, v in (line.split(":\t") for line in status
                                       if "ctxt_switches" in line)}
        out[int(tid)] = (int(st[11]) / TICK, int(st[12]) / TICK,
                         sw["voluntary_ctxt_switches"], sw["nonvoluntary_ctxt_switches"],
                         int(st[7]))
    return out


def main() -> None:
    n = int(sys.argv[1])
    mode = sys.argv[2] if len(sys.argv) > 2 else "single"
    if mode not in ("single", "batch"):
        raise SystemExit("mode must be single or batch")
    n_build = max(n, int(os.environ.get("PROBE_BUILD", "0")))
    pool = np.random.default_rng(42).integers(0, 256, 100 + 4096, dtype=np.uint8).tobytes()
    tags = ("TagA", "TagB", "TagC", "TagD")
    msgs = [Message("bench", pool[j:j + 100], tags=tags[i % 4], keys=[f"key-{i:010d}"])
            for i, j in enumerate((i * 7919) % 4096 for i in range(n_build))]
    qids = [i % 8 for i in range(n_build)]

    def run(s: MessageStore) -> None:
        if mode == "single":
            put = s.put_message
            for m, q in islice(zip(msgs, qids, strict=True), n):
                put(m, q)
        else:
            put_messages = s.put_messages
            for i in range(0, n, 1000):
                put_messages(msgs[i:min(i + 1000, n)], qids[i:min(i + 1000, n)])

    with tempfile.TemporaryDirectory(dir=os.environ.get("PROBE_DIR")) as d:
        s = MessageStore.open(d, StoreConfig(store_path_root_dir=d,
                                             mapped_file_size_commit_log=1 << 30,
                                             flush_disk_type="ASYNC_FLUSH"))
        if not os.environ.get("PROBE_NO_PREFAULT"):     # as bench/_common.prefault
            buf = np.empty(2 * 267 * n, dtype=np.uint8)
            buf.fill(1)
            del buf
        names = {t.native_id: t.name for t in threading.enumerate()}
        gc.collect()        # before perf starts: the collection is not the puts'
        gc.disable()
        perf = None
        if os.environ.get("PROBE_PERF"):
            perf = subprocess.Popen(["perf", "record", "-q", "-e", "cpu-clock", "-F", "10000",
                                     "-g", "-p", str(os.getpid()), "-o",
                                     os.environ["PROBE_PERF"]],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1.0)
        before = thread_stats()
        t0, th0, c0 = time.perf_counter(), time.thread_time(), time.process_time()
        run(s)
        wall = time.perf_counter() - t0
        th, cpu = time.thread_time() - th0, time.process_time() - c0
        after = thread_stats()
        if perf is not None:
            perf.send_signal(signal.SIGINT)
            perf.wait()
        dispatched = s.wait_dispatched(300.0)
        s.close()
        gc.enable()
    print(f"pid {os.getpid()} {mode} n={n}: wall {wall * 1e9 / n:.0f} ns/put, calling thread "
          f"{th * 1e9 / n:.0f} ns/put, process {cpu * 1e9 / n:.0f} ns/put, "
          f"dispatched={dispatched}")
    if os.environ.get("PROBE_THREADS"):
        for tid in sorted(after):
            if tid in before:
                u, sy, v, nv, mf = (after[tid][i] - before[tid][i] for i in range(5))
                if u or sy or v or nv:
                    print(f"  {names.get(tid, tid)!s:26} user {u * 1e9 / n:4.0f} sys "
                          f"{sy * 1e9 / n:4.0f} ns/put, voluntary switches/1k puts "
                          f"{v * 1000 / n:5.2f}, involuntary/1k {nv * 1000 / n:5.2f}, "
                          f"minor faults/1k {mf * 1000 / n:6.2f}")


if __name__ == "__main__":
    main()
