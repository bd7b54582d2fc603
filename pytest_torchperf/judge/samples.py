"""A measurement pass as the judge sees it (:class:`Sample`), the guards that decide whether a
pass can be trusted at all (CPU contention, a busy neighbour, a GPU not at its clocks, gross
spread, a slower machine) and the pooling of several fresh processes' passes
(``--torchperf-processes N``) into the sample a verdict judges: the median of their p25s. Pure.

Why pool: on a shared runner the noise that matters is between processes (memory layout,
allocator state, neighbours), not between the blocks of one process; judging the median of N
processes' statistics shrinks it by about sqrt(N).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Protocol, TypeVar

from pytest_torchperf.core.stats import Summary
from pytest_torchperf.core.types import JSONObject
from pytest_torchperf.core.units import format_change, format_percent, format_time
from pytest_torchperf.measure.gpu_clocks import MIN_CLOCK_SHARE, ClockSummary

if TYPE_CHECKING:
    from pytest_torchperf.options.measure_options import MeasureOptions

#: Below this CPU share (process CPU time / wall time) the process was starved: inconclusive.
MIN_CPU_SHARE = 0.9
#: Above this IQR/median the samples are too spread to judge (torch.utils.benchmark's gross warning).
MAX_RELATIVE_IQR = 0.25
#: Above this share of the other CPUs kept busy by other processes, a CPU pass shared caches,
#: memory bandwidth or an SMT core with a neighbour: inconclusive (see :mod:`pytest_torchperf.measure.machine_load`).
MAX_NEIGHBOUR_LOAD = 0.5
#: A pass whose calibration kernel ran this much slower than the reference was taken on a
#: disturbed machine. On a shared 2-vCPU VM the kernel switched between ~4.6 us and 6.5-8.5 us
#: from one measurement to the next, and the models' times followed it by 1.2-1.9x; judging only
#: passes near the baseline's machine speed halved the false failures of a 20-test suite there
#: (``benchmarks/suite_noise.py``). Used against the stored sessions when comparing and against
#: the stored sessions or the rest of the run when saving (:func:`machine_disturbance`).
MAX_MACHINE_SLOWDOWN = 0.25


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
    #: Share of the timed wall time the timing thread waited on a run queue (another thread had
    #: its CPU); None: not measured. Tells a crowded-out pass from a target that slept.
    queued_share: float | None = None
    #: A CUDA pass: the GPU's SM clocks and clock event reasons over its timed blocks (None:
    #: not a GPU pass, or NVML unreadable).
    gpu_clock: ClockSummary | None = None
    #: A CUDA pass: the untimed blocks it ran first for its times to settle and whether they
    #: came to rest (``blocks``, ``settled``; False: still moving at the limit); None: no settling.
    settle: JSONObject | None = None

    @property
    def crowded(self) -> bool | None:
        """A low CPU share came from other threads taking this one's CPU (True), not from the
        target sleeping or waiting (False); None where the run queue was not measured."""
        if self.queued_share is None or self.cpu_share is None:
            return None
        # Of the wall time not spent on the CPU, how much was spent queued (a pass that kept its
        # CPU was not crowded, whatever else refused it).
        off_cpu = max(0.0, 1.0 - self.cpu_share)
        return off_cpu >= 0.05 and self.queued_share >= CROWDED_SHARE * off_cpu

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
        """How many processes the statistic pools: this one and the fresh ones."""
        return 1 + len(self.process_statistics)

    @property
    def what(self) -> str:
        """What the statistic is, for messages."""
        return "p25" if not self.process_statistics else f"median p25 of {self.processes} processes"


#: How far a crowded pass's mean may stand above its p25, beyond the share of the wall time it
#: was off its CPU, for its spread to count as the crowding's (:meth:`GuardLimits.spread_unexplained`).
SPREAD_SLACK = 0.02
#: Of the time a pass was off the CPU, the share it must have spent queued for a CPU for the
#: low share to count as crowding by other processes: a sleeping target queues ~0 % of it
#: (measured 0.003 %), a thread sharing its core with a busy loop ~100 %.
CROWDED_SHARE = 0.5


def guard_problem(
    sample: Sample,
    *,
    min_cpu_share: float = MIN_CPU_SHARE,
    max_relative_iqr: float = MAX_RELATIVE_IQR,
    max_neighbour_load: float = MAX_NEIGHBOUR_LOAD,
    reference_calibration: float | None = None,
    max_machine_slowdown: float = MAX_MACHINE_SLOWDOWN,
    min_gpu_clock: float = MIN_CLOCK_SHARE,
) -> str | None:
    """Return why ``sample`` cannot be trusted, or None when it can.

    ``reference_calibration`` is the calibration kernel's time when the baseline was saved; a
    pass whose kernel ran more than ``max_machine_slowdown`` slower was taken on a slower machine.
    A GPU pass whose SM clock fell below ``min_gpu_clock`` of its maximum, or that the driver
    throttled for heat, a power brake or a hardware slowdown, ran on a GPU not at its clocks.
    """
    if sample.cpu_share is not None and sample.cpu_share < min_cpu_share:
        # Enough digits that the share reads below its limit (0.895 is not "0.90 < 0.90").
        digits = next(
            (d for d in (2, 3, 4) if f"{sample.cpu_share:.{d}f}" != f"{min_cpu_share:.{d}f}"), 4
        )
        head = f"CPU share {sample.cpu_share:.{digits}f} < {min_cpu_share:.2f}: "
        if sample.crowded is False:
            queued = sample.queued_share or 0.0
            return head + (
                f"the timed code itself left the CPU idle (it slept or waited on I/O, a lock "
                f"or another device; it waited for a CPU only {format_percent(queued)} of the "
                f"time)"
            )
        if sample.crowded:
            return head + (
                f"another process (or the VM's host) competed for the CPU while timing (the "
                f"timed thread waited for its CPU {format_percent(sample.queued_share or 0.0)} "
                f"of the time)"
            )
        return head + "another process competed for the CPU while timing"
    clock = sample.gpu_clock
    if clock is not None and min_gpu_clock > 0:
        share = clock.share
        if clock.disturbed or (share is not None and share < min_gpu_clock):
            why = f"; the driver reported {', '.join(clock.reasons)}" if clock.reasons else ""
            return (
                f"the GPU was not at its clocks while timing: its SM clock read "
                f"{clock.lowest_mhz}-{clock.highest_mhz} MHz of its {clock.max_mhz} MHz maximum "
                f"(limit {format_percent(min_gpu_clock)} of it{why}): a GPU still ramping up, "
                f"hot or held by a power brake runs the same kernels slower"
            )
    load = sample.neighbour_load
    if load is not None and max_neighbour_load < 1.0 and load > max_neighbour_load:
        return (
            f"other processes kept {format_percent(load)} of the other CPUs busy while timing "
            f"(limit {format_percent(max_neighbour_load)}): a busy neighbour shares caches, "
            f"memory bandwidth and SMT cores with this one"
        )
    rel = sample.summary.relative_iqr
    if rel > max_relative_iqr:
        return (
            f"spread IQR/median {format_percent(rel)} > {format_percent(max_relative_iqr)}: "
            f"timings too unstable to judge"
        )
    calibration = sample.machine_calibration
    if (
        reference_calibration
        and calibration
        and calibration > reference_calibration * (1.0 + max_machine_slowdown)
    ):
        return (
            f"the machine itself ran the calibration kernel timed alongside "
            f"{format_change(calibration / reference_calibration)} slower than when the "
            f"baseline was saved ({format_time(calibration)} vs "
            f"{format_time(reference_calibration)} per call; limit "
            f"{format_percent(max_machine_slowdown)}): a slower host or a busy neighbour. If "
            f"the machine stays this slow, save the baseline again on it"
        )
    return None


def machine_disturbance(
    calibration: float | None,
    references: Sequence[tuple[str, Sequence[float]]],
    limit: float = MAX_MACHINE_SLOWDOWN,
) -> tuple[float, float, str] | None:
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
class GuardLimits:
    """The guards' thresholds (see :func:`guard_problem`)."""

    min_cpu_share: float = MIN_CPU_SHARE
    max_relative_iqr: float = MAX_RELATIVE_IQR
    max_neighbour_load: float = MAX_NEIGHBOUR_LOAD
    max_machine_slowdown: float = MAX_MACHINE_SLOWDOWN
    min_gpu_clock: float = MIN_CLOCK_SHARE

    @classmethod
    def of(cls, options: MeasureOptions) -> GuardLimits:
        """The guards' thresholds ``options`` set."""
        return cls(
            options.min_cpu_share,
            options.max_spread,
            options.max_neighbour_load,
            options.max_machine_slowdown,
            options.min_gpu_clock,
        )

    def problem(self, sample: Sample, reference_calibration: float | None = None) -> str | None:
        """Why ``sample`` cannot be trusted under these thresholds (:func:`guard_problem`)."""
        return guard_problem(sample, reference_calibration=reference_calibration, **asdict(self))

    def crowded_only(self, sample: Sample, reference_calibration: float | None) -> bool:
        """The problems with ``sample`` are only that other processes took its CPU (a low CPU
        share spent queued for a CPU, not a target that sleeps) and, maybe, that the machine ran
        slower than at save time: both bound the time they added. So does the gross spread that
        preempted blocks give such a pass (the p25 compared is of the least preempted blocks).
        Busy neighbours bound nothing (a memory-bound model slows more than the calibration
        kernel beside them), so they still refuse the pass."""
        return (
            bool(sample.crowded)
            and self.problem(sample, reference_calibration) is not None
            and replace(self, min_cpu_share=0.0, max_relative_iqr=math.inf).problem(sample) is None
        )

    def spread_unexplained(self, sample: Sample) -> bool:
        """``sample``'s spread is beyond the limit and the time other processes took from it
        does not explain it: its blocks may fall in two groups (a slow path some calls take),
        and the p25 can stand on the fast one alone, so a within-limit p25 does not show the
        code is as fast as before. Preempted blocks add at most the share of the wall time the
        thread was off its CPU: a mean above the p25 by more than that is the code's own."""
        summary = sample.summary
        if summary.relative_iqr <= self.max_relative_iqr:
            return False
        if not sample.crowded or sample.cpu_share is None or summary.mean <= 0:
            return True
        excess = (summary.mean - summary.p25) / summary.mean
        return excess > max(0.0, 1.0 - sample.cpu_share) + SPREAD_SLACK

    def only_added_time(self, sample: Sample) -> bool:
        """What refuses ``sample`` can only have added time: other processes queued ahead of it
        for its CPU, busy neighbours, a slower machine, a GPU below its clocks. Not a target that
        left its CPU idle itself (its waits are its own), a low CPU share whose cause the run
        queue did not tell, nor a spread no crowding explains (:meth:`spread_unexplained`)."""
        share = sample.cpu_share
        if share is not None and share < self.min_cpu_share and not sample.crowded:
            return False
        return not self.spread_unexplained(sample)

    def slow_machine_only(self, sample: Sample, reference_calibration: float | None) -> bool:
        """The only problem with ``sample`` is that the machine ran slower than at save time
        (without a reference calibration the machine guard checks nothing)."""
        return (
            self.problem(sample, reference_calibration) is not None and self.problem(sample) is None
        )


class ProcessPass(Protocol):
    """What pooling needs of another process's measurement."""

    @property
    def statistic(self) -> float: ...

    @property
    def calibration(self) -> float | None: ...

    @property
    def problem(self) -> str | None: ...


P = TypeVar("P", bound=ProcessPass)


def trusted(others: Iterable[P]) -> list[P]:
    """The child measurements that passed the contention/spread guard (the rest are dropped)."""
    return [s for s in others if s.problem is None]


def pooled(own: Sample, others: Iterable[ProcessPass]) -> Sample:
    """``own`` (this process's pass) pooled with the trusted child measurements of the target.

    The statistic becomes the median of the per-process p25s, and the machine-speed check uses
    the median of the per-process calibrations (``Sample.machine_calibration``), so it compares
    like with like. The spread, CPU share and the stored ``calibration`` stay this process's own:
    the guard judges the pass it can re-measure, and a saved session pairs its own p25 with its own
    calibration.
    """
    usable = trusted(others)
    if not usable:
        return own
    return replace(
        own,
        process_statistics=tuple(s.statistic for s in usable),
        process_calibrations=tuple(s.calibration for s in usable if s.calibration),
    )
