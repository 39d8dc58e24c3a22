"""The native layer imports nothing above it: rocketstore/_native/*.pyx, .pxd and .pyi import
(and cimport) only rocketstore._native modules of the project and the vocabulary below it,
rocketstore.common (docs/design.md, "The house")."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

NATIVE_SOURCES = Path(__file__).resolve().parents[2] / "rocketstore" / "_native"
IMPORT = re.compile(r"^\s*(?:from\s+(rocketstore[\w.]*)\s+c?import|c?import\s+(rocketstore[\w.]*))",
                    re.M)


def test_native_modules_import_only_native_modules() -> None:
    sources = sorted(p for ext in ("*.pyx", "*.pxd", "*.pyi") for p in NATIVE_SOURCES.rglob(ext))
    if not sources:
        pytest.skip("the native sources are not beside the tests")
    upward = []
    for path in sources:
        for m in IMPORT.finditer(path.read_text()):
            module = m.group(1) or m.group(2)
            if module.split(".")[:2] not in (["rocketstore", "_native"], ["rocketstore", "common"]):
                upward.append(f"{path.relative_to(NATIVE_SOURCES)}: {module}")
    assert upward == []
