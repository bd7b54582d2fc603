"""The ``time-and-kernels`` measurement kind (CUDA measurements): the wall time as ``time`` judges
it, and beside it the summed device time of the call's GPU kernels, at a limit of its own
(``--torchperf-max-kernel-slowdown``). Its modules are named for their layers
(docs/architecture.md)."""

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
