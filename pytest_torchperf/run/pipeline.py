"""One measurement, from the target to its Result and baseline write, as functions of explicit
inputs (a :class:`~pytest_torchperf.run.context.RunContext`, the test's
:class:`~pytest_torchperf.run.state.TestState`, the measurement). Pytest-free.

:func:`measure`: [compiled target: graph counters] -> outputs checked once -> counters -> first
timed pass (calibration blocks interleaved, under the cross-worker timing lock) ->
:func:`conclude`: pooled with other processes -> compared (:func:`pytest_torchperf.judge.compare`)
-> explained (:func:`pytest_torchperf.run.explain.add_live`) -> written for a controlling process
(child runs) -> Result -> save queued. Warnings are queued on the test's state; the plugin emits
them at the test's location.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pytest_torchperf.core.child_protocol import SampleLine
from pytest_torchperf.judge.compare import Candidate, Comparison, Where, compare
from pytest_torchperf.judge.decision import CONFIRMATIONS
from pytest_torchperf.judge.failures import Failure, categories_of
from pytest_torchperf.judge.samples import Sample, pooled, trusted
from pytest_torchperf.run import explain
from pytest_torchperf.run.children import fresh_confirmer, fresh_speedups
from pytest_torchperf.run.context import RunContext
from pytest_torchperf.run.kinds import (
    check_measurable,
    explains_slowdown,
    gate_of,
    keeping_of,
    kind_fields,
    measure_beside,
    role_of,
    run_refusal,
)
from pytest_torchperf.run.result import Result
from pytest_torchperf.run.roles import Request
from pytest_torchperf.run.saving import (
    calibration_references,
    other_code_since_stored,
    queue_save,
    save_guard,
    session_record,
)
from pytest_torchperf.run.state import Call, Measured, TestState, VariantExtra
from pytest_torchperf.run.steps import (
    check_not_profiling,
    claim_name,
    counters_of,
    graph_of,
    sampler,
)
from pytest_torchperf.store.baselines import shown
from pytest_torchperf.store.graphs import stored_nodes, stored_structure

# -- one plain measurement --------------------------------------------------------------------


def measure(
    ctx: RunContext,
    state: TestState,
    call: Call,
    device: str | None = None,
    *,
    gate: bool = True,
    source: str = "torchperf",
) -> Result:
    """Measure the ``call``'s target (see module docstring).

    ``gate=False`` (the ``torchperf_timer`` default) records the measurement without comparing
    or saving it.
    """
    __tracebackhide__ = True
    from pytest_torchperf.measure.accuracy import output_fingerprint, user_metric
    from pytest_torchperf.measure.counters import compiled_original, dynamo_graph_total
    from pytest_torchperf.measure.timing import Measurer

    nodeid, name, target, options = call.nodeid, call.name, call.target, call.options
    check_not_profiling(ctx, nodeid, name)
    claim_name(state, nodeid, name, source)
    # Ungated timer measurements are never compared, so they skip the calibration blocks.
    measurer = Measurer(
        target, call.inputs, dict(call.kwargs), options, device=device, calibrate=gate
    )
    check_measurable(ctx, options, measurer.device, name, gate)
    # What this process does with it (runs it once, counts it, reads what the A/B sides
    # measured, or times it here) is its role's business: run/roles.py.
    role = role_of(ctx)
    obtained = role.obtain(ctx, state, Request(nodeid, name, measurer, options, source, gate))
    if isinstance(obtained, Measured):
        return conclude(ctx, state, obtained)
    if obtained is not None:
        return obtained
    if gate:
        role.prepare(ctx, measurer, nodeid, name)

    eager = compiled_original(target) if options.counters else None
    # explain() resets dynamo's caches process-wide; skipped when graph counters are opted out.
    count_graphs = eager is not None and "graphs" not in options.ignore_counters
    graph = measurer.graph_counters(eager) if count_graphs and eager is not None else {}
    output = measurer.check_outputs(name)
    counters, again = counters_of(measurer, options, eager)
    counters = None if counters is None else {**counters, **graph}
    extra = None
    if source == "torchperf":
        extra = VariantExtra(
            "eager",
            fingerprint=output_fingerprint(output, again, measurer),
            metric=user_metric(measurer, options, name),
            limits=options.accuracy_limits("eager"),
        )
    graphs_before = dynamo_graph_total() if count_graphs else 0
    clock: list[str] = []
    take_sample = sampler(ctx, measurer, clock)
    first = take_sample()
    if counters is not None and count_graphs:
        counters["recompiles"] = dynamo_graph_total() - graphs_before
    measured = Measured(
        nodeid,
        name,
        measurer,
        options,
        counters,
        first,
        take_sample,
        clock,
        gate=gate,
        source=source,
        extra=extra,
    )
    measure_beside(ctx, measured)
    if ctx.settings.graph and gate and source == "torchperf" and not ctx.settings.child:
        # Kept as the plain dict its file has: a compare adds to it (judge.node_changes).
        measured.graph = dict(graph_of(measurer))
    if measurer.clocks_unchecked:
        ctx.warn_once(measurer.clocks_unchecked)  # it holds for every CUDA measurement
    return conclude(ctx, state, measured)


# -- judging, the Result, the save ------------------------------------------------------------


def conclude(ctx: RunContext, state: TestState, m: Measured) -> Result:
    """Judge a measured target against its baseline, build the Result, queue the baseline write."""
    env_id, environment = ctx.environment(m.measurer.device, m.options.threads)
    role = role_of(ctx)
    comparing = role.judges(ctx) and m.gate
    saving = ctx.settings.save and m.gate
    others = ctx.process_pool.get((m.nodeid, m.name), []) if m.gate else []
    # What is kept of it, and where (time, a count, a count beside time): run/kinds.py.
    keeping = keeping_of(ctx, m.options, m.measurer.device, m.gate)
    env_id, environment = keeping.environment(ctx, env_id, environment)
    passes = [m.first]

    def take_sample() -> Sample:
        sample = m.take_sample()
        passes.append(sample)  # every pass is reported, so an offline judge sees the same data
        return pooled(sample, others) if others else sample

    first = pooled(m.first, others) if others else m.first
    references = (
        calibration_references(
            ctx,
            env_id,
            m.nodeid,
            m.name,
            processes=[m.first.calibration, *(o.calibration for o in trusted(others))]
            if others
            else (),
        )
        if saving and keeping.guards_time
        else []
    )
    unfit = save_guard(m.options, references) if keeping.guards_time else (lambda sample: None)
    # A save of other code than the stored sessions' fails and stores nothing (nor does one whose
    # variant failed its checks): known before a retry would wait up to --torchperf-save-wait for
    # a quiet machine to time what is not kept (a changed MLP's save took 68 s beside load, 8 s
    # without the wait), in this process and in each of the save's fresh processes.
    other = (
        other_code_since_stored(ctx, m, env_id)
        if m.gate and not comparing and keeping.guards_time
        else None
    )
    doomed = other is not None or bool(m.extra and m.extra.failures)
    final, comparison = first, None
    if comparing:
        comparison = _compare(
            ctx, state, m, first, take_sample, passes, env_id, environment, others
        )
        final = comparison.sample
    elif (saving or role.retries_unfit) and not doomed and unfit(first):
        # A contaminated baseline would poison every later comparison: measure again, after
        # waiting for a busy machine to quiet down (within the save's budget).
        # Under xdist it waits holding the workers' lock, so the other workers' tests (which
        # would count as load) finish and no new one starts.
        with ctx.timing_lock(m.measurer.device):
            final = ctx.quiet.retry(
                take_sample,
                unfit,
                m.options.max_neighbour_load,
                crowded=lambda sample: bool(sample.crowded),
            )
    result = _result(ctx, m, final, comparison, passes, others, env_id, environment)
    if m.gate:  # to whoever needs it: a controller's file, the A/B pairs behind the verdict
        role.report(ctx, state, m, final, result)
    unsaved = keeping.attach(ctx, state, m, result, comparing, saving) or run_refusal(ctx, m)
    state.results.append(result)
    if saving and unsaved:
        result.not_saved = unsaved[0]
        if unsaved[1]:
            state.warnings.append(unsaved[1])
    elif other is not None and not ctx.settings.child:  # a child's controller says it
        # The test fails on them, so it stores nothing. (A count's baseline is the latest count
        # alone: not checked.)
        result.counter_changes, result.other_code = other.changes, True
        if other.moved:
            moved = result.other_outputs_message(other.moved, other.counted)
            result.failures.append(Failure("numerics", moved))
    elif saving and not result.failures and (comparison is None or comparison.saveable):
        queue_save(ctx, state, m, result, final, others, unfit, len(passes), env_id, environment)
    if final.calibration and m.measurer.device.startswith("cpu"):
        ctx.calibrations.append(final.calibration)
    return result


def _compare(
    ctx: RunContext,
    state: TestState,
    m: Measured,
    first: Sample,
    take_sample: Callable[[], Sample],
    passes: list[Sample],
    env_id: str,
    environment: dict[str, Any],
    others: list[SampleLine],
) -> Comparison:
    """The comparison engine on live passes, then what only a live run can add: the other
    machine's counters (``--torchperf-cross-machine``) and a profile of a confirmed slowdown."""
    from pytest_torchperf.measure.timing import CALIBRATION_KERNEL

    role = role_of(ctx)
    sessions = role.baseline(ctx, m.nodeid, m.name, env_id)
    extra = m.extra or VariantExtra("eager")  # a torchperf_timer block's has no variant
    # Confirming passes are single fresh processes, pooled mode included: the children already
    # pooled into the first pass cannot confirm it a second time.
    fresh = ctx.fresh_runs
    confirm_speedups = fresh_speedups(fresh, m.nodeid, m.name, CONFIRMATIONS)
    confirmed: list[dict[str, float] | None] = []

    def recorded_speedups() -> list[dict[str, float] | None]:
        # Kept in the record, so `torchperf compare` replays the same confirmation.
        confirmed.extend(confirm_speedups() if confirm_speedups is not None else [])
        return confirmed

    run_failures = list(extra.failures)
    # The keys of the measurement's record the engine reads (the session a save would store,
    # the run's own findings), converted as a replay converts them.
    own, own_session = kind_fields(ctx, m)
    candidate = Candidate.from_record(
        first,
        {
            "name": m.name,
            "session": {
                "counters": m.counters,
                "variant": extra.variant,
                "speedup": extra.speedup,
                "fingerprint": extra.fingerprint,
                "metric": extra.metric,
                "accuracy_limits": (extra.limits or m.options.accuracy_limits(extra.variant))
                if m.extra
                else None,
                "calibration_kernel": CALIBRATION_KERNEL if first.calibration else None,
                **m.beside,
                **own_session,
            },
            "accuracy": extra.accuracy,
            "run_failures": run_failures,
            "run_failure_kinds": categories_of(run_failures),
            **own,
        },
    )
    where = Where(
        env_id,
        environment["exact"],
        shown(ctx.store.module_file(env_id, m.nodeid)),
        shown(ctx.store.root),
        storage_missing=not ctx.store.root.exists(),
        nodeid=m.nodeid if ctx.settings.ids_from_here else "",
        others=lambda: ctx.store.environments_with(m.nodeid, m.name),
        gone=lambda: [
            t for t in ctx.store.tests_with(env_id, m.nodeid, m.name) if not state.exists(t)
        ],
    )
    comparison = compare(
        candidate,
        sessions,
        gate_of(ctx, m.options, m.measurer.device),
        remeasure=take_sample,
        confirm=fresh_confirmer(fresh, m.nodeid, m.name, m.measurer.device, passes),
        confirm_speedups=recorded_speedups if confirm_speedups else None,
        where=where,
    )
    extra.confirm_speedups = confirmed
    verdict = comparison.verdict
    state.warnings.extend(comparison.pytest_warnings(m.name))
    # The kind whose figure decided says whether a profile of this call explains it.
    explainable = explains_slowdown(verdict.basis, extra.variant)
    explain.add_live(ctx, state, m, comparison, sessions, first, env_id, environment, explainable)
    return comparison


