"""The decision: is this measurement slower than its baseline, and how sure are we?

Pure module (no torch, no pytest). Deciding (:func:`decide`, here) and wording
(:func:`pytest_torchperf.judge.verdict.word`) are separate;
:func:`pytest_torchperf.judge.verdict.judge` does both. The procedure:

1. **Guard.** A pass during which the process did not get the CPU (CPU share < 0.9), other
   processes kept the other CPUs busy, the spread was gross (IQR/median > 25 %) or the machine
   itself ran the calibration kernel clearly slower than when the baseline was saved is measured
   again; if it is still bad the verdict is *inconclusive*, never *fail*. Two exceptions: a
   slowdown that, divided by the slower machine's or by the 1/(CPU share) that other processes
   taking the CPU can explain, is still over 3 limits counts; and a compare's pass within the
   limit that was refused only for what adds time (crowding, busy neighbours, a slower machine,
   GPU clocks) passes. With the CPU-share guard lowered, a crowded pass is still held to the
   first exception's bound, against the stored sessions' share.
2. **Compare** a low quantile (p25 of the per-call block times) with the baseline statistic: the
   median of the stored sessions' p25. Timing interference only adds time, so p25 is steadier.
3. **Widen, never narrow** the limit to three standard deviations of the process-to-process noise
   the stored sessions show (:mod:`.tolerance`). A pass within a limit widened beyond
   ``max_widening`` times ``max_slowdown`` is not a pass: inconclusive (``noisy-baseline``), as
   no such limit would catch the slowdowns the user asked about.
4. **Confirm.** A suspected slowdown fails only if two more passes agree, taken in fresh processes
   by default: a process that runs a model slow for its whole life (memory layout, allocator
   state) then cannot fail a test alone, nor can a baseline that happened to run fast. Each
   confirming pass is judged at the limit for its own number of processes (one, when the first
   pass pooled several). The figure of a failure is the median of the three passes.

Measuring is injected as callables so this module can be driven by synthetic samples in unit
tests and by the passes a results file recorded (``torchperf compare``).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_torchperf.core.units import format_change, format_percent
from pytest_torchperf.judge.outcome import Outcome
from pytest_torchperf.judge.refusals import unexplained_spread
from pytest_torchperf.judge.samples import MIN_CPU_SHARE, GuardLimits, Sample
from pytest_torchperf.judge.tolerance import MAX_WIDENING, effective_tolerance, widened_beyond

#: Passes that must agree, after the first, before a slowdown fails.
CONFIRMATIONS = 2

#: On a machine slower than the machine guard allows, a pass still counts when its ratio divided by
#: the machine's slowdown exceeds this many limits (1 + 3 x limit): a slowdown the machine cannot
#: explain. 3 and not 1 because some models slow down more than the calibration kernel on a slow
#: host (benchmarks/suite_noise.py: with 1, false red runs of a 20-test suite rose 1.8% -> 3.8%;
#: with 3, 2.0%, while +50% slowdowns caught rose 48% -> 57%).
SLOW_MACHINE_MARGIN = 3.0

#: The guards at their documented defaults.
DEFAULT_GUARD = GuardLimits()


@dataclass(frozen=True)
class Decision:
    """What :func:`decide` concluded, before any wording.

    ``reason``: ``new``, ``guard`` (the first pass and its re-measure untrusted), ``untrusted``
    (a confirming pass untrusted), ``confirmed`` (a failure), ``contradicted`` (a confirming pass
    within the limit), ``machine-faster`` (faster only because the machine is), ``improved``,
    ``within`` (with ``problem`` where a guard refused the pass for something that only adds
    time: within the limit all the same).
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
    #: ``(machine ratio, ratio divided by it)`` of a pass counted although the machine ran slow
    #: (its slowdown exceeded the machine's by over SLOW_MACHINE_MARGIN limits); the slowest such.
    slow_machine: tuple[float, float] | None = None
    #: ``(slowdown the crowding explains, ratio divided by it, CPU share)`` of a pass counted
    #: although other processes took its CPU (likewise over SLOW_MACHINE_MARGIN limits).
    crowded: tuple[float, float, float] | None = None
    #: The limit the confirming passes were judged at, when it differs from ``limit`` (a pooled
    #: first pass, single-process confirmations).
    confirm_limit: float | None = None
    #: The widest limit allowed, as a multiple of ``tolerance`` (0: no bound).
    max_widening: float = MAX_WIDENING

    def machine_ratio(self, sample: Sample) -> float | None:
        """The sample's calibration kernel against the baseline sessions' (None when unknown)."""
        calibration = sample.machine_calibration
        if not self.reference_calibration or not calibration:
            return None
        return calibration / self.reference_calibration


