"""A/B verdicts, pure: side B (the working tree) against side A (a git revision, or another
Python environment) measured in the same job, block by block in turn.

Why this statistic: the two sides ran alternately on the same CPU, so whatever the machine did
(a slower VM for a minute, a neighbour) hit both alike and cancels in the per-round ratio
``B block / A block``. What does not cancel is each *process's* own luck (memory layout, allocator
state: the same conv net ran 13.5 ms in some processes and 25 ms in others on a 2-vCPU VM). So
one process pair gives one figure, the median of its round ratios, and the verdict rests on
several fresh pairs: the mean of their log ratios with a Student-t interval over pairs. More pairs
narrow it; the run adds pairs while a verdict is undecided (:func:`undecided`).

Used by the comparison engine (:func:`pytest_torchperf.kinds.ab.judge.ab_verdict`) in
``--torchperf-ab`` / ``--torchperf-ab-python`` runs.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_torchperf.core.stats import summarize
from pytest_torchperf.core.units import counted, format_time
from pytest_torchperf.judge.outcome import Outcome

#: Default limit of an A/B run: both sides ran side by side, so a tighter limit than a stored
#: baseline's 10 % holds (overridable like any max_slowdown).
DEFAULT_AB_LIMIT = 0.05
#: Pairs a fail or improved verdict rests on at least, when the cap on pairs allows.
MIN_PAIRS_FOR_CHANGE = 4
#: Two-sided 95 % Student-t quantiles by degrees of freedom (1..30); above 30, 1.96 + 2.4/df.
_T95 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def t95(df: int) -> float:
    """The 97.5 % quantile of Student's t with ``df`` degrees of freedom (df >= 1)."""
    if df < 1:
        raise ValueError("a t interval needs at least two pairs")
    return _T95[df - 1] if df <= len(_T95) else 1.96 + 2.4 / df


@dataclass(frozen=True)
class PairResult:
    """One process pair's measurement of one target: per-call block times of each side, in the
    order the rounds ran (round i of A and round i of B ran one after the other)."""

    a: tuple[float, ...]
    b: tuple[float, ...]

    @property
    def rounds(self) -> int:
        return min(len(self.a), len(self.b))

    @property
    def ratio(self) -> float:
        """Median of the round ratios B/A (rounds one side ran alone are left out)."""
        return statistics.median(b / a for a, b in zip(self.a, self.b, strict=False) if a > 0)

    def to_record(self) -> dict[str, Any]:
        return {"a": list(self.a), "b": list(self.b)}

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> PairResult:
        return cls(tuple(float(t) for t in record["a"]), tuple(float(t) for t in record["b"]))


@dataclass(frozen=True)
class Interval:
    """The change B vs A (B/A - 1) and its confidence interval, from ``pairs`` pair ratios."""

    change: float
    low: float
    high: float
    pairs: int
    #: Relative standard deviation of the pair ratios (log scale), the pairs' own spread.
    spread: float
    #: Changes of the pairs left out as outliers (:func:`outliers`).
    left_out: tuple[float, ...] = ()


