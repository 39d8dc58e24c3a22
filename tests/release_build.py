"""The release build tests/test_packaging.py checks (.ci/build-wheel on a copy of the tracked
files), started as soon as collection selects those tests, in a background process at the
lowest CPU priority: compiling every extension takes minutes of CPU, which it then takes from
the idle time of the tests that wait on servers instead of adding to the suite's wall time."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: the bound on the whole build (a loaded 2-core machine compiles every extension in minutes)
BUILD_TIMEOUT_S = 1800


class ReleaseBuild:
    """One background run of .ci/build-wheel: ``out`` receives the distributions."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="rocketstore-release-"))
        self.out = self.root / "dist"
        self.log = self.root / "build.log"
        self.skip_reason: str | None = None
        self.process: subprocess.Popen[bytes] | None = None
        if not (REPO / "setup.py").exists() or not (REPO / ".ci" / "build-wheel").exists():
            self.skip_reason = f"not a source checkout: {REPO} has no setup.py or .ci/build-wheel"
            return
        if sys.platform != "linux":
            self.skip_reason = "manylinux wheels are built on Linux"
            return
        files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=False)
        if files.returncode != 0:
            self.skip_reason = "not a git checkout: the release is built from the tracked files"
            return
        # a copy: the build must not depend on (or write into) the checkout's in-place build
        src = self.root / "src" / "rocketstore"
        for name in files.stdout.decode().split("\0"):
            if name and (REPO / name).is_file():
                (src / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(REPO / name, src / name)
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(
                ["nice", "-n", "19", "bash", str(src / ".ci" / "build-wheel"), str(self.out)],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def result(self) -> tuple[int, str]:
        """Wait for the build: (its exit status, the end of its output)."""
        assert self.process is not None
        try:
            code = self.process.wait(BUILD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.stop()
            code = -1
        return code, self.log.read_text(errors="replace")[-8000:]

    def stop(self) -> None:
        """Kill a build still running and remove what it made."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)
        shutil.rmtree(self.root, ignore_errors=True)


_build: ReleaseBuild | None = None


def start() -> ReleaseBuild:
    """The session's release build, started on the first call."""
    global _build
    if _build is None:
        _build = ReleaseBuild()
    return _build


def stop() -> None:
    global _build
    if _build is not None:
        _build.stop()
        _build = None
