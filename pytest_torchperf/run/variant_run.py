"""Measuring the variants of one target side by side (``variants=[...]``).

Eager fp32 is the reference: its outputs are what every variant's accuracy is checked against,
and its blocks are interleaved with every variant's, so speedups are same-moment ratios. The
steps: :func:`_reference` (eager's graph counters, outputs, counters, fingerprint, metric) ->
:func:`_build` (each variant built, its outputs checked against eager's) -> :func:`_time` (all of
them timed round-robin) -> each listed variant concluded like a plain measurement
(:func:`pytest_torchperf.run.pipeline.conclude`) with a :class:`~pytest_torchperf.run.state.
VariantExtra` carrying its build facts, speedup, accuracy, fingerprint and metric. Building the
variants themselves is :mod:`pytest_torchperf.variants.builders`' job. Pytest-free.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from pytest_torchperf.core.stats import summarize
from pytest_torchperf.core.types import Target, UserValue
from pytest_torchperf.core.units import format_time
from pytest_torchperf.judge.failures import Failure
from pytest_torchperf.judge.samples import GuardLimits
from pytest_torchperf.measure.accuracy import output_fingerprint, user_metric
from pytest_torchperf.measure.counters import compiled_original, dynamo_graph_total
from pytest_torchperf.run.context import RunContext
from pytest_torchperf.run.kinds import check_measurable, measure_beside, role_of
from pytest_torchperf.run.pipeline import conclude
from pytest_torchperf.run.result import Result
from pytest_torchperf.run.state import (
    Call,
    Measured,
    MeasurementSkipped,
    TestState,
    VariantExtra,
    VariantPlan,
)
from pytest_torchperf.run.steps import (
    check_not_profiling,
    claim_name,
    counters_of,
    graph_of,
    model_ops,
    sampler,
    to_sample,
)
from pytest_torchperf.variants.registry import COMPILED_VARIANTS

if TYPE_CHECKING:  # torch (which timing imports) is imported lazily
    from pytest_torchperf.measure.sampling import RawSamples
    from pytest_torchperf.measure.timing import Measurer


class VariantSkipped(MeasurementSkipped):
    """The only variant a test asked for cannot exist here; the test is skipped with this reason."""


class VariantFailed(Exception):
    """The only variant a test asked for could not be built from the user's model, or its
    outputs were NaN/inf."""


def _counting_recompiles(
    runner: Callable[[int], float], tally: dict[str, int], key: str
) -> Callable[[int], float]:
    """Wrap a block runner so graphs dynamo compiles during its blocks are counted under ``key``."""

    def run(number: int) -> float:
        before = dynamo_graph_total()
        try:
            return runner(number)
        finally:
            tally[key] += dynamo_graph_total() - before

    return run


def measure_variants(
    ctx: RunContext, state: TestState, call: Call, variants: Sequence[str]
) -> dict[str, Result]:
    """Measure ``variants`` of the ``call``'s target side by side; returns variant -> Result.

    Eager fp32 is always run as the reference (outputs for accuracy, interleaved blocks for
    speedups) even when not listed; only listed variants get results, verdicts and baselines.
    A variant that cannot exist here is left out with a warning (or raises
    :class:`VariantSkipped` when it is the only one, so the test is skipped with the reason).
    """
    __tracebackhide__ = True
    from pytest_torchperf.measure.timing import Measurer

    nodeid, name, options = call.nodeid, call.name, call.options
    plan = VariantPlan(
        nodeid,
        name,
        options,
        variants,
        {v: name if v == "eager" else f"{name}[{v}]" for v in variants},
    )
    check_not_profiling(ctx, nodeid, name)
    for label in plan.labels.values():
        claim_name(state, nodeid, label)
    eager = Measurer(call.target, call.inputs, dict(call.kwargs), options)
    check_measurable(ctx, options, eager.device, name)
    # Whether this process builds and times the variants (or runs the target once, counts them,
    # reads what the A/B sides measured) is its role's business: run/roles.py.
    role = role_of(ctx)
    obtained = role.obtain_variants(ctx, state, plan, eager)
    if obtained is not None:
        return {
            v: conclude(ctx, state, got) if isinstance(got, Measured) else got
            for v, got in obtained.items()
        }
    state.built_variants = state.built_variants or any(v != "eager" for v in variants)
    reference = _reference(plan, eager, call.target)
    _build(ctx, state, plan, eager, call, reference)
    measured = role.measure_built(ctx, state, plan)
    if measured is not None:
        return measured
    raws = _time(ctx, plan, eager, role.turn(ctx, nodeid, name))
    return _conclude_each(ctx, state, plan, raws)


def _reference(plan: VariantPlan, eager: Measurer, target: Target) -> UserValue:
    """Eager's graph counters, checked outputs, counters, fingerprint and metric."""
    options = plan.options
    plan.count_graphs = (
        options.counters
        and "graphs" not in options.ignore_counters
        and any(v in COMPILED_VARIANTS for v in plan.variants)
    )
    # explain() must run before anything is compiled: it invalidates dynamo's cache entries.
    plan.graph = eager.graph_counters(target) if plan.count_graphs else {}
    label = plan.labels.get("eager", f"{plan.name}[eager reference]")
    reference = eager.check_outputs(label)
    # The counted call is the fingerprint's second (determinism): counting costs only the
    # dispatch modes' overhead. Eager's counters are judged where eager is listed; the other
    # variants keep its ops (``model_ops``), which a variant-only test (``test_x[amp]``) counts
    # alone (no FLOP formulas: the ops cost about a call; all counters cost about two).
    # A target already torch.compile'd is counted on its eager original, as a plain one is.
    original = compiled_original(target)
    counters, again = counters_of(eager, options, original, ops_only="eager" not in plan.variants)
    plan.model_ops = model_ops(counters, options)
    plan.extras["eager"] = VariantExtra(
        "eager",
        counters=counters if "eager" in plan.variants else None,
        fingerprint=output_fingerprint(reference, again, eager),
        metric=user_metric(eager, options, label),
        limits=options.accuracy_limits("eager"),
    )
    plan.measurers["eager"] = eager
    return reference


