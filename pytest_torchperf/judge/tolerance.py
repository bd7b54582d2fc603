"""How wide a limit the evidence allows: the user's ``max_slowdown``, widened (never narrowed)
to the process-to-process noise the stored sessions show, scaled by how many processes each side
pools.

Each stored session is a fresh process (a save measures in several by default), so their spread
is this machine's process-to-process noise, the noise a verdict has to beat. It is estimated as a
standard deviation two ways and the larger is used: from the range of the sessions (``(max/min -
1) / d2(m)``, Shewhart's range estimator, which keeps a two-level spread such as a model that runs
13.5 ms in some processes and 25 ms in others) and, from 5 sessions on, from their robust CV. The
limit is widened to three of those standard deviations: on a shared 2-vCPU VM, 3 saved sessions
widened by their range alone still failed 4-6 % of 20-test suite runs of unchanged code, three
standard deviations 1-3 % (``benchmarks/suite_noise.py``, docs/reliability.md).

Pure logic, used by :func:`pytest_torchperf.judge.decision.judge` and the speedup check in
:mod:`pytest_torchperf.judge.drift`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pytest_torchperf.core.stats import robust_cv

#: Stored sessions from which their robust CV counts too (fewer: the range alone).
NOISE_AWARE_MIN_SESSIONS = 5
#: The limit is widened to this many estimated standard deviations of the process noise.
NOISE_CV_FACTOR = 3.0
#: Expected range of n normal values in standard deviations (d2, from Shewhart control charts).
_D2 = {2: 1.128, 3: 1.693, 4: 2.059, 5: 2.326, 6: 2.534, 7: 2.704, 8: 2.847, 9: 2.970, 10: 3.078}


def process_noise(baseline_stats: Sequence[float]) -> float | None:
    """Estimated relative standard deviation of one process's statistic (None below 2 sessions)."""
    if len(baseline_stats) < 2:
        return None
    d2 = _D2.get(len(baseline_stats), 3.078 + 0.05 * (len(baseline_stats) - 10))
    sigma = baseline_range(baseline_stats) / d2
    if len(baseline_stats) >= NOISE_AWARE_MIN_SESSIONS:
        sigma = max(sigma, robust_cv(baseline_stats))
    return sigma


def effective_tolerance(
    tolerance: float, baseline_stats: Sequence[float], candidate_processes: int = 1
) -> tuple[float, float | None]:
    """``(limit applied, process noise)``: ``tolerance`` widened to 3 standard deviations of the
    process-to-process noise the stored sessions show.

    A candidate pooled over ``n`` processes against ``m`` sessions has the noise of a difference of
    two medians, ``sigma * sqrt(v(n) + v(m))`` with ``v`` the variance of a median of that many
    values relative to one value's; the floor scales by that relative to one candidate process,
    so ``--torchperf-processes 3`` can gate tighter than one process on the same runner.
    """
    sigma = process_noise(baseline_stats)
    if sigma is None:
        return tolerance, None
    m, n = len(baseline_stats), max(1, candidate_processes)
    scale = math.sqrt((median_variance(n) + median_variance(m)) / (1 + median_variance(m)))
    return max(tolerance, NOISE_CV_FACTOR * sigma * scale), sigma


def baseline_range(baseline_stats: Sequence[float]) -> float:
    """How far apart the stored sessions are: max / min - 1."""
    return max(baseline_stats) / min(baseline_stats) - 1.0


#: Variance of the median of n normal values relative to one value's, for small n (the median of
#: 2 or 4 is a mean of the middle pair); beyond, the asymptotic pi / (2 n).
_MEDIAN_VARIANCE = {1: 1.0, 2: 0.5, 3: 0.449, 4: 0.298, 5: 0.287}


def median_variance(n: int) -> float:
    """Variance of the median of ``n`` values relative to the variance of one (normal noise)."""
    return _MEDIAN_VARIANCE.get(n, math.pi / (2 * n))
