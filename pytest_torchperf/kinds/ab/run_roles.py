"""The roles of an A/B run's processes: a side's child (:class:`ABSide`: times on its turns,
writes a ``side`` line of each measurement, :func:`side_line`) and the controller (:class:`ABController`: times nothing, judges what
the sides measured). Pytest-free."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pytest_torchperf.core.child_protocol import SideResultLine, SkippedLine
from pytest_torchperf.judge.failures import categories_of
from pytest_torchperf.kinds.ab.run_data import ABState
from pytest_torchperf.run.roles import Request, Role
from pytest_torchperf.store.sessions import Session

if TYPE_CHECKING:
    from pytest_torchperf.judge.samples import Sample
    from pytest_torchperf.measure.timing import Measurer
    from pytest_torchperf.run.context import RunContext
    from pytest_torchperf.run.result import Result
    from pytest_torchperf.run.state import Measured, TestState, VariantPlan


class ABSide(Role):
    """One side of an A/B pair: its blocks alternate with the other side's (the pairing cancels
    the machine's drift, so no calibration blocks, and no waiting for a quiet machine)."""

    name = "A/B side"

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

    name = "A/B controller"

    def judges(self, ctx: RunContext) -> bool:
        return True

    def obtain(self, ctx: RunContext, state: TestState, asked: Request) -> Result | Measured | None:
        from pytest_torchperf.kinds.ab.run_data import ABMissing, ab_measured

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
        from pytest_torchperf.kinds.ab.run_data import ABMissing, ABSkipped, ab_measured

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
        from pytest_torchperf.kinds.ab.run_data import ab_record

        data = ctx.state(ABState).data
        assert data is not None
        result.sections["ab"] = ab_record(data, (m.nodeid, m.name))
