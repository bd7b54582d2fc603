"""The ``time-and-kernels`` measurement kind (CUDA measurements): the wall time as ``time`` judges
it, and beside it the summed device time of the call's GPU kernels, at a limit of its own
(``--torchperf-max-kernel-slowdown``).

- options: :mod:`.options` (its limit);
- measuring: :mod:`.measure` (the profiler after the timed pass, kernels summed by name);
- judging: :mod:`.judge_times` (deciding and wording), :mod:`.judge` (the kind);
- running: :mod:`.run` (profiling a measurement, when it is chosen)."""

from __future__ import annotations

from pytest_torchperf.kinds.spec import KindSpec

SPEC = KindSpec(
    name="time-and-kernels",
    package=__name__,
    summary="time, and the summed device time of the call's GPU kernels beside it",
    session_keys=("kernels", "unprofiled"),
    gate_keys=("max_kernel_slowdown",),
    figures=(("kernels", "GPU kernel time"),),
    parts=("options", "judge", "run"),
)
