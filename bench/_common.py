"""Shared helpers for the bench/ scripts: temp dirs on a real disk, timing, machine info,
markdown tables and JSON output.

Benchmarks here are runnable scripts, not timed tests: each prints a markdown table with the
ratio against a reference measured in the same run, because absolute numbers on shared machines
mean little (docs/design.md, "Tests and benchmarks").
"""
from __future__ import annotations

import atexit
import datetime as _dt
import gc
import glob
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(BENCH_DIR)
MB = 1_000_000          # rates are reported in MB = 10^6 bytes
MiB = 1 << 20


def built_in_place(root: str = REPO_ROOT) -> bool:
    """Whether the checkout at root has its extensions compiled in place."""
    return bool(glob.glob(os.path.join(root, "rocketstore", "remoting", "_command*.so")))


def ensure_importable() -> None:
    """Import rocketstore from this checkout when it is built in place (a developer measuring
    the tree they work on), else the installed package (after ``pip install .`` the checkout's
    modules are not compiled, and putting it first on sys.path would hide the installed ones)."""
    if built_in_place():
        if REPO_ROOT not in sys.path:
            sys.path.insert(0, REPO_ROOT)
        return
    try:
        import rocketstore  # noqa: F401
    except ImportError:
        raise SystemExit("rocketstore is neither installed nor built in place: run `pip install .` "
                         "(or `python setup.py build_ext --inplace`) first") from None


# ---- charts ---------------------------------------------------------------------------------
#: Every table markdown_table made in this run, for --png.
TABLES: list[tuple[str, list[str], list[list[str]]]] = []


def _png_option() -> str | None:
    """``--png FILE`` on a benchmark's command line: taken out here (before the script's own
    argparse sees it); the run's tables are drawn into FILE when it ends (bench/chart.py)."""
    if "--png" not in sys.argv:
        return None
    at = sys.argv.index("--png")
    if at + 1 >= len(sys.argv):
        raise SystemExit("--png needs a file name")
    path = sys.argv[at + 1]
    del sys.argv[at:at + 2]
    return path


def _draw_tables_at_exit(path: str) -> None:
    from chart import Table, draw

    drawn = draw([Table(title, headers, rows) for title, headers, rows in TABLES], path)
    print(f"\n{path}: {drawn} chart panel(s)", file=sys.stderr)


PNG_PATH = _png_option()
if PNG_PATH is not None:
    atexit.register(_draw_tables_at_exit, PNG_PATH)


# ---- temp dirs ------------------------------------------------------------------------------
def fs_type(path: str) -> str:
    """File system type of the mount holding path (from /proc/mounts; '?' if unknown)."""
    path = os.path.realpath(path)
    best, kind = "", "?"
    try:
        with open("/proc/mounts") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 3:
                    mnt = parts[1].replace("\\040", " ")
                    if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) > len(best):
                        best, kind = mnt, parts[2]
    except OSError:
        pass
    return kind


def default_base_dir() -> str:
    """Where temp stores go by default: the repository's parent directory (same disk as the
    repo). Never /tmp, which is tmpfs (RAM) on many machines and would flatter every number."""
    return os.path.dirname(REPO_ROOT)


class TempDirs:
    """One temp root under base (default: the repo's parent), subdirectories on demand,
    everything removed at exit (also on Ctrl-C and at interpreter exit)."""

    def __init__(self, base: str | None = None, prefix: str = "rocketstore-bench-") -> None:
        base = os.path.abspath(base or default_base_dir())
        os.makedirs(base, exist_ok=True)
        kind = fs_type(base)
        if kind in ("tmpfs", "ramfs"):
            warnings.warn(f"{base} is on {kind} (RAM): results will not reflect a disk-backed "
                          "store; pass --dir on a real disk", RuntimeWarning, stacklevel=2)
        self.base = base
        self.fs = kind
        self.root = tempfile.mkdtemp(prefix=prefix, dir=base)
        self._n = 0
        atexit.register(self.cleanup)

    def new(self, name: str) -> str:
        self._n += 1
        path = os.path.join(self.root, f"{self._n:03d}-{name}")
        os.makedirs(path)
        return path

    def remove(self, path: str) -> None:
        shutil.rmtree(path, ignore_errors=True)

    def cleanup(self) -> None:
        if self.root and os.path.exists(self.root):
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> TempDirs:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.cleanup()


def free_bytes(path: str) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


