"""Measurement kinds: what a measurement's performance figure is and how the comparison engine
judges it. One object per kind, chosen once from the gate (:func:`kind_of`); the engine
(:func:`pytest_torchperf.judge.compare.compare`) asks the kind, never the run mode. Pure.

A kind decides the figure's verdict (:meth:`Kind.judge`), may add failures from its own data
(:meth:`Kind.extra_checks`: an A/B run's paired speedups) and says how its baseline is recorded
(:attr:`Kind.save`). Everything else the engine checks (counters, output fingerprints, metrics,
failures found within the run, strict mode) is the same for every kind.

- ``time`` (:class:`TimeKind`): timed blocks against the stored sessions' timings.
- ``instructions`` (:class:`InstructionKind`): instructions per call under Valgrind against the
  latest stored count (``--torchperf-instructions``; sessions filed under their own environment).
- ``ab`` (:class:`ABKind`): process pairs of two sides measured now (``--torchperf-ab``).
- ``time-or-instructions`` (:class:`TimeOrInstructionsKind`): time; where the timing verdict
  cannot decide (inconclusive: busy machine, spread; or no timing stored), the instruction count
  stored beside the timing decides instead, and the verdict says so
  (``--torchperf-fallback instructions``).
- ``time-and-kernels`` (:class:`TimeAndKernelsKind`): time, and beside it the summed device time
  of the call's GPU kernels, judged at a limit of its own (``max_kernel_slowdown``); a
  launch-bound wall time says so (CUDA measurements).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from pytest_torchperf.core.units import format_percent
from pytest_torchperf.judge.ab import PairResult, judge_ab, judge_ab_speedup
from pytest_torchperf.judge.decision import Outcome
from pytest_torchperf.judge.failures import Failure
from pytest_torchperf.judge.inputs import Candidate, Gate
from pytest_torchperf.judge.instructions import effective_limit, judge_instructions
from pytest_torchperf.judge.kernel_time import judge_kernels, launch_note
from pytest_torchperf.judge.samples import IDLE, Sample, guard_kind, loosening_option
from pytest_torchperf.judge.verdict import (
    AB_MODE,
    BUSY_MACHINE_MODES,
    Judgement,
    Verdict,
    judge,
)
from pytest_torchperf.measure.callgrind import InstructionCount
from pytest_torchperf.measure.kernel_time import KernelTimes
from pytest_torchperf.store.records import timed_sessions

Remeasure = Callable[[], Sample]
Confirm = Callable[[], "Sample | None"]


@dataclass
class KindChecks:
    """What a kind's own data adds beyond its verdict: failures, warnings, and the gates it
    judged (``kernels``), which the run's coverage counts."""

    failures: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    gated: list[str] = field(default_factory=list)


class Kind(Protocol):
    """One measurement kind, as the comparison engine uses it."""

    #: The name recorded in the gate (:data:`pytest_torchperf.judge.inputs.KINDS`).
    name: str
    #: The command that records a baseline of this kind ("" when none is kept: an A/B run
    #: compares two sides measured now).
    save: str
    #: Variants' timed speedups are judged against the stored ones (else reported only, or
    #: judged by the kind's own data in :meth:`extra_checks`).
    judges_timed_speedups: bool
    #: A measurement without a stored baseline fails under ``--torchperf-strict``.
    needs_baseline: bool

    def judge(
        self,
        candidate: Candidate,
        sessions: Sequence[Mapping[str, Any]],
        gate: Gate,
        remeasure: Remeasure,
        confirm: Confirm | None,
    ) -> Judgement:
        """The verdict on this kind's figure, and the pass it rests on."""
        ...

    def extra_checks(
        self, candidate: Candidate, sessions: Sequence[Mapping[str, Any]], gate: Gate
    ) -> KindChecks:
        """Failures, warnings and gates from the kind's own data, beyond the shared checks."""
        ...


class _NoExtraChecks:
    """A kind whose own data adds no failure beyond its verdict."""

    def extra_checks(
        self, candidate: Candidate, sessions: Sequence[Mapping[str, Any]], gate: Gate
    ) -> KindChecks:
        return KindChecks()


