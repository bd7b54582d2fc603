"""The ``ab`` kind's run part: chosen for every measurement of an A/B run's controller (the
sides' data is on the context); kept as time is. Pytest-free."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_torchperf.run.kind_run import Keeping, KindRun

if TYPE_CHECKING:
    from pytest_torchperf.options.measure_options import MeasureOptions
    from pytest_torchperf.run.context import RunContext


def _chosen(ctx: RunContext, options: MeasureOptions, device: str, gate: bool) -> bool:
    return ctx.ab_data is not None


RUN = KindRun(Keeping(), _chosen)
