"""The ``time-or-instructions`` kind's run part: chosen in a ``--torchperf-fallback instructions``
run for a counted CPU measurement (a CUDA one is ``time-and-kernels``: Valgrind counts CPU code
only); timed and filed as time, with the count stored beside the timing. Pytest-free."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_torchperf.kinds.instructions.run_counting import attach_count, count_fields, counted
from pytest_torchperf.run.kind_run import Keeping, KindRun, Unsaved

if TYPE_CHECKING:
    from pytest_torchperf.options.measure_options import MeasureOptions
    from pytest_torchperf.run.context import RunContext
    from pytest_torchperf.run.result import Result
    from pytest_torchperf.run.state import Measured, TestState


class CountBesideTiming(Keeping):
    """Time, with the instruction count stored beside it (``--torchperf-fallback
    instructions``): a missing count is warned about, never refuses the timing's save."""

    def attach(
        self,
        ctx: RunContext,
        state: TestState,
        m: Measured,
        result: Result,
        comparing: bool,
        saving: bool,
    ) -> Unsaved | None:
        beside = attach_count(ctx, m.nodeid, m.name, m.extra, result, comparing, beside_timing=True)
        if saving and beside is not None:
            state.warnings.append(beside[1])
        return None


def _chosen(ctx: RunContext, options: MeasureOptions, device: str, gate: bool) -> bool:
    # The instructions kind, earlier in the registry, took --torchperf-instructions runs.
    return counted(ctx, options, gate) and device.startswith("cpu")


RUN = KindRun(CountBesideTiming(), _chosen, record_fields=count_fields)