def outliers(logs: Sequence[float]) -> list[int]:
    """Indexes of pairs far from the others: more than 4 robust standard deviations (and 3 %)
    from the median of four or more pairs, at most a quarter of them.

    Why: one process in a few runs much faster or slower than its usual (measured: one pair of
    an unchanged MLP at -12.8 % among seven within +-2.1 %), and the mean of so few pairs would
    follow it. The rule looks only at distance from the median, in both directions; leaving a
    pair out narrows the interval, and the message names every pair left out."""
    if len(logs) < 4:
        return []
    centre = statistics.median(logs)
    sigma = 1.4826 * statistics.median(abs(x - centre) for x in logs)
    far = sorted(
        (i for i, x in enumerate(logs) if abs(x - centre) > max(4 * sigma, 0.03)),
        key=lambda i: -abs(logs[i] - centre),
    )
    return sorted(far[: len(logs) // 4])


def interval(ratios: Sequence[float]) -> Interval | None:
    """Mean of the log pair ratios (:func:`outliers` left out) with a 95 % t interval; None with
    fewer than two pairs."""
    every = [math.log(r) for r in ratios if r > 0]
    far = set(outliers(every))
    logs = [x for i, x in enumerate(every) if i not in far]
    if len(logs) < 2:
        return None
    mean = statistics.fmean(logs)
    sd = statistics.stdev(logs)
    half = t95(len(logs) - 1) * sd / math.sqrt(len(logs))
    return Interval(
        math.exp(mean) - 1,
        math.exp(mean - half) - 1,
        math.exp(mean + half) - 1,
        len(logs),
        sd,
        tuple(math.exp(every[i]) - 1 for i in sorted(far)),
    )


def classify(iv: Interval, limit: float) -> Outcome:
    """Fail when the interval lies above the limit, improved when it lies below minus the
    limit, pass when it cannot reach the limit, inconclusive when it straddles the limit (a
    gate against slowdowns: an interval of -8..-2 % at a 5 % limit passes)."""
    if iv.low > limit:
        return Outcome.FAIL
    if iv.high < -limit:
        return Outcome.IMPROVED
    if iv.high <= limit:
        return Outcome.PASS
    return Outcome.INCONCLUSIVE


def undecided(pairs: Sequence[PairResult], limit: float, most: int | None = None) -> bool:
    """More pairs could still decide this measurement: its interval straddles the limit, and
    (given ``most``, the cap on pairs) the pairs' spread so far could shrink it enough by then.

    Why the second condition: a conv net whose processes ran 13.5 ms in some and 25 ms in others
    spread its pair ratios by +-40 % here; eight pairs cannot bring that inside a 5 % limit, and
    each extra pair costs two pytest start-ups."""
    iv = interval([p.ratio for p in pairs if p.rounds])
    if iv is None:
        return True
    outcome = classify(iv, limit)
    if outcome in (Outcome.FAIL, Outcome.IMPROVED):
        # Three pairs that happen to agree are not enough to call a change: beside two CPU hogs,
        # three conv-net pairs read -12..-17 % on unchanged code. One more pair confirms it.
        return iv.pairs < MIN_PAIRS_FOR_CHANGE and (most is None or most > iv.pairs)
    if outcome is not Outcome.INCONCLUSIVE:
        return False
    if most is None or most <= iv.pairs:
        return most is None
    centre = math.log1p(iv.change)
    half = t95(most - 1) * iv.spread / math.sqrt(most)
    low, high = math.expm1(centre - half), math.expm1(centre + half)
    return (
        classify(Interval(iv.change, low, high, most, iv.spread), limit) is not Outcome.INCONCLUSIVE
    )


def beyond_limit(pairs: Sequence[PairResult], limit: float) -> bool:
    """The pairs' interval already lies beyond the limit (a slowdown or a speedup): what more
    pairs would do for it is confirm it (:data:`MIN_PAIRS_FOR_CHANGE`), not decide it."""
    iv = interval([p.ratio for p in pairs if p.rounds])
    return iv is not None and classify(iv, limit) in (Outcome.FAIL, Outcome.IMPROVED)


def _pct(value: float) -> str:
    return f"{value * 100:+.1f}%"


def _ci(iv: Interval) -> str:
    return f"{_pct(iv.change)} (95% CI {_pct(iv.low)}..{_pct(iv.high)})"


@dataclass(frozen=True)
class ABVerdict:
    outcome: Outcome
    message: str
    interval: Interval | None
    #: p25 of each side's per-call block times over all its rounds (seconds).
    a_time: float | None
    b_time: float | None


@dataclass(frozen=True)
class ABDecision:
    """What side B's pairs decide against side A's, before any wording (:func:`decide_ab`)."""

    outcome: Outcome
    #: Which case decided: ``a-failed`` (side A ran the test, measured nothing), ``new`` (only
    #: B has it), ``removed`` (only A has it), ``few-pairs`` (under two usable pairs) or
    #: ``interval`` (the pairs' interval against the limit).
    case: str
    interval: Interval | None
    a_time: float | None
    b_time: float | None
    #: The pairs that measured both sides (their ratios made the interval).
    usable: tuple[PairResult, ...] = ()


def decide_ab(
    pairs: Sequence[PairResult],
    limit: float,
    one_sided: str | None = None,
    b_times: Sequence[float] = (),
) -> ABDecision:
    """The outcome of side B against side A (see :func:`judge_ab` for ``one_sided`` and
    ``b_times``)."""
    a_all = [t for p in pairs for t in p.a]
    # A pair holds a measurement only both sides took: one new in B is in none, and its time is
    # B's own blocks (``b_times``), which the reports show as its p25 too.
    b_all = [t for p in pairs for t in p.b] or list(b_times)
    # p25, the statistic every report shows for a measurement (the verdict rests on the pairs).
    a_time = summarize(a_all).p25 if a_all else None
    b_time = summarize(b_all).p25 if b_all else None
    if one_sided == "A-failed":
        return ABDecision(Outcome.INCONCLUSIVE, "a-failed", None, None, b_time)
    if one_sided == "B" or (b_all and not a_all):
        return ABDecision(Outcome.NEW, "new", None, None, b_time)
    if one_sided == "A" or not b_all:
        return ABDecision(Outcome.REMOVED, "removed", None, a_time, None)
    usable = tuple(p for p in pairs if p.rounds)
    iv = interval([p.ratio for p in usable])
    if iv is None:
        return ABDecision(Outcome.INCONCLUSIVE, "few-pairs", None, a_time, b_time, usable)
    return ABDecision(classify(iv, limit), "interval", iv, a_time, b_time, usable)


def word_ab(label: str, decision: ABDecision, limit: float, against: str) -> str:
    """The message a user reads for ``decision`` (``against`` names side A)."""
    a_time, b_time = decision.a_time, decision.b_time
    iv, usable = decision.interval, decision.usable
    in_b = f"{format_time(b_time) if b_time else '?'} per call in B"
    if decision.case == "a-failed":
        return (
            f"{label}: inconclusive: side A ({against}) ran this test but did not measure it "
            f"(it failed, errored or was skipped there: side A's output is printed before the "
            f"tests); {in_b}"
        )
    if decision.case == "new":
        return f"{label}: new in B: not measured on side A ({against}); {in_b}"
    if decision.case == "removed":
        return f"{label}: removed in B: only side A ({against}) measured it"
    figures = (
        f"p25 {format_time(b_time)} vs {format_time(a_time)} per call" if a_time and b_time else ""
    )
    if iv is None:
        return (
            f"{label}: inconclusive: {counted(len(usable), 'process pair')} measured both sides, an "
            f"interval needs at least 2 ({figures}). Run more pairs (--torchperf-ab-max-pairs)"
        )
    spread = ", ".join(f"{(p.ratio - 1) * 100:+.1f}%" for p in usable)
    head = f"{_ci(iv)} vs {against}; limit {limit * 100:g}%"
    dropped = (
        f" ({len(iv.left_out)} left out as far from the others: "
        + ", ".join(_pct(c) for c in iv.left_out)
        + ")"
        if iv.left_out
        else ""
    )
    detail = f"{figures}; {len(usable)} process pairs: {spread}{dropped}"
    if decision.outcome is Outcome.IMPROVED:
        return f"{label}: improved {head} ({detail})"
    if decision.outcome is Outcome.INCONCLUSIVE:
        # Which it is: pairs that disagree by more than the limit, a change within the pairs'
        # spread of the limit, or too few pairs for an interval as narrow as the pairs agree
        # (a spread of 1.6 % beside a 5 % limit was told the processes differ too much; a
        # +0.1 % change after 2 pairs, t = 12.7, is not "near" a 5 % limit).
        if iv.spread > limit:
            why = (
                "The processes differ more than the limit allows: a dedicated or quieter runner, "
                "or a larger max_slowdown for this test"
            )
        elif abs(iv.change - limit) <= iv.spread:
            why = (
                "The pairs agree, and the change sits near the limit: more pairs "
                "(--torchperf-ab-max-pairs) narrow the interval, or a larger max_slowdown for "
                "this test if the change is intended"
            )
        else:
            why = (
                f"The pairs agree, but {len(usable)} leave the interval wide: more pairs "
                f"(--torchperf-ab-max-pairs) narrow it"
            )
        return (
            f"{label}: inconclusive: {head}: the interval straddles the limit after "
            f"{len(usable)} process pairs ({detail}; their spread {iv.spread * 100:.1f}%). {why}"
        )
    return f"{label}: {head} ({detail})"  # fail or pass: the figure says which


def judge_ab(
    label: str,
    pairs: Sequence[PairResult],
    limit: float,
    against: str,
    one_sided: str | None = None,
    b_times: Sequence[float] = (),
) -> ABVerdict:
    """The verdict of side B against side A (``against`` names A: ``origin/main (abc1234)``):
    :func:`decide_ab`, then :func:`word_ab`.

    ``one_sided``: ``"B"`` when only the working tree has this measurement (new in B), ``"A"``
    when only the revision has it (removed in B), ``"A-failed"`` when side A ran its test but did
    not measure it (inconclusive, so strict mode fails it). ``b_times``: side B's per-call block
    times, its figure where no pair holds it (new in B).
    """
    decision = decide_ab(pairs, limit, one_sided, b_times)
    return ABVerdict(
        decision.outcome,
        word_ab(label, decision, limit, against),
        decision.interval,
        decision.a_time,
        decision.b_time,
    )


@dataclass(frozen=True)
class SpeedupDecision:
    """What a variant's speedups vs eager in the pairs decide (:func:`decide_ab_speedup`)."""

    #: ``fail``, ``inconclusive`` (straddles the limit), ``one-pair`` (a fall above the limit
    #: that one pair cannot decide) or ``ok``.
    case: str
    a_median: float
    b_median: float
    usable: tuple[tuple[float, float], ...]
    interval: Interval | None


def decide_ab_speedup(
    speedups: Sequence[tuple[float, float]], limit: float
) -> SpeedupDecision | None:
    """Whether a variant lost ground against eager from side A to B (None: no usable pair)."""
    usable = tuple((a, b) for a, b in speedups if a > 0 and b > 0)
    if not usable:
        return None
    a_med = statistics.median(a for a, _ in usable)
    b_med = statistics.median(b for _, b in usable)
    iv = interval([a / b for a, b in usable])
    if iv is None:
        case = "one-pair" if a_med / b_med - 1.0 > limit else "ok"
    else:
        outcome = classify(iv, limit)
        case = {Outcome.FAIL: "fail", Outcome.INCONCLUSIVE: "inconclusive"}.get(outcome, "ok")
    return SpeedupDecision(case, a_med, b_med, usable, iv)


def judge_ab_speedup(
    label: str, speedups: Sequence[tuple[float, float]], limit: float, against: str
) -> tuple[str | None, str | None]:
    """(failure, warning) of a variant's speedup vs eager in an A/B run, on the pairs:
    :func:`decide_ab_speedup`, then worded here.

    ``speedups``: each process pair's (side A, side B) median speedup. A speedup is a ratio
    within one process, but it still differs between processes (eager runs in one of two speeds
    in some), so one pair's fall is luck as often as not: like time, the fall A/B - 1 of every
    pair gives an interval, and only an interval wholly above ``limit`` fails.
    """
    decision = decide_ab_speedup(speedups, limit)
    if decision is None or decision.case == "ok":
        return None, None
    usable, iv = decision.usable, decision.interval
    falls = ", ".join(_pct(a / b - 1.0) for a, b in usable)
    head = (
        f"{label}: speedup vs eager x{decision.b_median:.2f} in B vs x{decision.a_median:.2f} "
        f"in A ({against}); {len(usable)} process pair{'s' if len(usable) != 1 else ''}, the "
        f"variant slower relative to eager by {falls}"
    )
    if decision.case == "one-pair" or iv is None:
        return None, (
            f"{head}: one pair cannot decide a fall (the pairs' interval needs two); run "
            f"more pairs (--torchperf-ab-pairs)"
        )
    interval_text = f"{_ci(iv)}; limit {limit * 100:g}%"
    if decision.case == "fail":
        return (
            f"{head}: fell by {interval_text}. Eager ran in the same processes, so the machine "
            f"does not explain it: this variant lost ground against eager"
        ), None
    return None, (
        f"{head}: fell by {interval_text}, an interval that straddles the limit: not "
        f"judged (the processes differ more than the limit allows)"
    )
