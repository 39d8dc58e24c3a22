"""bench/chart.py draws the markdown tables benchmarks print as a PNG (the bench extra)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


def _chart():
    if not (BENCH / "chart.py").exists():
        pytest.skip("bench/ is not beside the tests (an installed-package test run)")
    pytest.importorskip("matplotlib", reason="charts need matplotlib (the bench extra)")
    spec = importlib.util.spec_from_file_location("bench_chart", BENCH / "chart.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules["bench_chart"] = module         # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


TEXT = """# run
### sends
| part | size | what | msgs/s | of the echo |
|:--|--:|:--|--:|--:|
| (a) | 100 B | broker | 234,672 | 0.19 |
| (b) | 100 B | echo | 1,218,453 | 1.00 |
| (c) | 100 B | note | n/a |  |

### nothing numeric
| a | b |
|:--|:--|
| x | y |
"""


def test_tables_are_parsed_with_their_headings() -> None:
    chart = _chart()
    tables = chart.tables_in_markdown(TEXT)
    assert [t.title for t in tables] == ["sends", "nothing numeric"]
    assert tables[0].headers[-1] == "of the echo" and len(tables[0].rows) == 3
    assert chart.parse_number("1,218,453") == 1218453 and chart.parse_number("n/a") is None
    assert chart._value_column(tables[0]) == 4            # the ratio column, not msgs/s
    assert chart._value_column(tables[1]) is None


def test_a_png_is_drawn_for_the_tables_with_numbers(tmp_path: Path) -> None:
    chart = _chart()
    out = tmp_path / "run.png"
    assert chart.main([str(_write(tmp_path, TEXT)), "-o", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 2000
    assert chart.main([str(_write(tmp_path, "no tables here\n")), "-o", str(tmp_path / "none.png")]) == 1


def _write(folder: Path, text: str) -> Path:
    path = folder / f"t{abs(hash(text))}.md"
    path.write_text(text, encoding="utf-8")
    return path
