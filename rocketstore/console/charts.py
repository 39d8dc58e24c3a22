"""A time series as an inline SVG line chart (no JavaScript, nothing fetched)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from html import escape

WIDTH = 560
HEIGHT = 140
_PAD_LEFT = 48
_PAD_BOTTOM = 18


def _number(value: float) -> str:
    if value >= 1_000_000:
        return f"{value / 1_000_000:.1f}M"
    if value >= 1_000:
        return f"{value / 1_000:.1f}k"
    return f"{value:.0f}" if value == int(value) else f"{value:.1f}"


def line_chart(title: str, points: Sequence[tuple[float, float]]) -> str:
    """The SVG of ``points`` ((unix seconds, value), oldest first) with its title, the
    largest value on the axis and the time span."""
    label = escape(title)
    if len(points) < 2:
        return (f'<svg class="chart" width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{label}">'
                f'<text x="8" y="18">{label}</text>'
                f'<text x="8" y="{HEIGHT // 2}" class="muted">collecting samples…</text></svg>')
    t0, t1 = points[0][0], points[-1][0]
    top = max(value for _, value in points) or 1.0
    span = (t1 - t0) or 1.0
    inner_w, inner_h = WIDTH - _PAD_LEFT - 8, HEIGHT - _PAD_BOTTOM - 24
    coords = " ".join(
        f"{_PAD_LEFT + (t - t0) / span * inner_w:.1f},{24 + inner_h - value / top * inner_h:.1f}"
        for t, value in points)
    start = time.strftime("%H:%M:%S", time.localtime(t0))
    end = time.strftime("%H:%M:%S", time.localtime(t1))
    return (f'<svg class="chart" width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{label}">'
            f'<text x="8" y="16">{label}</text>'
            f'<text x="4" y="30" class="axis">{_number(top)}</text>'
            f'<text x="4" y="{24 + inner_h}" class="axis">0</text>'
            f'<line x1="{_PAD_LEFT}" y1="{24 + inner_h}" x2="{WIDTH - 8}" y2="{24 + inner_h}" class="grid"/>'
            f'<polyline fill="none" points="{coords}"/>'
            f'<text x="{_PAD_LEFT}" y="{HEIGHT - 4}" class="axis">{start}</text>'
            f'<text x="{WIDTH - 70}" y="{HEIGHT - 4}" class="axis">{end}</text></svg>')
