"""The house's import contracts (pyproject.toml [tool.importlinter]): packages import only
downward, other packages use the store only through ``rocketstore.store``, and the broker never
imports the name server. They hold for the package, and each fails on a planted violation.
Beside them, a grep: nothing outside the store reaches through a MessageStore into its parts."""
from __future__ import annotations

import os
import pkgutil
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import rocketstore
import rocketstore.store

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


def test_the_vocabulary_importing_any_other_package_breaks_the_contract(tmp_path: Path) -> None:
    """rocketstore.common is the floor: even a package below it in the layers (native code,
    the store's types) may not be imported from it."""
    src = copy_sources(tmp_path / "src")
    (src / "rocketstore" / "common" / "leak.py").write_text(
        "from rocketstore.config import StoreConfig\n", encoding="utf-8")
    proc = lint_imports(src, tmp_path)
    assert proc.returncode != 0
    assert "rocketstore.common.leak -> rocketstore.config" in proc.stdout


def test_a_reach_into_a_store_module_breaks_the_contract(tmp_path: Path) -> None:
    src = copy_sources(tmp_path / "src")
    (src / "rocketstore" / "broker" / "reach.py").write_text(
        "from rocketstore.store.commit_log import CommitLog\n", encoding="utf-8")
    (src / "rocketstore" / "spark" / "reach.py").write_text(
        "import rocketstore.store.services.reput\n", encoding="utf-8")
    proc = lint_imports(src, tmp_path)
    assert proc.returncode != 0
    assert "rocketstore.broker.reach -> rocketstore.store.commit_log" in proc.stdout
    assert "rocketstore.spark.reach -> rocketstore.store.services.reput" in proc.stdout


def test_no_name_of_the_store_face_is_a_store_module() -> None:
    """``from rocketstore.store import x`` must mean the face: were x also a module inside the
    package, the contract would read it as an import of that module."""
    modules = {m.name for m in pkgutil.iter_modules(rocketstore.store.__path__)}
    assert not modules & set(rocketstore.store.__all__)
    assert set(rocketstore.store.__all__) <= set(dir(rocketstore.store))


#: MessageStore's parts: the store's own modules use them, callers use its methods
STORE_PARTS = ("commit_log", "reput", "consume_queues", "index_service", "checkpoint",
               "damage_book", "clean_commit_log", "clean_consume_queue", "clean_service",
               "flush_consume_queue", "allocate_service", "pool")
REACH = re.compile(r"\bstore\.(?:" + "|".join(STORE_PARTS) + r"|_\w+)\b")


def test_no_package_reaches_through_the_store_into_its_parts() -> None:
    found = []
    for package in ("broker", "cli", "spark", "export"):
        for path in sorted((PACKAGE / package).rglob("*")):
            if path.suffix not in (".py", ".pyx", ".pxd"):
                continue
            name = path.relative_to(PACKAGE).as_posix()
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if REACH.search(line):
                    found.append(f"{name}:{n}: {line.strip()}")
    assert not found, "\n".join(found)
