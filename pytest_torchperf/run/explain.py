"""What a live run adds to a verdict beyond the comparison engine: the profiled op diff of a
confirmed slowdown, where on the graph the time grew (``--torchperf-graph``), the op table
stored with a baseline, and the opt-in cross-machine comparison.
Each function takes what it needs explicitly (the store, the report folder, the measurer).
Pytest-free; torch is imported lazily by the profiling it calls.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_torchperf.core.units import format_time
from pytest_torchperf.judge.counter_diff import compared_counters, diff_counters, newest_counters
from pytest_torchperf.judge.samples import GuardLimits, Sample
from pytest_torchperf.options.measure_options import MeasureOptions
from pytest_torchperf.options.values import COUNTER_NAMES
from pytest_torchperf.store.sessions import Session, timed_sessions

if TYPE_CHECKING:
    from pytest_torchperf.judge.compare import Comparison
    from pytest_torchperf.measure.timing import Measurer
    from pytest_torchperf.run.context import RunContext
    from pytest_torchperf.run.state import Measured, TestState
    from pytest_torchperf.store.baselines import BaselineStore


def add_live(
    ctx: RunContext,
    state: TestState,
    m: Measured,
    comparison: Comparison,
    sessions: Sequence[Session],
    first: Sample,
    env_id: str,
    environment: dict[str, Any],
    explainable: bool,
) -> None:
    """Add to ``comparison`` what only a live run can, once the engine has judged: a profile of
    a confirmed slowdown and where on the graph it grew (``explainable``: the kind whose figure
    decided says a profile of this call explains it), and another machine's counters
    (``--torchperf-cross-machine``) of a measurement new in this environment (``env_id``)."""
    from pytest_torchperf.judge.compare import no_comparable_baseline
    from pytest_torchperf.judge.cross_machine import compared_instead
    from pytest_torchperf.judge.node_changes import growth_line
    from pytest_torchperf.judge.outcome import Outcome
    from pytest_torchperf.run.steps import graph_beside_baseline

    verdict = comparison.verdict
    if verdict.outcome is Outcome.FAIL and explainable:
        comparison.explanation = explain_slowdown(
            ctx.settings.report_dir,
            m.measurer,
            sessions,
            m.nodeid,
            m.name,
            comparison.sample,
            m.counters,
            # A kind that keeps no baseline (an A/B run) was judged against side A.
            against="baseline" if comparison.save else "side A",
        )
    if m.graph is not None:  # --torchperf-graph: the baseline's node figures beside this run's
        m.graph = graph_beside_baseline(ctx, m.graph, m.name, sessions)
        grew = growth_line(m.name, m.graph) if verdict.outcome is Outcome.FAIL else None
        if grew and explainable:
            # Where to see it: the run's graph travels in its results file only.
            results = ctx.settings.results_file
            draw = (
                f"torchperf graph {results} -k {m.name} draws it"
                if results
                else "add --torchperf-json PATH to draw it with torchperf graph PATH"
            )
            comparison.explanation = [*comparison.explanation, f"{grew} ({draw})"]
    if verdict.outcome is Outcome.NEW and ctx.settings.cross_machine:
        across = cross_machine(
            ctx.store, env_id, environment, m.nodeid, m.name, first, m.counters, m.options
        )
        comparison.counter_changes = across.changes
        if across.counters_gated and "counters" not in comparison.gated:
            comparison.gated = [*comparison.gated, "counters"]
        verdict = replace(verdict, notes=(*verdict.notes, *across.notes))
        # Only a measurement whose baselines are all another environment's ("no comparable
        # baseline"): one stored here without timing was compared here, as it says.
        if across.env_id and verdict.new_reason and not verdict.untimed:
            reason = compared_instead(verdict.new_reason, across.env_id, across.not_compared)
            save = comparison.save or "pytest --torchperf-save"
            verdict = no_comparable_baseline(verdict, m.name, reason, save)
        comparison.verdict = verdict
        state.warnings.extend(across.warnings)


def profile_iterations(sample: Sample) -> int:
    """Enough profiled calls to cover ~0.2 s (3..100), so per-call op times are steady."""
    return max(3, min(100, int(0.2 / max(sample.statistic, 1e-9))))


def baseline_top_ops(
    measurer: Measurer, sample: Sample, state: "TestState", name: str
) -> list[dict[str, Any]] | None:
    """Op table stored with a saved session, to explain later slowdowns (None if profiling fails)."""
    try:
        rows, _ = measurer.profile(profile_iterations(sample))
    except Exception as exc:  # noqa: BLE001 - a profiler problem must not lose the baseline
        state.warnings.append(f"{name}: op table not stored (profiling failed: {exc})")
        return None
    return [
        {
            **row,
            "self_cpu": float(f"{row['self_cpu']:.4g}"),
            "self_device": float(f"{row['self_device']:.4g}"),
        }
        for row in rows
    ]


def explain_slowdown(
    report_dir: Path,
    measurer: Measurer,
    sessions: Sequence[Session],
    nodeid: str,
    name: str,
    sample: Sample,
    counters: Mapping[str, Any] | None = None,
    against: str = "baseline",
) -> list[str]:
    """Profile the target once more (after timing) and name the ops that got slower
    (``counters``: this run's, read beside the baseline's; ``against``: what the sessions are,
    ``side A`` in an A/B run)."""
    from pytest_torchperf.measure.op_tables import diff_top_ops, median_top_ops
    from pytest_torchperf.measure.profiling import trace_path

    path = trace_path(report_dir / "traces", nodeid, f"{name}-regression")
    try:
        rows, _ = measurer.profile(profile_iterations(sample), path)
    except Exception as exc:  # noqa: BLE001 - the verdict stands even if profiling breaks
        return [f"  (could not profile the slowdown: {type(exc).__name__}: {exc})"]
    stored = median_top_ops([list(s.top_ops) for s in sessions if s.top_ops])
    if stored:
        before = [s.statistic for s in timed_sessions(sessions) if s.statistic]
        slowdown = sample.statistic - statistics.median(before) if before else None
        stored_counters = newest_counters([s.counters for s in sessions])
        diffs = diff_top_ops(stored, rows, slowdown, (stored_counters, counters))
        why = (
            "; ".join(diffs)
            if diffs
            else "no op grew in the profile (the slowdown may be outside torch ops: Python, data, "
            "allocator or machine)"
        )
        lines = [f"  why (profiled, self time per call vs {against}): {why}"]
    else:
        top = ", ".join(
            f"{r['op']} {format_time(r['self_cpu'] + r['self_device'])}" for r in rows[:3]
        )
        whose = "stored with the baseline" if against == "baseline" else f"from {against}"
        lines = [f"  top ops now (no op table {whose} to compare): {top}"]
    return [*lines, f"  trace: {path}"]


@dataclass
class CrossMachine:
    """What ``--torchperf-cross-machine`` found for a measurement new here."""

    #: The stored environment compared with (None: none holds this measurement).
    env_id: str | None = None
    #: Counter changes against it, which fail the test as within one environment.
    changes: list[str] = field(default_factory=list)
    #: Whether its counters were compared (same torch build, counters on both sides).
    counters_gated: bool = False
    #: Why they were not, where they were not.
    not_compared: str | None = None
    #: The normalised time (a hint) and the changes reported but not gated.
    notes: list[str] = field(default_factory=list)
    #: A normalised slowdown beyond the warning limit, or why nothing could be compared.
    warnings: list[str] = field(default_factory=list)


def cross_machine(
    store: "BaselineStore",
    env_id: str,
    environment: dict[str, Any],
    nodeid: str,
    name: str,
    sample: Sample,
    counters: dict[str, Any] | None,
    options: MeasureOptions,
) -> CrossMachine:
    """``--torchperf-cross-machine``: note (or, beyond its limit, warn on) the normalised time,
    gate counters of the same build; changes of CPU-class-dependent counters are noted, not
    gated (:func:`~pytest_torchperf.judge.cross_machine.gated_across`)."""
    from pytest_torchperf.judge.cross_machine import (
        cpu_class_difference,
        gated_across,
        normalised_check,
        pick_environment,
        same_torch_build,
    )
    from pytest_torchperf.store.baselines import BaselineFileError

    # Another environment's: this one's sessions (stored without timing) were compared already.
    others = [(e, env) for e, env in store.environments_with(nodeid, name) if e != env_id]
    picked = pick_environment(environment["exact"], others)
    if picked is None:
        return CrossMachine()
    other, stored_env = picked
    try:
        sessions = store.load_sessions(other, nodeid, name)
    except BaselineFileError as exc:
        return CrossMachine(warnings=[f"{name}: cross-machine comparison skipped: {exc}"])
    if not sessions:
        return CrossMachine()
    across = CrossMachine(other)
    disturbed = GuardLimits.of(options).problem(sample)
    timing, warn = normalised_check(
        sample.statistic, sample.calibration, sessions, other, disturbed=disturbed
    )
    # The figure is the summary's either way (a warning alone left only the `new` line's "time
    # only a hint" there); beyond the warning limit it is a warning too.
    across.notes.append(timing)
    if warn:
        across.warnings.append(f"{name}: {timing}")
    stored_exact = stored_env.get("exact")
    if not isinstance(stored_exact, Mapping):
        stored_exact = {}
    stored_counters = newest_counters([s.counters for s in sessions])
    if counters is None or stored_counters is None:
        across.not_compared = "no counters on one side"
        return across
    if not same_torch_build(environment["exact"], stored_exact):
        across.not_compared = "another torch build"
        return across
    class_difference = cpu_class_difference(environment["exact"], stored_exact)
    informational = gated_across(counters, class_difference)
    # Gated only where a counter both sides hold is compared (not every one ignored).
    ignored = (*options.ignore_counters, *informational)
    across.counters_gated = bool(compared_counters(stored_counters, counters, ignored))
    if not across.counters_gated:
        across.not_compared = "every counter both hold is ignored"
    if informational:
        shown = diff_counters(
            stored_counters, counters, [c for c in COUNTER_NAMES if c not in informational]
        )
        if shown:
            across.notes.append(
                f"not gated: {'; '.join(shown)} vs {other}: this measurement runs low-precision or "
                f"quantized code, whose ops and kernels torch and torchao choose by the CPU's "
                f"instruction sets, and the CPU class differs ({class_difference}). Save a "
                f"baseline on this machine class (pytest --torchperf-save) to gate them"
            )
    across.changes = [
        f"{change} (vs {other}, same torch build)"
        for change in diff_counters(
            stored_counters, counters, (*options.ignore_counters, *informational)
        )
    ]
    return across
