"""Instruction counts of ``--torchperf-instructions``: taken in the child under Valgrind, read
back by the controlling run, filed under their own environment. Pytest-free.

The child (started by :mod:`pytest_torchperf.kinds.instructions.plugin_runs`) runs the perf tests
with its :class:`CountState` folder set: each measurement's target is called through its usual
preparation (threads, ``eval()``, ``no_grad()``) and counted by
:func:`pytest_torchperf.kinds.instructions.measure_callgrind.count_instructions` instead of timed
(:func:`count_target`), one JSON line per count in the child's file. The controller reads them
(:func:`read_counts`) and judges each against the sessions of the *instruction environment*
(:func:`instruction_environment`): the timing environment plus the Valgrind version and the CPU
capability torch dispatched to under Valgrind, so an instruction save never touches the timing
history and vice versa.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_torchperf.judge.failures import Failure
from pytest_torchperf.kinds.instructions.judge_counts import repeats
from pytest_torchperf.kinds.instructions.measure_callgrind import EXTRA_WINDOWS, InstructionCount
from pytest_torchperf.kinds.instructions.options import CountOptions, CountSettings
from pytest_torchperf.store.environment import INSTRUCTION_ENV_PREFIX, environment_id

if TYPE_CHECKING:
    from pytest_torchperf.measure.timing import Measurer
    from pytest_torchperf.options.measure_options import MeasureOptions
    from pytest_torchperf.run.context import RunContext
    from pytest_torchperf.run.result import Result
    from pytest_torchperf.run.state import Measured, VariantExtra

#: Key of one measurement: (nodeid, measurement name).
Key = tuple[str, str]


@dataclass
class CountState:
    """An instruction-count run's state (``ctx.state(CountState)``): in a child under Valgrind,
    where its profiles go; in the controller, the children's counts by (nodeid, name), what
    counted them (Valgrind version, CPU capability under it, kernel caps), and why a test may
    have no count, by node id (its counting process's failure and log tail); and the counts
    above their limits counted again in a fresh process, by (nodeid, name)
    (:mod:`pytest_torchperf.kinds.instructions.run_recount`)."""

    folder: Path | None = None
    counts: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    counted_with: dict[str, Any] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)
    recounts: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)


def count_target(
    ctx: RunContext, nodeid: str, name: str, measurer: Measurer, options: MeasureOptions
) -> None:
    """In the child under Valgrind: count ``measurer``'s target and write the line, with what
    the controller needs to judge it before its test loop (``options``: its threads and
    limit)."""
    import torch

    from pytest_torchperf.core.child_protocol import CountLine
    from pytest_torchperf.kinds.instructions.measure_callgrind import count_instructions

    folder = ctx.state(CountState).folder
    assert folder is not None and ctx.child_sink is not None
    started = time.time()
    with measurer.prepared():
        count = count_instructions(measurer.call, folder)
    ctx.child_sink.send(
        CountLine(
            nodeid,
            name,
            count.to_record(),
            torch.backends.cpu.get_cpu_capability(),
            # Where the child's time went (CountedTime): wall clock, epoch seconds.
            started=started,
            seconds=time.time() - started,
            device=measurer.device,
            threads=options.threads,
            limit=float(options.value("max_instruction_increase")),
        )
    )


@dataclass(frozen=True)
class CountedTime:
    """Where a counting child's wall time went, in seconds."""

    #: From starting the child to its first count: Python, pytest and ``import torch`` under
    #: Valgrind, collection, the first test's set-up and any tests before it (once per run).
    start_up: float
    #: Inside the counts: warm-up calls, the two counted windows, reading the profiles.
    counting: float
    #: The rest: building the later tests' models and inputs, tests without a count, exit.
    other: float
    #: The longest counts, ``(measurement name, seconds)``, longest first (at most three): what
    #: to leave out of the instruction job (``instructions=False``, ``-k``) when it is too slow.
    slowest: tuple[tuple[str, float], ...] = ()

    def describe(self) -> str:
        """``38 s to the first count (...), 120 s counting, 12 s the rest; longest counts: ...``."""
        text = (
            f"{self.start_up:.0f} s to the first count (start-up, imports, collection, the "
            f"first test's set-up), {self.counting:.0f} s counting, {self.other:.0f} s the rest "
            f"(building models, other tests)"
        )
        # With one count its time is the counting total already.
        if len(self.slowest) > 1:
            text += "; longest counts: " + ", ".join(f"{n} {s:.0f} s" for n, s in self.slowest)
        return text


def counted_time(path: Path, launched: float, ended: float) -> CountedTime | None:
    """Split the child's wall time (``launched``..``ended``) by its count lines; None when it
    wrote none with timings.

    Epoch seconds (``time.time()``), the one clock the child and this process share; a clock
    step between them is clamped away, so the parts never go below zero."""
    from pytest_torchperf.core.child_protocol import CountLine, read_messages

    spans = [
        (line.started, max(0.0, line.seconds), line.name)
        for line in read_messages(path, (CountLine,))
        if line.started is not None and line.seconds is not None
    ]
    if not spans:
        return None
    total = max(0.0, ended - launched)
    start_up = min(total, max(0.0, min(started for started, _, _ in spans) - launched))
    counting = sum(seconds for _, seconds, _ in spans)
    longest = sorted(spans, key=lambda span: -span[1])[:3]
    return CountedTime(
        start_up,
        counting,
        max(0.0, total - start_up - counting),
        tuple((name, seconds) for _, seconds, name in longest),
    )


def read_counts(path: Path) -> tuple[dict[Key, dict[str, Any]], str | None]:
    """The counts a child wrote, by measurement, and the CPU capability torch used under
    Valgrind (a torn or foreign line is skipped)."""
    from pytest_torchperf.core.child_protocol import CountLine, read_messages

    counts: dict[Key, dict[str, Any]] = {}
    capability = None
    for line in read_messages(path, (CountLine,)):
        per_call = line.instructions.get("per_call")
        try:
            if not isinstance(per_call, (int, float, str)) or not float(per_call) > 0:
                continue
        except ValueError:  # a text that is no number
            continue
        counts[(line.nodeid, line.name)] = dict(line.instructions)
        capability = line.capability or capability
    return counts, capability


def instruction_environment(
    environment: Mapping[str, Any], counted_with: Mapping[str, Any]
) -> tuple[str, dict[str, Any]]:
    """The environment instruction counts are filed under: the timing fingerprint of the same
    device and threads plus the Valgrind version and the capability torch saw under it."""
    exact = {**environment["exact"], **counted_with}
    return f"{INSTRUCTION_ENV_PREFIX}{environment_id(exact)}", {**environment, "exact": exact}


def counted(ctx: RunContext, options: MeasureOptions, gate: bool = True) -> bool:
    """This gated measurement is counted under Valgrind by the run's counting children
    (``--torchperf-instructions`` or ``--torchperf-fallback instructions``, and not opted out
    with ``instructions=False``)."""
    return gate and ctx.settings.of(CountSettings).counts and options.of(CountOptions).instructions


def count_fields(ctx: RunContext, m: Measured) -> dict[str, Any]:
    """A counted measurement's own record keys before it is judged: its count (or why there is
    none) and, in the session, what counted it."""
    counting = ctx.state(CountState)
    return {
        "instructions": counting.counts.get((m.nodeid, m.name)),
        "uncounted": counting.problems.get(m.nodeid),
        "recount": counting.recounts.get((m.nodeid, m.name)),
        "session": {"counted_with": counting.counted_with or None},
    }


def attach_count(
    ctx: RunContext,
    nodeid: str,
    name: str,
    extra: VariantExtra | None,
    result: Result,
    comparing: bool,
    *,
    beside_timing: bool = False,
) -> tuple[str, str] | None:
    """The instruction count of a counting run on its Result (and the session a save would
    store). In an instruction-count run a measurement without one fails (a comparing run's
    verdict says so); ``beside_timing`` (``--torchperf-fallback instructions``) stores a count
    that repeats beside the timing, with what counted it, and refuses nothing: time is the gate.
    Returns why the count must not be saved (short, and the warning; "" when the failure says
    it), or None."""
    counting = ctx.state(CountState)
    count = counting.counts.get((nodeid, name))
    if count is None:
        problem = counting.problems.get(nodeid) or "not measured"
        if beside_timing:
            return (
                "no instruction count",
                f"{name}: no instruction count stored beside the timing ({problem}); a compare "
                f"cannot fall back on a count for it until a save stores one",
            )
        if not comparing:
            result.failures.append(
                Failure("instructions", f"{name}: no instruction count: {problem}")
            )
        return ("no instruction count", "")
    result.sections["instructions"] = dict(count)
    if extra is not None and extra.variant != "eager":
        eager = counting.counts.get((nodeid, name.rsplit("[", 1)[0]))
        result.sections["instructions_vs_eager"] = vs_eager(count, eager)
    recount = counting.recounts.get((nodeid, name))
    if recount is not None:
        result.sections["recount"] = dict(recount)
        judged = result.verdict.candidate_statistic if result.verdict is not None else None
        if judged is not None and judged == float(recount["per_call"]) != float(count["per_call"]):
            count = recount  # a save stores the count the verdict judged
    counted = InstructionCount.from_record(count)
    trusted = repeats(counted)  # a count whose windows disagree is no baseline
    if result.session is not None:
        if trusted or not beside_timing:
            result.session = result.session.updated({"instructions": dict(count)})
        if beside_timing:  # the timing environment does not say how it was counted
            result.session = result.session.updated({"counted_with": dict(counting.counted_with)})
    if not trusted:
        first, second = counted.windows
        what = "instruction count not stored beside the timing" if beside_timing else "not saved"
        return (
            "counted windows disagree",
            f"{name}: {what}: the two counted windows disagree by "
            f"{counted.disagreement * 100:.2f}% ({first:,.0f} vs {second:,.0f} instructions per "
            f"call; up to {EXTRA_WINDOWS} more are counted where two disagree): the calls do "
            f"not repeat the same work (inputs created per call, lazy initialisation); create "
            f"inputs once outside the timed call",
        )
    return None


def vs_eager(count: Mapping[str, Any] | None, eager: Mapping[str, Any] | None) -> float | None:
    """A variant's instructions per call as a multiple of eager's (None without both)."""
    if not count or not eager or not eager.get("per_call"):
        return None
    return float(count["per_call"]) / float(eager["per_call"])