def _build(
    ctx: RunContext,
    state: TestState,
    plan: VariantPlan,
    eager: Measurer,
    call: Call,
    reference: UserValue,
) -> None:
    """Build every other variant, check its outputs against eager's, keep its facts."""
    import torch

    from pytest_torchperf.judge.numerics import check_limits, unjudged_numerics
    from pytest_torchperf.measure.accuracy import OutputMismatchError, compare_outputs, fingerprint
    from pytest_torchperf.measure.timing import Measurer, NonFiniteOutputError
    from pytest_torchperf.variants.builders import (
        VariantBuildError,
        VariantUnavailable,
        build_variant,
    )

    options, target = plan.options, call.target
    device_type = torch.device(eager.device).type
    module = target if isinstance(target, torch.nn.Module) else None
    for variant in plan.variants:
        if variant == "eager":
            continue
        label = plan.labels[variant]
        try:
            built = build_variant(
                variant,
                options.variant_settings(variant),
                target,
                call.inputs,
                call.kwargs,
                device_type,
                eager.prepared,
            )
        except VariantUnavailable as exc:
            role_of(ctx).variant_unavailable(ctx, plan.nodeid, label, str(exc))
            if len(plan.variants) == 1:
                raise VariantSkipped(f"{label}: not measured: {exc}") from None
            state.skipped[label] = str(exc)
            state.warnings.append(f"{label}: not measured: {exc}")
            continue
        except VariantBuildError as exc:
            message = f"{label}: could not be built: {exc}"
            plan.failed[variant] = failed_variant(ctx, state, plan, variant, eager.device, message)
            if len(plan.variants) == 1:
                raise VariantFailed(message) from None
            continue
        measurer = Measurer(
            built.target,
            call.inputs,
            dict(call.kwargs),
            options,
            device=eager.device,
            module=module,
        )
        try:
            output = measurer.check_outputs(label)
        except NonFiniteOutputError as exc:
            plan.failed[variant] = failed_variant(ctx, state, plan, variant, eager.device, str(exc))
            if len(plan.variants) == 1:  # the model's bug in one line, not our frames
                raise VariantFailed(str(exc)) from None
            continue
        extra = VariantExtra(
            variant,
            build_time=built.build_time,
            method=built.method,
            notes=list(built.notes),
            evidence=built.evidence,
        )
        extra.limits = options.accuracy_limits(variant, built.amp_dtype, str(eager.device))
        try:
            extra.accuracy = compare_outputs(reference, output)
            extra.failures += [
                Failure("accuracy", problem)
                for problem in check_limits(
                    label, extra.accuracy, extra.limits, caveat=built.accuracy_caveat
                )
            ]
            unjudged = None if extra.failures else unjudged_numerics(label, extra.accuracy)
            if unjudged:
                state.warnings.append(unjudged)
        except OutputMismatchError as exc:
            extra.failures.append(Failure("accuracy", f"{label}: {exc}"))
        if built.build_time > options.max_compile_time:
            extra.failures.append(
                Failure(
                    "compile time",
                    f"{label}: building the variant took {format_time(built.build_time)} ({built.method}), "
                    f"above max_compile_time {format_time(options.max_compile_time)}. A cold inductor "
                    f"compile of resnet18 takes ~25 s on 2 CPU cores; raise max_compile_time if "
                    f"this model is expected to compile slowly",
                )
            )
        extra.fingerprint = fingerprint(output) if plan.extras["eager"].fingerprint else None
        extra.metric = user_metric(measurer, options, label)
        if variant in COMPILED_VARIANTS and plan.count_graphs:
            extra.counters = dict(plan.graph)
        if plan.model_ops is not None:
            extra.counters = {**(extra.counters or {}), "model_ops": plan.model_ops}
        plan.measurers[variant] = measurer
        plan.extras[variant] = extra


