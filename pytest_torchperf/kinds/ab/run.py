"""The ``ab`` kind's run part: chosen for every measurement of an A/B run's controller (what the
sides measured is its run state, :class:`~pytest_torchperf.kinds.ab.run_data.ABState`); kept as
time is; its processes' roles: a side's child (:class:`ABSide`: times on its turns, writes a
``side`` line of each measurement, :func:`side_line`) and the controller
(:class:`ABController`: times nothing, judges what the sides measured); an A/B run's option
defaults and the side A its gates record; ``torchperf bisect --mode ab`` (:data:`BISECT`).
Pytest-free."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pytest_torchperf.core.child_protocol import SideResultLine, SkippedLine
from pytest_torchperf.judge.failures import categories_of
from pytest_torchperf.kinds.ab.judge_pairs import DEFAULT_AB_LIMIT
from pytest_torchperf.kinds.ab.options import ABSettings
from pytest_torchperf.kinds.ab.run_data import ABMissing, ABSkipped, ABState, ab_measured, ab_record
from pytest_torchperf.run.bisect_mode import BisectMode, Classify, Key
from pytest_torchperf.run.kind_run import Keeping, KindRun
from pytest_torchperf.run.roles import Request, Role
from pytest_torchperf.store.record import Record
from pytest_torchperf.store.sessions import Session

if TYPE_CHECKING:
    from pytest_torchperf.judge.samples import Sample
    from pytest_torchperf.measure.timing import Measurer
    from pytest_torchperf.options.measure_options import MeasureOptions
    from pytest_torchperf.run.context import RunContext
    from pytest_torchperf.run.result import Result
    from pytest_torchperf.run.state import Measured, TestState, VariantPlan


def _chosen(ctx: RunContext, options: MeasureOptions, device: str, gate: bool) -> bool:
    return ctx.state(ABState).data is not None


def _pairs_fields(ctx: RunContext, m: Measured) -> dict[str, Any]:
    """The process pairs behind the verdict, as the results file keeps them."""
    data = ctx.state(ABState).data
    assert data is not None
    ab = ab_record(data, (m.nodeid, m.name))
    return {} if ab is None else {"ab": ab}


class ABSide(Role):
    """One side of an A/B pair: its blocks alternate with the other side's (the pairing cancels
    the machine's drift, so no calibration blocks, and no waiting for a quiet machine)."""

    def judges(self, ctx: RunContext) -> bool:
        return False

    def turn(self, ctx: RunContext, nodeid: str, name: str) -> Callable[[], None] | None:
        turns = ctx.state(ABState).turns
        assert turns is not None
        return lambda: turns.take(nodeid, name)

    def variant_unavailable(self, ctx: RunContext, nodeid: str, label: str, reason: str) -> None:
        """Tell the controller it was skipped here, not lost: it skips the measurement with the
        same reason instead of calling it missing (which fails the test)."""
        assert ctx.child_sink is not None
        ctx.child_sink.send(SkippedLine(nodeid, label, reason))

    def report(
        self, ctx: RunContext, state: TestState, m: Measured, final: Sample, result: Result
    ) -> None:
        """Write the line of one concluded measurement (side A's first pair adds an op table:
        it explains a failing B's profile in the controller)."""
        from pytest_torchperf.run import explain

        top_ops = None
        turns, sink = ctx.state(ABState).turns, ctx.child_sink
        # Only a side's child writes these lines: its turns and its sink are set before its tests.
        assert turns is not None and sink is not None
        if turns.side == "A" and turns.pair == 1 and result.summary is not None:
            top_ops = explain.baseline_top_ops(m.measurer, final, state, m.name)
        sink.send(side_line(result, m.options.max_slowdown, top_ops))


def side_line(result: Result, limit: float, top_ops: list[dict[str, Any]] | None) -> SideResultLine:
    """What a side's child writes for one measurement: every block time at full precision (the
    rounds are paired by position), the session record a save would store (counters,
    fingerprint, speedup for the engine's checks), and the measurement's limit."""
    session: Session = result.session or Session()
    if top_ops:
        session = session.updated({"top_ops": top_ops})
    # Failures found within the side's run (a variant's accuracy vs eager, min_speedup): the
    # controller does not rebuild variants, so B's are carried here.
    session = session.updated(
        {
            "run_failures": list(result.run_failures),
            "run_failure_kinds": categories_of(result.run_failures),
        }
    )
    return SideResultLine(
        result.nodeid, result.name, tuple(result.samples), session.to_json(), limit
    )


class ABController(Role):
    """The controller of an A/B run: the two sides measured each target in their own processes;
    it judges side B against side A."""

    def judges(self, ctx: RunContext) -> bool:
        return True

    def obtain(self, ctx: RunContext, state: TestState, asked: Request) -> Result | Measured | None:
        if not asked.gate:
            return None  # an ungated timer measurement is timed here, as in any run
        data = ctx.state(ABState).data
        assert data is not None
        asked.measurer.check_outputs(asked.name)
        try:
            return ab_measured(data, asked.nodeid, asked.name, asked.measurer, asked.source)
        except ABMissing as exc:
            state.failures.append(str(exc))
            return asked.untimed(state)

    def obtain_variants(
        self, ctx: RunContext, state: TestState, plan: VariantPlan, eager: Measurer
    ) -> dict[str, Result | Measured] | None:
        """Each variant as the two sides measured it, to be concluded (nothing is rebuilt here;
        ``plan.labels`` maps each variant to its measurement name); a variant missing from the
        sides is a failed, untimed Result."""
        data = ctx.state(ABState).data
        assert data is not None, "only the A/B controller builds variants from the sides"
        eager.check_outputs(plan.name)
        results: dict[str, Result | Measured] = {}
        for variant, label in plan.labels.items():
            try:
                results[variant] = ab_measured(data, plan.nodeid, label, eager, "torchperf")
            except ABSkipped as exc:
                # Side B could not take this variant (unavailable there): as a plain run does,
                # the test skips when it is its only variant, else the variant is left out with
                # a note.
                if len(plan.labels) == 1:
                    raise
                state.skipped[label] = str(exc).split(": not measured: ", 1)[-1]
                state.warnings.append(str(exc))
            except ABMissing as exc:
                state.failures.append(str(exc))
                results[variant] = plan.untimed(state, variant, eager.device)
        return results

    def baseline(self, ctx: RunContext, nodeid: str, name: str, env_id: str) -> list[Session]:
        """Side A's sessions, measured now: the baseline of side B."""
        data = ctx.state(ABState).data
        assert data is not None
        paired = data.measured.get((nodeid, name))
        return list(paired.a_sessions) if paired is not None else []

    def report(
        self, ctx: RunContext, state: TestState, m: Measured, final: Sample, result: Result
    ) -> None:
        data = ctx.state(ABState).data
        assert data is not None
        result.sections["ab"] = ab_record(data, (m.nodeid, m.name))


def _role(ctx: RunContext) -> Role | None:
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
