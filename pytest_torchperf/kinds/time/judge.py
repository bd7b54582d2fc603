"""How the ``time`` kind judges: timed blocks against the stored sessions' timings
(:func:`pytest_torchperf.judge.verdict.judge`), the note an undecided compare adds about the
guards its baseline was saved with, and the verdict against sessions stored without timing.
Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from pytest_torchperf.core.units import format_percent
from pytest_torchperf.judge.inputs import Candidate, Gate, recorded_sample
from pytest_torchperf.judge.kind_protocol import Confirm, Kind, Remeasure
from pytest_torchperf.judge.outcome import Outcome
from pytest_torchperf.judge.refusals import IDLE, IDLE_REMEDY, loosening_option, refusing_guard
from pytest_torchperf.judge.verdict import BUSY_MACHINE_MODES, Judgement, Verdict, judge
from pytest_torchperf.store.sessions import Session, timed_sessions


class TimeKind(Kind):
    """Timed blocks against the stored sessions' timings (:func:`pytest_torchperf.judge.verdict.judge`)."""

    name = "time"
    save = "pytest --torchperf-save"
    judges_timed_speedups = True
    needs_baseline = True
    #: The run modes an inconclusive timing verdict names as able to judge it.
    modes: tuple[str, ...] = BUSY_MACHINE_MODES

    def judge(
        self,
        candidate: Candidate,
        sessions: Sequence[Session],
        gate: Gate,
        remeasure: Remeasure,
        confirm: Confirm | None,
    ) -> Judgement:
        timed = timed_sessions(sessions)
        judgement = judge(
            candidate.label,
            candidate.first,
            [s.statistic for s in timed if s.statistic],
            gate.max_slowdown,
            remeasure,
            guard=gate.guards,
            max_widening=gate.max_widening,
            confirm=confirm,
            modes=self.modes,
            strict=gate.strict,
            saving=gate.saving,
            baseline_shares=[s.cpu_share for s in timed if s.statistic and s.cpu_share],
            baseline_calibrated=[
                (s.statistic, s.calibration)
                for s in timed
                if s.statistic
                and s.calibration
                and candidate.calibration_kernel
                and s.calibration_kernel == candidate.calibration_kernel
            ],
        )
        # Said only where the guard that refused this pass is among the looser ones (a busy
        # neighbour's option does not help a crowded CPU); then naming them all: told one at a
        # time, a busy machine's next compare was refused by the next guard.
        refused_by = judgement.verdict.loosened_by or ""
        looser = looser_guards(gate, timed)
        if judgement.verdict.outcome is Outcome.INCONCLUSIVE and any(
            option.split("=")[0] in refused_by for option in looser
        ):
            verdict = judgement.verdict
            # A lowered CPU-share guard still bounds a pass more crowded than the stored
            # sessions by what that explains (decision.py); the other guards bound nothing.
            then = (
                "a pass whose CPU other processes took more than at save time is inconclusive "
                "unless it is slower than that explains (where the run queue is read: Linux)"
                if all(option.startswith("--torchperf-min-cpu-share") for option in looser)
                else "a pass slowed by a busier machine than at save time fails as a slower "
                "model would"
            )
            judgement.verdict = replace(
                verdict,
                notes=(
                    *verdict.notes,
                    f"its baseline was saved with {' and '.join(looser)}: passing the same to "
                    f"this compare judges it the way its baseline was taken, and then {then}",
                ),
            )
        if judgement.verdict.outcome is Outcome.NEW and sessions:
            judgement.verdict = untimed_verdict(
                judgement.verdict,
                candidate.label,
                sessions,
                " and ".join(candidate.gates_besides_time(sessions, gate.ignore_counters))
                or "nothing else",
            )
        judgement.verdict = self.fall_back(candidate, sessions, gate, judgement.verdict)
        return judgement

    def fall_back(
        self, candidate: Candidate, sessions: Sequence[Session], gate: Gate, timing: Verdict
    ) -> Verdict:
        """The verdict where timing judged ``timing``: timing's own (where it cannot decide,
        ``time-or-instructions`` falls back on the count)."""
        return timing

    def accept_problem(self, session: Session) -> str | None:
        """What the save guard would refuse of a recorded session (contention, spread), under
        the guards it was saved with (an older file's: :meth:`Gate.from_record`)."""
        times = session.times
        if not times:
            return "no timed samples"
        return Gate.from_record(session.gate or {}).guards.problem(recorded_sample(session))


def looser_guards(gate: Gate, timed: Sequence[Session]) -> list[str]:
    """The guard options the latest timed session was saved with that are looser than this
    compare's (a save on a busy machine told to store anyway with them), as options."""
    if not timed:
        return []
    saved: Mapping[str, Any] = timed[-1].gate or {}
    found = []
    if saved.get("min_cpu_share", gate.min_cpu_share) < gate.min_cpu_share:
        found.append(f"--torchperf-min-cpu-share={saved['min_cpu_share']:g}")
    if saved.get("min_gpu_clock", gate.min_gpu_clock) < gate.min_gpu_clock:
        clock = saved["min_gpu_clock"]
        found.append(f"--torchperf-min-gpu-clock={format_percent(clock) if clock else 0}")
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
    sessions: Sequence[Session],
    gated: str = "counters and numerics",
) -> Verdict:
    """The timing verdict against sessions that hold counters and numerics but no timing (every
    pass of the save was refused by a guard): no timing baseline, said as such (strict fails it
    like ``new``); what is still gated against those sessions (``gated``) is said, and the
    option of every guard that refused the save (storing it anyway needs them all)."""
    latest = next((s for s in reversed(sessions) if s.untimed), None)
    why = latest.untimed if latest and latest.untimed else ""
    options = list(latest.untimed_options) if latest and latest.untimed_options else []
    options = options or ([loosening_option(why)] if why else [])
    reason = f"the save could not time it ({why})" if why else "the save could not time it"
    anyway = f", or store it anyway with {' and '.join(options)}" if options else ""
    count = f"{len(sessions)} stored session{'s' if len(sessions) != 1 else ''}"
    store = (
        IDLE_REMEDY
        if why and refusing_guard(why) == IDLE
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


KIND = TimeKind()
