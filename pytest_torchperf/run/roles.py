"""What this process does with a measurement: the role it plays in the run (:func:`role_of`),
decided by how the plugin set up its context before the first measurement (and fixed from
then on). The pipeline (:mod:`pytest_torchperf.run.pipeline`) asks the role, never the run
mode. Pytest-free.

- :class:`Timing`: times, judges and saves here (a plain run, an xdist worker).
- :class:`Disabled`: ``--torchperf-disable``: each target runs once, nothing is timed.
- :class:`FreshProcess`: a child of ``--torchperf-processes`` or a fresh confirmation: times
  and writes each pass as a ``sample`` line for its controller (it judges and saves nothing).
- :class:`Counting`: a child under Valgrind: counts each target and writes a ``count`` line.
- :class:`ABSide`: one side of an A/B pair: times on its turns, writes a ``side`` line.
- :class:`ABController`: the controller of an A/B run: times nothing, judges what the sides
  measured.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_torchperf.judge.samples import Sample
    from pytest_torchperf.measure.timing import Measurer
    from pytest_torchperf.options.measure_options import MeasureOptions
    from pytest_torchperf.run.context import RunContext
    from pytest_torchperf.run.result import Result
    from pytest_torchperf.run.state import Measured, TestState, VariantPlan


@dataclass(frozen=True)
class Request:
    """One measurement the pipeline asks a role about."""

    nodeid: str
    name: str
    measurer: Measurer
    options: MeasureOptions
    #: ``torchperf`` (the fixture or a marked test) or ``timer`` (``torchperf_timer``).
    kind: str
    #: Gated: compared and saved (an ungated timer measurement is only recorded).
    gate: bool


class Role:
    """The base role: time here, write nothing for anyone else."""

    name = "timing"
    #: A pass unfit to store is measured again after waiting for a quiet machine even when this
    #: run does not save (its passes are someone else's baseline).
    retries_unfit = False

    def judges(self, ctx: RunContext) -> bool:
        """This process judges its gated measurements against a baseline."""
        return ctx.settings.compare

    def obtain(self, ctx: RunContext, state: TestState, asked: Request) -> Result | Measured | None:
        """A measurement this process does not time: a finished Result, a Measured to conclude,
        or None to time it here (after :meth:`prepare`)."""
        return None

    def prepare(self, ctx: RunContext, measurer: Measurer, nodeid: str, name: str) -> None:
        """Set up the measurer of a gated measurement before it is timed."""
        turn = self.turn(ctx, nodeid, name)
        if turn is not None:
            measurer.turn = turn
            measurer.calibrate = False

    def turn(self, ctx: RunContext, nodeid: str, name: str) -> Callable[[], None] | None:
        """Called before each timed block of a measurement; returns when this process may
        time it (None: whenever it likes). Where blocks wait for turns, no calibration blocks
        are timed: the pairing cancels the machine's drift."""
        return None

    def obtain_variants(
        self, ctx: RunContext, state: TestState, plan: VariantPlan, eager: Measurer
    ) -> dict[str, Result | Measured] | None:
        """The variants of a target this process does not build: finished Results or Measured
        to conclude, by variant; or None to build them here (then :meth:`measure_built`)."""
        return None

    def measure_built(
        self, ctx: RunContext, state: TestState, plan: VariantPlan
    ) -> dict[str, Result] | None:
        """The built variants measured some other way than timing (None: time them here)."""
        return None

    def variant_unavailable(self, ctx: RunContext, nodeid: str, label: str, reason: str) -> None:
        """A variant cannot exist here (left out with ``reason``)."""

    def baseline(
        self, ctx: RunContext, nodeid: str, name: str, env_id: str
    ) -> list[Mapping[str, Any]]:
        """The sessions a measurement is judged against: the stored ones of its environment."""
        return list(ctx.store.load_sessions(env_id, nodeid, name))

    def record_fields(self, ctx: RunContext, nodeid: str, name: str) -> dict[str, Any]:
        """What this role adds to a measurement's record before it is judged (the engine's
        candidate is built from the record: :meth:`~pytest_torchperf.judge.inputs.Candidate.
        from_record`)."""
        return {}

    def report(
        self, ctx: RunContext, state: TestState, m: Measured, final: Sample, result: Result
    ) -> None:
        """After a gated measurement is concluded: hand it to whoever needs it."""


