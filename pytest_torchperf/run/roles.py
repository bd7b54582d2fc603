"""What this process does with a measurement: the role it plays in the run, decided by how the
plugin set up its context before the first measurement (and fixed from then on:
:func:`pytest_torchperf.run.kinds.role_of`). The pipeline (:mod:`pytest_torchperf.run.pipeline`)
asks the role, never the run mode. Pytest-free.

Here: :class:`Timing` (a plain run, an xdist worker), :class:`Disabled` and
:class:`FreshProcess` (a child of ``--torchperf-processes`` or a fresh confirmation). The
measurement kinds' run parts add theirs (a counting child under Valgrind:
``kinds/instructions/run.py``; an A/B side and the A/B controller: ``kinds/ab/run.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_torchperf.judge.samples import Sample
    from pytest_torchperf.measure.timing import Measurer
    from pytest_torchperf.options.measure_options import MeasureOptions
    from pytest_torchperf.run.context import RunContext
    from pytest_torchperf.run.result import Result
    from pytest_torchperf.run.state import Measured, TestState, VariantPlan
    from pytest_torchperf.store.sessions import Session


@dataclass(frozen=True)
class Request:
    """One measurement the pipeline asks a role about."""

    nodeid: str
    name: str
    measurer: Measurer
    options: MeasureOptions
    #: ``torchperf`` (the fixture or a marked test) or ``timer`` (``torchperf_timer``).
    source: str
    #: Gated: compared and saved (an ungated timer measurement is only recorded).
    gate: bool

    def untimed(self, state: TestState) -> Result:
        """Its untimed result (:meth:`TestState.untimed`)."""
        device = self.measurer.device
        return state.untimed(self.nodeid, self.name, device, self.options, self.source)


class Role:
    """The base role: time here, write nothing for anyone else."""

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

    def baseline(self, ctx: RunContext, nodeid: str, name: str, env_id: str) -> list[Session]:
        """The sessions a measurement is judged against: the stored ones of its environment."""
        return list(ctx.store.load_sessions(env_id, nodeid, name))

    def report(
        self, ctx: RunContext, state: TestState, m: Measured, final: Sample, result: Result
    ) -> None:
        """After a gated measurement is concluded: hand it to whoever needs it."""


class Timing(Role):
    """Times, judges and saves here."""


class Disabled(Role):
    """``--torchperf-disable``: each target runs once; nothing is timed, judged or stored."""

    def obtain(self, ctx: RunContext, state: TestState, asked: Request) -> Result | Measured | None:
        asked.measurer.run_once()
        return asked.untimed(state)

    def obtain_variants(
        self, ctx: RunContext, state: TestState, plan: VariantPlan, eager: Measurer
    ) -> dict[str, Result | Measured] | None:
        return run_once(state, plan, eager)


def run_once(state: TestState, plan: VariantPlan, eager: Measurer) -> dict[str, Result | Measured]:
    """Eager run once; each variant an untimed result (a disabled run, what opted out of
    counting)."""
    eager.run_once()
    return {v: plan.untimed(state, v, eager.device) for v in plan.variants}


class FreshProcess(Role):
    """A fresh child process: times and writes each gated pass for its controller, as a
    ``sample`` line (it judges and saves nothing)."""

    retries_unfit = True

    def judges(self, ctx: RunContext) -> bool:
        return False

    def report(
        self, ctx: RunContext, state: TestState, m: Measured, final: Sample, result: Result
    ) -> None:
        from pytest_torchperf.judge.samples import GuardLimits

        assert ctx.child_sink is not None
        # A save stores no speedup of rounds a guard refused; a compare's confirmation (process
        # 0, also in a run that saves too) judges it as the controller judges its own.
        extra = m.extra
        saved = ctx.settings.save and ctx.child_sink.process > 0
        untrusted = extra is not None and bool(extra.speedup_refused) and saved
        ctx.child_sink.write(
            m.nodeid,
            m.name,
            final,
            GuardLimits.of(m.options).problem(final),
            extra.speedup if extra is not None and not untrusted else None,
            m.beside,
            ctx.quiet.spent,
        )