def decide(
    first: Sample,
    baseline_stats: Sequence[float],
    tolerance: float,
    remeasure: Callable[[], Sample],
    *,
    guard: GuardLimits = DEFAULT_GUARD,
    baseline_calibrations: Sequence[float] = (),
    baseline_shares: Sequence[float] = (),
    confirm: Callable[[], Sample | None] | None = None,
    max_widening: float = MAX_WIDENING,
    saving: bool = False,
) -> Decision:
    """The outcome of ``first`` against stored per-session statistics ``baseline_stats``.

    ``remeasure`` takes another pass in this process (once when the guard rejects the first pass,
    then for confirmations ``confirm`` cannot give); ``confirm`` takes a confirming pass in a
    fresh process (None when it cannot). ``baseline_calibrations``: the stored sessions'
    calibration kernel times, when every session has one (the machine-speed guard needs them).
    ``max_widening``: a pass within a limit widened beyond this many times ``tolerance`` is
    inconclusive, not a pass (0: no bound). ``baseline_shares``: the CPU shares the stored
    sessions were timed at, where known (a guard lowered below its default still bounds what a
    more crowded pass may fail on: :meth:`_Judging.crowded_beyond_guard`). ``saving``: the run
    stores the pass it judges, so a refused first pass is measured again even where it is
    within the limit (a trusted pass is what a save stores).
    """
    if not baseline_stats:
        return Decision(
            Outcome.NEW, "new", first, first, [first], tolerance=tolerance, limit=tolerance
        )
    limit, noise = effective_tolerance(tolerance, baseline_stats, first.processes)
    reference = (
        statistics.median(baseline_calibrations)
        if len(baseline_calibrations) == len(baseline_stats)
        else None
    )
    share = statistics.median(baseline_shares) if baseline_shares else None
    judging = _Judging(first, baseline_stats, tolerance, guard, reference, share)
    judging.common.update(noise=noise, max_widening=max_widening)

    current, problem = first, judging.untrusted(first)
    # What only adds time (a crowded CPU, a slower machine) cannot hide a slowdown: a pass it
    # disturbed that is still within the limit bounds the code's own time from above, so it
    # passes, said with what disturbed it, as such a confirming pass contradicts a slowdown.
    if problem and (saving or not judging.within_although(first)):
        current = remeasure()
        judging.samples.append(current)
        problem = judging.untrusted(current)
        # A save stores only a trusted pass: a refused re-measure is inconclusive there, as
        # before, not a pass that stores its session without timing and fails the run.
        if problem and (saving or not judging.within_although(current)):
            ratio = judging.ratio(current)
            # Within a limit that gates (not widened beyond its bound), only the spread kept it.
            bound = judging.limit_for(current)
            gates = not widened_beyond(bound, tolerance, max_widening)
            if not saving and gates and abs(ratio - 1.0) <= bound:
                problem += unexplained_spread(current, guard)
            return judging.decision(Outcome.INCONCLUSIVE, "guard", current, ratio, problem=problem)
    ratio = judging.ratio(current)
    if ratio > 1.0 + limit:
        return judging.confirm_slowdown(current, confirm, remeasure)
    if ratio < 1.0 - limit:
        calibration = current.machine_calibration
        if (
            reference
            and calibration
            and calibration < reference / (1.0 + guard.max_machine_slowdown)
            # Only as far as the machine explains it, within the margin a slow machine gets
            # (models speed up more than the kernel on a faster host, as they slow down more
            # on a slower one): -47.5 % on a machine 23.9 % faster is -31 % of the code's own.
            and ratio / (calibration / reference) >= 1.0 / (1.0 + SLOW_MACHINE_MARGIN * limit)
        ):
            return judging.decision(Outcome.PASS, "machine-faster", current, ratio)
        return judging.decision(Outcome.IMPROVED, "improved", current, ratio)
    if widened_beyond(limit, tolerance, max_widening):
        return judging.decision(Outcome.INCONCLUSIVE, "noisy-baseline", current, ratio)
    return judging.decision(Outcome.PASS, "within", current, ratio, problem=problem)


