"""Instruction-count verdicts, pure: a measurement's instructions per call under Valgrind against
its baseline, and the functions that explain a change.

Why a separate rule from timing: instruction counts of the same code repeat within about 0.002 %
between windows of one process (measured on this project's 2-vCPU CI VM with callgrind), so no
statistics over samples are needed and the limit can be tight (1 % by default). What can break
that determinism is the workload itself (random inputs per call, lazy initialisation,
data-dependent control flow): two counted windows of the same calls must agree, or the verdict is
inconclusive with both figures.

Used by the comparison engine
(:func:`pytest_torchperf.kinds.instructions.judge.instruction_verdict`) in
``--torchperf-instructions`` runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from pytest_torchperf.core.units import format_count
from pytest_torchperf.judge.outcome import Outcome
from pytest_torchperf.kinds.instructions.measure_callgrind import (
    EXTRA_WINDOWS,
    WINDOW_AGREEMENT,
    WINDOW_AGREEMENT_FLOOR,
    InstructionCount,
    windows_agree,
)
from pytest_torchperf.kinds.instructions.options import DEFAULT_MAX_INCREASE

#: Smallest change of instructions per call that a verdict acts on, whatever the limit. The same
#: code counted in different processes differs: the memory allocators' own code (pymalloc, glibc
#: malloc) and Python's type-attribute cache depend on everything the process did before (see
#: benchmarks/instruction_floor.py). Seen: a 300 k-instruction MLP +1.3 % (4.0 k, its "why" all
#: dict and type lookups) between a save and a compare of unchanged code in CI;
#: ``benchmarks/instruction_floor.py`` (models of 44 k to 4.6 M): up to 3.7 k (-0.69 %, a 537 k
#: model running a Python loop, the smallest margin: 2.2x under this floor) and 6.6 k (-0.17 %,
#: a 3.8 M stack of 60 Linear+ReLU, whose 1 % limit is 38 k) in 5 compares on a busy machine,
#: 3.4 k and 3.0 k beside a CPU hog. The floor binds below 800 k instructions per call, where a
#: 1 % limit would be under it.
MIN_CHANGE = 8_000.0
#: Functions named in a verdict's "why" line.
TOP_FUNCTIONS = 3

#: The interpreter's attribute and dict lookup functions. A count that moved in these alone may
#: be the process's, not the code's: an unchanged 1.27 M-instruction model (20 Linear+ReLU) once
#: read +2.5 % in one counting process, all in them (benchmarks/instruction_floor.py on a busy
#: machine), as a type-cache collision its history made (the cache's version tags are handed
#: out in order of first use).
LOOKUPS = frozenset(
    {"_PyType_Lookup", "_Py_dict_lookup", "unicodekeys_lookup_unicode", "find_name_in_mro"}
)
#: The memory allocators' own functions (pymalloc's, glibc's): their counts per call depend on
#: where the process's pools and free lists stand, which is everything it did before (unchanged
#: models moved by up to 6.8 k per call in them between processes: benchmarks/instruction_floor.py).
ALLOCATORS = frozenset(
    {
        "_PyObject_Malloc",
        "_PyObject_Free",
        "_PyObject_Realloc",
        "PyObject_Malloc",
        "PyObject_Free",
        "_int_malloc",
        "_int_free",
        "_int_memalign",
        "_int_realloc",
        "malloc",
        "free",
        "cfree",
        "realloc",
        "malloc_consolidate",
        "unlink_chunk",
        "unlink_chunk.constprop.0",
    }
)
#: Functions whose counts are the process's history as much as the code's.
HISTORY_FUNCTIONS = LOOKUPS | ALLOCATORS
#: A count above its limit is counted again in a fresh process where at least this share of its
#: increase lies in :data:`HISTORY_FUNCTIONS`: the unchanged 1.27 M model's +29.6 k had 68 % in
#: three lookups. An increase in the code's own functions is the code's: a recount would not
#: tell it apart, and judging the lower count could pass it (a baseline whose own process had a
#: collision that the recount lacks reads lower by that much).
HISTORY_SHARE = 0.5

#: The command that records an instruction-count baseline (the kind's ``save``).
SAVE = "pytest --torchperf-instructions --torchperf-save"


@dataclass(frozen=True)
class InstructionVerdict:
    outcome: Outcome
    #: Relative change of instructions per call vs the baseline (None when there is none).
    change: float | None
    message: str
    #: The judged count's instructions per call (a recount's where that was the lower).
    per_call: float | None = None
    #: The first count's change where a recount was judged beside it, else ``change``.
    first_change: float | None = None


@dataclass(frozen=True)
class InstructionDecision:
    """What a count decides against its baseline, before any wording
    (:func:`decide_instructions`)."""

    outcome: Outcome
    #: ``windows`` (the count's windows disagree), ``new`` (no baseline) or ``compared``.
    case: str
    change: float | None = None
    #: The relative limit applied (``max_increase``, or the absolute floor on small targets).
    limit: float = 0.0
    why: tuple[str, ...] = ()
    #: The judged count's instructions per call (the recount's where that is the lower).
    per_call: float = 0.0
    #: A count above its limit that was counted again in a fresh process: the first count's
    #: change and the recount's, in that order (the lower of the two is judged).
    counted_twice: tuple[float, float] | None = None
    #: Above the limit with most of the increase in :data:`HISTORY_FUNCTIONS`: a recount in a
    #: fresh process decides (the run starts one before its test loop).
    recountable: bool = False


def decide_instructions(
    current: InstructionCount,
    baseline: InstructionCount | None,
    max_increase: float = DEFAULT_MAX_INCREASE,
    recount: InstructionCount | None = None,
) -> InstructionDecision:
    """Pass, fail, improved, inconclusive or new.

    ``recount``: the same measurement counted again in a fresh process (other type tags, other
    tests before it), because ``current`` (the run's count) was above its limit with most of the
    increase in the interpreter's lookups and the allocators (:func:`from_history`). Both are
    counts of the same code; what differs between them is the processes' history (which types
    collide in Python's type cache, where the allocators' pools stand), so the lower one is
    judged: a change of the code exceeds the limit in both, a collision of one process's caches
    in one alone. The recount can pass the measurement, never improve it (two counts that far
    apart say nothing of a speedup). A recount whose windows disagree is ignored, as is one of
    an increase in the code's own functions."""
    if not repeats(current):
        return InstructionDecision(Outcome.INCONCLUSIVE, "windows")
    if baseline is None:
        return InstructionDecision(Outcome.NEW, "new")
    first = _compared(current, baseline, max_increase)
    if first.outcome is not Outcome.FAIL or not from_history(current, baseline):
        return first
    first = replace(first, recountable=True)
    if recount is None or not repeats(recount):
        return first
    again = _compared(recount, baseline, max_increase)
    judged = again if again.per_call < first.per_call else first
    if judged.outcome is Outcome.IMPROVED:
        judged = replace(judged, outcome=Outcome.PASS)
    assert first.change is not None and again.change is not None
    return replace(judged, counted_twice=(first.change, again.change))