class TimeKind(_NoExtraChecks):
    """Timed blocks against the stored sessions' timings (:func:`.verdict.judge`)."""

    name = "time"
    save = "pytest --torchperf-save"
    judges_timed_speedups = True
    needs_baseline = True
    #: The run modes an inconclusive timing verdict names as able to judge it.
    modes: tuple[str, ...] = BUSY_MACHINE_MODES

    def judge(
        self,
        candidate: Candidate,
        sessions: Sequence[Mapping[str, Any]],
        gate: Gate,
        remeasure: Remeasure,
        confirm: Confirm | None,
    ) -> Judgement:
        timed = timed_sessions(sessions)
        judgement = judge(
            candidate.label,
            candidate.first,
            [s["statistic"] for s in timed],
            gate.max_slowdown,
            remeasure,
            min_cpu_share=gate.min_cpu_share,
            max_relative_iqr=gate.max_spread,
            max_neighbour_load=gate.max_neighbour_load,
            min_gpu_clock=gate.min_gpu_clock,
            max_machine_slowdown=gate.max_machine_slowdown,
            max_widening=gate.max_widening,
            confirm=confirm,
            modes=self.modes,
            baseline_calibrated=[
                (s["statistic"], s["calibration"])
                for s in timed
                if s.get("calibration")
                and candidate.calibration_kernel
                and s.get("calibration_kernel") == candidate.calibration_kernel
            ],
        )
        looser = looser_guards(gate, timed)
        if judgement.verdict.outcome is Outcome.INCONCLUSIVE and looser:
            verdict = judgement.verdict
            judgement.verdict = replace(
                verdict,
                notes=(
                    *verdict.notes,
                    f"its baseline was saved with {' and '.join(looser)}: pass the same to this "
                    f"compare to judge it the way its baseline was taken",
                ),
            )
        if judgement.verdict.outcome is Outcome.NEW and sessions:
            judgement.verdict = untimed_verdict(
                judgement.verdict,
                candidate.label,
                sessions,
                gated_besides_time(candidate, sessions),
            )
        return judgement


class InstructionKind(_NoExtraChecks):
    """Instructions per call under Valgrind against the latest stored count."""

    name = "instructions"
    save = "pytest --torchperf-instructions --torchperf-save"
    # Timed speedups are reported only in an instruction-count run, like time itself.
    judges_timed_speedups = False
    needs_baseline = True

    def judge(
        self,
        candidate: Candidate,
        sessions: Sequence[Mapping[str, Any]],
        gate: Gate,
        remeasure: Remeasure,
        confirm: Confirm | None,
    ) -> Judgement:
        verdict = instruction_verdict(
            candidate.label,
            candidate.instructions,
            candidate.uncounted,
            sessions,
            gate.max_instruction_increase,
        )
        return Judgement(verdict, candidate.first, [candidate.first])


class ABKind:
    """Side B's paired interval against side A, both measured now (``gate.ab`` names side A)."""

    name = "ab"
    save = ""
    # Judged on the pairs (extra_checks), not against stored speedups.
    judges_timed_speedups = False
    needs_baseline = False

    def judge(
        self,
        candidate: Candidate,
        sessions: Sequence[Mapping[str, Any]],
        gate: Gate,
        remeasure: Remeasure,
        confirm: Confirm | None,
    ) -> Judgement:
        verdict = ab_verdict(
            candidate.label, candidate.ab_pairs, candidate.one_sided, gate.max_slowdown, gate.ab
        )
        return Judgement(verdict, candidate.first, [candidate.first])

    def extra_checks(
        self, candidate: Candidate, sessions: Sequence[Mapping[str, Any]], gate: Gate
    ) -> KindChecks:
        if not candidate.ab_speedups:
            return KindChecks()
        failure, warning = judge_ab_speedup(
            candidate.label, candidate.ab_speedups, gate.max_slowdown, gate.ab
        )
        return KindChecks(
            [Failure("speedup", failure)] if failure else [], [warning] if warning else []
        )


class TimeOrInstructionsKind(TimeKind):
    """Time, falling back to the instruction count stored beside it where timing cannot decide:
    an inconclusive timing verdict (busy machine, spread, slower machine) or stored sessions
    without timing. The fallback verdict's basis is ``instructions`` and its message says that
    timing could not decide and why; the timing verdict's message is kept as a note."""

    name = "time-or-instructions"
    save = "pytest --torchperf-fallback instructions --torchperf-save"
    # This run falls back on the count already: where that cannot decide either, A/B pairs can.
    modes = (AB_MODE,)

    def judge(
        self,
        candidate: Candidate,
        sessions: Sequence[Mapping[str, Any]],
        gate: Gate,
        remeasure: Remeasure,
        confirm: Confirm | None,
    ) -> Judgement:
        judgement = super().judge(candidate, sessions, gate, remeasure, confirm)
        timing = judgement.verdict
        if not (timing.outcome is Outcome.INCONCLUSIVE or timing.untimed):
            return judgement
        counts = latest_count_verdict(
            candidate.label,
            candidate.instructions,
            candidate.uncounted,
            candidate.counted_with,
            sessions,
            gate.max_instruction_increase,
            self.save,
        )
        if (
            timing.confirmed_in is not None
            and isinstance(counts, Verdict)
            and counts.outcome is not Outcome.FAIL
        ):
            # A trusted pass was over the limit and only its confirmation was disturbed: a
            # slowdown the count does not show (memory, threads, code Valgrind does not run)
            # stays inconclusive, with the count beside it, never a pass.
            detail = counts.message.removeprefix(f"{candidate.label}: ")
            counted = replace(
                timing,
                notes=(
                    *timing.notes,
                    f"its instruction count does not explain the slowdown: {detail}",
                ),
            )
        else:
            counted = fallback_verdict(candidate.label, timing, counts)
        judgement.verdict = counted
        return judgement


