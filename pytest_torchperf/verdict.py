"""The decision: is this measurement slower than its baseline, and how sure are we?

Pure module (no torch, no pytest). Deciding (:func:`decide`) and wording (:func:`word`) are
separate; :func:`judge` does both. The procedure:

1. **Guard.** A pass during which the process did not get the CPU (CPU share < 0.9), other
   processes kept the other CPUs busy, the spread was gross (IQR/median > 25 %) or the machine
   itself ran the calibration kernel clearly slower than when the baseline was saved is measured
   again; if it is still bad the verdict is *inconclusive*, never *fail*.
2. **Compare** a low quantile (p25 of the per-call block times) with the baseline statistic: the
   median of the stored sessions' p25. Timing interference only adds time, so p25 is steadier.
3. **Widen, never narrow** the limit to three standard deviations of the process-to-process noise
   the stored sessions show (:mod:`.tolerance`).
4. **Confirm.** A suspected slowdown fails only if two more passes agree, taken in fresh processes
   by default: a process that runs a model slow for its whole life (memory layout, allocator
   state) then cannot fail a test alone, nor can a baseline that happened to run fast. The
   figure of a failure is the median of the three passes.

Measuring is injected as callables so this module can be driven by synthetic samples in unit
tests and by the passes a results file recorded (``torchperf compare``).
"""

from __future__ import annotations

import enum
import statistics
from dataclasses import dataclass, field
from typing import Callable, Sequence

from .stats import Summary
from .tolerance import (NOISE_AWARE_MIN_SESSIONS, NOISE_CV_FACTOR,  # noqa: F401 - re-exported
                        baseline_range, effective_tolerance)
from .units import format_change, format_percent, format_time

#: Below this CPU share (process CPU time / wall time) the process was starved: inconclusive.
MIN_CPU_SHARE = 0.9
#: Above this IQR/median the samples are too spread to judge (torch.utils.benchmark's gross warning).
MAX_RELATIVE_IQR = 0.25
#: Above this share of the other CPUs kept busy by other processes, a CPU pass shared caches,
#: memory bandwidth or an SMT core with a neighbour: inconclusive (see :mod:`.machine_load`).
MAX_NEIGHBOUR_LOAD = 0.5
#: A pass whose calibration kernel ran this much slower than the reference was taken on a
#: disturbed machine. On a shared 2-vCPU VM the kernel switched between ~4.6 us and 6.5-8.5 us
#: from one measurement to the next, and the models' times followed it by 1.2-1.9x; judging only
#: passes near the baseline's machine speed halved the false failures of a 20-test suite there
#: (``benchmarks/suite_noise.py``). Used against the stored sessions when comparing and against
#: the stored sessions or the rest of the run when saving (:func:`machine_disturbance`).
MAX_MACHINE_SLOWDOWN = 0.25
#: Backwards-compatible name of the save-time threshold.
MAX_SAVE_MACHINE_SLOWDOWN = MAX_MACHINE_SLOWDOWN
#: Passes that must agree, after the first, before a slowdown fails.
CONFIRMATIONS = 2


class Outcome(str, enum.Enum):
    """What a measurement's comparison concluded."""

    PASS = "pass"
    FAIL = "fail"
    INCONCLUSIVE = "inconclusive"
    IMPROVED = "improved"
    NEW = "new"  #: no baseline for this environment yet
    MEASURED = "measured"  #: measured without comparing (no --torchperf-compare)

    def __str__(self) -> str:  # "fail", not "Outcome.FAIL", in messages and JSON
        return self.value


