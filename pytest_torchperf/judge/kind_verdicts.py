"""Each measurement kind's verdict, decided from its figures and worded: what the kinds of
:mod:`pytest_torchperf.judge.kinds` return (no timing stored, an instruction count, a count
beside the timing, an A/B interval) and the note an undecided compare adds about the guards
its baseline was saved with. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from pytest_torchperf.core.units import format_percent
from pytest_torchperf.judge.ab import PairResult, judge_ab
from pytest_torchperf.judge.decision import Outcome
from pytest_torchperf.judge.inputs import Gate
from pytest_torchperf.judge.instructions import effective_limit, judge_instructions
from pytest_torchperf.judge.samples import IDLE, guard_kind, loosening_option
from pytest_torchperf.judge.verdict import Verdict
from pytest_torchperf.measure.callgrind import InstructionCount


def looser_guards(gate: Gate, timed: Sequence[Mapping[str, Any]]) -> list[str]:
    """The guard options the latest timed session was saved with that are looser than this
    compare's (a save on a busy machine told to store anyway with them), as options."""
    if not timed:
        return []
    saved = timed[-1].get("gate") or {}
    found = []
    if saved.get("min_cpu_share", gate.min_cpu_share) < gate.min_cpu_share:
        found.append(f"--torchperf-min-cpu-share={saved['min_cpu_share']:g}")
    for key, option in (
        ("max_neighbour_load", "--torchperf-max-neighbour-load"),
        ("max_spread", "--torchperf-max-spread"),
        ("max_machine_slowdown", "--torchperf-max-machine-slowdown"),
    ):
        if saved.get(key, getattr(gate, key)) > getattr(gate, key):
            found.append(f"{option}={format_percent(saved[key])}")
    return found


def untimed_verdict(
    verdict: Verdict,
    label: str,
    sessions: Sequence[Mapping[str, Any]],
    gated: str = "counters and numerics",
) -> Verdict:
    """The timing verdict against sessions that hold counters and numerics but no timing (every
    pass of the save was refused by a guard): no timing baseline, said as such (strict fails it
    like ``new``); what is still gated against those sessions (``gated``) is said."""
    why = next((str(s["untimed"]) for s in reversed(sessions) if s.get("untimed")), "")
    reason = f"the save could not time it ({why})" if why else "the save could not time it"
    anyway = f", or store it anyway with {loosening_option(why)}" if why else ""
    count = f"{len(sessions)} stored session{'s' if len(sessions) != 1 else ''}"
    store = (
        "A quieter machine will not change that: time the work without the waiting"
        if why and guard_kind(why) == IDLE
        else "Store its timing with pytest --torchperf-save on a quiet machine"
    )
    return replace(
        verdict,
        new_reason=reason,
        untimed=True,
        message=(
            f"{label}: no timing baseline: {reason}; "
            + (
                f"its {gated} were gated against the {count}"
                if gated != "nothing else"
                else f"nothing else of it was gated against the {count}"
            )
            + f". {store}{anyway}"
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


def latest_count_verdict(
    label: str,
    instructions: Mapping[str, Any] | None,
    uncounted: str | None,
    counted_with: Mapping[str, Any] | None,
    sessions: Sequence[Mapping[str, Any]],
    max_increase: float,
    save: str,
) -> Verdict | str:
    """``time-or-instructions``: this count against the latest save's count taken the same way
    (``counted_with``), or why there is none to judge."""
    # Only the latest save's count: an older one may describe code saved over since (a plain
    # --torchperf-save stores no count, and the history keeps 10 sessions).
    latest_run = sessions[-1].get("run_id") if sessions else None
    latest = [s for s in sessions if s.get("run_id") == latest_run] if latest_run else sessions[-1:]
    counted = [s for s in latest if s.get("instructions")]
    same = [s for s in counted if dict(s.get("counted_with") or {}) == dict(counted_with or {})]
    if instructions is None:
        return f"no instruction count to fall back on: {uncounted or 'not counted'}"
    if not counted:
        older = any(s.get("instructions") for s in sessions)
        return (
            "the latest save stored no instruction count beside its timing"
            if older
            else "no instruction count stored beside the timing"
        ) + f" to fall back on; record one with {save}"
    if not same:
        stored_with = dict(counted[-1].get("counted_with") or {})
        differs = sorted(
            k
            for k in {*stored_with, *(counted_with or {})}
            if stored_with.get(k) != (counted_with or {}).get(k)
        )
        return (
            f"the stored instruction count was taken differently ({', '.join(differs)} "
            f"differ), so it is no baseline for this one; record a new one with {save}"
        )
    return instruction_verdict(label, instructions, uncounted, same, max_increase)


def fallback_verdict(label: str, timing: Verdict, counts: Verdict | str) -> Verdict:
    """The verdict of ``time-or-instructions`` where ``timing`` could not decide: the count's
    (:func:`latest_count_verdict`), worded as such; without one the timing verdict stands, with
    a note that says why."""
    if isinstance(counts, str):
        return replace(timing, notes=(*timing.notes, counts))
    why = timing.guard or ("no timing baseline" if timing.untimed else "undecided")
    detail = counts.message.removeprefix(f"{label}: ")
    return replace(
        counts,
        message=f"{label}: timing could not decide ({why}), judged by its instruction count "
        f"instead: {detail}",
        notes=(*counts.notes, f"timing: {timing.message}"),
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
