"""Which guard refused a pass, in a word a run's summary counts (:data:`BUSY`, :data:`IDLE`,
...), and the option that loosens it for a machine that is always like that: what a verdict, a
save's refusal and a session stored without its timing say. Pure; the guards themselves and
their sentences are :mod:`pytest_torchperf.judge.samples`'.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace

from pytest_torchperf.judge.samples import GuardLimits, Sample


def loosening_options(sample: Sample, limits: GuardLimits) -> list[str]:
    """The option of every guard of ``limits`` that, on its own, refuses ``sample``:
    :func:`~pytest_torchperf.judge.samples.guard_problem` names the first, and loosening only that one leaves a busy machine's
    pass refused by the next (a newcomer's second save of five minutes, refused by the neighbour
    guard)."""
    off = GuardLimits(0.0, math.inf, 1.0, min_gpu_clock=0.0)
    found = []
    for key in ("min_cpu_share", "min_gpu_clock", "max_neighbour_load", "max_relative_iqr"):
        problem = replace(off, **{key: getattr(limits, key)}).problem(sample)
        if problem:
            found.append(loosening_option(problem))
    return found


#: Why a pass could not be trusted, in a word per guard (run summaries count them).
BUSY = "busy machine"
SPREAD = "spread"
SLOWER = "slower machine"
#: The timed code itself left its CPU idle (it slept, or waited on I/O or a device).
IDLE = "idle target"
IDLE_REMEDY = "A quieter machine will not change that: time the work without the waiting"
#: The GPU ran below its clocks (or was throttled) while timing.
GPU_CLOCK = "GPU clock"

#: Each guard by how its sentence of :func:`~pytest_torchperf.judge.samples.guard_problem` starts: its word and the option that
#: loosens it, for a machine that is always like that (the machine guard's: any other sentence).
_GUARDS = (
    ("CPU share", BUSY, "--torchperf-min-cpu-share=0"),
    ("other processes kept", BUSY, "--torchperf-max-neighbour-load=100%"),
    ("spread", SPREAD, "a wider --torchperf-max-spread (e.g. {above})"),
    ("the GPU", GPU_CLOCK, "--torchperf-min-gpu-clock=0"),
    ("", SLOWER, "--torchperf-max-machine-slowdown={above}"),
)
#: The guards whose option names a limit: the figure their sentence measured, and the least
#: limit suggested.
_MEASURED = {SPREAD: (r"IQR/median ([0-9.]+)%", 50), SLOWER: (r"\+([0-9.]+)% slower", 1000)}


def loosening_option(problem: str) -> str:
    """The option that loosens the guard behind ``problem`` (a sentence of :func:`~pytest_torchperf.judge.samples.guard_problem`,
    or its head as a save stores it). A limit it names lies above the figure ``problem``
    measured: a save told to store a 113 % spread anyway with ``--torchperf-max-spread=50%``
    was refused again."""
    _, word, option = next(guard for guard in _GUARDS if problem.startswith(guard[0]))
    if word not in _MEASURED:
        return option
    pattern, least = _MEASURED[word]
    return option.format(above=_round_above(re.search(pattern, problem), least))


def _round_above(measured: re.Match[str] | None, least: int) -> str:
    """A round percentage above the ``measured`` one (a match of its figure), at least
    ``least``: 50, 100, 200 or 500 %, then the next multiple of its leading digit's power of 10
    (1234 % -> 2000 %)."""
    percent = float(measured.group(1)) if measured else 0.0
    for round_percent in (50, 100, 200, 500):
        if round_percent >= least and round_percent > percent:
            return f"{round_percent}%"
    step = 10 ** math.floor(math.log10(max(percent, least)))
    return f"{max(least, (math.floor(percent / step) + 1) * step)}%"


def untimed_reason(problem: str, sample: Sample, limits: GuardLimits) -> tuple[str, list[str]]:
    """What a session stored without its timing says of the guard ``problem`` that refused
    ``sample``: why (the head of its sentence) and the option of every guard of ``limits`` that
    refuses it (storing the timing anyway needs them all), only the CPU share guard's where the
    timed code itself left its CPU idle. A save and ``torchperf accept`` store it so."""
    head = problem.split(":")[0]
    if refusing_guard(problem) == IDLE:
        return f"{head}: the timed code left the CPU idle", [loosening_option(problem)]
    return head, loosening_options(sample, limits) or [loosening_option(problem)]


def refusing_guard(problem: str) -> str:
    """Which guard refused a pass: :data:`BUSY` (another process took this CPU or kept the
    others busy), :data:`IDLE` (the timed code left its CPU idle), :data:`SPREAD`,
    :data:`GPU_CLOCK` or :data:`SLOWER` (the calibration kernel ran slow), from a sentence of
    :func:`~pytest_torchperf.judge.samples.guard_problem` (or a save's short form of one)."""
    if problem.startswith("CPU share") and "left the CPU idle" in problem:
        return IDLE
    return next(word for start, word, _ in _GUARDS if problem.startswith(start))


def unexplained_spread(sample: Sample, limits: GuardLimits) -> str:
    """Why a crowded pass within its limit was not passed as within it, where that is why: its
    spread is more than the time other processes took explains
    (:meth:`~pytest_torchperf.judge.samples.GuardLimits.spread_unexplained`), so its p25 may
    rest on the fast blocks of a slow path. '' otherwise (its refusal then says all)."""
    if not sample.crowded or sample.cpu_share is None or not limits.spread_unexplained(sample):
        return ""
    summary = sample.summary
    return (
        f"; within the limit, yet not passed as within it: its blocks' mean exceeds their p25 "
        f"by {(summary.mean - summary.p25) / summary.mean:.0%} of it, more than its "
        f"{1.0 - sample.cpu_share:.0%} of time off the CPU explains, so the p25 may rest on the "
        f"fast blocks of a slow path some calls take"
    )
