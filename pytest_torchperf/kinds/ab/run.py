"""The ``ab`` kind's run part: chosen for every measurement of an A/B run's controller (what the
sides measured is its run state, :class:`~pytest_torchperf.kinds.ab.run_data.ABState`); kept as
time is; its processes' roles (a side, the controller); an A/B run's option defaults and the
side A its gates record; ``torchperf bisect --mode ab`` (:data:`BISECT`). Pytest-free."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pytest_torchperf.kinds.ab.judge_pairs import DEFAULT_AB_LIMIT
from pytest_torchperf.kinds.ab.options import ABSettings
from pytest_torchperf.kinds.ab.run_data import ABState, ab_record
from pytest_torchperf.run.bisect_mode import BisectMode, Classify, Key
from pytest_torchperf.run.kind_run import Keeping, KindRun
from pytest_torchperf.store.record import Record

if TYPE_CHECKING:
    from pytest_torchperf.options.measure_options import MeasureOptions
    from pytest_torchperf.run.context import RunContext
    from pytest_torchperf.run.roles import Role
    from pytest_torchperf.run.state import Measured


def _chosen(ctx: RunContext, options: MeasureOptions, device: str, gate: bool) -> bool:
    return ctx.state(ABState).data is not None


def _pairs_fields(ctx: RunContext, m: Measured) -> dict[str, Any]:
    """The process pairs behind the verdict, as the results file keeps them."""
    data = ctx.state(ABState).data
    assert data is not None
    ab = ab_record(data, (m.nodeid, m.name))
    return {} if ab is None else {"ab": ab}


def _role(ctx: RunContext) -> Role | None:
    from pytest_torchperf.kinds.ab.run_roles import ABController, ABSide

    state = ctx.state(ABState)
    if state.data is not None:
        return ABController()
    return ABSide() if state.turns is not None else None


def _adjust_options(
    ctx: RunContext, options: MeasureOptions, layers: tuple[Mapping[str, Any], ...]
) -> MeasureOptions:
    """An A/B run's defaults: a 5 % limit (both sides ran in the same moments), and in a
    side's process ``min_time`` shared out over the first pairs, so those pairs together
    time each side as long as one plain measurement (the spread between processes, not
    the blocks of one, decides the interval)."""
    if not ctx.settings.of(ABSettings).against:
        return options
    if not any("max_slowdown" in layer for layer in layers):
        options = replace(options, max_slowdown=DEFAULT_AB_LIMIT)
    if ctx.settings.child:
        options = replace(options, min_time=options.min_time / ctx.settings.of(ABSettings).pairs)
        turns = ctx.state(ABState).turns
        if turns is not None and turns.pair > 1:
            # Counters are deterministic: the first pair's are compared; later pairs time.
            options = replace(options, counters=False)
    return options


def _gate_fields(ctx: RunContext) -> dict[str, Any]:
    """What side A is (``origin/main (abc1234)``), in every gate of the controller's run."""
    data = ctx.state(ABState).data
    return {"ab": data.against if data is not None else ""}


def _bisect_figure(record: Record) -> tuple[str, str] | None:
    if not (record.extra("ab") and record.outcome):
        return None
    ratio = record.verdict.ratio if record.verdict else None
    change = f" ({(ratio - 1) * 100:+.1f}% vs GOOD)" if ratio else ""
    return record.outcome, change


def _bisect_classifier(good: Mapping[Key, Any], bad: Mapping[Key, Any]) -> Classify:
    # Each run judged the revision against GOOD itself: GOOD's and BAD's figures are not needed.
    def ab(figures: Mapping[Key, Any]) -> tuple[str, str]:
        said = ", ".join(f"{k[1]}: {outcome}{change}" for k, (outcome, change) in figures.items())
        outcomes = {outcome for outcome, _ in figures.values()}
        if "fail" in outcomes:
            return "bad", said
        if "inconclusive" in outcomes:
            return "skip", f"{said}: the A/B verdict could not decide (a busy machine?)"
        return "good", said

    return ab


#: ``torchperf bisect --mode ab``: each revision against GOOD in alternating process pairs
#: (``--torchperf-ab GOOD``); bad where the A/B verdict fails (the tests' own ``max_slowdown``).
#: For GPU measurements or where Valgrind is missing; the verdicts are statistical, so a step
#: has to be well over the limit to be found every time.
BISECT = BisectMode(
    "ab",
    args=lambda good: ("--torchperf-ab", good),
    figure=_bisect_figure,
    what="an A/B verdict",
    classifier=_bisect_classifier,
    measures_good=False,
    retry_hint=", or retry on a quieter machine (A/B verdicts are statistical)",
    default_rank=1,
)

RUN = KindRun(
    Keeping(),
    _chosen,
    record_fields=_pairs_fields,
    role=_role,
    adjust_options=_adjust_options,
    gate_fields=_gate_fields,
    # A/B runs do not rebuild variants in this process: only eager's profile explains.
    explains_slowdown=lambda variant: variant == "eager",
    bisect=BISECT,
)
