#!/usr/bin/env python
"""Run every target of fuzz_parsers.py with its budget of inputs and print the figures.

With a clang on PATH (or CC), the package is first built into a separate directory (beside
the repository: never the checkout's own extensions, never site-packages) with
``-fsanitize=address,fuzzer-no-link``: libFuzzer then sees the native code's coverage and
AddressSanitizer reports any read or write outside a buffer. Without clang, the checkout's
build is fuzzed with Python-level coverage only (and no sanitizer).

    python tests/fuzz/run_fuzz.py                    # the default budgets: 10^6 inputs
    python tests/fuzz/run_fuzz.py --scale 0.01       # a quick run
    python tests/fuzz/run_fuzz.py --targets index --json fuzz.json

Exit code 1 when a target crashed, raised an undocumented exception, leaked memory past a
buffer or hung (-timeout); the input that did it is kept under --artifacts.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HARNESS = Path(__file__).resolve().parent / "fuzz_parsers.py"
BUDGETS = {"commitlog": 600_000, "index": 200_000, "checkpoint": 100_000, "config": 60_000,
           "properties": 20_000, "consumequeue": 20_000}


def find_clang() -> str | None:
    for name in (os.environ.get("CC", ""), "clang", "clang-18", "clang-17", "clang-16",
                 "clang-15", "clang-14"):
        if name and "clang" in name and shutil.which(name):
            return shutil.which(name)
    return None


def build(clang: str, into: Path) -> None:
    """The package, built with sanitizer coverage into `into` (a copy of the sources)."""
    if into.exists():
        shutil.rmtree(into)
    into.mkdir(parents=True)
    for name in ("setup.py", "pyproject.toml", "src", "rocketstore"):
        src = REPO / name
        if src.is_dir():     # not the checkout's builds (extensions, Cython's C files)
            skip = ("*.so", "__pycache__") + (("*.c",) if name == "rocketstore" else ())
            shutil.copytree(src, into / name, ignore=shutil.ignore_patterns(*skip))
        else:
            shutil.copy2(src, into / name)
    env = dict(os.environ, CC=clang, LDSHARED=f"{clang} -shared",
               CFLAGS="-fsanitize=address,fuzzer-no-link -g")
    subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace", "-j", "2"],
                   cwd=into, env=env, check=True, stdout=subprocess.DEVNULL)


def run_target(target: str, runs: int, package: Path, preload: str | None,
               artifacts: Path) -> dict:
    artifacts.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(package),
               ASAN_OPTIONS="detect_leaks=0:allocator_may_return_null=1")
    if preload:
        env["LD_PRELOAD"] = preload
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, str(HARNESS), target, f"-runs={runs}", "-timeout=10",
         "-max_len=8192", "-print_final_stats=1",
         f"-artifact_prefix={artifacts}/{target}-"],
        env=env, capture_output=True, text=True, cwd=artifacts)
    seconds = time.monotonic() - started
    out = proc.stdout + proc.stderr
    done = re.findall(r"stat::number_of_executed_units:\s*(\d+)", out)
    executed = int(done[-1]) if done else 0
    cov = re.findall(r"cov: (\d+)", out)
    finding = None
    if proc.returncode != 0:
        lines = [x for x in out.splitlines() if "ERROR" in x or "Uncaught" in x
                 or "Error" in x or "timeout" in x.lower()]
        finding = (lines[:1] or [f"exit code {proc.returncode}"])[0]
        (artifacts / f"{target}.log").write_text(out)
    return {"target": target, "inputs": executed, "seconds": round(seconds, 1),
            "per_second": round(executed / seconds) if seconds else 0,
            "coverage": int(cov[-1]) if cov else None, "finding": finding}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--targets", nargs="*", default=list(BUDGETS))
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every budget")
    ap.add_argument("--build-dir", type=Path, default=REPO.parent / "rocketstore-fuzz-build")
    ap.add_argument("--artifacts", type=Path, default=REPO.parent / "rocketstore-fuzz-out")
    ap.add_argument("--no-sanitizers", action="store_true",
                    help="fuzz the checkout's own build (no clang needed)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    import atheris
    clang = None if args.no_sanitizers else find_clang()
    preload = None
    package = REPO
    if clang:
        print(f"building an instrumented copy with {clang} in {args.build_dir} ...",
              flush=True)
        build(clang, args.build_dir)
        package = args.build_dir
        preload = os.path.join(atheris.path(), "asan_with_fuzzer.so")
    else:
        print("no clang: fuzzing the checkout's build (Python coverage only, no sanitizer)")
    rows = []
    for target in args.targets:
        runs = max(1, int(BUDGETS[target] * args.scale))
        row = run_target(target, runs, package, preload, args.artifacts)
        rows.append(row)
        print(f"{target}: {row}", flush=True)
    print("\n| target | inputs | seconds | inputs/s | coverage | finding |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['target']} | {r['inputs']:,} | {r['seconds']} | {r['per_second']:,} | "
              f"{r['coverage']} | {r['finding'] or 'none'} |")
    total = sum(r["inputs"] for r in rows)
    print(f"\ntotal: {total:,} inputs; sanitizers: {'ASan + libFuzzer coverage' if clang else 'none'}")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "total": total,
                                         "sanitizers": bool(clang)}, indent=1))
    return 1 if any(r["finding"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
