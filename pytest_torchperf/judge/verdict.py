"""The verdict of a measurement: a decision (:func:`pytest_torchperf.judge.decision.decide`)
worded into a message, notes and figures (:func:`word`); :func:`judge` does both. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_torchperf.core.json_fields import NOT_JSON, json_fields
from pytest_torchperf.core.units import counted, format_change, format_percent, format_time
from pytest_torchperf.judge.decision import DEFAULT_GUARD, SLOW_MACHINE_MARGIN, Decision, decide
from pytest_torchperf.judge.outcome import Outcome
from pytest_torchperf.judge.refusals import IDLE, IDLE_REMEDY, loosening_option, refusing_guard
from pytest_torchperf.judge.samples import GuardLimits, Sample
from pytest_torchperf.judge.tolerance import (
    MAX_WIDENING,
    NOISY_BASELINE,
    no_gate_remedy,
    widened_beyond,
    widening_bound,
)
from pytest_torchperf.store.record import RecordedVerdict


@dataclass(frozen=True)
class Verdict(RecordedVerdict):
    """The judgement of one measurement against its baseline: the fields a record's verdict
    holds (:class:`~pytest_torchperf.store.record.RecordedVerdict`, their meaning), as the judge
    gives them.

    ``ratio`` is *the* figure of the verdict: the change every report shows. For a failure it is
    the median of the agreeing passes, for a pass after a contradicting re-measure that pass's.
    """

    outcome: Outcome
    message: str
    baseline_sessions: int = 0
    remeasures: int = 0
    basis: str = "time"
    #: INCONCLUSIVE by a guard only: the option that loosens that guard
    #: (:func:`~pytest_torchperf.judge.refusals.loosening_option`), e.g. for a note that the
    #: baseline was saved with it. Not recorded: a replay decides it again.
    loosened_by: str | None = field(default=None, metadata=NOT_JSON)

    @property
    def failed(self) -> bool:
        return self.outcome is Outcome.FAIL

    def to_dict(self) -> dict[str, object]:
        """JSON-friendly representation for reports: every recorded field, in order."""
        plan = json_fields(RecordedVerdict).values()
        return {
            **{f.key: f.type.write(getattr(self, f.name)) for f in plan},
            "outcome": self.outcome.value,
        }

    to_json = to_dict  # not the keys it was read with: the judge builds it, nothing reads it


#: The modes that judge a measurement on a machine too busy to time it on: said where a timing
#: verdict is inconclusive (docs/instructions.md, docs/ab.md).
FALLBACK_MODE = (
    "--torchperf-fallback instructions (judges by the instruction count where timing cannot, "
    "once a save with that option stored the counts; needs valgrind)"
)
AB_MODE = "--torchperf-ab REV (times this tree against revision REV in alternating process pairs)"
BUSY_MACHINE_MODES = (FALLBACK_MODE, AB_MODE)


@dataclass
class Judgement:
    """A verdict and the sample it was reached on (the last trustworthy pass)."""

    verdict: Verdict
    sample: Sample
    samples: list[Sample]


def new_message(label: str) -> str:
    """What a measurement without any stored baseline says: not "for this environment", which
    read as an environment problem to a newcomer (where other environments hold one, the engine
    says which field differs instead: ``judge/compare.py:explain_new``). The same words for
    every measurement, so the run's summary says them once for all."""
    return f"{label}: no baseline yet; record one with pytest --torchperf-save"


