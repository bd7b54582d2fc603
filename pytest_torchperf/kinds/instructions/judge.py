"""How the ``instructions`` kind judges: instructions per call under Valgrind against the latest
stored count (``--torchperf-instructions``; deciding and wording:
:mod:`pytest_torchperf.kinds.instructions.judge_counts`), and the latest save's count taken the
same way, which the ``time-or-instructions`` kind falls back on. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_torchperf.judge.inputs import Candidate, Gate
from pytest_torchperf.judge.kind_protocol import Kind
from pytest_torchperf.judge.outcome import Outcome
from pytest_torchperf.judge.verdict import Verdict
from pytest_torchperf.kinds.instructions.judge_counts import (
    SAVE,
    effective_limit,
    judge_instructions,
)
from pytest_torchperf.kinds.instructions.measure_callgrind import InstructionCount
from pytest_torchperf.store.sessions import Session

#: Why a replayed measurement has no count (``torchperf compare``): its record holds none.
REPLAYED_UNCOUNTED = "no count was recorded for it"


@dataclass(frozen=True)
class CountData:
    """The instruction count a candidate carries (its ``instructions``, ``uncounted`` and
    ``counted_with`` sections): the count (``InstructionCount.to_record()``) or None with why
    there is none, and what counted it (Valgrind version, the CPU capability torch dispatched
    to under it, the math libraries' kernel caps: a count stored beside a timing is a baseline
    only for a count taken the same way)."""

    instructions: Mapping[str, Any] | None = None
    uncounted: str | None = None
    counted_with: Mapping[str, Any] | None = None
    #: The same measurement counted again in a fresh process because the first count was above
    #: its limit (``--torchperf-confirm fresh``, the default), or None.
    recount: Mapping[str, object] | None = None

    @classmethod
    def of(cls, candidate: Candidate) -> CountData:
        sections = candidate.sections
        return cls(
            sections.get("instructions"),
            sections.get("uncounted", REPLAYED_UNCOUNTED),
            sections.get("counted_with"),
            sections.get("recount"),
        )


class InstructionKind(Kind):
    """Instructions per call under Valgrind against the latest stored count."""

    name = "instructions"
    save = SAVE
    # Timed speedups are reported only in an instruction-count run, like time itself.
    judges_timed_speedups = False
    needs_baseline = True
    stored_figure = "instructions"

    def verdict(self, candidate: Candidate, sessions: Sequence[Session], gate: Gate) -> Verdict:
        data = CountData.of(candidate)
        return instruction_verdict(
            candidate.label,
            data.instructions,
            data.uncounted,
            sessions,
            gate.limit("max_instruction_increase"),
            data.recount,
        )

    def accept_problem(self, session: Session) -> str | None:
        # An instruction-count run stores counts; its time was never guarded.
        return None if session.instructions else "no instruction count"


def instruction_verdict(
    label: str,
    instructions: Mapping[str, Any] | None,
    uncounted: str | None,
    sessions: Sequence[Session],
    max_increase: float,
    recount: Mapping[str, object] | None = None,
) -> Verdict:
    """The verdict of an instruction-count run: this count (``instructions``, or None with
    ``uncounted`` saying why) against the latest stored session that has one (counts repeat
    within 0.1 %, so one session is a baseline); where it was above its limit and counted again
    in a fresh process (``recount``), the lower of the two."""
    if instructions is None:
        return Verdict(
            Outcome.FAIL,
            f"{label}: no instruction count: {uncounted or 'not measured'}",
            basis="instructions",
        )
    current = InstructionCount.from_record(instructions)
    stored = [s.instructions for s in sessions if s.instructions]
    baseline = InstructionCount.from_record(stored[-1]) if stored else None
    again = InstructionCount.from_record(recount) if recount else None
    judged = judge_instructions(label, current, baseline, max_increase, again)
    ratio = None if judged.change is None else 1.0 + judged.change
    return Verdict(
        judged.outcome,
        judged.message,
        ratio=ratio,
        first_ratio=None if judged.first_change is None else 1.0 + judged.first_change,
        baseline_statistic=baseline.per_call if baseline else None,
        candidate_statistic=judged.per_call,
        tolerance=max_increase,
        effective_tolerance=effective_limit(baseline.per_call, max_increase)
        if baseline
        else max_increase,
        baseline_sessions=len(stored),
        basis="instructions",
        guard="counts undecided" if judged.outcome is Outcome.INCONCLUSIVE else None,
    )


def latest_counts(
    sessions: Sequence[Session], counted_with: Mapping[str, object] | None
) -> tuple[list[Session], list[Session]]:
    """``time-or-instructions``: the latest save's sessions that hold a count, and of those the
    ones whose count was taken the same way (``counted_with``): the baseline of a count beside
    a timing. Only the latest save's: an older count may describe code saved over since (a
    plain --torchperf-save stores no count, and the history keeps 10 sessions)."""
    latest_run = sessions[-1].run_id if sessions else None
    latest = [s for s in sessions if s.run_id == latest_run] if latest_run else sessions[-1:]
    counted = [s for s in latest if s.instructions]
    wanted = dict(counted_with or {})
    return counted, [s for s in counted if dict(stored_counted_with(s)) == wanted]


def latest_count_verdict(
    label: str,
    instructions: Mapping[str, Any] | None,
    uncounted: str | None,
    counted_with: Mapping[str, Any] | None,
    sessions: Sequence[Session],
    max_increase: float,
    save: str,
    recount: Mapping[str, object] | None = None,
) -> Verdict | str:
    """``time-or-instructions``: this count (or the lower of it and its ``recount``) against the
    latest save's count taken the same way (``counted_with``), or why there is none to judge."""
    counted, same = latest_counts(sessions, counted_with)
    wanted = dict(counted_with or {})
    if instructions is None:
        return f"no instruction count to fall back on: {uncounted or 'not counted'}"
    if not counted:
        older = any(s.instructions for s in sessions)
        return (
            "the latest save stored no instruction count beside its timing"
            if older
            else "no instruction count stored beside the timing"
        ) + f" to fall back on; record one with {save}"
    if not same:
        stored_with = stored_counted_with(counted[-1])
        differs = sorted(k for k in {*stored_with, *wanted} if stored_with.get(k) != wanted.get(k))
        return (
            f"the stored instruction count was taken differently ({', '.join(differs)} "
            f"differ), so it is no baseline for this one; record a new one with {save}"
        )
    return instruction_verdict(label, instructions, uncounted, same, max_increase, recount)


def stored_counted_with(session: Session) -> Mapping[str, object]:
    """What counted the instruction count a timing session stores (its ``counted_with``: this
    kind's own key, kept as read), or nothing."""
    counted_with = session.extra("counted_with")
    return counted_with if isinstance(counted_with, Mapping) else {}


KIND = InstructionKind()
