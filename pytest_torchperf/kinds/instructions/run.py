"""The ``instructions`` kind's run part: chosen in a ``--torchperf-instructions`` run for every
measurement counted (not opted out with ``instructions=False``); filed under the instruction
environment, with its count attached to the Result; CPU only; and the role of a counting child
under Valgrind (:class:`Counting`, of ``--torchperf-instructions`` and ``--torchperf-fallback
instructions``); ``torchperf bisect --mode instructions`` (:data:`BISECT`). Pytest-free."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pytest_torchperf.core.json_fields import json_number, json_object
from pytest_torchperf.kinds.instructions.options import CountSettings
from pytest_torchperf.kinds.instructions.run_counting import (
    CountState,
    attach_count,
    count_fields,
    count_target,
    counted,
    instruction_environment,
)
from pytest_torchperf.run.bisect_mode import BisectError, BisectMode, Classify, Key
from pytest_torchperf.run.kind_run import Keeping, KindRun, Unsaved
from pytest_torchperf.run.roles import Request, Role, run_once
from pytest_torchperf.store.record import Record

if TYPE_CHECKING:
    from pytest_torchperf.measure.timing import Measurer
    from pytest_torchperf.options.measure_options import MeasureOptions
    from pytest_torchperf.run.context import RunContext
    from pytest_torchperf.run.result import Result
    from pytest_torchperf.run.state import Measured, TestState, VariantPlan


class CountKeeping(Keeping):
    """Instruction counts: filed under the instruction environment (Valgrind version and the
    capability counted under); time is not stored, so its guards refuse nothing. With
    ``beside_timing`` (``--torchperf-fallback instructions``): time, filed and guarded as time,
    with the count stored beside it; a missing count is warned about, never refuses the timing's
    save."""

    def __init__(self, beside_timing: bool = False) -> None:
        self.beside_timing = self.guards_time = beside_timing

    def environment(
        self, ctx: RunContext, env_id: str, environment: dict[str, Any]
    ) -> tuple[str, dict[str, Any]]:
        if self.beside_timing:
            return env_id, environment
        return instruction_environment(environment, ctx.state(CountState).counted_with)

    def attach(
        self,
        ctx: RunContext,
        state: TestState,
        m: Measured,
        result: Result,
        comparing: bool,
        saving: bool,
    ) -> Unsaved | None:
        unsaved = attach_count(
            ctx, m.nodeid, m.name, m.extra, result, comparing, beside_timing=self.beside_timing
        )
        if not self.beside_timing:
            return unsaved
        if saving and unsaved is not None:
            state.warnings.append(unsaved[1])
        return None


def _refuses_save(ctx: RunContext, m: Measured, kind: str) -> Unsaved | None:
    """A measurement opted out of counting in an instruction-count run (``instructions=False``,
    or a kind of its own) was timed in one process beside the Valgrind children: not saved."""
    if kind == "instructions" or not (ctx.settings.of(CountSettings).instructions and m.gate):
        return None
    return (
        "timed in an instruction-count run",
        f"{m.name}: not saved: timed in a --torchperf-instructions run (one process); "
        f"save its timing baseline in a run without that option",
    )


def _chosen(ctx: RunContext, options: MeasureOptions, device: str, gate: bool) -> bool:
    return counted(ctx, options, gate) and ctx.settings.of(CountSettings).instructions


def _unmeasurable(device: str, label: str) -> str | None:
    """Instruction counts are CPU-only: a measurement on another device is skipped, saying so
    (``--torchperf-fallback instructions`` times it, judged on time alone)."""
    if device.startswith("cpu"):
        return None
    return (
        f"{label}: not measured: --torchperf-instructions counts CPU instructions under "
        f"Valgrind, and this measurement runs on {device}. Measure it in a run without "
        f"--torchperf-instructions, or mark it @pytest.mark.torchperf(instructions=False) "
        f"to time it in this run"
    )


def _role(ctx: RunContext) -> Role | None:
    return Counting() if ctx.state(CountState).folder is not None else None


class Counting(Role):
    """A child under Valgrind: counts each measurement that is counted and writes a ``count``
    line (what opted out runs once); the controlling run does everything else."""

    def obtain(self, ctx: RunContext, state: TestState, asked: Request) -> Result | Measured | None:
        asked.measurer.check_outputs(asked.name)
        if counted(ctx, asked.options, asked.gate):
            count_target(ctx, asked.nodeid, asked.name, asked.measurer, asked.options)
        return asked.untimed(state)

    def obtain_variants(
        self, ctx: RunContext, state: TestState, plan: VariantPlan, eager: Measurer
    ) -> dict[str, Result | Measured] | None:
        # What opted out of counting runs once here: the controller times it.
        return None if counted(ctx, plan.options) else run_once(state, plan, eager)

    def measure_built(
        self, ctx: RunContext, state: TestState, plan: VariantPlan
    ) -> dict[str, Result] | None:
        """Count eager (the ratios' reference, listed or not) and each built variant."""
        for variant, measurer in plan.measurers.items():
            label = plan.labels.get(variant, plan.name)
            count_target(ctx, plan.nodeid, label, measurer, plan.options)
        return {
            v: plan.untimed(state, v, plan.measurers[v].device)
            for v in plan.variants
            if v in plan.measurers
        }


def _bisect_count(record: Record) -> float | None:
    counted = json_number(json_object(record.extra("instructions")).get("per_call"))
    return float(counted) if counted else None


def _bisect_classifier(good: Mapping[Key, Any], bad: Mapping[Key, Any]) -> Classify:
    # Halfway from GOOD's count to BAD's decides, for the measurements that BAD made slower (one
    # that got faster is not what is looked for: its commit would pass for the first bad one).
    moved = {k: (good[k], bad[k]) for k in good if k in bad and bad[k] >= good[k] * 1.002}
    if not moved:
        raise BisectError(
            "BAD does not count 0.2 % or more instructions per call than GOOD for any selected "
            "measurement: nothing to bisect. Check -k and the order of the revisions, or "
            "bisect a timing change with --mode ab"
        )

    def instructions(figures: Mapping[Key, Any]) -> tuple[str, str]:
        details, verdict = [], "good"
        for key, (g, b) in moved.items():
            if key not in figures:
                continue
            x = figures[key]
            details.append(f"{key[1]}: {x:,.0f} instr/call, {(x / g - 1) * 100:+.2f}% vs GOOD")
            if (x - g) / (b - g) > 0.5:
                verdict = "bad"
        if not details:
            return "skip", "no instruction count of the measurements that changed"
        return verdict, "; ".join(details)

    return instructions


#: ``torchperf bisect --mode instructions``: each revision's selected tests counted under
#: Valgrind; deterministic, so a +3 % pure-Python slowdown is found exactly. GOOD and BAD are
#: counted first; a revision is bad where a measurement that changed between them has moved
#: more than halfway from GOOD's count to BAD's.
BISECT = BisectMode(
    "instructions",
    args=lambda good: ("--torchperf-instructions",),
    figure=_bisect_count,
    what="an instruction count (a GPU measurement? those need --mode ab)",
    classifier=_bisect_classifier,
    default_rank=0,
    available=lambda: shutil.which("valgrind") is not None,
)

RUN = KindRun(
    CountKeeping(),
    _chosen,
    record_fields=count_fields,
    role=_role,
    unmeasurable=_unmeasurable,
    refuses_save=_refuses_save,
    bisect=BISECT,
)
