"""GPU kernel time: the summed device time of one call's kernels, judged beside its wall time.

On a GPU the wall time of a block (CUDA events around it) also counts the moments the GPU waited
for the CPU to launch the next kernel: a launch-bound model's wall time is CPU dispatch speed,
which differs from process to process. The time the kernels themselves ran (the profiler's
device activities: kernels, copies, fills) does not include those gaps, so it repeats far better
and is gated at a tighter limit of its own (``max_kernel_slowdown``); when it grows, the kernels
that grew are named. The share of the wall time the kernels fill (:attr:`KernelTimes.busy`)
says whether the wall time is launch-bound.

Pure (no torch): :mod:`pytest_torchperf.kinds.kernels.measure` takes the profiles and holds
their figures (:class:`~pytest_torchperf.kinds.kernels.measure.KernelTimes`);
:class:`pytest_torchperf.kinds.kernels.judge.TimeAndKernelsKind` judges with :func:`judge_kernels`.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_torchperf.core.units import format_change, format_percent, format_time
from pytest_torchperf.judge.outcome import Outcome
from pytest_torchperf.judge.tolerance import (
    NOISY_BASELINE,
    effective_tolerance,
    widened_beyond,
    widening_bound,
)
from pytest_torchperf.kinds.kernels.measure import KernelTimes

#: Longest kernel name shown in a message (template-heavy names run to hundreds of characters).
NAME_WIDTH = 72
#: Why a kernel-time verdict judged nothing, in a word (run summaries count them).
UNSTEADY = "kernel time unsteady"


@dataclass(frozen=True)
class KernelVerdict:
    """The kernel-time verdict of one measurement."""

    outcome: Outcome
    message: str
    ratio: float | None = None
    baseline: float | None = None
    limit: float = 0.0
    #: Why nothing was judged (:data:`UNSTEADY`, :data:`~pytest_torchperf.judge.tolerance.NOISY_BASELINE`), else None.
    guard: str | None = None


def judge_kernels(
    label: str,
    current: KernelTimes,
    stored: Sequence[KernelTimes],
    tolerance: float,
    max_widening: float,
) -> KernelVerdict:
    """``current`` against the stored sessions' kernel times (one per save process).

    The limit is ``tolerance`` widened to the stored sessions' process noise (as for wall
    time, and bounded by ``max_widening`` the same way). A failure needs every profiler session
    of this process over the limit; a median over it with a session within is unsteady, not a
    failure. The failure names the kernels that grew against the latest stored profile.
    """
    if not stored:
        return KernelVerdict(
            Outcome.NEW,
            f"{label}: GPU kernel time {format_time(current.per_call)} per call, "
            f"no stored kernel time to compare with yet",
        )
    stored_totals = [s.per_call for s in stored]
    baseline = statistics.median(stored_totals)
    limit, noise = effective_tolerance(tolerance, stored_totals)
    ratio = current.per_call / baseline
    lowest = min(current.sessions) / baseline
    figures = (
        f"{format_time(current.per_call)} vs {format_time(baseline)} per call, the median of "
        f"{len(stored)} stored session{'s' if len(stored) != 1 else ''}; limit "
        f"{format_percent(limit)}"
    )
    sessions = ", ".join(format_change(s / baseline) for s in current.sessions)
    change = format_change(ratio)

    def verdict(outcome: Outcome, text: str, guard: str | None = None) -> KernelVerdict:
        message = f"{label}: GPU kernel time {text}"
        return KernelVerdict(outcome, message, ratio, baseline, limit, guard)

    if lowest > 1.0 + limit:
        grown = kernel_changes(stored[-1], current)
        why = f". Kernels that changed: {'; '.join(grown)}" if grown else ""
        return verdict(
            Outcome.FAIL,
            f"{change} vs baseline ({figures}; every profiler session over it: {sessions}){why}",
        )
    if ratio > 1.0 + limit:
        return verdict(
            Outcome.INCONCLUSIVE,
            f"{change} vs baseline but its profiler sessions disagree ({sessions}; {figures}): "
            f"the kernels did not run the same way each time (clocks, other work on the GPU)",
            UNSTEADY,
        )
    if widened_beyond(limit, tolerance, max_widening):
        bound = widening_bound(tolerance, max_widening) or limit
        return verdict(
            Outcome.INCONCLUSIVE,
            f"not judged, {change} vs baseline: the {len(stored)} stored sessions put its "
            f"process-to-process noise at {format_percent(noise or 0.0)}, which widens the "
            f"{format_percent(tolerance)} limit to {format_percent(limit)}, beyond the "
            f"{format_percent(bound)} allowed. Save the baseline again with pytest "
            f"--torchperf-save --torchperf-reset",
            NOISY_BASELINE,
        )
    return verdict(
        Outcome.IMPROVED if ratio < 1.0 - limit else Outcome.PASS,
        f"{change} vs baseline ({figures})",
    )


def kernel_changes(before: KernelTimes, after: KernelTimes, most: int = 4) -> list[str]:
    """The kernels whose device time per call changed most from ``before`` to ``after``, new
    and vanished ones included, largest change first (``new kernel spin x1: +98.2 us``)."""
    old = {k.name: k for k in before.kernels}
    new = {k.name: k for k in after.kernels}
    rows = []
    for name in {*old, *new}:
        a, b = old.get(name), new.get(name)
        delta = (b.seconds if b else 0.0) - (a.seconds if a else 0.0)
        if b and not a:
            text = f"new kernel {short(name)} x{b.launches:g}: +{format_time(delta)}"
        elif a and not b:
            text = f"kernel {short(name)} gone: -{format_time(-delta)}"
        else:
            assert a is not None and b is not None
            if abs(delta) <= 0.02 * max(a.seconds, 1e-12) and a.launches == b.launches:
                continue
            launches = f", x{a.launches:g} -> x{b.launches:g}" if a.launches != b.launches else ""
            text = (
                f"{short(name)} {format_time(a.seconds)} -> {format_time(b.seconds)} "
                f"({format_change(b.seconds / a.seconds) if a.seconds else 'new time'}{launches})"
            )
        rows.append((delta, text))
    rows.sort(key=lambda r: -abs(r[0]))
    return [text for _, text in rows[:most]]


def short(name: str, width: int = NAME_WIDTH) -> str:
    """A kernel name cut to ``width`` characters (``...`` marks the cut)."""
    return name if len(name) <= width else name[: width - 3] + "..."


def launch_note(times: KernelTimes) -> str | None:
    """A note for a launch-bound measurement: how little of its wall time the kernels filled."""
    busy = times.busy
    if busy is None or not times.launch_bound:
        return None
    return (
        f"launch-bound: the kernels filled only {format_percent(busy)} of the wall time "
        f"({format_time(times.per_call)} of {format_time(times.wall or 0.0)} per call, "
        f"{times.launches:g} launches); the wall time mostly measures the CPU launching work, "
        f"so it varies with the CPU, and the GPU kernel time is the steadier gate"
    )
