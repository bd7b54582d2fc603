"""Measuring the variants of one target side by side (``variants=[...]``).

Eager fp32 is the reference: its outputs are what every variant's accuracy is checked against,
and its blocks are interleaved with every variant's, so speedups are same-moment ratios. Each
listed variant then goes through the session's ordinary verdict and save (``PerfSession._conclude``)
with a :class:`VariantExtra` carrying its build facts, speedup, accuracy, fingerprint and metric.
Building the variants themselves is :mod:`pytest_torchperf.variants`' job. Pytest-free.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from .config import MeasureOptions
from .counters import dynamo_graph_total
from .outputs import output_fingerprint, user_metric
from .result import Result
from .stats import summarize
from .verdict import Sample

if TYPE_CHECKING:  # the session imports this module
    from .session import PerfSession, TestState


def to_sample(raw: Any, on_cpu: bool) -> Sample:
    """A verdict :class:`Sample` from one sampling pass's raw samples."""
    times = tuple(raw.times)
    calibration = summarize(raw.calibration).p25 if raw.calibration else None
    return Sample(summarize(times), raw.cpu_share if on_cpu else None, times, calibration,
                  neighbour_load=raw.neighbour_load if on_cpu else None)


class VariantSkipped(Exception):
    """The only variant a test asked for cannot exist here; the test is skipped with this reason."""


class VariantFailed(Exception):
    """The only variant a test asked for could not be built from the user's model."""


def _counting_recompiles(runner: Callable[[int], float], tally: dict[str, int],
                         key: str) -> Callable[[int], float]:
    """Wrap a block runner so graphs dynamo compiles during its blocks are counted under ``key``."""
    def run(number: int) -> float:
        before = dynamo_graph_total()
        try:
            return runner(number)
        finally:
            tally[key] += dynamo_graph_total() - before
    return run


@dataclass
class VariantExtra:
    """What a measurement carries beyond its timing: variant facts, accuracy, fingerprint, metric."""

    variant: str
    counters: dict[str, Any] | None = None
    build_time: float | None = None
    method: str | None = None
    notes: list[str] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    speedup: dict[str, float] | None = None
    accuracy: dict[str, float] | None = None
    limits: dict[str, float] | None = None
    fingerprint: dict[str, Any] | None = None
    metric: float | None = None
    failures: list[str] = field(default_factory=list)
    #: Speedups the fresh confirming processes measured (when the speedup check needed them).
    confirm_speedups: list[dict[str, float]] = field(default_factory=list)

    def apply(self, result: Result) -> None:
        """Copy the variant facts onto the test's Result."""
        result.variant = self.variant
        result.speedup = self.speedup
        result.accuracy = self.accuracy
        result.accuracy_limits = self.limits
        result.build_time = self.build_time
        result.method = self.method
        facts = ", ".join(f"{k}={v}" for k, v in self.info.items())
        result.notes = [*self.notes, *([f"evidence: {facts}"] if facts else [])]
        result.metric = self.metric
        result.fingerprint = self.fingerprint
        result.confirm_speedups = list(self.confirm_speedups)

    def record(self) -> dict[str, Any]:
        """The keys a saved baseline session holds for this measurement."""
        def rounded(values: Mapping[str, float] | None) -> dict[str, float] | None:
            return None if values is None else {k: float(f"{v:.6g}") for k, v in values.items()}

        return {"variant": self.variant, "speedup": rounded(self.speedup),
                "accuracy": rounded(self.accuracy), "accuracy_limits": rounded(self.limits),
                "build_time": None if self.build_time is None else round(self.build_time, 3),
                "method": self.method, "fingerprint": self.fingerprint, "metric": self.metric}


