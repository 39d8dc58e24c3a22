"""Where the store written by Apache RocketMQ 4.9.8 is (shared/fixtures beside the
repository), and skipping the tests that need it when it is not there."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

FIXTURE_DIR = Path(os.environ.get(
    "ROCKETSTORE_FIXTURE_DIR",
    Path(__file__).resolve().parents[1] / "../shared/fixtures/rocketmq-4.9.8")).resolve()
MISSING_FIXTURE = (
    f"the store written by Apache RocketMQ 4.9.8 is not at {FIXTURE_DIR}: it comes with the "
    "project's shared/ folder beside the repository (or set ROCKETSTORE_FIXTURE_DIR)")


def require_fixture() -> Path:
    """The fixture's directory; skips the calling test when it is not there."""
    if not (FIXTURE_DIR / "store").is_dir():
        pytest.skip(MISSING_FIXTURE)
    return FIXTURE_DIR


def fixture_file(name: str) -> Path:
    path = require_fixture() / name
    if not path.exists():
        pytest.fail(f"RocketMQ 4.9.8 fixture incomplete: {path} does not exist", pytrace=False)
    return path


