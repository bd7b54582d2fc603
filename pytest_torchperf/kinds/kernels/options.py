"""The ``time-and-kernels`` kind's option of a measurement: the limit its GPU kernel time is
judged at. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from pytest_torchperf.options.option_spec import option
from pytest_torchperf.options.values import parse_fraction

#: The default ``max_kernel_slowdown``: kernel time repeats far better than wall time (to be
#: measured on a GPU: benchmarks/gpu_e2e.sh prints its process noise).
DEFAULT_KERNEL_LIMIT = 0.03


@dataclass(frozen=True)
class KernelOptions:
    """A measurement's GPU kernel-time option."""

    #: CUDA measurements: fail when the summed device time of the call's GPU kernels grew by
    #: more than this fraction (widened to the stored sessions' noise like ``max_slowdown``).
    max_kernel_slowdown: float = option(
        DEFAULT_KERNEL_LIMIT,
        parse_fraction,
        "CUDA measurements: growth of the summed GPU kernel time per call beyond which a "
        "test fails, e.g. 3% (default)",
    )


SECTION = KernelOptions
