"""Tiny inline SVG charts for the HTML report: distributions, trends and speedup bars.

Hand-written on purpose: the report must be one self-contained file under 2 MB for hundreds of
measurements. Plotly's bundle alone is 3.6 MB, Vega + Vega-Lite + vega-embed about 0.9 MB before
any data, and a matplotlib SVG ~25 KB per chart (three charts x 200 measurements = 15 MB); these
charts are 0.5-1.5 KB each and need no JavaScript. Pure module.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence

from pytest_torchperf.core.stats import quantile

WIDTH = 180
HEIGHT = 34
COLORS = {"current": "#2563eb", "baseline": "#9ca3af", "fail": "#dc2626", "ok": "#16a34a"}


def _scale(low: float, high: float, width: float, pad: float = 4.0) -> Callable[[float], float]:
    span = (high - low) or (abs(high) or 1.0)

    def x(value: float) -> float:
        return round(pad + (value - low) / span * (width - 2 * pad), 1)

    return x


def _box(
    values: Sequence[float], y: float, h: float, x: Callable[[float], float], color: str, label: str
) -> str:
    v = sorted(values)
    q1, med, q3 = quantile(v, 0.25), quantile(v, 0.5), quantile(v, 0.75)
    return (
        f"<g><title>{html.escape(label)}</title>"
        f'<line x1="{x(v[0])}" x2="{x(v[-1])}" y1="{y + h / 2}" y2="{y + h / 2}" stroke="{color}"/>'
        f'<rect x="{x(q1)}" y="{y}" width="{max(x(q3) - x(q1), 1)}" height="{h}" '
        f'fill="{color}" fill-opacity="0.35" stroke="{color}"/>'
        f'<line x1="{x(med)}" x2="{x(med)}" y1="{y}" y2="{y + h}" stroke="{color}" stroke-width="2"/></g>'
    )


def distribution(
    current: Sequence[float],
    baseline: Sequence[float],
    current_label: str = "this run",
    baseline_label: str = "baseline",
) -> str:
    """Two box plots on one axis: this run's per-call times (top) and the baseline's (bottom),
    titled ``current_label`` and ``baseline_label``."""
    values = [*current, *baseline]
    if not values:
        return ""
    x = _scale(min(values), max(values), WIDTH)
    parts = [
        f'<svg class="chart" role="img" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" xmlns="http://www.w3.org/2000/svg">'
    ]
    if current:
        parts.append(_box(current, 3, 12, x, COLORS["current"], current_label))
    if baseline:
        parts.append(_box(baseline, 19, 12, x, COLORS["baseline"], baseline_label))
    parts.append("</svg>")
    return "".join(parts)


def trend(
    history: Sequence[float],
    current: float | None,
    failed: bool = False,
    labels: Sequence[str] = (),
    marks: Sequence[int] = (),
) -> str:
    """The stored sessions' statistic over time, with this run's value as the last (bold) dot;
    ``marks``: indexes of points before which a step happened (a red line each)."""
    points = list(history) + ([current] if current is not None else [])
    if not points:
        return ""
    low, high = min(points), max(points)
    span = (high - low) or (abs(high) * 0.1 or 1.0)
    step = (WIDTH - 8) / max(len(points) - 1, 1)

    def y(value: float) -> float:
        return round(HEIGHT - 4 - (value - (low - span * 0.1)) / (span * 1.2) * (HEIGHT - 8), 1)

    coords = [(round(4 + i * step, 1), y(v)) for i, v in enumerate(points)]
    path = " ".join(f"{cx},{cy}" for cx, cy in coords)
    parts = [
        f'<svg class="chart" role="img" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" xmlns="http://www.w3.org/2000/svg">',
        f'<polyline points="{path}" fill="none" stroke="{COLORS["baseline"]}"/>',
    ]
    for mark in marks:
        if 0 < mark < len(coords):
            x = round((coords[mark - 1][0] + coords[mark][0]) / 2, 1)
            parts.append(
                f'<line x1="{x}" y1="0" x2="{x}" y2="{HEIGHT}" stroke="{COLORS["fail"]}"/>'
            )
    for i, (cx, cy) in enumerate(coords):
        is_current = current is not None and i == len(coords) - 1
        color = (
            (COLORS["fail"] if failed else COLORS["current"]) if is_current else COLORS["baseline"]
        )
        title = labels[i] if i < len(labels) else ("this run" if is_current else f"session {i + 1}")
        parts.append(
            f'<circle cx="{cx}" cy="{cy}" r="{3 if is_current else 2}" fill="{color}">'
            f"<title>{html.escape(title)}</title></circle>"
        )
    parts.append("</svg>")
    return "".join(parts)


def speedup_bars(rows: Sequence[tuple[str, float, float, float]], width: int = 420) -> str:
    """Horizontal bars of speedup vs eager (``label, median, p25, p75``), a line at x1.

    The figures sit in a column of their own right of the plot: beside the bar's end they ran
    into the IQR whisker and the x1 line when speedups were close to 1 (x0.89, x0.91)."""
    if not rows:
        return ""
    bar_h, gap, left, right = 14, 6, 110, 130
    height = len(rows) * (bar_h + gap) + 14
    high = max(2.0, max(p75 for _, _, _, p75 in rows) * 1.1)
    x = _scale(0.0, high, width - left - right, pad=0)
    figures = width - right + 8
    parts = [
        f'<svg class="chart" role="img" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">'
    ]
    for i, (label, median, p25, p75) in enumerate(rows):
        top = i * (bar_h + gap) + 4
        color = COLORS["ok"] if median >= 1.0 else COLORS["fail"]
        parts.append(
            f"<g><title>{html.escape(label)}: x{median:.2f} (IQR {p25:.2f}-{p75:.2f})</title>"
            f'<text x="{left - 4}" y="{top + bar_h - 3}" text-anchor="end" font-size="11">'
            f"{html.escape(label)}</text>"
            f'<rect x="{left}" y="{top}" width="{max(x(median), 1)}" height="{bar_h}" fill="{color}" '
            f'fill-opacity="0.6"/>'
            f'<line x1="{left + x(p25)}" x2="{left + x(p75)}" y1="{top + bar_h / 2}" '
            f'y2="{top + bar_h / 2}" stroke="#111827"/>'
            f'<text x="{figures}" y="{top + bar_h - 3}" font-size="11">x{median:.2f} '
            f'<tspan fill="#6b7280">({p25:.2f}-{p75:.2f})</tspan></text></g>'
        )
    one = left + x(1.0)
    parts.append(
        f'<line x1="{one}" x2="{one}" y1="0" y2="{height - 10}" stroke="#111827" '
        f'stroke-dasharray="3,2"/><text x="{one}" y="{height - 1}" font-size="10" '
        f'text-anchor="middle">x1 (eager)</text></svg>'
    )
    return "".join(parts)