def word(
    label: str, d: Decision, modes: Sequence[str] = BUSY_MACHINE_MODES, strict_run: bool = False
) -> Verdict:
    """The :class:`Verdict` of a decision: its message, notes and figures. An inconclusive one
    names ``modes``, the run modes that could judge it on such a machine, and, unless
    ``strict_run`` (the engine then fails it), that --torchperf-strict would fail it."""
    notes = []
    if d.noise is not None and d.limit > d.tolerance and d.reason != "noisy-baseline":
        noise = (
            f"the {d.sessions} stored sessions (fresh processes of unchanged code) put this "
            f"machine's process-to-process noise at {format_percent(d.noise)}, too much for a "
            f"{format_percent(d.tolerance)} limit; "
        )
        if d.outcome is Outcome.INCONCLUSIVE and widened_beyond(
            d.limit, d.tolerance, d.max_widening
        ):
            # Inconclusive for another reason too: say this one, or the next run surprises.
            bound = widening_bound(d.tolerance, d.max_widening) or d.limit
            notes.append(
                f"{noise}that widens it to {format_percent(d.limit)}, beyond the "
                f"{format_percent(bound)} allowed: even on a quiet machine its timing is no "
                f"gate. {no_gate_remedy(d.limit, d.tolerance)}"
            )
        else:
            notes.append(f"{noise}judged at {format_percent(d.limit)} (3 standard deviations)")
    if d.sessions == 1 and d.reason in ("within", "contradicted", "improved", "confirmed"):
        notes.append(
            f"one stored session: this machine's process-to-process noise is unknown, so it was "
            f"judged at the {format_percent(d.tolerance)} asked; a save that keeps several "
            f"processes' timings measures it (it runs five by default, and keeps only those a "
            f"busy machine did not disturb: save again when it is quieter)"
        )
    machine = d.machine_ratio(d.final)
    figures: dict[str, Any] = dict(
        ratio=d.ratio,
        first_ratio=d.first_ratio,
        baseline_statistic=d.baseline,
        candidate_statistic=d.candidate,
        tolerance=d.tolerance,
        effective_tolerance=d.limit,
        confirm_tolerance=d.confirm_limit,
        baseline_sessions=d.sessions,
        baseline_cv=d.noise,
        remeasures=len(d.samples) - 1,
        confirm_ratio=d.confirm_ratios[0] if d.confirm_ratios else None,
        confirm_ratios=d.confirm_ratios,
        confirmed_in=d.confirmed_in,
        machine_ratio=machine,
        normalized_ratio=d.ratio / machine if machine and d.ratio else None,
    )
    limit = format_percent(d.limit)
    if d.confirm_limit is not None:  # a pooled first pass, single-process confirming passes
        limit += f", {format_percent(d.confirm_limit)} for one process"
    # Under --torchperf-strict the engine fails it: the hint that it would is then moot.
    strict = "." if strict_run else "; --torchperf-strict turns this into a failure."
    idle = d.problem is not None and refusing_guard(d.problem) == IDLE
    quieter = (IDLE_REMEDY if idle else "Re-run on a quieter machine") + (
        f", or judge it with {' or '.join(modes)}" if modes else ""
    )
    where = "in a fresh process" if d.confirmed_in == "fresh" else "in this process"
    if d.reason == "new":
        return Verdict(Outcome.NEW, new_message(label), tolerance=d.tolerance)
    if d.reason == "guard":
        message = (
            f"{label}: inconclusive, {format_change(d.ratio)} vs baseline cannot be "
            f"trusted (measured twice, both disturbed): {d.problem}. {quieter}{strict}"
        )
    elif d.reason == "untrusted":
        message = (
            f"{label}: inconclusive, {format_change(d.ratio)} vs baseline but a confirming "
            f"pass ({where}) could not be trusted: {d.problem}. {quieter}{strict}"
        )
    elif d.reason == "confirmed":
        passes = len(d.confirm_ratios) + 1
        where_all = (
            "fresh processes" if d.confirmed_in == "fresh" else "re-measures in this process"
        )
        message = (
            f"{label}: {format_change(d.ratio).lstrip('+')} slower than baseline "
            f"({d.final.what} {format_time(d.candidate)} vs {format_time(d.baseline)}, the "
            f"median of {passes} passes: first {format_change(d.first_ratio)}, then "
            f"{', '.join(format_change(r) for r in d.confirm_ratios)} in {where_all}; "
            f"limit {limit})\n" + _confidence_line(d)
        )
        if d.slow_machine is not None:
            slow, normalised = d.slow_machine
            notes.append(
                f"the pass at {format_change(normalised * slow)} ran while the machine ran its "
                f"calibration kernel {format_change(slow)} slower than at save time; divided by "
                f"that, its slowdown was still {format_change(normalised)}, over "
                f"{SLOW_MACHINE_MARGIN:g} times that pass's limit, so it was not the machine's"
            )
        if d.crowded is not None:
            explained, normalised, share = d.crowded
            notes.append(
                f"the pass at {format_change(normalised * explained)} got the CPU only "
                f"{format_percent(share)} of the time (other processes took it), which explains "
                f"at most {format_change(explained)}; divided by that, its slowdown was still "
                f"{format_change(normalised)}, over {SLOW_MACHINE_MARGIN:g} times that pass's "
                f"limit, so it was not the crowding"
            )
    elif d.reason == "noisy-baseline":
        message = _noisy_baseline(label, d, where) + strict
    elif d.reason == "contradicted":
        message = (
            f"{label}: {format_change(d.ratio)} vs baseline after a re-measure {where} "
            f"(first pass {format_change(d.first_ratio)}; limit {limit})"
        )
    elif d.reason == "machine-faster":
        notes.append(
            f"{format_change(d.ratio)} only because the machine itself ran the calibration "
            f"kernel {format_change(machine)}: not an improvement"
        )
        message = (
            f"{label}: {format_change(d.ratio)} vs baseline, faster only because the machine "
            f"is (calibration kernel {format_change(machine)}; limit {limit})"
        )
    elif d.reason == "improved":
        # A faster machine explains part of it: said, with what is left of the code's own.
        faster = (
            f"; the machine itself ran the calibration kernel {format_change(machine)}, so "
            f"about {format_change(d.ratio / machine)} is the code's own"
            if machine and machine < 0.95 and d.ratio
            else ""
        )
        message = (
            f"{label}: {format_change(d.ratio).lstrip('-')} faster than baseline "
            f"({d.final.what} {format_time(d.candidate)} vs {format_time(d.baseline)}; limit "
            f"{limit}{faster}): the baseline is stale; refresh it with pytest --torchperf-save "
            f"--torchperf-reset"
        )
    else:
        message = f"{label}: {format_change(d.ratio)} vs baseline (limit {limit})"
        if d.problem:  # a pass refused for what only adds time, within the limit
            # The guard's finding, not its advice ("save the baseline again on it").
            found = d.problem.split(": ", 1)[0]
            if found.startswith("spread") and d.final.crowded and d.final.cpu_share is not None:
                # The spread passes only as the crowding's: say so (with the CPU-share guard
                # lowered, the share is named nowhere else).
                found += (
                    f", from other processes taking its CPU (CPU share {d.final.cpu_share:.2f})"
                )
            notes.append(
                f"judged although a guard refused the pass ({found}): that only adds time, "
                f"so the code's own is within the limit all the same"
            )
    refused = d.problem if d.outcome is Outcome.INCONCLUSIVE else None
    guard = refused and refusing_guard(refused)
    return Verdict(
        d.outcome,
        message,
        suspicious=d.reason == "contradicted",
        guard=NOISY_BASELINE if d.reason == "noisy-baseline" else guard,
        loosened_by=refused and loosening_option(refused),
        notes=tuple(notes),
        **figures,
    )


