"""Shared fixtures: the real Apache RocketMQ 4.9.8 store in ../shared/fixtures/rocketmq-4.9.8."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest

FIXTURE_DIR = Path(os.environ.get(
    "ROCKETSTORE_FIXTURE_DIR",
    Path(__file__).parents[1] / "../shared/fixtures/rocketmq-4.9.8")).resolve()
MISSING_FIXTURE = (
    f"the store written by Apache RocketMQ 4.9.8 is not at {FIXTURE_DIR}: it comes with the "
    "project's shared/ folder beside the repository (or set ROCKETSTORE_FIXTURE_DIR)")


def require_fixture() -> Path:
    """The fixture's directory; skips the calling test when it is not there."""
    if not (FIXTURE_DIR / "store").is_dir():
        pytest.skip(MISSING_FIXTURE)
    return FIXTURE_DIR


def _fixture_file(name: str) -> Path:
    path = require_fixture() / name
    if not path.exists():
        pytest.fail(f"RocketMQ 4.9.8 fixture incomplete: {path} does not exist", pytrace=False)
    return path


def _read_jsonl(name: str) -> list[dict[str, Any]]:
    with _fixture_file(name).open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.fixture
def rocketmq_store(tmp_path: Path) -> Path:
    """A writable private copy of the fixture's store/ directory."""
    dst = tmp_path / "store"
    shutil.copytree(_fixture_file("store"), dst)
    for root, dirs, files in os.walk(dst):
        for name in dirs:
            os.chmod(os.path.join(root, name), stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP)
        for name in files:
            os.chmod(os.path.join(root, name), stat.S_IRUSR | stat.S_IWUSR | stat.S_IRGRP)
    os.chmod(dst, stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP)
    return dst


@pytest.fixture(scope="session")
def fixture_messages() -> list[dict[str, Any]]:
    return _read_jsonl("messages.jsonl")


@pytest.fixture(scope="session")
def fixture_consumequeue() -> list[dict[str, Any]]:
    return _read_jsonl("consumequeue.jsonl")


@pytest.fixture(scope="session")
def fixture_index_queries() -> list[dict[str, Any]]:
    return _read_jsonl("index_queries.jsonl")


@pytest.fixture(scope="session")
def fixture_manifest() -> dict[str, Any]:
    with _fixture_file("manifest.json").open(encoding="utf-8") as f:
        return json.load(f)