# ---- timing ---------------------------------------------------------------------------------
def prefault(nbytes: int) -> None:
    """Touch and free nbytes of anonymous memory, so that what the next timed block allocates
    (page cache, Python heap) comes from guest pages the hypervisor has already backed.

    Why: on VMs with free page reporting or proactive reclaim (this Firecracker guest runs a
    virtio balloon and a DAMON "pageout" scheme), memory freed a second or two earlier is handed
    back to the host, and the next first touch of it costs ~10 us a page instead of ~1.3 us.
    That cost lands on whichever run follows a pause (a store close, an rmtree), i.e. randomly:
    the same 267 MB copy took 0.07 s or 0.5 s. Prefaulting makes runs comparable; it does not
    remove the ordinary first-touch fault of a file page, which every row still pays."""
    if nbytes <= 0:
        return
    import numpy as np
    buf = np.empty(nbytes, dtype=np.uint8)
    buf.fill(1)
    del buf


# Which clock Timer.seconds reports: "wall" (perf_counter, the default), "cpu" (process CPU
# time, user + system, every thread: robust when other processes compete for the cores, blind
# to waiting, and it charges a store's background services) or "thread" (the calling thread's
# CPU time only: the foreground path alone).
CLOCK = "wall"
_last: list[tuple[float, float, float]] = []


def pick(wall: float, cpu: float, thread: float) -> float:
    """The one of three times that CLOCK names."""
    return cpu if CLOCK == "cpu" else thread if CLOCK == "thread" else wall


class Timer:
    """`with Timer() as t: ...` then t.seconds (per CLOCK), t.wall, t.cpu (the process: every
    thread, the store's background services included) and t.thread (the calling thread's CPU
    time: what the caller itself spent; t.cpu - t.thread is background work). With gc_off
    (default) the cyclic GC is collected before and disabled inside the timed block, as timeit
    does. With prefault, prefault(that many bytes) first (outside the timing)."""

    def __init__(self, gc_off: bool = True, prefault: int = 0) -> None:
        self.gc_off = gc_off
        self.prefault = prefault
        self.seconds = self.wall = self.cpu = self.thread = 0.0
        self._was_enabled = False

    def __enter__(self) -> Timer:
        self._was_enabled = gc.isenabled()
        prefault(self.prefault)
        gc.collect()
        if self.gc_off:
            gc.disable()
        self.c0 = time.process_time()
        self.th0 = time.thread_time()
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.wall = time.perf_counter() - self.t0
        self.thread = time.thread_time() - self.th0
        self.cpu = time.process_time() - self.c0
        self.seconds = pick(self.wall, self.cpu, self.thread)
        if self._was_enabled:
            gc.enable()
        _last[:] = [(self.wall, self.cpu, self.thread)]


class Samples(list):
    """Seconds per run (per CLOCK), with the wall, process CPU and calling-thread CPU times of
    each run beside them (thread may be empty when a run was timed without it)."""

    def __init__(self, values: Iterable[float] = (), wall: Sequence[float] = (),
                 cpu: Sequence[float] = (), thread: Sequence[float] = ()) -> None:
        super().__init__(values)
        self.wall = list(wall)
        self.cpu = list(cpu)
        self.thread = list(thread)


def add_sample(samples: Samples, seconds: float) -> None:
    """Append one run measured by the last Timer (seconds per CLOCK, plus its wall and CPU)."""
    samples.append(seconds)
    if _last:
        samples.wall.append(_last[0][0])
        samples.cpu.append(_last[0][1])
        samples.thread.append(_last[0][2])


def add_times(samples: Samples, wall: float, cpu: float, thread: float | None = None) -> None:
    """Append one run timed by hand (seconds per CLOCK; without thread, the thread clock falls
    back to cpu)."""
    samples.append(pick(wall, cpu, cpu if thread is None else thread))
    samples.wall.append(wall)
    samples.cpu.append(cpu)
    if thread is not None:
        samples.thread.append(thread)


def run_repeated(repeat: int, once: Callable[[int], float]) -> Samples:
    """Call once(i) repeat times; each returns the seconds it measured (one Timer in it)."""
    out = Samples()
    for i in range(repeat):
        _last.clear()
        out.append(once(i))
        if _last:
            out.wall.append(_last[0][0])
            out.cpu.append(_last[0][1])
            out.thread.append(_last[0][2])
    return out


def median(samples: Sequence[float]) -> float:
    return statistics.median(samples)