def _noisy_baseline(label: str, d: Decision, where: str) -> str:
    """A pass within a limit too wide to gate: the figures that widened it, and what repeats."""
    limit = d.confirm_limit if d.confirm_ratios and d.confirm_limit is not None else d.limit
    bound = widening_bound(d.tolerance, d.max_widening) or limit
    passes = (
        f" (first pass {format_change(d.first_ratio)}, then {format_change(d.ratio)} {where})"
        if d.confirm_ratios
        else ""
    )
    return (
        f"{label}: timing not judged, {format_change(d.ratio)} vs baseline{passes}: the "
        f"{d.sessions} stored sessions (fresh processes of unchanged code) put this machine's "
        f"process-to-process noise at {format_percent(d.noise or 0.0)}, which widens the "
        f"{format_percent(d.tolerance)} limit to {format_percent(limit)}, beyond the "
        f"{format_percent(bound)} allowed ({d.max_widening:g}x the limit): a slowdown below "
        f"{format_percent(limit)} would pass unseen, so this is no gate. "
        f"{no_gate_remedy(limit, d.tolerance)}"
    )


def _confidence_line(d: Decision) -> str:
    """One line saying how much noise the decision had to beat."""
    first, final = (format_percent(s.summary.relative_iqr) for s in (d.first, d.final))
    # One figure where the reported pass is the first (it read "6.76% and 6.76%").
    spread = first if d.final is d.first else f"{first} (first pass), {final} (reported pass)"
    parts = [f"spread within run IQR/median {spread}"]
    if d.final.process_statistics:
        p25s = ", ".join(format_time(t) for t in (*d.final.process_statistics, d.final.summary.p25))
        # This process's pass is among them (last): it is no fresh one.
        fresh = len(d.final.process_statistics)
        parts.append(
            f"candidate: median of {d.final.processes} processes ({fresh} fresh, then this one: "
            f"p25s {p25s})"
        )
    if d.noise is not None:
        parts.append(
            f"baseline: median of {d.sessions} sessions, process noise {format_percent(d.noise)}"
        )
    else:
        parts.append(f"baseline: {counted(d.sessions, 'saved session')}")
    shares = [s.cpu_share for s in (d.first, d.final) if s.cpu_share is not None]
    if shares:
        parts.append(f"CPU share {min(shares):.2f}")
    machine = d.machine_ratio(d.final)
    if machine is not None:
        parts.append(f"machine speed {format_change(machine)} on the calibration kernel")
    return "  how sure: " + "; ".join(parts)


def judge(
    label: str,
    first: Sample,
    baseline_stats: Sequence[float],
    tolerance: float,
    remeasure: Callable[[], Sample],
    *,
    guard: GuardLimits = DEFAULT_GUARD,
    baseline_calibrated: Sequence[tuple[float, float]] = (),
    baseline_shares: Sequence[float] = (),
    confirm: Callable[[], Sample | None] | None = None,
    max_widening: float = MAX_WIDENING,
    modes: Sequence[str] = BUSY_MACHINE_MODES,
    strict: bool = False,
    saving: bool = False,
) -> Judgement:
    """Decide and word the outcome of ``first`` against ``baseline_stats`` (see :func:`decide`).

    ``baseline_calibrated`` holds ``(statistic, calibration)`` of the stored sessions that timed
    the calibration kernel; the machine-speed guard applies when every session did.
    ``baseline_shares``: the CPU shares they were timed at, where known. ``modes``:
    what an inconclusive verdict says could judge it instead (:func:`word`).
    """
    d = decide(
        first,
        baseline_stats,
        tolerance,
        remeasure,
        guard=guard,
        baseline_calibrations=[c for _, c in baseline_calibrated],
        baseline_shares=baseline_shares,
        confirm=confirm,
        max_widening=max_widening,
        saving=saving,
    )
    return Judgement(word(label, d, modes, strict), d.final, d.samples)
