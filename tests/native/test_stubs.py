"""Every compiled module of rocketstore (the native layer, remoting's and the client's
extensions) has a .pyi stub, and mypy.stubtest finds the
stubs true to the modules (names, signatures, properties, finality). The allowlist beside
this file names only what Cython adds to every module."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import rocketstore._native

NATIVE_DIR = Path(rocketstore._native.__file__).parent
PACKAGE_DIR = NATIVE_DIR.parent
ALLOWLIST = Path(__file__).with_name("stubtest_allowlist.txt")


def compiled_modules() -> list[str]:
    """The extension modules of the package, from its .so files (the .pyx sources are not
    installed)."""
    names = set()
    for path in PACKAGE_DIR.rglob("*"):
        if path.suffix in (".so", ".pyd"):
            parts = path.relative_to(PACKAGE_DIR.parent).with_name(path.name.split(".")[0]).parts
            names.add(".".join(parts))
    return sorted(names)


def stub_path(module: str) -> Path:
    return PACKAGE_DIR.parent.joinpath(*module.split(".")).with_suffix(".pyi")


def test_every_compiled_module_has_a_stub() -> None:
    modules = compiled_modules()
    assert sum(m.startswith("rocketstore._native.") for m in modules) >= 10, modules
    assert any(m.startswith("rocketstore.remoting.") for m in modules), modules
    missing = [m for m in modules if not stub_path(m).exists()]
    assert missing == []


def test_stubs_match_the_compiled_modules(tmp_path: Path) -> None:
    pytest.importorskip("mypy.stubtest")
    config = tmp_path / "mypy.ini"
    # only the stubs are checked: what they import (the Python package, pyarrow) is followed
    # silently
    config.write_text("[mypy]\nignore_missing_imports = True\nfollow_imports = silent\n")
    # mypy takes its working directory for user code: run it beside a copy of the package
    # (where it is installed, site-packages' other modules would shadow the library's own)
    package_root = tmp_path / "package"
    shutil.copytree(PACKAGE_DIR, package_root / "rocketstore",
                    ignore=shutil.ignore_patterns("__pycache__"))
    env = dict(os.environ, MYPY_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "--mypy-config-file", str(config),
         "--allowlist", str(ALLOWLIST), *compiled_modules()],
        cwd=package_root, env=env, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
