"""The remoting layer's compiled modules (_command, _frames, _pump) have .pyi stubs, and
mypy.stubtest finds them true to the modules. The allowlist names only what Cython adds to
every module."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import rocketstore.remoting

REMOTING_DIR = Path(rocketstore.remoting.__file__).parent
ALLOWLIST = """
rocketstore\\.remoting\\._\\w+\\.__pyx_capi__
rocketstore\\.remoting\\._\\w+\\.__test__
rocketstore\\.remoting\\._.*\\.__reduce_cython__
rocketstore\\.remoting\\._.*\\.__setstate_cython__
"""


def compiled_modules() -> list[str]:
    names = {p.name.split(".")[0] for p in REMOTING_DIR.iterdir() if p.suffix in (".so", ".pyd")}
    return sorted(f"rocketstore.remoting.{n}" for n in names)


def test_every_compiled_module_has_a_stub() -> None:
    modules = compiled_modules()
    assert {"rocketstore.remoting._command", "rocketstore.remoting._frames"} <= set(modules)
    missing = [m for m in modules if not (REMOTING_DIR / f"{m.rsplit('.', 1)[1]}.pyi").exists()]
    assert missing == []


@pytest.mark.slow
def test_stubs_match_the_compiled_modules(tmp_path: Path) -> None:
    pytest.importorskip("mypy.stubtest")
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\nignore_missing_imports = True\nfollow_imports = silent\n")
    allowlist = tmp_path / "allowlist.txt"
    allowlist.write_text(ALLOWLIST)
    package_root = tmp_path / "package"
    shutil.copytree(REMOTING_DIR.parent, package_root / "rocketstore",
                    ignore=shutil.ignore_patterns("__pycache__"))
    env = dict(os.environ, MYPY_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "--mypy-config-file", str(config),
         "--allowlist", str(allowlist), *compiled_modules()],
        cwd=package_root, env=env, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