def from_history(current: InstructionCount, baseline: InstructionCount) -> bool:
    """Whether at least :data:`HISTORY_SHARE` of the increase from ``baseline`` to ``current``
    lies in :data:`HISTORY_FUNCTIONS` (functions among both counts' kept ones only: one missing
    from a side's list has no known change)."""
    increase = current.per_call - baseline.per_call
    if increase <= 0:
        return False
    moved = sum(
        current.functions[name] - baseline.functions[name]
        for name in HISTORY_FUNCTIONS
        if name in current.functions and name in baseline.functions
    )
    return moved >= HISTORY_SHARE * increase


def _compared(
    current: InstructionCount, baseline: InstructionCount, max_increase: float
) -> InstructionDecision:
    change = (current.per_call - baseline.per_call) / baseline.per_call
    limit = effective_limit(baseline.per_call, max_increase)
    outcome = (
        Outcome.FAIL if change > limit else Outcome.IMPROVED if change < -limit else Outcome.PASS
    )
    why = tuple(function_changes(current.functions, baseline.functions))
    return InstructionDecision(outcome, "compared", change, limit, why, current.per_call)


def word_instructions(
    label: str,
    decision: InstructionDecision,
    current: InstructionCount,
    baseline: InstructionCount | None,
    max_increase: float,
) -> str:
    """The message a user reads for ``decision``."""
    first, second = current.windows
    if decision.case == "windows":
        return (
            f"{label}: inconclusive: the two counted windows disagree by "
            f"{current.disagreement * 100:.2f}% ({format_count(first)} vs "
            f"{format_count(second)} instructions per call; they must agree within "
            f"{WINDOW_AGREEMENT * 100:g}% or {WINDOW_AGREEMENT_FLOOR:.0f} instructions per "
            f"call; up to {EXTRA_WINDOWS} more are counted where two disagree). The calls do "
            f"not repeat the same work: random "
            f"inputs created per call, lazy initialisation or data-dependent control flow. "
            f"Create inputs once outside the timed call"
        )
    if decision.case == "new" or baseline is None or decision.change is None:
        # A timing baseline of the same test is not one: counts live in their own environment.
        return (
            f"{label}: {format_count(second)} instructions per call (no instruction-count "
            f"baseline yet; save one with {SAVE}: a timing baseline is not one)"
        )
    floor = (
        f", at least {format_count(MIN_CHANGE)} per call: smaller changes are process-to-process "
        f"noise"
        if decision.limit > max_increase
        else ""
    )
    figures = (
        f"{format_count(decision.per_call)} vs {format_count(baseline.per_call)}; "
        f"limit {max_increase * 100:g}%{floor}"
    )
    message = (
        f"{label}: instructions {decision.change * 100:+.1f}% per call vs baseline ({figures})"
    )
    if decision.counted_twice is not None:
        message += _counted_twice(decision.outcome, *decision.counted_twice)
    if decision.outcome is not Outcome.PASS and decision.why:
        message += "\n  why (self instructions per call vs baseline): " + "; ".join(decision.why)
        if decision.counted_twice is None and all(
            line.split(" ", 1)[0] in LOOKUPS for line in decision.why
        ):
            message += (
                "\n  the functions that moved most are all type-attribute and dict lookups, "
                "which can differ between processes of unchanged code (which types collide in "
                "Python's type cache depends on what the process ran before): run the compare "
                "again before trusting it"
            )
    return message


