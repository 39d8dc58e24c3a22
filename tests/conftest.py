"""Shared fixtures: the real Apache RocketMQ 4.9.8 store in ../shared/fixtures/rocketmq-4.9.8."""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

# the independent reference codec and the test helpers, importable from every test folder
TESTS = Path(__file__).resolve().parent
for _path in (TESTS / "reference", TESTS):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from rocketmq_fixture import fixture_file  # noqa: E402 - importable once the path is set


def _read_jsonl(name: str) -> list[dict[str, Any]]:
    with fixture_file(name).open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.fixture
def rocketmq_store(tmp_path: Path) -> Path:
    """A writable private copy of the fixture's store/ directory."""
    dst = tmp_path / "store"
    shutil.copytree(fixture_file("store"), dst)
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
    with fixture_file("manifest.json").open(encoding="utf-8") as f:
        return json.load(f)
