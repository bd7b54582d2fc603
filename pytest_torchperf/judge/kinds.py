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

Each kind's verdict, decided from its figures and worded, is in
:mod:`pytest_torchperf.judge.kind_verdicts`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from pytest_torchperf.judge.ab import judge_ab_speedup
from pytest_torchperf.judge.decision import Outcome
from pytest_torchperf.judge.failures import Failure
from pytest_torchperf.judge.inputs import Candidate, Gate
from pytest_torchperf.judge.kernel_time import judge_kernels, launch_note
from pytest_torchperf.judge.kind_verdicts import (
    ab_verdict,
    fallback_verdict,
    instruction_verdict,
    latest_count_verdict,
    looser_guards,
    untimed_verdict,
)
from pytest_torchperf.judge.samples import Sample
from pytest_torchperf.judge.verdict import (
    AB_MODE,
    BUSY_MACHINE_MODES,
    Judgement,
    Verdict,
    judge,
)
from pytest_torchperf.measure.kernel_time import KernelTimes
from pytest_torchperf.store.records import timed_sessions

Remeasure = Callable[[], Sample]
Confirm = Callable[[], "Sample | None"]


@dataclass
class KindChecks:
    """What a kind's own data adds beyond its verdict: failures, warnings, notes on the verdict,
    and the gates it judged (``kernels``), which the run's coverage counts."""

    failures: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
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
            strict=gate.strict,
            baseline_calibrated=[
                (s["statistic"], s["calibration"])
                for s in timed
                if s.get("calibration")
                and candidate.calibration_kernel
                and s.get("calibration_kernel") == candidate.calibration_kernel
            ],
        )
        # Only the option that loosens the guard that refused this pass can judge it as the
        # baseline was judged: a busy neighbour's option does not help a crowded CPU.
        refused_by = judgement.verdict.loosened_by or ""
        looser = [
            option for option in looser_guards(gate, timed) if option.split("=")[0] in refused_by
        ]
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
                " and ".join(candidate.gates_besides_time(sessions)) or "nothing else",
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

    def extra_checks(
        self, candidate: Candidate, sessions: Sequence[Mapping[str, Any]], gate: Gate
    ) -> KindChecks:
        if candidate.kernels is None:
            why = candidate.unprofiled or "not profiled"
            return KindChecks(notes=[f"GPU kernel time not measured: {why}"])
        current = KernelTimes.from_record(candidate.kernels)
        stored = [
            KernelTimes.from_record(s["kernels"])
            for s in timed_sessions(sessions)
            if s.get("kernels")
        ]
        verdict = judge_kernels(
            candidate.label, current, stored, gate.max_kernel_slowdown, gate.max_widening
        )
        # The verdict as a note on the wall time's (a failure or an undecided one is said as
        # such too), and whether the wall time is launch-bound.
        notes = [verdict.message.removeprefix(f"{candidate.label}: "), launch_note(current)]
        checks = KindChecks(
            notes=[n for n in notes if n],
            gated=["kernels"] if verdict.outcome in _JUDGED else [],
        )
        if verdict.outcome is Outcome.FAIL:
            checks.failures.append(Failure("kernel time", verdict.message))
        elif verdict.outcome is Outcome.INCONCLUSIVE:
            checks.warnings.append(verdict.message)
        return checks


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
