"""What a measurement kind keeps of a concluded measurement: the environment its sessions are
filed under, whether the time guards refuse its save, and what it adds to the Result (an
instruction count, with what counted it) or why it must not be saved. The run-side half of a
measurement kind (its judging half is :mod:`pytest_torchperf.judge.kinds`); the pipeline asks
:func:`keeping_of` once per measurement and never the run mode. Pytest-free.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pytest_torchperf.kinds.instructions.run_counting import attach_count, instruction_environment

if TYPE_CHECKING:
    from pytest_torchperf.run.context import RunContext
    from pytest_torchperf.run.result import Result
    from pytest_torchperf.run.state import Measured, TestState

#: Why a measurement is not saved: (short reason for the results, warning or "").
Unsaved = tuple[str, str]


class Keeping:
    """Time (and A/B pairs): filed under the timing environment, its save guarded by the
    timing guards; nothing is added."""

    #: The save is refused when the pass was disturbed (calibration, neighbours, spread).
    guards_time = True

    def environment(
        self, ctx: RunContext, env_id: str, environment: dict[str, Any]
    ) -> tuple[str, dict[str, Any]]:
        return env_id, environment

    def attach(
        self,
        ctx: RunContext,
        state: TestState,
        m: Measured,
        result: Result,
        comparing: bool,
        saving: bool,
    ) -> Unsaved | None:
        """Add what this kind measured besides time to ``result``; returns why it must not be
        saved, or None."""
        if ctx.settings.instructions and m.gate:
            # Opted out of counting, timed in one process beside a Valgrind run.
            return (
                "timed in an instruction-count run",
                f"{m.name}: not saved: timed in a --torchperf-instructions run (one process); "
                f"save its timing baseline in a run without that option",
            )
        return None


class CountKeeping(Keeping):
    """Instruction counts: filed under the instruction environment (Valgrind version and the
    capability counted under); time is not stored, so its guards refuse nothing."""

    guards_time = False

    def environment(
        self, ctx: RunContext, env_id: str, environment: dict[str, Any]
    ) -> tuple[str, dict[str, Any]]:
        return instruction_environment(environment, ctx.counted_with)

    def attach(
        self,
        ctx: RunContext,
        state: TestState,
        m: Measured,
        result: Result,
        comparing: bool,
        saving: bool,
    ) -> Unsaved | None:
        return attach_count(ctx, m.nodeid, m.name, m.extra, result, comparing)


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


_KEEPINGS: dict[str, Keeping] = {
    "time": Keeping(),
    "ab": Keeping(),
    "instructions": CountKeeping(),
    "time-or-instructions": CountBesideTiming(),
    # The kernel time rides in the timing session (measured before the comparison).
    "time-and-kernels": Keeping(),
}


def keeping_of(kind: str) -> Keeping:
    """What a measurement of ``kind`` (:data:`pytest_torchperf.judge.inputs.KINDS`) keeps."""
    return _KEEPINGS[kind]