@dataclass(frozen=True)
class Sample:
    """One measurement pass: summary of per-call times plus what the guard needs."""

    summary: Summary
    #: Process CPU time / wall time during the timed blocks; None where it does not apply (GPU).
    cpu_share: float | None = None
    #: The per-call times summarised (kept for storage and reports; may be empty in unit tests).
    times: tuple[float, ...] = ()
    #: p25 of the calibration kernel timed alongside (seconds per call), None when not calibrated.
    calibration: float | None = None
    #: p25s of the same target measured in other fresh processes (``--torchperf-processes``).
    process_statistics: tuple[float, ...] = ()
    #: Their calibration kernel p25s (for the machine-speed check, pooled like the statistic).
    process_calibrations: tuple[float, ...] = ()
    #: Share of the other CPUs other processes kept busy during the pass (None: not measured).
    neighbour_load: float | None = None
    #: Taken in a fresh process (a confirming pass of ``--torchperf-confirm fresh``).
    fresh: bool = False

    @property
    def machine_calibration(self) -> float | None:
        """The machine speed the statistic was measured at: this pass's calibration or, with other
        processes pooled, the median over all of them."""
        if not self.process_calibrations or not self.calibration:
            return self.calibration
        return statistics.median((*self.process_calibrations, self.calibration))

    @property
    def statistic(self) -> float:
        """The statistic compared against baselines: p25 of per-call times (the median of the
        processes' p25s when other processes measured the target too)."""
        if self.process_statistics:
            return statistics.median((*self.process_statistics, self.summary.p25))
        return self.summary.p25

    @property
    def processes(self) -> int:
        """How many fresh processes the statistic pools."""
        return 1 + len(self.process_statistics)

    @property
    def what(self) -> str:
        """What the statistic is, for messages."""
        return "p25" if not self.process_statistics else f"median p25 of {self.processes} processes"


def guard_problem(sample: Sample, *, min_cpu_share: float = MIN_CPU_SHARE,
                  max_relative_iqr: float = MAX_RELATIVE_IQR,
                  max_neighbour_load: float = MAX_NEIGHBOUR_LOAD,
                  reference_calibration: float | None = None,
                  max_machine_slowdown: float = MAX_MACHINE_SLOWDOWN) -> str | None:
    """Return why ``sample`` cannot be trusted, or None when it can.

    ``reference_calibration`` is the calibration kernel's time when the baseline was saved; a
    pass whose kernel ran more than ``max_machine_slowdown`` slower was taken on a slower machine.
    """
    if sample.cpu_share is not None and sample.cpu_share < min_cpu_share:
        return (f"CPU share {sample.cpu_share:.2f} < {min_cpu_share:.2f}: another process competed for "
                f"the CPU while timing")
    load = sample.neighbour_load
    if load is not None and max_neighbour_load < 1.0 and load > max_neighbour_load:
        return (f"other processes kept {format_percent(load)} of the other CPUs busy while timing "
                f"(limit {format_percent(max_neighbour_load)}): a busy neighbour shares caches, "
                f"memory bandwidth and SMT cores with this one")
    rel = sample.summary.relative_iqr
    if rel > max_relative_iqr:
        return (f"spread IQR/median {format_percent(rel)} > {format_percent(max_relative_iqr)}: "
                f"timings too unstable to judge")
    calibration = sample.machine_calibration
    if reference_calibration and calibration \
            and calibration > reference_calibration * (1.0 + max_machine_slowdown):
        return (f"the machine itself ran the calibration kernel timed alongside "
                f"{format_change(calibration / reference_calibration)} slower than when the "
                f"baseline was saved ({format_time(calibration)} vs "
                f"{format_time(reference_calibration)} per call; limit "
                f"{format_percent(max_machine_slowdown)}): a slower host or a busy neighbour. If "
                f"the machine stays this slow, save the baseline again on it")
    return None


def machine_disturbance(calibration: float | None,
                        references: Sequence[tuple[str, Sequence[float]]],
                        limit: float = MAX_MACHINE_SLOWDOWN) -> tuple[float, float, str] | None:
    """``(ratio, reference, what)`` when the machine ran the calibration kernel more than
    ``limit`` slower than the median of any of the ``(what, calibrations)`` references, else None.

    The lowest reference decides: a run that is slow throughout is still caught against the
    stored sessions, and slow stored sessions do not hide a disturbed pass within this run.
    """
    if not calibration:
        return None
    medians = [(statistics.median(values), what) for what, values in references if values]
    if not medians:
        return None
    reference, what = min(medians)
    ratio = calibration / reference
    return (ratio, reference, what) if ratio > 1.0 + limit else None


