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

A limit widened far beyond ``max_slowdown`` is no gate: with 5 sessions of a 160 us MLP at 156-323
us (a jumpy 2-vCPU VM) a 10 % limit became 139 % and a +25 % slowdown passed. :data:`MAX_WIDENING`
bounds it: a pass judged at a limit over that many times ``max_slowdown`` is not a pass (the
verdict is inconclusive: "noisy baseline"), and a save whose stored sessions imply such a limit
fails (:func:`widened_beyond`).

Pure logic, used by :func:`pytest_torchperf.judge.decision.judge` and the speedup check in
:mod:`pytest_torchperf.judge.drift`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from pytest_torchperf.core.stats import robust_cv
from pytest_torchperf.core.types import JSONObject
from pytest_torchperf.core.units import format_percent

#: Stored sessions from which their robust CV counts too (fewer: the range alone).
NOISE_AWARE_MIN_SESSIONS = 5
#: The limit is widened to this many estimated standard deviations of the process noise.
NOISE_CV_FACTOR = 3.0
#: A limit the noise widened to more than this many times ``max_slowdown`` gates nothing (the
#: default of ``--torchperf-max-widening``; 0 there disables the bound).
MAX_WIDENING = 3.0
#: Why such a verdict judged no timing, in a word (run summaries count it).
NOISY_BASELINE = "noisy baseline"
#: Expected range of n normal values in standard deviations (d2, from Shewhart control charts).
_D2 = {2: 1.128, 3: 1.693, 4: 2.059, 5: 2.326, 6: 2.534, 7: 2.704, 8: 2.847, 9: 2.970, 10: 3.078}


def process_noise(baseline_stats: Sequence[float]) -> float | None:
    """Estimated relative standard deviation of one process's statistic (None below 2 sessions)."""
    if len(baseline_stats) < 2:
        return None
    d2 = _D2.get(len(baseline_stats), 3.078 + 0.05 * (len(baseline_stats) - 10))
    # The range of the sessions, max / min - 1, over the range expected of that many normal values.
    sigma = (max(baseline_stats) / min(baseline_stats) - 1.0) / d2
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


def widening_bound(tolerance: float, max_widening: float) -> float | None:
    """The widest limit that still gates: ``max_widening`` times ``tolerance`` (None: no bound)."""
    return tolerance * max_widening if max_widening > 0 else None


def widened_beyond(limit: float, tolerance: float, max_widening: float) -> bool:
    """Whether ``limit`` (``tolerance`` widened to the noise) is too wide to be a gate."""
    bound = widening_bound(tolerance, max_widening)
    return bound is not None and limit > bound * (1 + 1e-9)


#: A limit wider than this passes code twice as slow: no ``--torchperf-max-widening`` factor
#: makes such a timing a gate (a loaded 2-core save was told to accept a 15 % limit widened to
#: 482 % with ``--torchperf-max-widening=33``); the remedy is another kind of measurement.
MAX_GATING_LIMIT = 1.0

_MODES = "gate on instruction counts (--torchperf-instructions) or A/B pairs (--torchperf-ab REV)"


def no_gate_remedy(limit: float, tolerance: float) -> str:
    """What mends a timing ``limit`` (``tolerance`` widened) beyond the widening bound, one
    sentence that save, compare and ``torchperf show`` share: saving again, the modes that gate
    on a noisy machine and the ``--torchperf-max-widening`` factor that accepts it, or, for a
    limit over :data:`MAX_GATING_LIMIT`, that timing cannot gate on this machine and those
    modes instead."""
    save = (
        "save the baseline again on a quieter machine, replacing its sessions (pytest "
        "--torchperf-save --torchperf-reset)"
    )
    if limit > MAX_GATING_LIMIT:
        return (
            f"Timing cannot gate on this machine (a limit over {format_percent(MAX_GATING_LIMIT)}"
            f" lets code twice as slow pass): {_MODES} instead, or {save}"
        )
    return (
        f"{save[0].upper()}{save[1:]}, {_MODES}, or accept the wider limit with "
        f"--torchperf-max-widening={widening_factor(limit, tolerance)}"
    )


