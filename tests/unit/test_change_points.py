"""Steps in a series of runs (judge/change_points.py), on seeded synthetic series: the noise
levels are those measured on the CI VMs (2-10 % between processes for time, 0.05 % for
instruction counts); benchmarks/history_steps.py measures the rates on real processes."""

from __future__ import annotations

import math
import random

import pytest

from pytest_torchperf.judge.change_points import MIN_STEP, change_points, noise


def series(levels: list[tuple[int, float]], cv: float, seed: int) -> list[float]:
    """Runs at each (count, level), with log-normal noise of ``cv``."""
    rng = random.Random(seed)
    return [level * math.exp(rng.gauss(0, cv)) for count, level in levels for _ in range(count)]


@pytest.mark.parametrize("seed", range(20))
def test_a_ten_percent_step_in_timing_noise_is_found_at_its_run(seed: int) -> None:
    values = series([(30, 1e-3), (30, 1.1e-3)], cv=0.02, seed=seed)
    (step,) = change_points(values)
    assert step.index == 30 and 0.07 < step.change < 0.13
    assert step.before == pytest.approx(1e-3, rel=0.03)


@pytest.mark.parametrize("seed", range(20))
def test_a_half_percent_instruction_step_is_found_three_runs_after_it(seed: int) -> None:
    values = series([(30, 4.6e6), (3, 4.6e6 * 1.005)], cv=0.0005, seed=seed)
    (step,) = change_points(values)
    assert step.index == 30 and step.change == pytest.approx(0.005, abs=0.001)


def test_unchanged_series_have_no_steps() -> None:
    false = sum(len(change_points(series([(60, 1e-3)], cv=0.05, seed=s))) for s in range(50))
    assert false <= 1  # 3,000 runs of unchanged code


def test_a_lone_outlier_or_two_are_no_step() -> None:
    values = [1.0] * 20 + [3.0] + [1.0] * 20 + [2.5, 2.5] + [1.0] * 20
    values = [v * (1 + 0.001 * (i % 7)) for i, v in enumerate(values)]
    assert change_points(values) == []


def test_two_steps_each_with_the_levels_around_it() -> None:
    values = series([(20, 1.0), (20, 1.2), (20, 1.0)], cv=0.01, seed=1)
    first, second = change_points(values)
    assert (first.index, second.index) == (20, 40)
    assert first.change == pytest.approx(0.2, abs=0.02)
    assert second.change == pytest.approx(-1 / 6, abs=0.02)


def test_identical_counts_use_the_noise_floor_and_tiny_steps_are_not_reported() -> None:
    assert noise([5e6] * 10) == pytest.approx(1e-4)
    # A 0.1 % step in exactly repeating counts is sure but under the reported minimum.
    assert change_points([5e6] * 10 + [5.005e6] * 10) == []
    assert MIN_STEP < 0.005
    (step,) = change_points([5e6] * 10 + [5.05e6] * 10)
    assert step.index == 10


def test_short_series_and_bad_values() -> None:
    assert change_points([1.0, 2.0, 2.0, 2.0, 2.0]) == []  # under two segments of three runs
    with pytest.raises(ValueError, match="positive"):
        change_points([1.0, 0.0, 1.0])


def test_a_run_next_to_a_step_that_fits_either_side_widens_the_range_named() -> None:
    """The step's commits: exact where the runs either side sit on their levels; one run wider
    where the first run after it is an outlier beyond both levels (a newcomer's history blamed
    the commit before the change), or lies halfway between them."""
    quiet = [38.0, 38.4, 37.8, 38.2, 38.1, 50.0, 50.3, 49.8, 50.1]
    (step,) = change_points(quiet)
    assert step.index == 5 and list(step.candidates) == [5]
    outlier = [38.0, 38.4, 37.8, 38.2, 58.0, 50.0, 50.3, 49.8, 50.1]  # run 4: old code, slow
    (step,) = change_points(outlier)
    assert step.index == 4 and list(step.candidates) == [4, 5]
    # A run below both levels next to the step is the fast side's: slower code does not run
    # faster than the fast level (a newcomer's history offered it as where the step may be).
    fast = [34.0, 34.2, 22.7, 113.0, 112.0, 114.0, 113.5]
    (step,) = change_points(fast, one_sided=True)
    assert step.index == 3 and list(step.candidates) == [3]
    # Counts, and times over the machine's speed, are not one-sided: it may be either side's.
    (step,) = change_points(fast)
    assert list(step.candidates) == [2, 3]
    halfway = [38.0, 38.4, 37.8, 38.2, 38.1, 43.7, 50.3, 49.8, 50.1]
    (step,) = change_points(halfway)
    assert step.index in (5, 6) and len(step.candidates) == 2 and 5 in step.candidates