class _Judging:
    """One decision in progress: the baseline it is held against and the passes taken so far."""

    def __init__(
        self,
        first: Sample,
        baseline_stats: Sequence[float],
        tolerance: float,
        guard: GuardLimits,
        reference: float | None,
        reference_share: float | None = None,
    ) -> None:
        self.first, self.baseline_stats, self.tolerance = first, baseline_stats, tolerance
        self.baseline = statistics.median(baseline_stats)
        self.limit = self.limit_for(first)
        self.guard, self.reference = guard, reference
        self.samples = [first]
        self.slow_machine: tuple[float, float] | None = None
        self.crowded: tuple[float, float, float] | None = None
        #: The stored sessions' median CPU share (None: not known).
        self.reference_share = reference_share
        self.common: dict[str, Any] = dict(
            baseline=self.baseline,
            sessions=len(baseline_stats),
            tolerance=tolerance,
            limit=self.limit,
            reference_calibration=reference,
        )

    def ratio(self, sample: Sample) -> float:
        return sample.statistic / self.baseline

    def limit_for(self, sample: Sample) -> float:
        """The limit for a pass pooling ``sample.processes`` processes (widened to the noise)."""
        return effective_tolerance(self.tolerance, self.baseline_stats, sample.processes)[0]

    def within_although(self, sample: Sample) -> bool:
        """``sample``, refused by a guard for something that only adds time, is within its limit
        all the same, and that limit gates (not widened beyond the bound)."""
        limit = self.limit_for(sample)
        return (
            self.guard.only_added_time(sample)
            and not widened_beyond(limit, self.tolerance, self.common["max_widening"])
            and 1.0 - limit <= self.ratio(sample) <= 1.0 + limit
        )

    def untrusted(self, sample: Sample) -> str | None:
        """Why ``sample`` cannot be judged; a slow machine, or other processes taking the CPU,
        do not hide a slowdown far larger than they can explain."""
        problem = self.guard.problem(sample, self.reference)
        if not problem:
            return self.crowded_beyond_guard(sample)
        machine = self.machine(sample)
        margin = 1.0 + SLOW_MACHINE_MARGIN * self.limit_for(sample)
        if machine is not None and self.guard.slow_machine_only(sample, self.reference):
            normalised = self.ratio(sample) / machine
            if normalised > margin:  # not the machine's doing
                if self.slow_machine is None or machine > self.slow_machine[0]:
                    self.slow_machine = (machine, normalised)
                # Nor, with the CPU-share guard lowered, other processes' on top of it.
                return self.crowded_beyond_guard(sample)
        elif sample.cpu_share and self.guard.crowded_only(sample, self.reference):
            # A thread that got the CPU for a share s of the wall time took at most 1/s of it
            # for the same work (its p25 blocks, the least preempted, less), times the machine.
            if self.beyond_crowding(sample, max(machine or 1.0, 1.0) / sample.cpu_share):
                return None
        return problem

    def machine(self, sample: Sample) -> float | None:
        """How much slower the machine ran the calibration kernel than in the stored sessions
        (None: unknown)."""
        calibration = sample.machine_calibration
        return calibration / self.reference if calibration and self.reference else None

    def beyond_crowding(self, sample: Sample, explained: float) -> bool:
        """``sample``'s slowdown divided by the ``explained`` one that crowding can account
        for is still over :data:`SLOW_MACHINE_MARGIN` limits: it counts (the largest such
        crowding is kept for the failure's note)."""
        normalised = self.ratio(sample) / explained
        if normalised <= 1.0 + SLOW_MACHINE_MARGIN * self.limit_for(sample):
            return False
        if self.crowded is None or explained > self.crowded[0]:
            self.crowded = (explained, normalised, sample.cpu_share or 0.0)
        return True

    def crowded_beyond_guard(self, sample: Sample) -> str | None:
        """Why a slower-than-limit pass that the CPU-share guard let through only because it is
        lowered below its default (``--torchperf-min-cpu-share=0``, as a busy machine's save
        is told) cannot count towards a failure: other processes took its CPU more than they
        took the stored sessions', which explains up to the ratio of the two shares, and its
        slowdown is not beyond that by the margin a crowded pass needs. None where it counts.

        Without this bound, unchanged code compared beside a busier neighbour than at save time
        failed (+55 % at CPU share 0.41); a pass within the limit is never questioned (crowding
        only adds time), nor one at a share the default guard accepts."""
        share, ratio = sample.cpu_share, self.ratio(sample)
        limit = self.limit_for(sample)
        if not share or not sample.crowded or share >= MIN_CPU_SHARE or ratio <= 1.0 + limit:
            return None
        # Not capped at 1: with several threads a process's CPU share exceeds 1.
        reference = self.reference_share or 1.0
        explained = max(self.machine(sample) or 1.0, 1.0) * reference / share
        if explained <= 1.0 + limit or self.beyond_crowding(sample, explained):
            return None  # as crowded as the stored sessions were, or slower than that explains
        stored = (
            f"{reference:.2f} in the stored sessions"
            if self.reference_share
            else "the stored sessions' unknown, taken as 1.00"
        )
        return (
            f"CPU share {share:.2f}, {stored}: other processes took this pass's CPU (it waited "
            f"for a CPU {format_percent(sample.queued_share or 0.0)} of the time), which "
            f"explains up to {format_change(explained)}; the CPU-share guard is lowered to "
            f"{self.guard.min_cpu_share:.2f}, yet a slowdown that is not over "
            f"{SLOW_MACHINE_MARGIN:g} limits beyond what the crowding explains cannot fail"
        )

    def decision(
        self, outcome: Outcome, reason: str, final: Sample, ratio: float, **figures: Any
    ) -> Decision:
        figures.setdefault("first_ratio", ratio)
        return Decision(
            outcome,
            reason,
            self.first,
            final,
            self.samples,
            ratio=ratio,
            candidate=final.statistic,
            **figures,
            **self.common,
        )

    def confirm_slowdown(
        self,
        current: Sample,
        confirm: Callable[[], Sample | None] | None,
        remeasure: Callable[[], Sample],
    ) -> Decision:
        """Fail only when :data:`CONFIRMATIONS` more passes (fresh processes when ``confirm`` gives
        them) are slower than the limit too; one within it contradicts the slowdown."""
        ratio = self.ratio(current)
        passes, retried = [current], False
        where: str | None = None
        confirm_limit: float | None = None
        while len(passes) <= CONFIRMATIONS:
            taken = confirm() if confirm is not None else None
            where = "fresh" if taken is not None else "same"
            taken = taken if taken is not None else remeasure()
            self.samples.append(taken)
            problem = self.untrusted(taken)
            taken_ratio = self.ratio(taken)
            confirm_ratios = tuple(self.ratio(p) for p in passes[1:])
            taken_limit = self.limit_for(taken)
            if taken_limit != self.limit:
                confirm_limit = taken_limit
            if taken_ratio <= 1.0 + taken_limit and not self.guard.spread_unexplained(taken):
                # Within the limit, disturbed or not (a disturbance only adds time): the first
                # pass was not confirmed; unless that limit is too wide to tell anything. A
                # spread nothing explains is no such disturbance: its p25 may be the fast
                # calls alone, so that pass is retried like any other disturbed one.
                wide = widened_beyond(taken_limit, self.tolerance, self.common["max_widening"])
                return self.decision(
                    Outcome.INCONCLUSIVE if wide else Outcome.PASS,
                    "noisy-baseline" if wide else "contradicted",
                    taken,
                    taken_ratio,
                    first_ratio=ratio,
                    confirm_ratios=(*confirm_ratios, taken_ratio),
                    confirmed_in=where,
                    confirm_limit=confirm_limit,
                )
            if problem and not retried:
                retried = True  # one more try for a disturbed confirming pass
                continue
            if problem:
                return self.decision(
                    Outcome.INCONCLUSIVE,
                    "untrusted",
                    current,
                    ratio,
                    confirm_ratios=confirm_ratios,
                    confirmed_in=where,
                    confirm_limit=confirm_limit,
                    problem=problem,
                )
            passes.append(taken)
        # The figure is the median pass: the Result then shows that pass's times and p25.
        middle = sorted(passes, key=lambda p: p.statistic)[len(passes) // 2]
        return self.decision(
            Outcome.FAIL,
            "confirmed",
            middle,
            self.ratio(middle),
            first_ratio=ratio,
            confirm_ratios=tuple(self.ratio(p) for p in passes[1:]),
            confirmed_in=where,
            confirm_limit=confirm_limit,
            slow_machine=self.slow_machine,
            crowded=self.crowded,
        )
