"""The house's import contract (pyproject.toml [tool.importlinter]): packages import only
downward. It holds for the package, and it fails when an import crosses a layer upward."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import rocketstore

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "pyproject.toml"
PACKAGE = Path(rocketstore.__file__).resolve().parent

pytest.importorskip("importlinter", reason="import-linter is in the test extra")


def lint_imports(package_parent: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(package_parent)}
    run = "import sys; from importlinter.cli import lint_imports_command; lint_imports_command()"
    return subprocess.run([sys.executable, "-c", run, "--config", str(CONFIG)],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def copy_sources(dst: Path) -> Path:
    """The package's Python sources (what the contract reads), without compiled modules."""
    shutil.copytree(PACKAGE, dst / "rocketstore",
                    ignore=shutil.ignore_patterns("*.so", "*.c", "__pycache__"))
    return dst


def test_the_package_keeps_its_layers(tmp_path: Path) -> None:
    proc = lint_imports(copy_sources(tmp_path / "src"), tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout


def test_an_upward_import_breaks_the_contract(tmp_path: Path) -> None:
    src = copy_sources(tmp_path / "src")
    (src / "rocketstore" / "store" / "upward.py").write_text(
        "from rocketstore.broker import consumer_offset_manager\n", encoding="utf-8")
    proc = lint_imports(src, tmp_path)
    assert proc.returncode != 0
    assert "rocketstore.store.upward -> rocketstore.broker.consumer_offset_manager" in proc.stdout


def test_a_broker_import_of_the_name_server_breaks_the_contract(tmp_path: Path) -> None:
    src = copy_sources(tmp_path / "src")
    (src / "rocketstore" / "broker" / "peer.py").write_text(
        "from rocketstore.namesrv import route_info\n", encoding="utf-8")
    proc = lint_imports(src, tmp_path)
    assert proc.returncode != 0
    assert "rocketstore.broker.peer -> rocketstore.namesrv.route_info" in proc.stdout

