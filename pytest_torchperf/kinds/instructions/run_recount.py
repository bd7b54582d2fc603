"""Which instruction counts are counted again in a fresh process before they are judged: those
above their limit against their stored baseline (compares of ``--torchperf-instructions`` and
``--torchperf-fallback instructions``, with ``--torchperf-confirm fresh``, the default).
Pytest-free.

Why: the same code counted in two processes differs by what each process ran before. Python's
type-attribute cache hands out its version tags in order of first use, so which types collide in
it (and miss on every lookup) is the process's history; the memory allocators' pools are too. An
unchanged model of 1.27 M instructions per call once read +2.5 % in one counting process, all of
it in attribute and dict lookups (``benchmarks/instruction_floor.py``). A fresh process that
runs only the suspected tests has another history; a change of the code shows in both counts, a
collision of one process's caches in one alone, so the lower of the two is judged
(:func:`pytest_torchperf.kinds.instructions.judge_counts.decide_instructions`). The counting
processes themselves are started by :mod:`pytest_torchperf.kinds.instructions.plugin_runs`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from pytest_torchperf.judge.outcome import Outcome
from pytest_torchperf.kinds.instructions.judge import latest_counts
from pytest_torchperf.kinds.instructions.judge_counts import decide_instructions
from pytest_torchperf.kinds.instructions.measure_callgrind import InstructionCount
from pytest_torchperf.kinds.instructions.run_counting import Key, instruction_environment
from pytest_torchperf.store.schema import BaselineFileError

if TYPE_CHECKING:
    from pytest_torchperf.core.child_protocol import CountLine
    from pytest_torchperf.run.context import RunContext


def above_limit(
    ctx: RunContext,
    lines: Iterable[CountLine],
    counted_with: Mapping[str, Any],
    beside_timing: bool = False,
) -> dict[Key, float]:
    """The counts in ``lines`` that exceed their limit against their baseline, by (nodeid,
    name): their change (+0.031 for +3.1 %). The baseline: the latest stored count of the
    instruction environment, or with ``beside_timing`` (``--torchperf-fallback instructions``)
    the latest save's count taken the same way, stored beside the timing.

    Judged as the comparison engine will judge them; a count that cannot be judged here (no
    baseline, a damaged baseline file, a line without its limit) is left to the engine."""
    found: dict[Key, float] = {}
    for line in lines:
        if line.threads is None or line.limit is None:
            continue
        try:
            current = InstructionCount.from_record(line.instructions)
        except (KeyError, TypeError, ValueError):
            continue
        env_id, environment = ctx.environment(line.device or "cpu", line.threads)
        if not beside_timing:
            env_id, _ = instruction_environment(environment, counted_with)
        try:
            sessions = ctx.store.load_sessions(env_id, line.nodeid, line.name)
        except BaselineFileError:
            continue  # the measurement's own verdict says what is wrong with the file
        if beside_timing:
            sessions = latest_counts(sessions, counted_with)[1]
        stored = [s.instructions for s in sessions if s.instructions]
        if not stored:
            continue
        baseline = InstructionCount.from_record(stored[-1])
        decision = decide_instructions(current, baseline, line.limit)
        if decision.outcome is Outcome.FAIL and decision.change is not None:
            found[(line.nodeid, line.name)] = decision.change
    return found


def listed(changes: Mapping[Key, float], most: int = 4) -> str:
    """``b +3.1%, deep20 +2.5%`` (the first ``most``, then how many more)."""
    items = [f"{name} {change * 100:+.1f}%" for (_, name), change in changes.items()]
    more = len(items) - most
    return ", ".join(items[:most]) + (f" and {more} more" if more > 0 else "")
