"""The ``time-or-instructions`` kind's run part: chosen in a ``--torchperf-fallback instructions``
run for a counted CPU measurement (a CUDA one is ``time-and-kernels``: Valgrind counts CPU code
only); timed and filed as time, with the count stored beside the timing. Pytest-free."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_torchperf.kinds.instructions.run import CountKeeping
from pytest_torchperf.kinds.instructions.run_counting import count_fields, counted
from pytest_torchperf.run.kind_run import KindRun

if TYPE_CHECKING:
    from pytest_torchperf.options.measure_options import MeasureOptions
    from pytest_torchperf.run.context import RunContext


def _chosen(ctx: RunContext, options: MeasureOptions, device: str, gate: bool) -> bool:
    # The instructions kind, earlier in the registry, took --torchperf-instructions runs.
    return counted(ctx, options, gate) and device.startswith("cpu")


RUN = KindRun(CountKeeping(beside_timing=True), _chosen, record_fields=count_fields)