def no_gate_hint(limit: float, tolerance: float) -> str:
    """:func:`no_gate_remedy` in a few words, for a table cell (``torchperf show``)."""
    if limit > MAX_GATING_LIMIT:
        return "timing cannot gate here: use --torchperf-instructions or --torchperf-ab"
    return f"--torchperf-max-widening={widening_factor(limit, tolerance)} accepts it"


def widening_factor(limit: float, tolerance: float) -> int:
    """The smallest whole ``--torchperf-max-widening`` factor that admits ``limit``."""
    return math.ceil(limit / tolerance - 1e-9)


@dataclass(frozen=True)
class StoredBaseline:
    """What a save left stored for one measurement's timing, and the limit it implies: the
    figures a save's summary shows, and what makes it fail when that limit is no gate."""

    #: Timed sessions stored for the measurement (this save's and earlier saves' still kept).
    sessions: int
    #: Of them, written by this save; and the processes this save measured it in.
    this_save: int
    asked: int
    #: The median of the stored p25s: what a compare holds a pass against (seconds per call).
    baseline: float | None
    #: Process-to-process noise the sessions show (relative standard deviation), None below 2.
    noise: float | None
    #: The ``max_slowdown`` asked for, and the limit a one-process compare will apply.
    tolerance: float
    limit: float
    #: The widest limit that gates (None: no bound).
    bound: float | None
    #: This save's processes whose sessions were not stored, each with why.
    left_out: tuple[str, ...] = ()
    #: Of this save's sessions stored, those holding a variant's speedup vs eager.
    speedups: int = 0
    #: The guards that refused the left-out processes' timing (``refusals.BUSY``, ``IDLE``...):
    #: what the save's summary says about them depends on which.
    refused_by: tuple[str, ...] = ()

    @property
    def wide(self) -> bool:
        """The limit is too wide to gate."""
        return self.bound is not None and self.limit > self.bound * (1 + 1e-9)

    @property
    def thin(self) -> bool:
        """Fewer of this save's processes were stored than measured it."""
        return self.this_save < self.asked

    def to_dict(self) -> JSONObject:
        record = asdict(self)
        record["left_out"], record["refused_by"] = list(self.left_out), list(self.refused_by)
        return record

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "StoredBaseline":
        values = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        values["left_out"] = tuple(values.get("left_out") or ())
        values["refused_by"] = tuple(values.get("refused_by") or ())
        return cls(**values)


def stored_baseline(
    statistics_stored: Sequence[float],
    this_save: int,
    asked: int,
    tolerance: float,
    max_widening: float,
    left_out: tuple[str, ...] = (),
    speedups: int = 0,
) -> StoredBaseline:
    """The :class:`StoredBaseline` of the timed sessions' statistics now stored."""
    limit, noise = effective_tolerance(tolerance, statistics_stored)
    return StoredBaseline(
        sessions=len(statistics_stored),
        this_save=this_save,
        asked=max(asked, this_save),
        baseline=statistics.median(statistics_stored) if statistics_stored else None,
        noise=noise,
        tolerance=tolerance,
        limit=limit,
        bound=widening_bound(tolerance, max_widening),
        left_out=left_out,
        speedups=speedups,
    )


#: Variance of the median of n normal values relative to one value's, for small n (the median of
#: 2 or 4 is a mean of the middle pair); beyond, the asymptotic pi / (2 n).
_MEDIAN_VARIANCE = {1: 1.0, 2: 0.5, 3: 0.449, 4: 0.298, 5: 0.287}


def median_variance(n: int) -> float:
    """Variance of the median of ``n`` values relative to the variance of one (normal noise)."""
    return _MEDIAN_VARIANCE.get(n, math.pi / (2 * n))