class TimeAndKernelsKind(TimeKind):
    """Wall time as :class:`TimeKind` judges it, and beside it the GPU kernel time of the call
    (:mod:`pytest_torchperf.judge.kernel_time`) against the kernel times stored in the timing
    sessions, at ``max_kernel_slowdown``: a slower or an added kernel fails even where the wall
    time is launch-bound and too noisy to gate. The wall-time verdict carries the kernel
    verdict and, when the kernels filled under half the wall time, a launch-bound note."""

    name = "time-and-kernels"

    def judge(
        self,
        candidate: Candidate,
        sessions: Sequence[Mapping[str, Any]],
        gate: Gate,
        remeasure: Remeasure,
        confirm: Confirm | None,
    ) -> Judgement:
        judgement = super().judge(candidate, sessions, gate, remeasure, confirm)
        notes = [n for n in (self._note(candidate, sessions, gate), self._launch(candidate)) if n]
        if notes:
            verdict = judgement.verdict
            judgement.verdict = replace(verdict, notes=(*verdict.notes, *notes))
        return judgement

    def extra_checks(
        self, candidate: Candidate, sessions: Sequence[Mapping[str, Any]], gate: Gate
    ) -> KindChecks:
        verdict = self._verdict(candidate, sessions, gate)
        if verdict is None:
            return KindChecks()
        checks = KindChecks(gated=["kernels"] if verdict.outcome in _JUDGED else [])
        if verdict.outcome is Outcome.FAIL:
            checks.failures.append(Failure("kernel time", verdict.message))
        elif verdict.outcome is Outcome.INCONCLUSIVE:
            checks.warnings.append(verdict.message)
        return checks

    def _verdict(
        self, candidate: Candidate, sessions: Sequence[Mapping[str, Any]], gate: Gate
    ) -> Any:
        if candidate.kernels is None:
            return None
        stored = [
            KernelTimes.from_record(s["kernels"])
            for s in timed_sessions(sessions)
            if s.get("kernels")
        ]
        return judge_kernels(
            candidate.label,
            KernelTimes.from_record(candidate.kernels),
            stored,
            gate.max_kernel_slowdown,
            gate.max_widening,
        )

    def _note(
        self, candidate: Candidate, sessions: Sequence[Mapping[str, Any]], gate: Gate
    ) -> str | None:
        """The kernel verdict as a note on the wall-time verdict (a failure or an undecided
        one is said by :meth:`extra_checks` too), or why there is none."""
        if candidate.kernels is None:
            return f"GPU kernel time not measured: {candidate.unprofiled or 'not profiled'}"
        verdict = self._verdict(candidate, sessions, gate)
        return verdict.message.removeprefix(f"{candidate.label}: ") if verdict else None

    @staticmethod
    def _launch(candidate: Candidate) -> str | None:
        return (
            launch_note(KernelTimes.from_record(candidate.kernels)) if candidate.kernels else None
        )


#: Kernel-time outcomes that judged the figure.
_JUDGED = (Outcome.PASS, Outcome.FAIL, Outcome.IMPROVED)

_KINDS: dict[str, Kind] = {
    kind.name: kind
    for kind in (
        TimeKind(),
        InstructionKind(),
        ABKind(),
        TimeOrInstructionsKind(),
        TimeAndKernelsKind(),
    )
}


def kind_of(gate: Gate) -> Kind:
    """The kind a gate judges (chosen once per run, recorded in the gate)."""
    return _KINDS[gate.kind]


# -- each kind's verdict, decided from its figures and worded ----------------------------------


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


def gated_besides_time(candidate: Candidate, sessions: Sequence[Mapping[str, Any]]) -> str:
    """What the engine gates of ``candidate`` against ``sessions`` besides time, in words
    (``counters and numerics``, ``numerics``, ``nothing else``): an amp variant records no
    counters, so its message must not say they were gated."""
    counters = candidate.counters is not None and any(s.get("counters") for s in sessions)
    numerics = (
        (candidate.fingerprint is not None and any(s.get("fingerprint") for s in sessions))
        or (candidate.metric is not None and any(s.get("metric") is not None for s in sessions))
        or candidate.variant != "eager"  # checked against eager fp32 within the run
    )
    return " and ".join(w for w, on in (("counters", counters), ("numerics", numerics)) if on) or (
        "nothing else"
    )


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
