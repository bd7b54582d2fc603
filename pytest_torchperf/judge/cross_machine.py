"""Opt-in comparison with a baseline recorded on *another* machine (``--torchperf-cross-machine``).

Absolute times do not travel between machines, so the time check divides each side by the
calibration kernel timed alongside it (a 64x64 fp32 matrix product, the same on both) and only
*warns* beyond a wide tolerance: different CPUs speed up different ops differently, so a
normalised comparison is a hint, never a verdict. Counters (FLOPs, ATen ops, parameters, peak
tensor memory, graphs) do travel between machines that run the same torch build, so they are
compared exactly and a change fails as usual, except where the CPU class differs and the
measurement runs low-precision or quantized code: torch and torchao choose its decompositions and
kernels from the CPU's instruction sets, so those counters are reported, not gated
(:func:`gated_across`). Pure module.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

from pytest_torchperf.store.sessions import Session

#: Normalised slowdowns beyond this are reported (as a warning, never a failure).
CROSS_MACHINE_TOLERANCE = 0.5


def pick_environment(
    here: Mapping[str, object], others: Sequence[tuple[str, Mapping[str, object]]]
) -> tuple[str, Mapping[str, object]] | None:
    """The stored environment most like this one: same device type and torch build first."""

    def score(entry: tuple[str, Mapping[str, object]]) -> tuple[int, int, int]:
        exact = entry[1].get("exact")
        if not isinstance(exact, Mapping):
            exact = {}
        same_device = (
            str(exact.get("device", "")).split(":")[0] == str(here.get("device", "")).split(":")[0]
        )
        same_threads = exact.get("threads") == here.get("threads")
        return (int(same_device), int(same_torch_build(here, exact)), int(same_threads))

    return max(others, key=score) if others else None


def same_torch_build(here: Mapping[str, object], stored: Mapping[str, object]) -> bool:
    """Counters are comparable: the same torch version and git revision."""
    return here.get("torch") == stored.get("torch") and here.get("torch_git") == stored.get(
        "torch_git"
    )


#: Fingerprint fields that say which kernels the CPU gets: the instruction-set flags and the
#: capability torch dispatches to. Two environments that agree on them are one CPU class.
CPU_CLASS_FIELDS = ("cpu_isa", "cpu_capability")


def cpu_class_difference(here: Mapping[str, object], stored: Mapping[str, object]) -> str | None:
    """How two environments' CPU classes differ (``cpu_isa avx2,avx512f here vs avx2 stored``),
    or None when they are the same class."""
    diffs = [
        f"{key} {here.get(key)} here vs {stored.get(key)} stored"
        for key in CPU_CLASS_FIELDS
        if here.get(key) != stored.get(key)
    ]
    return "; ".join(diffs) or None


def gated_across(
    counters: Mapping[str, object] | None, class_difference: str | None
) -> tuple[str, ...]:
    """The counter names (``ignore_counters`` names) *not* gated against another environment.

    Same CPU class: none, every counter is exact as within one environment. Another CPU class:
    parameters and graph counts are still properties of the model, and fp32 code's ops, FLOPs
    and peak memory were seen identical across classes; but low-precision or quantized code
    (bf16/fp16/int8 tensors, quantized ops) gets other decompositions and kernels per CPU class,
    so its ops, FLOPs and memory are reported, not gated.
    """
    from pytest_torchperf.judge.counter_diff import CPU_DEPENDENT_COUNTERS, low_precision

    if class_difference is None or counters is None or not low_precision(counters):
        return ()
    return CPU_DEPENDENT_COUNTERS


def compared_instead(reason: str, env_id: str, not_compared: str | None) -> str:
    """A measurement's "no comparable baseline" ``reason``, with what
    ``--torchperf-cross-machine`` compared instead: the counters of ``env_id`` (or why not,
    ``not_compared``) and the time only as a hint."""
    counters = (
        f"counters not compared ({not_compared})"
        if not_compared
        else "counters gated (same torch build)"
    )
    return (
        f"{reason}; --torchperf-cross-machine compared with {env_id} instead: {counters}, time "
        f"only a hint"
    )


def normalised_check(
    statistic: float,
    calibration: float | None,
    sessions: Sequence[Session],
    env_id: str,
    tolerance: float = CROSS_MACHINE_TOLERANCE,
    disturbed: str | None = None,
) -> tuple[str, bool]:
    """This run's time against another machine's sessions, normalised by the calibration kernel,
    in words (without the measurement's name), and whether it is a warning: beyond
    ``tolerance`` slower. Otherwise it is a note of the figure, a hint that fails nothing. A
    pass a guard found ``disturbed`` (its reason) is not even a hint and warns nothing:
    unchanged code read 85 % slower beside a CPU-bound neighbour while the calibration kernel
    ran as fast as ever."""
    calibrated = [(s.statistic, s.calibration) for s in sessions if s.calibration and s.statistic]
    if not any(s.statistic for s in sessions):  # every save there was refused its timing
        return (
            f"cross-machine: the baseline of {env_id} holds no timing (its saves stored none: a "
            f"guard refused it), so there is no time to compare; record a baseline here with "
            f"pytest --torchperf-save"
        ), False
    if not calibration or not calibrated:
        return (
            f"cross-machine: no calibration kernel on one side (GPU measurement or an older "
            f"baseline), so times from {env_id} cannot be normalised; record a baseline here "
            f"with pytest --torchperf-save"
        ), False
    stored = statistics.median(stat / cal for stat, cal in calibrated)
    machine = calibration / statistics.median(cal for _, cal in calibrated)
    ratio = (statistic / calibration) / stored
    speed = f"this machine runs the calibration kernel x{1 / machine:.2f} as fast as {env_id}"
    if disturbed:
        return (
            f"cross-machine: time {(ratio - 1) * 100:+.0f}% vs the baseline of {env_id} after "
            f"normalising by the calibration kernel ({speed}), but this pass was disturbed "
            f"({disturbed}), so it is not even a hint: compare on a quiet machine"
        ), False
    if ratio > 1.0 + tolerance:
        return (
            f"cross-machine warning: {(ratio - 1) * 100:.0f}% slower than the baseline of "
            f"{env_id} after normalising by the calibration kernel ({speed}; warning limit "
            f"{tolerance:.0%}). Normalised times are a hint across machines, never a verdict: "
            f"record a baseline here with pytest --torchperf-save"
        ), True
    return (
        f"cross-machine: time {(ratio - 1) * 100:+.0f}% vs the baseline of {env_id} after "
        f"normalising by the calibration kernel ({speed}): a hint, not judged (a warning beyond "
        f"{tolerance:.0%} slower)"
    ), False
