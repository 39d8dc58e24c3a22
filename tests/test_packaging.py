"""The release distributions as a user receives them (.ci/build-wheel): the sdist holds the
sources and builds with pip in a clean build environment; the wheel holds no C and no debug
info, is repaired to a manylinux tag, and installs and runs the demo in a fresh virtualenv with
no compiler on PATH. One build serves every check (it compiles every extension: minutes)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: a wheel over this is carrying what it should not (generated C, debug info): about 3 MB today
WHEEL_LIMIT = 8 << 20

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not (REPO / "setup.py").exists() or not (REPO / ".ci" / "build-wheel").exists():
        pytest.skip(f"not a source checkout: {REPO} has no setup.py or .ci/build-wheel")
    if sys.platform != "linux":
        pytest.skip("manylinux wheels are built on Linux")
    out = tmp_path_factory.mktemp("dist")
    # a copy: the build must not depend on (or write into) the checkout's in-place build
    src = tmp_path_factory.mktemp("src") / "rocketstore"
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=False)
    if files.returncode != 0:
        pytest.skip("not a git checkout: the release is built from the tracked files")
    for name in files.stdout.decode().split("\0"):
        if name and (REPO / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, src / name)
    # at -O0: what is checked is what the distributions hold, not how fast the code runs, and
    # -O3 takes three times the compile time (the release builds keep -O3)
    result = subprocess.run(["bash", str(src / ".ci" / "build-wheel"), str(out)], capture_output=True,
                            text=True, timeout=1800, env={**os.environ, "ROCKETSTORE_BUILD_OPT": "-O0"})
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-5000:]}"
    return out


def _one(folder: Path, pattern: str) -> Path:
    found = sorted(folder.glob(pattern))
    assert len(found) == 1, f"{pattern} in {folder}: {[p.name for p in folder.iterdir()]}"
    return found[0]


def test_sdist_holds_the_sources_and_no_generated_code(dist: Path) -> None:
    with tarfile.open(_one(dist, "rocketstore-*.tar.gz")) as tar:
        names = [n.split("/", 1)[1] for n in tar.getnames() if "/" in n]
    assert "LICENSE" in names and "setup.py" in names and "pyproject.toml" in names
    assert "rocketstore/_native/mapped_file.pyx" in names
    assert "rocketstore/remoting/_command.pyx" in names
    assert "rocketstore/_native/includes/crc32.pxd" in names
    assert any(n.startswith("src/") and n.endswith(".c") for n in names)
    assert any(n.startswith("src/") and n.endswith(".h") for n in names)
    generated = [n for n in names if n.startswith("rocketstore/") and n.endswith((".c", ".so"))]
    assert generated == []
    assert "src/rs_vocabulary.h" not in names      # setup.py writes it from rocketstore/common


def test_wheel_is_slim_stripped_and_manylinux(dist: Path) -> None:
    wheel = _one(dist, "rocketstore-*manylinux*.whl")
    assert wheel.stat().st_size < WHEEL_LIMIT, wheel.stat().st_size
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        assert [n for n in names if n.endswith((".c", ".pyx"))] == []
        modules = [n for n in names if n.endswith(".so")]
        assert len(modules) >= 20
        for name in modules:
            data = zf.read(name)
            # a stripped ELF has neither section name in its section-name table
            assert b".debug_info" not in data and b".symtab" not in data, f"{name} is not stripped"
        metadata = zf.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        assert "License-Expression: Apache-2.0" in metadata
        assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)


def test_repaired_wheel_installs_and_runs_the_demo_without_a_compiler(dist: Path, tmp_path: Path) -> None:
    wheel = _one(dist, "rocketstore-*manylinux*.whl")
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    bin_dir = env_dir / "bin"
    # a clean environment: a PYTHONPATH naming a checkout (other tests set one for their
    # children) would make pip find rocketstore "already satisfied" and install nothing
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("PIP_")}
    install = subprocess.run([str(bin_dir / "python"), "-m", "pip", "install", "-q", str(wheel)],
                             capture_output=True, text=True, timeout=900, env=clean)
    assert install.returncode == 0, install.stderr[-3000:]
    # only the virtualenv on PATH: no gcc, no cc; CC pointing nowhere for good measure
    env = {"PATH": str(bin_dir), "CC": "/nonexistent-cc", "HOME": str(tmp_path),
           "LANG": os.environ.get("LANG", "C.UTF-8")}
    demo = subprocess.run([str(bin_dir / "rocketstore"), "demo", str(tmp_path / "demo"), "-n", "2000",
                           "--no-progress"], capture_output=True, text=True, timeout=600, env=env,
                          cwd=tmp_path)
    assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-3000:]
    assert "2,000" in demo.stdout or "2000" in demo.stdout, demo.stdout
    where = subprocess.run([str(bin_dir / "python"), "-c", "import rocketstore; print(rocketstore.__file__)"],
                           capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert str(env_dir) in where.stdout