class Timing(Role):
    """Times, judges and saves here."""


class Disabled(Role):
    """``--torchperf-disable``: each target runs once; nothing is timed, judged or stored."""

    name = "disabled"

    def obtain(self, ctx: RunContext, state: TestState, asked: Request) -> Result | Measured | None:
        from pytest_torchperf.run.steps import disabled_result

        asked.measurer.run_once()
        return disabled_result(
            state, asked.nodeid, asked.name, asked.measurer.device, asked.options, asked.kind
        )

    def obtain_variants(
        self, ctx: RunContext, state: TestState, plan: VariantPlan, eager: Measurer
    ) -> dict[str, Result | Measured] | None:
        return _run_once(state, plan, eager)


def _run_once(state: TestState, plan: VariantPlan, eager: Measurer) -> dict[str, Result | Measured]:
    """Eager run once; each variant an untimed result (a disabled run, what opted out of
    counting)."""
    from pytest_torchperf.run.steps import disabled_result

    eager.run_once()
    return {
        v: disabled_result(
            state, plan.nodeid, plan.labels[v], eager.device, plan.options, "torchperf", v
        )
        for v in plan.variants
    }


class FreshProcess(Role):
    """A fresh child process: times and writes each gated pass for its controller."""

    name = "fresh process"
    retries_unfit = True

    def judges(self, ctx: RunContext) -> bool:
        return False

    def report(
        self, ctx: RunContext, state: TestState, m: Measured, final: Sample, result: Result
    ) -> None:
        from pytest_torchperf.run.saving import guard_of

        assert ctx.child_sink is not None
        ctx.child_sink.write(
            m.nodeid,
            m.name,
            final,
            guard_of(m.options)(final),
            m.extra.speedup if m.extra is not None else None,
            m.kernels,
        )


class Counting(Role):
    """A child under Valgrind: counts each measurement that is counted (what opted out runs
    once); the controlling run does everything else."""

    name = "counting"

    def obtain(self, ctx: RunContext, state: TestState, asked: Request) -> Result | Measured | None:
        from pytest_torchperf.run.counting import count_target
        from pytest_torchperf.run.steps import disabled_result

        asked.measurer.check_outputs(asked.name)
        if ctx.counts_instructions(asked.options, asked.gate):
            count_target(ctx, asked.nodeid, asked.name, asked.measurer)
        return disabled_result(
            state, asked.nodeid, asked.name, asked.measurer.device, asked.options, asked.kind
        )

    def obtain_variants(
        self, ctx: RunContext, state: TestState, plan: VariantPlan, eager: Measurer
    ) -> dict[str, Result | Measured] | None:
        # What opted out of counting runs once here: the controller times it.
        return None if ctx.counts_instructions(plan.options) else _run_once(state, plan, eager)

    def measure_built(
        self, ctx: RunContext, state: TestState, plan: VariantPlan
    ) -> dict[str, Result] | None:
        """Count eager (the ratios' reference, listed or not) and each built variant."""
        from pytest_torchperf.run.counting import count_target
        from pytest_torchperf.run.steps import disabled_result

        for variant, measurer in plan.measurers.items():
            count_target(ctx, plan.nodeid, plan.labels.get(variant, plan.name), measurer)
        return {
            v: disabled_result(
                state,
                plan.nodeid,
                plan.labels[v],
                plan.measurers[v].device,
                plan.options,
                "torchperf",
                v,
            )
            for v in plan.variants
            if v in plan.measurers
        }


