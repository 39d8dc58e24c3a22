"""Importing rocketstore from a source tree without its compiled extensions says what to do."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import rocketstore


def test_unbuilt_source_tree_explains_itself(tmp_path: Path) -> None:
    package = Path(rocketstore.__file__).parent
    shutil.copytree(package, tmp_path / "rocketstore",
                    ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    proc = subprocess.run([sys.executable, "-c", "import rocketstore"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "compiled extensions" in proc.stderr
    assert "pip install ." in proc.stderr and "build_ext --inplace" in proc.stderr
