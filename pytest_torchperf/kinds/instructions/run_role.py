"""The role of a counting child under Valgrind (``--torchperf-instructions``, ``--torchperf-fallback
instructions``): it counts each measurement that is counted and writes a ``count`` line; what
opted out runs once. Its controller does everything else. Pytest-free."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_torchperf.kinds.instructions.run_counting import counted
from pytest_torchperf.run.roles import Request, Role, run_once

if TYPE_CHECKING:
    from pytest_torchperf.measure.timing import Measurer
    from pytest_torchperf.run.context import RunContext
    from pytest_torchperf.run.result import Result
    from pytest_torchperf.run.state import Measured, TestState, VariantPlan


class Counting(Role):
    """A child under Valgrind: counts each measurement that is counted (what opted out runs
    once); the controlling run does everything else."""

    name = "counting"

    def obtain(self, ctx: RunContext, state: TestState, asked: Request) -> Result | Measured | None:
        from pytest_torchperf.kinds.instructions.run_counting import count_target
        from pytest_torchperf.run.steps import disabled_result

        asked.measurer.check_outputs(asked.name)
        if counted(ctx, asked.options, asked.gate):
            count_target(ctx, asked.nodeid, asked.name, asked.measurer)
        return disabled_result(
            state, asked.nodeid, asked.name, asked.measurer.device, asked.options, asked.source
        )

    def obtain_variants(
        self, ctx: RunContext, state: TestState, plan: VariantPlan, eager: Measurer
    ) -> dict[str, Result | Measured] | None:
        # What opted out of counting runs once here: the controller times it.
        return None if counted(ctx, plan.options) else run_once(state, plan, eager)

    def measure_built(
        self, ctx: RunContext, state: TestState, plan: VariantPlan
    ) -> dict[str, Result] | None:
        """Count eager (the ratios' reference, listed or not) and each built variant."""
        from pytest_torchperf.kinds.instructions.run_counting import count_target
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
