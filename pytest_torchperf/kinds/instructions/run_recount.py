"""Which instruction counts are counted again in a fresh process before they are judged: those
above their limit against their stored baseline with most of the increase in the interpreter's
lookups and the memory allocators (compares of ``--torchperf-instructions`` and
``--torchperf-fallback instructions``, with ``--torchperf-confirm fresh``, the default).
Pytest-free.

Why: the same code counted in two processes differs by what each process ran before. Python's
type-attribute cache hands out its version tags in order of first use, so which types collide in
it (and miss on every lookup) is the process's history; the memory allocators' pools are too. An
unchanged model of 1.27 M instructions per call once read +2.5 % in one counting process, most
of it in attribute and dict lookups (``benchmarks/instruction_floor.py``). A fresh process that
runs only the suspected tests, and hands out some type version tags before them
(:func:`shift_type_tags`), has another history; a change of the code shows in both counts, a collision of one process's caches
in one alone, so the lower of the two is judged
(:func:`pytest_torchperf.kinds.instructions.judge_counts.decide_instructions`). The counting
processes themselves are started by :mod:`pytest_torchperf.kinds.instructions.plugin_runs`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from pytest_torchperf.kinds.instructions.judge import latest_counts
from pytest_torchperf.kinds.instructions.judge_counts import decide_instructions
from pytest_torchperf.kinds.instructions.measure_callgrind import InstructionCount
from pytest_torchperf.kinds.instructions.run_counting import Key, instruction_environment

if TYPE_CHECKING:
    from pytest_torchperf.core.child_protocol import CountLine
    from pytest_torchperf.run.context import RunContext


def above_limit(
    ctx: RunContext,
    counts: Mapping[Key, Mapping[str, object]],
    lines: Iterable[CountLine],
    counted_with: Mapping[str, object],
    beside_timing: bool = False,
) -> dict[Key, float]:
    """The ``counts`` (as the run keeps them: the last line of each measurement) that exceed
    their limit against their baseline with most of the increase in the interpreter's lookups
    and the allocators (``decide_instructions``' ``recountable``), by (nodeid, name): their
    change (+0.031 for +3.1 %). ``lines``: the count lines, for each measurement's device,
    threads and limit. The baseline: the latest stored count of the instruction environment, or
    with ``beside_timing`` (``--torchperf-fallback instructions``) the latest save's count taken
    the same way, stored beside the timing.

    Judged as the comparison engine will judge them; a count that cannot be judged here (no
    baseline, a damaged baseline file, an environment that cannot be fingerprinted, a line
    without its limit) is left to the engine, which says what is wrong."""
    said = {(line.nodeid, line.name): line for line in lines}
    found: dict[Key, float] = {}
    # Each environment once (a fingerprint hook of another plugin runs for each), uncached in
    # the context: asked before the test loop, its fixtures have set up nothing yet.
    environments: dict[tuple[str, int], str] = {}
    for key, count in counts.items():
        line = said.get(key)
        if line is None or line.threads is None or line.limit is None:
            continue
        where = (line.device or "cpu", line.threads)
        try:
            current = InstructionCount.from_record(count)
            if where not in environments:
                env_id, environment = ctx.environment(*where, keep=False)
                if not beside_timing:
                    env_id, _ = instruction_environment(environment, counted_with)
                environments[where] = env_id
            sessions = ctx.store.load_sessions(environments[where], *key)
        except Exception:  # noqa: BLE001 - a damaged count or baseline file, a fingerprint hook
            continue  # that raised: the measurement's own verdict or error says what is wrong
        if beside_timing:
            sessions = latest_counts(sessions, counted_with)[1]
        stored = [s.instructions for s in sessions if s.instructions]
        if not stored:
            continue
        baseline = InstructionCount.from_record(stored[-1])
        decision = decide_instructions(current, baseline, line.limit)
        if decision.recountable and decision.change is not None:
            found[key] = decision.change
    return found


def listed(changes: Mapping[Key, float], most: int = 4) -> str:
    """``b +3.1%, deep20 +2.5%`` (the first ``most``, then how many more)."""
    items = [f"{name} {change * 100:+.1f}%" for (_, name), change in changes.items()]
    more = len(items) - most
    return ", ".join(items[:most]) + (f" and {more} more" if more > 0 else "")


#: The environment variable that makes a counting child hand out type version tags before its
#: tests (:func:`shift_type_tags`; set by the recount's processes), and how many.
TAG_SHIFT_ENV = "TORCHPERF_TYPE_TAG_SHIFT"
TAG_SHIFT = 997


def shift_type_tags(n: int) -> None:
    """Hand out ``n`` of Python's type version tags, to throwaway classes, so that every type
    tagged afterwards gets another tag than in the first counting processes. The type-attribute
    cache's slot of a lookup is the type's tag XOR the name's address (CPython 3.11), so other
    tags collide in other slots: a test that its first counting process ran first would
    otherwise see the same collisions again (the same start-up and collection before it).
    A class gets its tag at its first attribute lookup (checked with ctypes on 3.11: five such
    classes moved the next class's tag by five); tags are never handed out again."""
    for index in range(n):
        hasattr(type(f"_TagShift{index}", (), {}), "_torchperf")