@dataclass(frozen=True)
class Verdict:
    """The judgement of one measurement against its baseline.

    ``ratio`` is *the* figure of the verdict: the change every report shows. For a failure it is
    the median of the agreeing passes, for a pass after a contradicting re-measure that pass's.
    """

    outcome: Outcome
    message: str
    #: Candidate statistic / baseline statistic: the verdict's figure (None without a baseline).
    ratio: float | None = None
    #: Ratio of the first confirming pass, when one was made.
    confirm_ratio: float | None = None
    #: Ratio of the first pass (``ratio`` may pool it with the confirming passes).
    first_ratio: float | None = None
    baseline_statistic: float | None = None
    candidate_statistic: float | None = None
    tolerance: float | None = None
    #: Tolerance actually applied (widened by the stored sessions' noise).
    effective_tolerance: float | None = None
    baseline_sessions: int = 0
    #: Estimated process-to-process noise (relative standard deviation) of the stored sessions.
    baseline_cv: float | None = None
    #: Passed, but only after a re-measurement contradicted a first suspicious pass.
    suspicious: bool = False
    #: Calibration kernel now / in the baseline sessions: >1 means the machine itself is slower.
    machine_ratio: float | None = None
    #: ``ratio`` / ``machine_ratio``: the change with the machine's own speed factored out.
    normalized_ratio: float | None = None
    #: How many extra measurement passes the decision needed.
    remeasures: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: NEW only: why no stored baseline is comparable (the fingerprint fields that differ from a
    #: stored environment, and where it is), shared by every measurement of that environment.
    new_reason: str | None = None
    #: Ratios of every confirming pass, in order.
    confirm_ratios: tuple[float, ...] = ()
    #: Where the confirming passes were taken: ``fresh`` (new processes) or ``same``.
    confirmed_in: str | None = None

    @property
    def failed(self) -> bool:
        """True when the outcome is FAIL."""
        return self.outcome is Outcome.FAIL

    def to_dict(self) -> dict[str, object]:
        """JSON-friendly representation for reports."""
        return {
            "outcome": self.outcome.value,
            "message": self.message,
            "ratio": self.ratio,
            "confirm_ratio": self.confirm_ratio,
            "first_ratio": self.first_ratio,
            "baseline_statistic": self.baseline_statistic,
            "candidate_statistic": self.candidate_statistic,
            "tolerance": self.tolerance,
            "effective_tolerance": self.effective_tolerance,
            "baseline_sessions": self.baseline_sessions,
            "baseline_cv": self.baseline_cv,
            "suspicious": self.suspicious,
            "machine_ratio": self.machine_ratio,
            "normalized_ratio": self.normalized_ratio,
            "remeasures": self.remeasures,
            "notes": list(self.notes),
            "new_reason": self.new_reason,
            "confirm_ratios": list(self.confirm_ratios),
            "confirmed_in": self.confirmed_in,
        }


@dataclass
class Judgement:
    """A verdict and the sample it was reached on (the last trustworthy pass)."""

    verdict: Verdict
    sample: Sample
    samples: list[Sample]


@dataclass(frozen=True)
class Decision:
    """What :func:`decide` concluded, before any wording.

    ``reason``: ``new``, ``guard`` (the first pass and its re-measure untrusted), ``untrusted``
    (a confirming pass untrusted), ``confirmed`` (a failure), ``contradicted`` (a confirming pass
    within the limit), ``machine-faster`` (faster only because the machine is), ``improved``,
    ``within``.
    """

    outcome: Outcome
    reason: str
    first: Sample
    #: The pass the figure and the stored sample come from.
    final: Sample
    samples: list[Sample]
    baseline: float | None = None
    sessions: int = 0
    tolerance: float = 0.0
    limit: float = 0.0
    noise: float | None = None
    ratio: float | None = None
    candidate: float | None = None
    first_ratio: float | None = None
    confirm_ratios: tuple[float, ...] = ()
    confirmed_in: str | None = None
    problem: str | None = None
    reference_calibration: float | None = None
    widened_by: str | None = None

    def machine_ratio(self, sample: Sample) -> float | None:
        """The sample's calibration kernel against the baseline sessions' (None when unknown)."""
        calibration = sample.machine_calibration
        if not self.reference_calibration or not calibration:
            return None
        return calibration / self.reference_calibration


@dataclass(frozen=True)
class GuardLimits:
    """The guards' thresholds (see :func:`guard_problem`)."""

    min_cpu_share: float = MIN_CPU_SHARE
    max_relative_iqr: float = MAX_RELATIVE_IQR
    max_neighbour_load: float = MAX_NEIGHBOUR_LOAD
    max_machine_slowdown: float = MAX_MACHINE_SLOWDOWN

    def problem(self, sample: Sample, reference_calibration: float | None) -> str | None:
        return guard_problem(sample, min_cpu_share=self.min_cpu_share,
                             max_relative_iqr=self.max_relative_iqr,
                             max_neighbour_load=self.max_neighbour_load,
                             reference_calibration=reference_calibration,
                             max_machine_slowdown=self.max_machine_slowdown)


def decide(first: Sample, baseline_stats: Sequence[float], tolerance: float,
           remeasure: Callable[[], Sample], *, guard: GuardLimits = GuardLimits(),
           baseline_calibrations: Sequence[float] = (),
           confirm: Callable[[], Sample | None] | None = None,
           confirmations: int = CONFIRMATIONS) -> Decision:
    """The outcome of ``first`` against stored per-session statistics ``baseline_stats``.

    ``remeasure`` takes another pass in this process (once when the guard rejects the first pass,
    then for confirmations ``confirm`` cannot give); ``confirm`` takes a confirming pass in a
    fresh process (None when it cannot). ``baseline_calibrations``: the stored sessions'
    calibration kernel times, when every session has one (the machine-speed guard needs them).
    """
    samples = [first]
    if not baseline_stats:
        return Decision(Outcome.NEW, "new", first, first, samples, tolerance=tolerance,
                        limit=tolerance)
    baseline = statistics.median(baseline_stats)
    limit, noise = effective_tolerance(tolerance, baseline_stats, first.processes)
    reference = (statistics.median(baseline_calibrations)
                 if len(baseline_calibrations) == len(baseline_stats) else None)
    common = dict(baseline=baseline, sessions=len(baseline_stats), tolerance=tolerance,
                  limit=limit, noise=noise, reference_calibration=reference)

    current, problem = first, guard.problem(first, reference)
    if problem:
        current = remeasure()
        samples.append(current)
        problem = guard.problem(current, reference)
        if problem:
            return Decision(Outcome.INCONCLUSIVE, "guard", first, current, samples,
                            ratio=current.statistic / baseline, candidate=current.statistic,
                            first_ratio=current.statistic / baseline, problem=problem, **common)
    ratio = current.statistic / baseline
    if ratio > 1.0 + limit:
        passes, where, retried = [current], None, False
        while len(passes) <= confirmations:
            taken = confirm() if confirm is not None else None
            where = "fresh" if taken is not None else "same"
            taken = taken if taken is not None else remeasure()
            samples.append(taken)
            problem = guard.problem(taken, reference)
            if problem and not retried:
                retried = True  # one more try for a disturbed confirming pass
                continue
            confirm_ratios = tuple(p.statistic / baseline for p in passes[1:])
            if problem:
                return Decision(Outcome.INCONCLUSIVE, "untrusted", first, current, samples,
                                ratio=ratio, candidate=current.statistic, first_ratio=ratio,
                                confirm_ratios=confirm_ratios, confirmed_in=where,
                                problem=problem, **common)
            taken_ratio = taken.statistic / baseline
            if taken_ratio <= 1.0 + limit:
                return Decision(Outcome.PASS, "contradicted", first, taken, samples,
                                ratio=taken_ratio, candidate=taken.statistic, first_ratio=ratio,
                                confirm_ratios=(*confirm_ratios, taken_ratio),
                                confirmed_in=where, **common)
            passes.append(taken)
        pooled = statistics.median(p.statistic for p in passes)
        return Decision(Outcome.FAIL, "confirmed", first, passes[-1], samples,
                        ratio=pooled / baseline, candidate=pooled, first_ratio=ratio,
                        confirm_ratios=tuple(p.statistic / baseline for p in passes[1:]),
                        confirmed_in=where, **common)
    figures = dict(ratio=ratio, candidate=current.statistic, first_ratio=ratio, **common)
    if ratio < 1.0 - limit:
        calibration = current.machine_calibration
        if reference and calibration and calibration < reference / (1.0 + guard.max_machine_slowdown):
            return Decision(Outcome.PASS, "machine-faster", first, current, samples, **figures)
        return Decision(Outcome.IMPROVED, "improved", first, current, samples, **figures)
    return Decision(Outcome.PASS, "within", first, current, samples, **figures)


def word(label: str, d: Decision) -> Verdict:
    """The :class:`Verdict` of a decision: its message, notes and figures."""
    notes = []
    if d.noise is not None and d.limit > d.tolerance:
        notes.append(
            f"the {d.sessions} stored sessions (fresh processes of unchanged code) put this "
            f"machine's process-to-process noise at {format_percent(d.noise)}, too much for a "
            f"{format_percent(d.tolerance)} limit; judged at {format_percent(d.limit)} (3 standard "
            f"deviations)")
    machine = d.machine_ratio(d.final)
    figures = dict(
        ratio=d.ratio, first_ratio=d.first_ratio, baseline_statistic=d.baseline,
        candidate_statistic=d.candidate, tolerance=d.tolerance, effective_tolerance=d.limit,
        baseline_sessions=d.sessions, baseline_cv=d.noise, remeasures=len(d.samples) - 1,
        confirm_ratio=d.confirm_ratios[0] if d.confirm_ratios else None,
        confirm_ratios=d.confirm_ratios, confirmed_in=d.confirmed_in, machine_ratio=machine,
        normalized_ratio=d.ratio / machine if machine and d.ratio else None, notes=tuple(notes))
    limit = format_percent(d.limit)
    strict = "--torchperf-strict turns this into a failure."
    where = "in a fresh process" if d.confirmed_in == "fresh" else "in this process"
    if d.reason == "new":
        return Verdict(Outcome.NEW, f"{label}: no baseline for this environment yet; record one "
                       f"with pytest --torchperf-save", tolerance=d.tolerance)
    if d.reason == "guard":
        message = (f"{label}: inconclusive, {format_change(d.ratio)} vs baseline cannot be "
                   f"trusted: {d.problem} (re-measured once, still bad). Re-run on a quieter "
                   f"machine; {strict}")
    elif d.reason == "untrusted":
        message = (f"{label}: inconclusive, {format_change(d.ratio)} vs baseline but a confirming "
                   f"pass ({where}) could not be trusted: {d.problem}. Re-run on a quieter "
                   f"machine; {strict}")
    elif d.reason == "confirmed":
        passes = len(d.confirm_ratios) + 1
        where_all = "fresh processes" if d.confirmed_in == "fresh" else "re-measures in this process"
        message = (f"{label}: {format_change(d.ratio).lstrip('+')} slower than baseline "
                   f"({d.first.what} {format_time(d.candidate)} vs {format_time(d.baseline)}, the "
                   f"median of {passes} passes: first {format_change(d.first_ratio)}, then "
                   f"{', '.join(format_change(r) for r in d.confirm_ratios)} in {where_all}; "
                   f"limit {limit})\n" + _confidence_line(d))
    elif d.reason == "contradicted":
        message = (f"{label}: {format_change(d.ratio)} vs baseline after a re-measure {where} "
                   f"(first pass {format_change(d.first_ratio)}; limit {limit})")
    elif d.reason == "machine-faster":
        notes.append(f"{format_change(d.ratio)} only because the machine itself ran the calibration "
                     f"kernel {format_change(machine)}: not an improvement")
        message = (f"{label}: {format_change(d.ratio)} vs baseline, faster only because the machine "
                   f"is (calibration kernel {format_change(machine)}; limit {limit})")
        figures["notes"] = tuple(notes)
    elif d.reason == "improved":
        message = (f"{label}: {format_change(d.ratio).lstrip('-')} faster than baseline "
                   f"({d.first.what} {format_time(d.candidate)} vs {format_time(d.baseline)}; limit "
                   f"{limit}): the baseline is stale; refresh it with pytest --torchperf-save "
                   f"--torchperf-reset")
    else:
        message = f"{label}: {format_change(d.ratio)} vs baseline (limit {limit})"
    return Verdict(d.outcome, message, suspicious=d.reason == "contradicted", **figures)


def judge(
    label: str,
    first: Sample,
    baseline_stats: Sequence[float],
    tolerance: float,
    remeasure: Callable[[], Sample],
    *,
    min_cpu_share: float = MIN_CPU_SHARE,
    max_relative_iqr: float = MAX_RELATIVE_IQR,
    max_neighbour_load: float = MAX_NEIGHBOUR_LOAD,
    max_machine_slowdown: float = MAX_MACHINE_SLOWDOWN,
    baseline_calibrated: Sequence[tuple[float, float]] = (),
    confirm: Callable[[], Sample | None] | None = None,
    confirmations: int = CONFIRMATIONS,
) -> Judgement:
    """Decide and word the outcome of ``first`` against ``baseline_stats`` (see :func:`decide`).

    ``baseline_calibrated`` holds ``(statistic, calibration)`` of the stored sessions that timed
    the calibration kernel; the machine-speed guard applies when every session did.
    """
    guard = GuardLimits(min_cpu_share, max_relative_iqr, max_neighbour_load, max_machine_slowdown)
    calibrations = ([c for _, c in baseline_calibrated]
                    if len(baseline_calibrated) == len(baseline_stats) else [])
    d = decide(first, baseline_stats, tolerance, remeasure, guard=guard,
               baseline_calibrations=calibrations, confirm=confirm, confirmations=confirmations)
    return Judgement(word(label, d), d.final, d.samples)


def _confidence_line(d: Decision) -> str:
    """One line saying how much noise the decision had to beat."""
    parts = [f"spread within run IQR/median {format_percent(d.first.summary.relative_iqr)} and "
             f"{format_percent(d.final.summary.relative_iqr)}"]
    if d.final.process_statistics:
        p25s = ", ".join(format_time(t) for t in (*d.final.process_statistics, d.final.summary.p25))
        parts.append(f"candidate: median of {d.final.processes} fresh processes (p25s {p25s})")
    if d.noise is not None:
        parts.append(f"baseline: median of {d.sessions} sessions, process noise "
                     f"{format_percent(d.noise)}")
    else:
        parts.append(f"baseline: {d.sessions} saved session{'s' if d.sessions != 1 else ''}")
    shares = [s.cpu_share for s in (d.first, d.final) if s.cpu_share is not None]
    if shares:
        parts.append(f"CPU share {min(shares):.2f}")
    machine = d.machine_ratio(d.final)
    if machine is not None:
        parts.append(f"machine speed {format_change(machine)} on the calibration kernel")
    return "  how sure: " + "; ".join(parts)