def _counted_twice(outcome: Outcome, first: float, again: float) -> str:
    """What a message adds where a count above its limit was counted again in a fresh process."""
    if outcome is Outcome.FAIL:
        return (
            f"; counted again in a fresh process: {first * 100:+.1f}% in the run's counting "
            f"process, {again * 100:+.1f}% in the fresh one, above the limit both times"
        )
    return (
        f", as counted again in a fresh process; the run's counting process read "
        f"{first * 100:+.1f}%, most of it in the interpreter's lookups and the allocators: that "
        f"difference was most likely the process's (what it ran before moves Python's type "
        f"cache and the memory allocators' pools), not the code's"
    )


def judge_instructions(
    label: str,
    current: InstructionCount,
    baseline: InstructionCount | None,
    max_increase: float = DEFAULT_MAX_INCREASE,
    recount: InstructionCount | None = None,
) -> InstructionVerdict:
    """Pass, fail, improved, inconclusive or new, with the message a user reads:
    :func:`decide_instructions`, then :func:`word_instructions`."""
    decision = decide_instructions(current, baseline, max_increase, recount)
    message = word_instructions(label, decision, current, baseline, max_increase)
    judged = decision.per_call or current.per_call  # the count itself where none was compared
    first = decision.counted_twice[0] if decision.counted_twice else decision.change
    return InstructionVerdict(decision.outcome, decision.change, message, judged, first)


def repeats(count: InstructionCount) -> bool:
    """The count's two windows agree, so it can be judged and stored as a baseline."""
    return windows_agree(*count.windows)


def effective_limit(baseline_per_call: float, max_increase: float) -> float:
    """The relative limit applied: ``max_increase``, or :data:`MIN_CHANGE` per call where that is
    larger (small targets)."""
    return max(max_increase, MIN_CHANGE / baseline_per_call if baseline_per_call > 0 else 0.0)


def function_changes(
    current: Mapping[str, float], baseline: Mapping[str, float], top: int = TOP_FUNCTIONS
) -> list[str]:
    """The functions whose self instructions per call changed most, largest first:
    ``at::native::cpublas::gemm +2.1 M/call``. A function only one side has counts from zero."""
    deltas = {
        name: current.get(name, 0.0) - baseline.get(name, 0.0)
        for name in set(current) | set(baseline)
    }
    ranked = sorted(
        ((delta, name) for name, delta in deltas.items() if delta), key=lambda t: -abs(t[0])
    )
    return [f"{name} {_signed_count(delta)}/call" for delta, name in ranked[:top]]


def _signed_count(n: float) -> str:
    return ("+" if n > 0 else "-") + format_count(abs(n))
