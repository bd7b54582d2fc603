"""The ``time-and-kernels`` kind's run part: chosen for a gated CUDA measurement; its GPU kernel
time is profiled after the first timed pass (never during it) and rides in the timing session
(``kernels``, or ``unprofiled`` saying why there is none). Pytest-free."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pytest_torchperf.run.kind_run import Keeping, KindRun

if TYPE_CHECKING:
    from pytest_torchperf.judge.samples import Sample
    from pytest_torchperf.measure.timing import Measurer
    from pytest_torchperf.options.measure_options import MeasureOptions
    from pytest_torchperf.run.context import RunContext


def _chosen(ctx: RunContext, options: MeasureOptions, device: str, gate: bool) -> bool:
    return device.startswith("cuda") and gate


def kernel_times_of(measurer: Measurer, first: Sample) -> dict[str, Any]:
    """The session keys of a CUDA target's kernel time, profiled after its first timed pass:
    ``kernels`` (:meth:`~pytest_torchperf.kinds.kernels.measure.KernelTimes.to_record`), or
    ``unprofiled`` saying why there is none."""
    from pytest_torchperf.kinds.kernels.measure import KernelTimeUnavailable, kernel_times

    try:
        with measurer.prepared():
            times = kernel_times(measurer.call, measurer.device, first.summary.p25)
    except KernelTimeUnavailable as exc:
        return {"kernels": None, "unprofiled": str(exc)}
    except RuntimeError as exc:  # the profiler itself failed (another profiler active, ...)
        return {"kernels": None, "unprofiled": f"the profiler failed: {exc}"}
    return {"kernels": times.to_record(), "unprofiled": None}


RUN = KindRun(Keeping(), _chosen, beside=kernel_times_of)
