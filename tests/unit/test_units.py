"""Unit tests of pytest_torchperf.core.units (pure formatting helpers)."""

from __future__ import annotations

import math

import pytest

from pytest_torchperf.core.units import format_bytes, format_change, format_percent, format_time


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        (1.0, "1 s"),
        (2.5, "2.5 s"),
        (0.0124, "12.4 ms"),
        (1e-3, "1 ms"),
        (1.5e-3, "1.5 ms"),
        (250e-6, "250 us"),
        (1e-6, "1 us"),
        (42e-9, "42 ns"),
        (1e-10, "0.1 ns"),
        (0.0, "0 ns"),
        (-0.005, "-5 ms"),
    ],
)
def test_format_time_picks_largest_unit_keeping_value_at_least_one(seconds, expected):
    assert format_time(seconds) == expected


def test_format_time_digits():
    assert format_time(0.0123456, digits=5) == "12.346 ms"
    assert format_time(2.0, digits=1) == "2 s"


def test_format_time_none_and_non_finite():
    assert format_time(None) == "-"
    assert format_time(math.inf) == "inf"
    assert format_time(-math.inf) == "-inf"
    assert format_time(math.nan) == "nan"


@pytest.mark.parametrize(("seconds", "expected"), [(0.9999, "1 s"), (0.0009996, "1 ms")])
def test_format_time_just_below_unit_boundary(seconds, expected):
    assert format_time(seconds) == expected


@pytest.mark.parametrize(
    ("ratio", "expected"),
    [(1.234, "+23.4%"), (1.0, "+0.0%"), (0.5, "-50.0%"), (2.0, "+100.0%"), (0.999, "-0.1%")],
)
def test_format_change(ratio, expected):
    assert format_change(ratio) == expected


@pytest.mark.parametrize("ratio", [None, math.inf, -math.inf, math.nan])
def test_format_change_missing_or_non_finite(ratio):
    assert format_change(ratio) == "-"


@pytest.mark.parametrize(
    ("fraction", "expected"),
    [
        (0.1, "10%"),
        (0.105, "10.5%"),
        (0.25, "25%"),
        (1.5, "150%"),
        (0.0, "0%"),
        (1.0, "100%"),
        (0.123456, "12.35%"),
        (10.0, "1000%"),
    ],
)
def test_format_percent(fraction, expected):
    assert format_percent(fraction) == expected


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (None, "-"),
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1.0 KiB"),
        (1536, "1.5 KiB"),
        (46.8 * 2**20, "46.8 MiB"),
        (3 * 2**30, "3.0 GiB"),
        (2**40, "1024.0 GiB"),  # GiB is the largest unit
    ],
)
def test_format_bytes(n, expected):
    assert format_bytes(n) == expected
