"""A bounded run of every target of fuzz_parsers.py (coverage-guided, atheris): a few
thousand inputs each, in child processes, so that a crash is a failure and not the end of
the test run. The long runs (10^6 inputs, native coverage, AddressSanitizer) are
tests/fuzz/run_fuzz.py's; their figures are in bench/README.md."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import helpers
import pytest

pytest.importorskip("atheris", reason="atheris is not installed (pip install '.[fuzz]')")

HARNESS = Path(__file__).resolve().parent / "fuzz_parsers.py"
RUNS = {"commitlog": 4000, "index": 3000, "checkpoint": 2000, "config": 1000,
        "properties": 300, "consumequeue": 300}


@pytest.mark.slow
@pytest.mark.parametrize("target", sorted(RUNS))
def test_fuzz_target(target: str, tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(helpers.PACKAGE_ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run(
        [sys.executable, str(HARNESS), target, f"-runs={RUNS[target]}", "-timeout=10",
         "-max_len=8192", "-print_final_stats=1", f"-artifact_prefix={tmp_path}/",
         "-seed=14"],
        env=env, capture_output=True, text=True, cwd=tmp_path, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert f"stat::number_of_executed_units: {RUNS[target]}" in out, out[-2000:]