@dataclass
class Measurement:
    """One row: a count of messages (or operations) moved in `samples` seconds each."""

    group: str                 # e.g. "100 B"
    name: str                  # e.g. "put_message (single)"
    count: int                 # messages per run
    record_bytes: int          # encoded bytes per run (0 when not meaningful)
    body_bytes: int            # body bytes per run (0 when not meaningful)
    samples: list[float]
    kind: str = "store"        # store | reference | extra
    note: str = ""
    ratios: dict[str, float] = field(default_factory=dict)

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    thread: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        if isinstance(self.samples, Samples):
            self.wall = self.wall or self.samples.wall
            self.cpu = self.cpu or self.samples.cpu
            self.thread = self.thread or self.samples.thread
        self.samples = list(self.samples)

    def us_per_msg_of(self, which: str) -> float | None:
        """Median microseconds per message of one clock: wall, cpu (all threads) or thread."""
        values = getattr(self, which)
        if not values or not self.count:
            return None
        return median(values) / self.count * 1e6

    @property
    def cpu_share(self) -> float | None:
        """Median CPU time / median wall time: well below 1.0 means the run waited (other
        processes on the cores, I/O) and its wall number is inflated."""
        if not self.cpu or not self.wall or median(self.wall) <= 0:
            return None
        return median(self.cpu) / median(self.wall)

    @property
    def seconds(self) -> float:
        return median(self.samples)

    @property
    def msgs_per_s(self) -> float:
        return self.count / self.seconds if self.seconds > 0 else float("inf")

    @property
    def mb_per_s(self) -> float:
        return self.record_bytes / MB / self.seconds if self.seconds > 0 else float("inf")

    @property
    def body_mb_per_s(self) -> float:
        return self.body_bytes / MB / self.seconds if self.seconds > 0 else float("inf")

    @property
    def us_per_msg(self) -> float:
        return self.seconds / self.count * 1e6 if self.count else 0.0

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(median_s=self.seconds, cpu_share=self.cpu_share, msgs_per_s=self.msgs_per_s, mb_per_s=self.mb_per_s,
                 body_mb_per_s=self.body_mb_per_s, us_per_msg=self.us_per_msg)
        return d


# ---- formatting -----------------------------------------------------------------------------
def fmt_int(x: float) -> str:
    return f"{x:,.0f}"


def fmt_rate(x: float) -> str:
    if x != x or x in (float("inf"), float("-inf")):
        return "-"
    if x >= 100:
        return f"{x:,.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def fmt_ratio(x: float | None) -> str:
    return "" if x is None else f"{x:.2f}"


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[Any]],
                   align: str | None = None, title: str = "") -> str:
    """A GitHub markdown table; align is one char per column: l, r or c (default: l then r).
    Kept for ``--png`` too (``title`` names its chart panel)."""
    rows = [[str(c) for c in r] for r in rows]
    TABLES.append((title or f"table {len(TABLES) + 1}", list(headers), rows))
    n = len(headers)
    align = align or ("l" + "r" * (n - 1))
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def cell(text: str, i: int) -> str:
        return text.rjust(widths[i]) if align[i] == "r" else text.ljust(widths[i])

    sep = {"l": ":{}", "r": "{}:", "c": ":{}:"}
    out = ["| " + " | ".join(cell(h, i) for i, h in enumerate(headers)) + " |",
           "|" + "|".join(sep[align[i]].format("-" * (widths[i] + 2 - (2 if align[i] == "c" else 1)))
                          for i in range(n)) + "|"]
    out += ["| " + " | ".join(cell(c, i) for i, c in enumerate(r)) + " |" for r in rows]
    return "\n".join(out)


# ---- machine info ---------------------------------------------------------------------------
def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def mem_total_gib() -> float | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) / (1 << 20)
    except OSError:
        pass
    return None


def machine_info(bench_dir: str | None = None, extra: dict[str, Any] | None = None
                 ) -> dict[str, Any]:
    info: dict[str, Any] = {
        "date": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "cpu": cpu_model(),
        "nproc": os.cpu_count(),
        "mem_gib": round(mem_total_gib() or 0, 1),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "os": f"{platform.system()} {platform.release()}",
    }
    try:
        import numpy
        info["numpy"] = numpy.__version__
    except ImportError:
        pass
    try:
        import rocketstore
        from rocketstore._native import hashes
        info["rocketstore"] = rocketstore.__version__
        info["crc32_impl"] = hashes.CRC32_IMPL
    except ImportError:
        pass
    if bench_dir:
        info["bench_dir"] = bench_dir
        info["bench_fs"] = fs_type(bench_dir)
    if extra:
        info.update(extra)
    return info


def print_machine_info(info: dict[str, Any]) -> None:
    print("Machine: " + ", ".join(f"{k}={v}" for k, v in info.items()))


def write_json(path: str, payload: dict[str, Any]) -> None:
    with open(path, "w") as f:
        json.dump(payload, f, indent=2, default=str)
        f.write("\n")
