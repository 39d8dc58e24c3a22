"""The README's quick start, run: its two Python blocks against a name server and a broker
(ours, then with RocketMQ's C++ client from PyPI)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from cluster import CHILD_CWD, child_env, cluster

from rocketstore.client import AdminClient

pytestmark = pytest.mark.slow

README = Path(__file__).resolve().parents[2] / "README.md"


def block(name: str) -> str:
    text = README.read_text("utf-8")
    match = re.search(rf"<!-- quickstart: {name} -->\n```python\n(.*?)```", text, re.S)
    assert match, f"README has no quick start block {name!r}"
    return match.group(1)


def run_block(name: str, namesrv: str, home: Path) -> str:
    code = block(name).replace("127.0.0.1:9876", namesrv)
    home.mkdir(exist_ok=True)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180,
                          env=child_env(HOME=str(home)), cwd=CHILD_CWD)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    return proc.stdout


def test_readme_quick_start(tmp_path: Path) -> None:
    with cluster(tmp_path) as c:
        with AdminClient(namesrv_addr=c.namesrv_addr) as admin:
            admin.update_topic("orders", cluster="TestCluster", read_queue_nums=4, write_queue_nums=4)
        out = run_block("rocketstore", c.namesrv_addr, tmp_path / "home")
        assert out.strip().splitlines()[-1] == "[b'order 0 paid', b'order 1 paid', b'order 2 paid']"
        pytest.importorskip("rocketmq.client", reason="RocketMQ's C++ client (rocketmq on PyPI) is not installed")
        out = run_block("rocketmq", c.namesrv_addr, tmp_path / "home")
        lines = out.strip().splitlines()
        assert "[b'order 100 shipped']" in lines
        assert lines[-1] == "[b'order 100 shipped', b'order 200 shipped']"
