"""The ``time`` kind's run part: chosen when no other kind is; filed under the timing environment,
its save guarded by the time guards (the default :class:`~pytest_torchperf.run.kind_run.Keeping`).
Pytest-free."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_torchperf.run.kind_run import Keeping, KindRun

if TYPE_CHECKING:
    from pytest_torchperf.options.measure_options import MeasureOptions
    from pytest_torchperf.run.context import RunContext


def _chosen(ctx: RunContext, options: MeasureOptions, device: str, gate: bool) -> bool:
    return True


RUN = KindRun(Keeping(), _chosen, explains_slowdown=lambda variant: True)
