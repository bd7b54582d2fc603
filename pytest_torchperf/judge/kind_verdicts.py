"""The timing verdict of each kind of measurement besides time itself, for the comparison
engine (:func:`pytest_torchperf.judge.compare.compare`): instruction counts, A/B process pairs,
and stored sessions that hold no timing. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from pytest_torchperf.judge.ab import PairResult, judge_ab
from pytest_torchperf.judge.decision import Outcome
from pytest_torchperf.judge.instructions import effective_limit, judge_instructions
from pytest_torchperf.judge.samples import loosening_option
from pytest_torchperf.judge.verdict import Verdict
from pytest_torchperf.measure.callgrind import InstructionCount


def untimed_verdict(verdict: Verdict, label: str, sessions: Sequence[Mapping[str, Any]]) -> Verdict:
    """The timing verdict against sessions that hold counters and numerics but no timing (every
    pass of the save was refused by a guard): no timing baseline, said as such (strict fails it
    like ``new``); the counters and numerics are still gated against those sessions."""
    why = next((str(s["untimed"]) for s in reversed(sessions) if s.get("untimed")), "")
    reason = f"the save could not time it ({why})" if why else "the save could not time it"
    anyway = f", or store it anyway with {loosening_option(why)}" if why else ""
    count = f"{len(sessions)} stored session{'s' if len(sessions) != 1 else ''}"
    return replace(
        verdict,
        new_reason=reason,
        untimed=True,
        message=(
            f"{label}: no timing baseline: {reason}; its counters and numerics were gated "
            f"against the {count}. Store its timing with pytest --torchperf-save on a quiet "
            f"machine{anyway}"
        ),
    )


def instruction_verdict(
    label: str,
    instructions: Mapping[str, Any] | None,
    uncounted: str | None,
    sessions: Sequence[Mapping[str, Any]],
    max_increase: float,
) -> Verdict:
    """The verdict of an instruction-count run: this count (``instructions``, or None with
    ``uncounted`` saying why) against the latest stored session that has one (counts repeat
    within 0.1 %, so one session is a baseline)."""
    if instructions is None:
        return Verdict(
            Outcome.FAIL,
            f"{label}: no instruction count: {uncounted or 'not measured'}",
            basis="instructions",
        )
    current = InstructionCount.from_record(instructions)
    stored = [s for s in sessions if s.get("instructions")]
    baseline = InstructionCount.from_record(stored[-1]["instructions"]) if stored else None
    judged = judge_instructions(label, current, baseline, max_increase)
    ratio = None if judged.change is None else 1.0 + judged.change
    return Verdict(
        judged.outcome,
        judged.message,
        ratio=ratio,
        first_ratio=ratio,
        baseline_statistic=baseline.per_call if baseline else None,
        candidate_statistic=current.per_call,
        tolerance=max_increase,
        effective_tolerance=effective_limit(baseline.per_call, max_increase)
        if baseline
        else max_increase,
        baseline_sessions=len(stored),
        basis="instructions",
        guard="counts undecided" if judged.outcome is Outcome.INCONCLUSIVE else None,
    )


def ab_verdict(
    label: str,
    ab_pairs: Sequence[Mapping[str, Any]],
    one_sided: str | None,
    max_slowdown: float,
    against: str,
) -> Verdict:
    """The timing verdict of an A/B run: side B's paired interval (``ab_pairs``, each pair's
    block times) against side A (the sessions the engine checks counters and numerics against
    are side A's)."""
    pairs = [PairResult.from_record(p) for p in ab_pairs]
    judged = judge_ab(label, pairs, max_slowdown, against, one_sided)
    iv = judged.interval
    ratio = None if iv is None else 1.0 + iv.change
    return Verdict(
        judged.outcome,
        judged.message,
        ratio=ratio,
        first_ratio=ratio,
        baseline_statistic=judged.a_time,
        candidate_statistic=judged.b_time,
        tolerance=max_slowdown,
        effective_tolerance=max_slowdown,
        baseline_sessions=len(pairs),
        basis="ab",
        guard="pairs undecided" if judged.outcome is Outcome.INCONCLUSIVE else None,
    )
