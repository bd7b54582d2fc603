"""Unit tests of pytest_torchperf.core.stats (quantiles, summaries, robust CV)."""

from __future__ import annotations

import dataclasses
import math
import random

import pytest

from pytest_torchperf.core.stats import (
    MAD_TO_SIGMA,
    InvalidSamplesError,
    Summary,
    quantile,
    robust_cv,
    summarize,
)

TEN = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]


@pytest.mark.parametrize(
    ("q", "expected"),
    [(0.0, 1.0), (0.25, 3.25), (0.5, 5.5), (0.75, 7.75), (1.0, 10.0), (0.1, 1.9), (0.9, 9.1)],
)
def test_quantile_linear_interpolation_type7(q, expected):
    assert quantile(TEN, q) == pytest.approx(expected)


def test_quantile_single_value():
    for q in (0.0, 0.25, 0.5, 1.0):
        assert quantile([3.0], q) == 3.0


def test_quantile_two_values():
    assert quantile([1.0, 3.0], 0.25) == pytest.approx(1.5)
    assert quantile([1.0, 3.0], 0.5) == pytest.approx(2.0)


def test_quantile_matches_numpy_default():
    np = pytest.importorskip("numpy")
    rng = random.Random(1234)
    for n in (1, 2, 3, 4, 7, 50):
        values = sorted(rng.uniform(0.1, 5.0) for _ in range(n))
        for q in (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0):
            assert quantile(values, q) == pytest.approx(float(np.quantile(values, q)))


def test_quantile_empty_raises():
    with pytest.raises(ValueError, match="empty"):
        quantile([], 0.5)


@pytest.mark.parametrize("q", [-0.01, 1.01, 2.0])
def test_quantile_q_out_of_range(q):
    with pytest.raises(ValueError, match=r"within \[0, 1\]"):
        quantile([1.0, 2.0], q)


def test_summarize_fields():
    s = summarize(reversed(TEN))  # any iterable, any order
    assert s.n == 10
    assert s.min == 1.0 and s.max == 10.0
    assert s.p25 == pytest.approx(3.25)
    assert s.median == pytest.approx(5.5)
    assert s.p75 == pytest.approx(7.75)
    assert s.mean == pytest.approx(5.5)
    assert s.iqr == pytest.approx(4.5)
    assert s.relative_iqr == pytest.approx(4.5 / 5.5)


def test_summarize_generator_and_ints():
    s = summarize(x for x in (2, 2, 2))
    assert s == Summary(n=3, min=2.0, p25=2.0, median=2.0, p75=2.0, max=2.0, mean=2.0)
    assert s.iqr == 0.0 and s.relative_iqr == 0.0


def test_summary_to_dict_includes_iqr():
    d = summarize([1.0, 2.0, 3.0, 4.0]).to_dict()
    assert set(d) == {"n", "min", "p25", "median", "p75", "max", "mean", "iqr"}
    assert d["iqr"] == pytest.approx(d["p75"] - d["p25"])
    assert d["n"] == 4


def test_summary_is_frozen():
    s = summarize([1.0])
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.median = 2.0  # type: ignore[misc]


def test_relative_iqr_zero_median_is_inf():
    s = Summary(n=1, min=0.0, p25=0.0, median=0.0, p75=0.0, max=0.0, mean=0.0)
    assert s.relative_iqr == math.inf


def test_summarize_empty():
    with pytest.raises(InvalidSamplesError, match="no timing samples"):
        summarize([])


@pytest.mark.parametrize("bad", [0.0, -1e-3, math.nan, math.inf, -math.inf])
def test_summarize_rejects_non_positive_or_non_finite(bad):
    with pytest.raises(InvalidSamplesError, match=r"1 of 4 timing samples are not finite positive"):
        summarize([1e-3, 2e-3, bad, 3e-3])


def test_summarize_error_counts_all_bad_values():
    with pytest.raises(InvalidSamplesError, match=r"2 of 5 .*clock or the timed block is broken"):
        summarize([1.0, 0.0, 2.0, -3.0, 4.0])


def test_invalid_samples_error_is_value_error():
    assert issubclass(InvalidSamplesError, ValueError)


def test_robust_cv_fewer_than_two_values():
    assert robust_cv([]) == 0.0
    assert robust_cv([5.0]) == 0.0


def test_robust_cv_constant_values():
    assert robust_cv([2.0, 2.0, 2.0, 2.0]) == 0.0


def test_robust_cv_known_value_ignores_outlier():
    # median 3, absolute deviations [2, 1, 0, 1, 97] -> MAD 1
    assert robust_cv([1.0, 2.0, 3.0, 4.0, 100.0]) == pytest.approx(MAD_TO_SIGMA * 1.0 / 3.0)
    assert pytest.approx(1.4826) == MAD_TO_SIGMA


def test_robust_cv_scale_invariant():
    values = [1.0, 1.1, 0.9, 1.05, 0.97]
    assert robust_cv(values) == pytest.approx(robust_cv([v * 1e-3 for v in values]))


@pytest.mark.parametrize("values", [[0.0, 0.0, 1.0], [-1.0, -2.0]])
def test_robust_cv_non_positive_median_is_inf(values):
    assert robust_cv(values) == math.inf
