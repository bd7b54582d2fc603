"""Human-readable formatting of durations, ratios and byte counts.

Pure functions, no torch: used by result reprs, failure messages and the terminal summary.
"""

from __future__ import annotations

import math

_TIME_UNITS = ((1.0, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns"))


def format_time(seconds: float | None, digits: int = 3) -> str:
    """Format a duration in seconds with the largest unit that keeps it >= 1 (``12.4 ms``)."""
    if seconds is None:
        return "-"
    if not math.isfinite(seconds):
        return str(seconds)
    # Round to the shown precision first, so 0.9999 s reads "1 s", not "1e+03 ms".
    rounded = float(f"{seconds:.{digits}g}")
    magnitude = abs(rounded)
    for scale, unit in _TIME_UNITS:
        if magnitude >= scale:
            return f"{rounded / scale:.{digits}g} {unit}"
    return f"{rounded / 1e-9:.{digits}g} ns"


def format_change(ratio: float | None) -> str:
    """Format a candidate/baseline ratio as a signed percentage (``+23.4%``)."""
    if ratio is None or not math.isfinite(ratio):
        return "-"
    return f"{(ratio - 1.0) * 100:+.1f}%"


def format_percent(fraction: float) -> str:
    """Format a fraction as a percentage without a sign (``0.1`` -> ``10%``)."""
    percent = fraction * 100
    text = f"{percent:.2f}" if abs(percent) >= 0.01 or percent == 0 else f"{percent:.2g}"
    text = text.rstrip("0").rstrip(".") if "." in text and "e" not in text else text
    return f"{text}%"


def format_bytes(n: float | None) -> str:
    """Format a byte count with binary units (``46.8 MiB``)."""
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"  # pragma: no cover - loop always returns


def format_count(n: float) -> str:
    """Instructions for people: ``13.49 M``, ``410 k``, ``41.3 k``, ``812``.

    Millions and billions keep two decimals: a 1 % limit needs four significant digits there.
    """
    size = abs(n)
    for unit, scale in (("G", 1e9), ("M", 1e6)):
        if size >= scale:
            return f"{n / scale:.2f} {unit}"
    if size >= 1e3:
        value = n / 1e3
        return f"{value:.{2 if abs(value) < 10 else (1 if abs(value) < 100 else 0)}f} k"
    return f"{n:.0f}"


def counted(number: int, noun: str) -> str:
    """``1 run``, ``2 runs``: a count and its noun (plural by an ``s``)."""
    return f"{number} {noun}{'' if number == 1 else 's'}"
