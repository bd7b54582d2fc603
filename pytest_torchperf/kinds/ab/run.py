"""The ``ab`` kind's run part: chosen for every measurement of an A/B run's controller (the
sides' data is on the context); kept as time is. Pytest-free."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pytest_torchperf.run.kind_run import Keeping, KindRun

if TYPE_CHECKING:
    from pytest_torchperf.options.measure_options import MeasureOptions
    from pytest_torchperf.run.context import RunContext
    from pytest_torchperf.run.roles import Role
    from pytest_torchperf.run.state import Measured


def _chosen(ctx: RunContext, options: MeasureOptions, device: str, gate: bool) -> bool:
    return ctx.ab_data is not None


def _pairs_fields(ctx: RunContext, m: Measured) -> dict[str, Any]:
    """The process pairs behind the verdict, as the results file keeps them."""
    from pytest_torchperf.kinds.ab.run_data import ab_record

    assert ctx.ab_data is not None
    ab = ab_record(ctx.ab_data, (m.nodeid, m.name))
    return {} if ab is None else {"ab": ab}


def _role(ctx: RunContext) -> Role | None:
    from pytest_torchperf.kinds.ab.run_roles import ABController, ABSide

    if ctx.ab_data is not None:
        return ABController()
    return ABSide() if ctx.turns is not None else None


RUN = KindRun(Keeping(), _chosen, record_fields=_pairs_fields, role=_role)