def _result(
    ctx: RunContext,
    m: Measured,
    final: Sample,
    comparison: Comparison | None,
    passes: list[Sample],
    others: list[SampleLine],
    env_id: str,
    environment: dict[str, Any],
) -> Result:
    verdict = comparison.verdict if comparison is not None else None
    run_failures = list(m.extra.failures) if m.extra else []
    result = Result(
        name=m.name,
        nodeid=m.nodeid,
        samples=list(final.times),
        number_per_block=m.measurer.number_per_block or 0,
        device=m.measurer.device,
        threads=m.options.threads,
        cpu_share=final.cpu_share,
        neighbour_load=None if final.neighbour_load is None else round(final.neighbour_load, 3),
        queued_share=None if final.queued_share is None else round(final.queued_share, 4),
        environment_id=env_id,
        verdict=verdict,
        group=m.options.group,
        summary=final.summary,
        options=m.options,
        counters=m.counters,
        counter_changes=comparison.counter_changes if comparison is not None else [],
        source=m.source,
        clock=m.clock[-1],
        calibration=final.calibration,
        failures=comparison.failures if comparison is not None else run_failures,
        run_id=ctx.run_id,
        run_failures=run_failures,
        # Full precision: `torchperf compare` must replay the very same figures. A fresh
        # confirming pass was judged alone, so it is not pooled with the children on replay.
        passes=[
            {
                "times": list(p.times),
                "cpu_share": p.cpu_share,
                "calibration": p.calibration,
                "neighbour_load": p.neighbour_load,
                "queued_share": p.queued_share,
                "fresh": p.fresh,
                "gpu_clock": p.gpu_clock.to_record() if p.gpu_clock else None,
                "settle": p.settle,
                "process_statistics": [] if p.fresh else [s.statistic for s in trusted(others)],
                "process_calibrations": []
                if p.fresh
                else [s.calibration for s in trusted(others) if s.calibration],
            }
            for p in passes
        ],
        processes=[*final.process_statistics, final.summary.p25]
        if final.process_statistics
        else [],
        **(m.extra.facts() if m.extra is not None else {}),
    )
    if comparison is not None:
        result.explanation = list(comparison.explanation)
        result.gated = list(comparison.gated)
        result.save_command = comparison.save or result.save_command
    if m.gate and result.summary is not None:
        # What --torchperf-save would store: shipped in reports so `torchperf accept` can
        # promote this very measurement to a baseline later.
        session = session_record(ctx, result, m.options).updated(m.beside)
        if final.gpu_clock is not None:  # the GPU's clocks while it was timed, for the reader
            session = session.updated({"gpu_clock": final.gpu_clock.to_record()})
        if final.settle is not None:  # and how long it settled first
            session = session.updated({"settle": final.settle})
        if m.extra is not None:
            session = session.updated(m.extra.record())
        if m.graph is not None and m.graph.get("exported"):
            session = session.updated(
                {"nodes": stored_nodes(m.graph), "graph": stored_structure(m.graph)}
            )
        result.session = session
        result.environment = environment
    result.graph = m.graph
    return result
