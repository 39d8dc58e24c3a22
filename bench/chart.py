"""Draw benchmark tables as a PNG chart (matplotlib, the ``bench`` extra).

Every markdown table a benchmark prints (``_common.markdown_table``) can be drawn: run the
benchmark with ``--png FILE`` (``python bench/broker.py --quick --png broker.png``), or draw
the tables of any markdown text afterwards, a results file or a saved run::

    python bench/chart.py bench/results/2026-11-25-session11.md -o session11.png
    python bench/broker.py --quick | tee run.md && python bench/chart.py run.md -o run.png

One panel per table, one bar per row. The bars show the table's ratio column when it has one
(a header such as "ratio", "new/base", "of the echo" or "vs ..."; a line marks 1.0, the
reference), else its first
numeric column. Rows without a number in that column are left out.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass

_NUMBER = re.compile(r"^\s*[-+]?[\d,]*\.?\d+(?:[eE][-+]?\d+)?\s*(?:x|%|ms|s|MB/s)?\s*$")
#: "ratio", "new/base", "of the echo", "vs ...": not a rate's unit such as msgs/s or MB/s
_RATIO_HEADER = re.compile(r"ratio|\w/\w{2,}|(^|\s)of\s|\bvs\b", re.IGNORECASE)


@dataclass
class Table:
    title: str
    headers: list[str]
    rows: list[list[str]]


def parse_number(text: str) -> float | None:
    text = text.replace("*", "").strip()
    if not _NUMBER.match(text):
        return None
    return float(re.sub(r"[,x%]|ms|MB/s|s$", "", text).strip())


def tables_in_markdown(text: str) -> list[Table]:
    """The markdown tables of ``text``, each titled by the heading above it."""
    tables: list[Table] = []
    title = ""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if line.startswith("#"):
            title = line.lstrip("#").strip()
        if (line.startswith("|") and i + 1 < len(lines)
                and re.match(r"^\|[\s:|-]+\|$", lines[i + 1].strip())):
            headers = [c.strip() for c in line.strip("|").split("|")]
            rows = []
            i += 2
            while i < len(lines) and lines[i].strip().startswith("|"):
                rows.append([c.strip() for c in lines[i].strip().strip("|").split("|")])
                i += 1
            tables.append(Table(title or f"table {len(tables) + 1}", headers, rows))
            continue
        i += 1
    return tables


def _value_column(table: Table) -> int | None:
    numeric = [j for j in range(1, len(table.headers))
               if any(j < len(r) and parse_number(r[j]) is not None for r in table.rows)]
    for j in numeric:
        if _RATIO_HEADER.search(table.headers[j]):
            return j
    return numeric[0] if numeric else None


def draw(tables: Sequence[Table], path: str) -> int:
    """Draw the tables that have a numeric column into one PNG; returns how many were drawn."""
    try:
        import matplotlib
    except ImportError:
        raise SystemExit("drawing charts needs matplotlib: pip install 'rocketstore[bench]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = []
    for table in tables:
        column = _value_column(table)
        if column is None:
            continue
        bars = []
        for row in table.rows:
            value = parse_number(row[column]) if column < len(row) else None
            if value is not None:
                label = " · ".join(c for c in row[:column] if c and parse_number(c) is None)
                bars.append((label[:70], value))
        if bars:
            panels.append((table, column, bars))
    if not panels:
        return 0
    heights = [0.9 + 0.32 * len(bars) for _, _, bars in panels]
    fig, axes = plt.subplots(len(panels), 1, figsize=(10, sum(heights)),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    for ax, (table, column, bars) in zip(axes[:, 0], panels, strict=True):
        labels = [b[0] for b in bars][::-1]
        values = [b[1] for b in bars][::-1]
        ratio = bool(_RATIO_HEADER.search(table.headers[column]))
        colors = ["#4c72b0" if not ratio or v >= 1 else "#dd8452" for v in values]
        ax.barh(range(len(values)), values, color=colors)
        ax.set_yticks(range(len(values)), labels, fontsize=8)
        ax.set_title(f"{table.title}: {table.headers[column]}", fontsize=9, loc="left")
        if ratio:
            ax.axvline(1.0, color="black", linewidth=0.8)
        for k, v in enumerate(values):
            ax.text(v, k, f" {v:,.2f}" if v < 100 else f" {v:,.0f}", va="center", fontsize=7)
        ax.tick_params(axis="x", labelsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return len(panels)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("markdown", help="a markdown file with tables ('-' for stdin)")
    parser.add_argument("-o", "--output", required=True, help="the PNG to write")
    parser.add_argument("--section", help="only the tables under headings containing this text")
    args = parser.parse_args(argv)
    text = sys.stdin.read() if args.markdown == "-" else open(args.markdown, encoding="utf-8").read()
    tables = tables_in_markdown(text)
    if args.section:
        tables = [t for t in tables if args.section in t.title]
    drawn = draw(tables, args.output)
    print(f"{args.output}: {drawn} of {len(tables)} table(s) drawn")
    return 0 if drawn else 1


if __name__ == "__main__":
    raise SystemExit(main())
