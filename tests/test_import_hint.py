"""Importing rocketstore from a source tree without its compiled extensions says what to do;
the network peers import without loading the store, nor the broker the name server."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import PACKAGE_ROOT

import rocketstore


def test_unbuilt_source_tree_explains_itself(tmp_path: Path) -> None:
    package = Path(rocketstore.__file__).parent
    shutil.copytree(package, tmp_path / "rocketstore",
                    ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    proc = subprocess.run([sys.executable, "-c", "from rocketstore import MessageStore"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "compiled extensions" in proc.stderr
    assert "pip install ." in proc.stderr and "build_ext --inplace" in proc.stderr


def test_public_names_resolve_and_unknown_names_raise() -> None:
    for name in rocketstore.__all__:
        assert getattr(rocketstore, name) is not None
    assert set(rocketstore.__all__) <= set(dir(rocketstore))
    with pytest.raises(AttributeError, match="no_such_name"):
        rocketstore.no_such_name  # noqa: B018


@pytest.mark.parametrize("module", ["rocketstore.namesrv", "rocketstore.remoting"])
def test_network_peers_do_not_load_the_store(module: str, tmp_path: Path) -> None:
    code = (f"import sys, {module}\n"
            "loaded = sorted(m for m in sys.modules if m.startswith(('rocketstore.store', "
            "'rocketstore._native', 'rocketstore.broker')))\n"
            "print(loaded)\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, env={"PYTHONPATH": str(PACKAGE_ROOT),
                                                      "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_the_broker_does_not_load_the_name_server(tmp_path: Path) -> None:
    code = ("import sys, rocketstore.broker\n"
            "print(sorted(m for m in sys.modules if m.startswith('rocketstore.namesrv')))\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, env={"PYTHONPATH": str(PACKAGE_ROOT),
                                                      "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_exports_and_all_agree() -> None:
    assert set(rocketstore.__all__) == {*rocketstore._EXPORTS, "__version__"}
