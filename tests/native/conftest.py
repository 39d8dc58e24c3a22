"""Fixtures of the native layer's tests: a MappedFile of mapped_file_cases.SIZE bytes."""

from __future__ import annotations

from pathlib import Path

import pytest
from mapped_file_cases import SIZE

from rocketstore._native.mapped_file import MappedFile


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "00000000000000131072"


@pytest.fixture
def mf(path: Path):
    f = MappedFile(path, SIZE)
    yield f
    f.close()
