"""How wide a limit the evidence allows: the user's ``max_slowdown``, widened (never narrowed)
to the noise the stored sessions show and scaled by how many processes each side pools.

Pure logic, used by :func:`pytest_torchperf.verdict.judge`.
"""

from __future__ import annotations

import math
from typing import Sequence

from .stats import robust_cv

#: Stored sessions needed before the tolerance adapts to their CV (fewer: their range).
NOISE_AWARE_MIN_SESSIONS = 5
#: The tolerance is widened to this many robust CVs of the stored sessions.
NOISE_CV_FACTOR = 3.0


def effective_tolerance(tolerance: float, baseline_stats: Sequence[float],
                        candidate_processes: int = 1) -> tuple[float, float | None]:
    """Widen ``tolerance`` to the noise of the comparison when >= 5 stored sessions show it.

    With one candidate process the floor is ``3 x robust CV`` of the stored sessions (their
    process-to-process noise). A candidate pooled over ``n`` processes against ``m`` sessions has
    the noise of a difference of two medians, ``CV * sqrt(v(n) + v(m))`` with ``v`` the variance
    of a median of that many values relative to one value; the floor scales by that relative to
    the one-process case, so ``--torchperf-processes 3`` can gate tighter than one process on the
    same runner (by a factor 0.76 against 5 sessions).
    """
    if len(baseline_stats) < 2:
        return tolerance, None
    if len(baseline_stats) < NOISE_AWARE_MIN_SESSIONS:
        # Too few sessions for a CV, but enough to see a test whose time jumps between processes
        # (a conv net here ran 13.5 ms in some fresh processes and 25 ms in others): never judge
        # tighter than the stored sessions disagree among themselves.
        return max(tolerance, baseline_range(baseline_stats)), robust_cv(baseline_stats)
    cv = robust_cv(baseline_stats)
    m, n = len(baseline_stats), max(1, candidate_processes)
    scale = math.sqrt((median_variance(n) + median_variance(m)) / (1 + median_variance(m)))
    return max(tolerance, NOISE_CV_FACTOR * cv * scale), cv


def baseline_range(baseline_stats: Sequence[float]) -> float:
    """How far apart the stored sessions are: max / min - 1."""
    return max(baseline_stats) / min(baseline_stats) - 1.0


#: Variance of the median of n normal values relative to one value's, for small n (the median of
#: 2 or 4 is a mean of the middle pair); beyond, the asymptotic pi / (2 n).
_MEDIAN_VARIANCE = {1: 1.0, 2: 0.5, 3: 0.449, 4: 0.298, 5: 0.287}


def median_variance(n: int) -> float:
    """Variance of the median of ``n`` values relative to the variance of one (normal noise)."""
    return _MEDIAN_VARIANCE.get(n, math.pi / (2 * n))
