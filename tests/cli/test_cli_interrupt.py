"""Ctrl-C ends the ``rocketstore`` command with exit status 130 and no traceback, whether it
lands while the command line is still importing or in the middle of a command's work."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import TESTS, run_python

import rocketstore

PACKAGE_ROOT = str(Path(rocketstore.__file__).resolve().parents[1])


def _interrupted(args: list[str], after_s: float, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": PACKAGE_ROOT, "PATH": "/usr/bin:/bin"}
    # "started" once run() imports the command line (an import hook says so): a Ctrl-C from
    # there on lands where run() answers for it. Announcing before run() is called would leave
    # a gap the signal can land in (a loaded machine preempts the child right after its write),
    # which is the interpreter's own startup, as Ctrl-C before any console script's entry point.
    code = (
        "import sys\n"
        "from rocketstore.__main__ import run\n"
        "class Announce:\n"
        "    @staticmethod\n"
        "    def find_spec(name, path=None, target=None):\n"
        "        if name == 'rocketstore.cli':\n"
        "            print('started', flush=True)\n"
        "        return None\n"
        "sys.meta_path.insert(0, Announce)\n"
        "run()\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=str(TESTS))
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "started"
    time.sleep(after_s)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.mark.parametrize("after_s", [0.0, 0.05, 0.2, 0.6, 2.5])
def test_ctrl_c_exits_130_without_a_traceback(tmp_path: Path, after_s: float) -> None:
    result = _interrupted(["demo", str(tmp_path / "demo"), "-n", "3000000", "--no-progress"], after_s,
                          tmp_path)
    assert result.returncode == 130, (result.returncode, result.stderr[-3000:])
    assert "Traceback" not in result.stderr and "Aborted" not in result.stderr, result.stderr[-3000:]


def test_interrupted_demo_store_still_opens(tmp_path: Path) -> None:
    result = _interrupted(["demo", str(tmp_path / "demo"), "-n", "3000000", "--no-progress"], 2.5, tmp_path)
    assert result.returncode == 130
    check = run_python(f"""
from rocketstore import MessageStore
with MessageStore.open({str(tmp_path / 'demo')!r}, read_only=True) as store:
    print(store.get_max_phy_offset() > 0)
""")
    assert check.returncode == 0 and check.stdout.strip() == "True", check.stderr[-3000:]
