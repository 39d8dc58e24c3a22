"""Small shared helpers for the store tests (configs, subprocess runner, record checks)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import refcodec

import rocketstore
from rocketstore import MessageStore, StoreConfig

TESTS = Path(__file__).resolve().parent
#: what a child interpreter needs importable: the helpers and the test modules of each folder
TEST_PATHS = [str(TESTS), *sorted(str(p) for p in TESTS.iterdir()
                                   if p.is_dir() and p.name.isidentifier())]
PACKAGE_ROOT = Path(rocketstore.__file__).resolve().parents[1]
STORE_HOST = "192.168.0.10:10911"
SEG = 64 * 1024
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"


def make_config(root: str | os.PathLike[str], **changes: Any) -> StoreConfig:
    """A test config: 64 KiB CommitLog segments, small queue/index files, a fixed store host."""
    values: dict[str, Any] = {
        "store_path_root_dir": os.fspath(root),
        "mapped_file_size_commit_log": SEG,
        # small ConsumeQueue and IndexFile files: the defaults allocate 6 MB per queue and
        # 420 MB per index file, which fills /tmp when tests make hundreds of stores
        "mapped_file_size_consume_queue": 1000 * 20,
        "max_hash_slot_num": 500,
        "max_index_num": 2000,
        "store_host": STORE_HOST,
    }
    values.update(changes)
    return StoreConfig(**values)


def open_store(root: str | os.PathLike[str], *, read_only: bool = False, **changes: Any):
    return MessageStore.open(root, make_config(root, **changes), read_only=read_only)


def segment_paths(root: str | os.PathLike[str]) -> list[Path]:
    return sorted((Path(root) / "commitlog").iterdir(), key=lambda p: p.name)


def native_dict(ext: Any) -> dict[str, Any]:
    """MessageExt.to_dict() with properties as a plain dict (order-free comparison)."""
    d = ext.to_dict()
    d["properties"] = dict(d["properties"])
    return d


def ref_dict(rec: refcodec.RefRecord) -> dict[str, Any]:
    d = rec.to_json_dict()
    d["properties"] = dict(d["properties"])
    return d


def reencode(rec: refcodec.RefRecord) -> bytes:
    """refcodec.encode_record of a decoded record's fields (stored properties text)."""
    return rec.encode()


def _child_setup() -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # crashes must not leave core files


def run_python(
    code: str,
    *,
    timeout: float = 120,
    env: dict[str, str] | None = None,
    args: list[str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run code in a fresh interpreter with the repository and tests/ importable."""
    full_env = dict(os.environ)
    # the child imports rocketstore from where this process did (a checkout built in place,
    # or an installed wheel), and the test helpers from tests/
    full_env["PYTHONPATH"] = os.pathsep.join(
        [str(PACKAGE_ROOT), *TEST_PATHS, full_env.get("PYTHONPATH", "")]
    )
    full_env["PYTHONFAULTHANDLER"] = "1"
    if env:
        full_env.update(env)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *(args or [])],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        cwd=str(TESTS),  # not the checkout: its rocketstore/ may be an unbuilt source tree
        preexec_fn=_child_setup,
    )


def assert_no_signal(proc: subprocess.CompletedProcess[str], what: str) -> None:
    """A negative return code means the child died by a signal (a crash)."""
    assert proc.returncode >= 0, (
        f"{what}: child process killed by signal {-proc.returncode}\n"
        f"--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}"
    )


def cli_run(*args: str | int | os.PathLike[str]) -> Any:
    """Invoke the `rocketstore` CLI in-process (click's CliRunner), stderr kept apart."""
    from click.testing import CliRunner

    from rocketstore.cli import main

    try:  # click < 8.2 mixes stderr into stdout unless told not to
        runner = CliRunner(mix_stderr=False)  # type: ignore[call-arg]
    except TypeError:
        runner = CliRunner()
    argv = [str(a) if isinstance(a, int) else os.fspath(a) for a in args]
    return runner.invoke(main, argv, catch_exceptions=False)