class ABSide(Role):
    """One side of an A/B pair: its blocks alternate with the other side's (the pairing cancels
    the machine's drift, so no calibration blocks, and no waiting for a quiet machine)."""

    name = "A/B side"

    def judges(self, ctx: RunContext) -> bool:
        return False

    def turn(self, ctx: RunContext, nodeid: str, name: str) -> Callable[[], None] | None:
        turns = ctx.turns
        assert turns is not None
        return lambda: turns.take(nodeid, name)

    def variant_unavailable(self, ctx: RunContext, nodeid: str, label: str, reason: str) -> None:
        """Tell the controller it was skipped here, not lost."""
        from pytest_torchperf.run.ab_data import skipped_line

        assert ctx.child_sink is not None
        ctx.child_sink.send(skipped_line(nodeid, label, reason))

    def report(
        self, ctx: RunContext, state: TestState, m: Measured, final: Sample, result: Result
    ) -> None:
        from pytest_torchperf.run.ab_data import write_side_line

        write_side_line(ctx, state, m, final, result)


class ABController(Role):
    """The controller of an A/B run: the two sides measured each target in their own processes;
    it judges side B against side A."""

    name = "A/B controller"

    def judges(self, ctx: RunContext) -> bool:
        return True

    def obtain(self, ctx: RunContext, state: TestState, asked: Request) -> Result | Measured | None:
        from pytest_torchperf.run.ab_data import ABMissing, ab_measured
        from pytest_torchperf.run.steps import disabled_result

        if not asked.gate:
            return None  # an ungated timer measurement is timed here, as in any run
        assert ctx.ab_data is not None
        asked.measurer.check_outputs(asked.name)
        try:
            measured: Measured = ab_measured(
                ctx.ab_data, asked.nodeid, asked.name, asked.measurer, asked.kind
            )
            return measured
        except ABMissing as exc:
            state.failures.append(str(exc))
            return disabled_result(
                state, asked.nodeid, asked.name, asked.measurer.device, asked.options, asked.kind
            )

    def obtain_variants(
        self, ctx: RunContext, state: TestState, plan: VariantPlan, eager: Measurer
    ) -> dict[str, Result | Measured] | None:
        """Each variant as the two sides measured it: nothing is rebuilt here."""
        from pytest_torchperf.run.ab_variants import variants_from_sides

        return variants_from_sides(
            ctx, state, plan.nodeid, plan.name, plan.labels, eager, plan.options
        )

    def baseline(
        self, ctx: RunContext, nodeid: str, name: str, env_id: str
    ) -> list[Mapping[str, Any]]:
        """Side A's sessions, measured now: the baseline of side B."""
        assert ctx.ab_data is not None
        paired = ctx.ab_data.measured.get((nodeid, name))
        return list(paired.a_sessions) if paired is not None else []

    def record_fields(self, ctx: RunContext, nodeid: str, name: str) -> dict[str, Any]:
        """The process pairs behind the verdict (the ``ab`` kind judges them), as the results
        file keeps them."""
        from pytest_torchperf.run.ab_data import ab_record

        assert ctx.ab_data is not None
        ab = ab_record(ctx.ab_data, (nodeid, name))
        return {} if ab is None else {"ab": ab}

    def report(
        self, ctx: RunContext, state: TestState, m: Measured, final: Sample, result: Result
    ) -> None:
        from pytest_torchperf.run.ab_data import ab_record

        assert ctx.ab_data is not None
        result.ab = ab_record(ctx.ab_data, (m.nodeid, m.name))


def role_of(ctx: Any) -> Role:
    """The role of this process, from how the plugin set up its context."""
    if ctx.settings.disable:
        return Disabled()
    if ctx.counting is not None:
        return Counting()
    if ctx.ab_data is not None:
        return ABController()
    if ctx.turns is not None:
        return ABSide()
    if ctx.child_sink is not None:
        return FreshProcess()
    return Timing()