def measure_variants(session: "PerfSession", state: "TestState", nodeid: str, name: str,
                     target: Callable[..., Any], inputs: Sequence[Any], kwargs: Mapping[str, Any],
                     options: MeasureOptions, variants: Sequence[str]) -> dict[str, Result]:
    """Measure ``variants`` of ``target`` side by side; returns variant -> Result.

    Eager fp32 is always run as the reference (outputs for accuracy, interleaved blocks for
    speedups) even when not listed; only listed variants get results, verdicts and baselines.
    A variant that cannot exist here is left out with a warning (or raises
    :class:`VariantSkipped` when it is the only one, so the test is skipped with the reason).
    """
    __tracebackhide__ = True
    from .accuracy import OutputMismatchError, check_limits, compare_outputs, fingerprint, tolerances
    from .measure import (Measurer, NonFiniteOutputError, calibration_kernel, neighbours_for,
                          prepared)
    from .sampling import collect_interleaved, round_ratios
    from .variants import COMPILED_VARIANTS, VariantBuildError, VariantUnavailable, build_variant

    labels = {v: name if v == "eager" else f"{name}[{v}]" for v in variants}
    session._check_not_profiling(nodeid, name)
    for label in labels.values():
        session._claim_name(state, nodeid, label)
    eager_m = Measurer(target, inputs, kwargs, options)
    if session.settings.disable:
        eager_m.run_once()
        return {v: session._disabled(state, nodeid, labels[v], eager_m, options, "torchperf", v)
                for v in variants}
    import torch

    device_type = torch.device(eager_m.device).type
    state.built_variants = state.built_variants or any(v != "eager" for v in variants)
    count_graphs = (options.counters and "graphs" not in options.ignore_counters
                    and any(v in COMPILED_VARIANTS for v in variants))
    # explain() must run before anything is compiled: it invalidates dynamo's cache entries.
    graph = eager_m.graph_counters(target) if count_graphs else {}
    reference_label = labels.get("eager", f"{name}[eager reference]")
    reference = eager_m.check_outputs(reference_label)
    eager_counters, again = session._counters(eager_m, options)
    extras = {"eager": VariantExtra("eager", counters=eager_counters,
                                    fingerprint=output_fingerprint(reference, again, eager_m),
                                    metric=user_metric(eager_m, options, reference_label))}
    measurers = {"eager": eager_m}
    failed: dict[str, Result] = {}
    overrides = {v: dict(pairs) for v, pairs in options.accuracy}
    module = target if isinstance(target, torch.nn.Module) else None
    skipped: dict[str, str] = {}
    for variant in variants:
        if variant == "eager":
            continue
        label = labels[variant]
        try:
            built = build_variant(variant, options.variant_settings(variant), target, inputs,
                                  kwargs, device_type, eager_m.prepared)
        except VariantUnavailable as exc:
            if len(variants) == 1:
                raise VariantSkipped(f"{label}: not measured: {exc}") from None
            skipped[variant] = str(exc)
            state.warnings.append(f"{label}: not measured: {exc}")
            continue
        except VariantBuildError as exc:
            message = f"{label}: could not be built: {exc}"
            failed[variant] = failed_variant(session, state, nodeid, label, variant, options,
                                                   eager_m.device, message)
            if len(variants) == 1:
                raise VariantFailed(message) from None
            continue
        measurer = Measurer(built.target, inputs, kwargs, options, device=eager_m.device,
                            module=module)
        try:
            output = measurer.check_outputs(label)
        except NonFiniteOutputError as exc:
            failed[variant] = failed_variant(session, state, nodeid, label, variant, options,
                                                   eager_m.device, str(exc))
            if len(variants) == 1:
                raise
            continue
        extra = VariantExtra(variant, build_time=built.build_time, method=built.method,
                             notes=list(built.notes), info=dict(built.info))
        extra.limits = tolerances(variant, overrides.get(variant), built.amp_dtype,
                                  device=str(eager_m.device))
        try:
            extra.accuracy = compare_outputs(reference, output)
            extra.failures += check_limits(label, extra.accuracy, extra.limits)
        except OutputMismatchError as exc:
            extra.failures.append(f"{label}: {exc}")
        if built.build_time > options.max_compile_time:
            extra.failures.append(
                f"{label}: building the variant took {built.build_time:.1f} s ({built.method}), "
                f"above max_compile_time {options.max_compile_time:.0f} s. A cold inductor "
                f"compile of resnet18 takes ~25 s on 2 CPU cores; raise max_compile_time if "
                f"this model is expected to compile slowly")
        extra.fingerprint = fingerprint(output) if extras["eager"].fingerprint else None
        extra.metric = user_metric(measurer, options, label)
        if variant in COMPILED_VARIANTS and count_graphs:
            extra.counters = dict(graph)
        measurers[variant] = measurer
        extras[variant] = extra
    for variant, reason in skipped.items():
        state.skipped[labels[variant]] = reason

    # Interleaved timing: one block of each variant per round.
    runners: dict[str, Callable[[int], float]] = {}
    recompiles = dict.fromkeys(measurers, 0)
    for variant, measurer in measurers.items():
        runner, clock_name = measurer.block_runner(per_block_state=True)
        runners[variant] = _counting_recompiles(runner, recompiles, variant) \
            if variant in COMPILED_VARIANTS else runner
    calibrate = None
    if clock_name == "cpu":
        kernel = calibration_kernel()

        def calibrate(number: int) -> float:
            with prepared(kernel, options):
                return kernel(number)
    with session.timing_lock(eager_m.device):
        raws = collect_interleaved(runners, min_time=options.min_time, warmup=options.warmup,
                                   calibrate=calibrate, neighbours=neighbours_for(eager_m.device))
    on_cpu = eager_m.device.startswith("cpu")
    required = dict(options.min_speedup)
    results: dict[str, Result] = {}
    for variant in [v for v in variants if v in measurers]:
        measurer, extra = measurers[variant], extras[variant]
        measurer.number_per_block = raws[variant].number_per_block
        if variant != "eager":
            ratios = summarize(round_ratios(raws["eager"].times, raws[variant].times))
            extra.speedup = {"median": ratios.median, "p25": ratios.p25, "p75": ratios.p75,
                             "n": ratios.n}
            if variant in required and ratios.median < required[variant]:
                extra.failures.append(
                    f"{labels[variant]}: speedup vs eager x{ratios.median:.2f} (IQR of "
                    f"{ratios.n} interleaved rounds x{ratios.p25:.2f}-x{ratios.p75:.2f}) is "
                    f"below the required min_speedup x{required[variant]:.2f}")
        if extra.counters is not None and variant in COMPILED_VARIANTS:
            extra.counters["recompiles"] = recompiles[variant]
        clock = [clock_name]
        first = to_sample(raws[variant], on_cpu)
        results[variant] = session._conclude(
            state, nodeid, labels[variant], measurer, options, extra.counters, first,
            session._sampler(measurer, clock), clock, gate=True, kind="torchperf", extra=extra)
    return {v: results.get(v) or failed[v] for v in variants if v in results or v in failed}

def failed_variant(session: "PerfSession", state: "TestState", nodeid: str, label: str, variant: str,
                    options: MeasureOptions, device: str, message: str) -> Result:
    """An untimed, failed result for a variant that could not be built or gave NaN/inf, so
    the summary and every report show it (and the test fails with its message)."""
    result = Result(name=label, nodeid=nodeid, samples=[], number_per_block=0, device=device,
                    threads=options.threads, cpu_share=None, group=options.group,
                    options=options, variant=variant, failures=[message], run_id=session.run_id,
                    run_failures=[message])
    state.results.append(result)
    return result
