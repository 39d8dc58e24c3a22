"""A small real file system for tests: a tmpfs mounted by the test in a private mount
namespace (``unshare -m``, or ``unshare -rm`` as an unprivileged user), so nothing outside the
child process sees it and it goes away with the child. Tests skip, saying why, where the
sandbox allows neither."""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import helpers


def _unshare_argv() -> list[str]:
    return ["unshare", "-m"] if os.geteuid() == 0 else ["unshare", "-rm"]


@functools.cache
def unavailable() -> str | None:
    """Why a tmpfs cannot be mounted here (None: it can)."""
    if sys.platform != "linux":
        return f"tmpfs mounts need Linux (this is {sys.platform})"
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return "unshare(1) or mount(8) is not installed"
    with tempfile.TemporaryDirectory() as where:
        try:
            proc = subprocess.run(
                [*_unshare_argv(), "sh", "-c",
                 f"mount -t tmpfs -o size=1m tmpfs '{where}' && touch '{where}/probe'"],
                capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"unshare/mount failed: {exc}"
        if proc.returncode != 0:
            return (f"cannot mount a tmpfs in a private mount namespace here "
                    f"({' '.join(_unshare_argv())}: {proc.stderr.strip() or proc.returncode})")
    return None


def run_on_tmpfs(script: Path, size_bytes: int, mount_point: Path, *args: str,
                 timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run `python script MOUNT_POINT args...` with a tmpfs of size_bytes mounted at
    mount_point (an empty directory) for the child alone."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(helpers.PACKAGE_ROOT), *helpers.TEST_PATHS,
                                         env.get("PYTHONPATH", "")])
    env["PYTHONFAULTHANDLER"] = "1"
    mount_point.mkdir(parents=True, exist_ok=True)
    # exec: the child is the interpreter, so a signal that kills it shows in the return code
    shell = (f'mount -t tmpfs -o size={size_bytes} tmpfs "$1" && shift && '
             f'exec "$@"')
    return subprocess.run(
        [*_unshare_argv(), "sh", "-c", shell, "sh", str(mount_point), sys.executable,
         str(script), str(mount_point), *args],
        capture_output=True, text=True, timeout=timeout, env=env, cwd=str(helpers.TESTS),
        preexec_fn=helpers._child_setup)
