"""Every compiled module of rocketstore._native has a .pyi stub, and mypy.stubtest finds the
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
ALLOWLIST = Path(__file__).with_name("stubtest_allowlist.txt")


def compiled_modules() -> list[str]:
    """The extension modules of rocketstore._native, from the .so files beside the package
    (the .pyx sources are not installed)."""
    names = {p.name.split(".")[0] for p in NATIVE_DIR.iterdir()
             if p.suffix in (".so", ".pyd") and not p.name.startswith("_")}
    return sorted(f"rocketstore._native.{n}" for n in names)


def test_every_compiled_module_has_a_stub() -> None:
    modules = compiled_modules()
    assert len(modules) >= 10, modules
    missing = [m for m in modules if not (NATIVE_DIR / f"{m.rsplit('.', 1)[1]}.pyi").exists()]
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
    shutil.copytree(NATIVE_DIR.parent, package_root / "rocketstore",
                    ignore=shutil.ignore_patterns("__pycache__"))
    env = dict(os.environ, MYPY_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "--mypy-config-file", str(config),
         "--allowlist", str(ALLOWLIST), *compiled_modules()],
        cwd=package_root, env=env, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