def _time(
    ctx: RunContext, plan: VariantPlan, eager: Measurer, turn: Callable[[], None] | None
) -> dict[str, RawSamples]:
    """Time eager and every built variant round-robin (one block of each per round); ``turn``
    (the role's) is awaited before each round, and where there is one no calibration blocks are
    timed."""
    from pytest_torchperf.measure.sampling import collect_interleaved, round_ratios
    from pytest_torchperf.measure.timing import calibration_kernel, neighbours_for, prepared

    runners: dict[str, Callable[[int], float]] = {}
    recompiles = dict.fromkeys(plan.measurers, 0)
    clock_name = "cpu"
    for variant, measurer in plan.measurers.items():
        runner, clock_name = measurer.block_runner(per_block_state=True)
        runners[variant] = (
            _counting_recompiles(runner, recompiles, variant)
            if variant in COMPILED_VARIANTS
            else runner
        )
    calibrate = None
    if clock_name == "cpu" and turn is None:
        kernel = calibration_kernel()

        def calibrate(number: int) -> float:
            with prepared(kernel, plan.options):
                return kernel(number)

    plan.clock_name = clock_name
    with ctx.timing_lock(eager.device):
        raws = collect_interleaved(
            runners,
            min_time=plan.options.min_time,
            warmup=plan.options.warmup,
            calibrate=calibrate,
            neighbours=neighbours_for(eager.device),
            turn=turn,
        )
    required = dict(plan.options.min_speedup)
    # A speedup is as trustworthy as the rounds it was timed in: where a guard refuses eager's
    # blocks or the variant's, no session stores it (the timing a save then measures again is
    # the variant's alone, not interleaved). An A/B side's rounds (taking turns) are judged by
    # their pairs, not by the guards.
    guard = GuardLimits.of(plan.options).problem
    on_cpu = eager.device.startswith("cpu")

    def refused(name: str) -> str | None:
        return None if turn is not None else guard(to_sample(raws[name], on_cpu))

    eager_refused = refused("eager")
    for variant, extra in plan.extras.items():
        plan.measurers[variant].number_per_block = raws[variant].number_per_block
        if plan.count_graphs and extra.counters is not None and variant in COMPILED_VARIANTS:
            extra.counters["recompiles"] = recompiles[variant]
        if variant == "eager":
            continue
        ratios = summarize(round_ratios(raws["eager"].times, raws[variant].times))
        extra.speedup = {
            "median": ratios.median,
            "p25": ratios.p25,
            "p75": ratios.p75,
            "n": ratios.n,
        }
        extra.speedup_refused = eager_refused or refused(variant)
        if variant in required and ratios.median < required[variant]:
            extra.failures.append(
                Failure(
                    "speedup",
                    f"{plan.labels[variant]}: speedup vs eager x{ratios.median:.2f} (IQR of "
                    f"{ratios.n} interleaved rounds x{ratios.p25:.2f}-x{ratios.p75:.2f}) is below "
                    f"the required min_speedup x{required[variant]:.2f}",
                )
            )
    return raws


def _conclude_each(
    ctx: RunContext, state: TestState, plan: VariantPlan, raws: dict[str, RawSamples]
) -> dict[str, Result]:
    """Each listed variant judged and saved like a plain measurement."""
    results: dict[str, Result] = {}
    for variant in [v for v in plan.variants if v in plan.measurers]:
        measurer, extra = plan.measurers[variant], plan.extras[variant]
        clock = [plan.clock_name]
        first = to_sample(raws[variant], measurer.device.startswith("cpu"))
        measured = Measured(
            plan.nodeid,
            plan.labels[variant],
            measurer,
            plan.options,
            extra.counters,
            first,
            sampler(ctx, measurer, clock),
            clock,
            extra=extra,
        )
        # Each variant's own (a GPU's kernels: amp casts, compiled fusions), after the timed rounds.
        measure_beside(ctx, measured)
        if ctx.settings.graph and not ctx.settings.child:
            # --torchperf-graph: the model's own graph is eager's; another variant runs another
            # program (compiled, autocast, frozen, quantized), which it does not draw.
            if variant == "eager":
                measured.graph = dict(graph_of(measurer))
            elif "eager" not in plan.variants:
                test = plan.nodeid.partition("[")[0]
                ctx.warn_once(
                    f"{test}: no graph recorded: --torchperf-graph draws a variants test's eager "
                    f'item only (the model as written); add "eager" to its variants for one',
                    topic=f"graph {test}",
                )
        results[variant] = conclude(ctx, state, measured)
    return {
        v: results.get(v) or plan.failed[v]
        for v in plan.variants
        if v in results or v in plan.failed
    }


def failed_variant(
    ctx: RunContext, state: TestState, plan: VariantPlan, variant: str, device: str, message: str
) -> Result:
    """An untimed, failed result for a variant that could not be built or gave NaN/inf, so
    the summary and every report show it (and the test fails with its message)."""
    result = Result(
        name=plan.labels[variant],
        nodeid=plan.nodeid,
        samples=[],
        number_per_block=0,
        device=device,
        threads=plan.options.threads,
        cpu_share=None,
        group=plan.options.group,
        options=plan.options,
        variant=variant,
        failures=[Failure("variant", message)],
        run_id=ctx.run_id,
        run_failures=[Failure("variant", message)],
    )
    state.results.append(result)
    return result
