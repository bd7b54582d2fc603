"""One pytest run's measurements: options, timing, verdicts and baseline writes.

This module is free of pytest: the plugin hands it node ids and option layers and gets back
:class:`~pytest_torchperf.result.Result` objects plus the baseline writes to perform if the test
passes. Flow of one ``torchperf(...)`` call:

options resolved -> [compiled target: graph counters] -> outputs checked once -> counters ->
timed pass with interleaved calibration blocks (under the cross-worker timing lock) -> fingerprint
-> [compare: load sessions, judge (guard, machine rule, confirming re-measure), diff counters,
profile and explain a confirmed slowdown] -> [save: queue a session record with an op table]
-> Result. Warnings are queued on the test's state; the plugin emits them at the test's location.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import math
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from . import __version__
from .config import MeasureOptions, OptionError, parse_layer, resolve
from .counters import compiled_original, diff_counters, dynamo_graph_total
from .profiling import median_top_ops
from .result import Result
from .settings import RunSettings
from .stats import summarize
from .units import format_time
from .storage import BaselineStore, file_lock
from .verdict import Outcome, Sample, Verdict, guard_problem, judge


class TorchperfWarning(UserWarning):
    """Inconclusive verdicts, unsaved baselines and other things a user should see but not fail on."""


class VariantSkipped(Exception):
    """The only variant a test asked for cannot exist here; the test is skipped with this reason."""


class VariantFailed(Exception):
    """The only variant a test asked for could not be built from the user's model."""


#: Two calls whose outputs differ by more than this (relative) are nondeterministic: their
#: fingerprint is not stored, so random outputs never raise "numerics changed".
DETERMINISM_TOLERANCE = 1e-6

#: Marks "no second output captured" (``None`` is a legitimate output).
_NO_OUTPUT = object()


def _to_sample(raw: Any, on_cpu: bool) -> Sample:
    """A verdict :class:`Sample` from one sampling pass's raw samples."""
    times = tuple(raw.times)
    calibration = summarize(raw.calibration).p25 if raw.calibration else None
    return Sample(summarize(times), raw.cpu_share if on_cpu else None, times, calibration)


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

    def record(self) -> dict[str, Any]:
        """The keys a saved baseline session holds for this measurement."""
        def rounded(values: Mapping[str, float] | None) -> dict[str, float] | None:
            return None if values is None else {k: float(f"{v:.6g}") for k, v in values.items()}

        return {"variant": self.variant, "speedup": rounded(self.speedup),
                "accuracy": rounded(self.accuracy), "accuracy_limits": rounded(self.limits),
                "build_time": None if self.build_time is None else round(self.build_time, 3),
                "method": self.method, "fingerprint": self.fingerprint, "metric": self.metric}


@dataclass
class PendingSave:
    """A session record to write once the test has passed."""

    env_id: str
    environment: dict[str, Any]
    nodeid: str
    name: str
    record: dict[str, Any]
    result: Result


@dataclass
class TestState:
    """Measurements made by one test item."""

    results: list[Result] = field(default_factory=list)
    pending: list[PendingSave] = field(default_factory=list)
    names: set[str] = field(default_factory=set)
    strict_failures: list[str] = field(default_factory=list)
    #: Messages to show as TorchperfWarning, attributed to the test by the plugin.
    warnings: list[str] = field(default_factory=list)
    #: Failures not tied to one Result (a variant that could not be built).
    failures: list[str] = field(default_factory=list)
    #: Variants left out because they cannot exist here: label -> reason.
    skipped: dict[str, str] = field(default_factory=dict)
    #: True once this test built compiled/quantized variants (dynamo is reset after the test).
    built_variants: bool = False

    def failure_messages(self) -> list[str]:
        """Messages of measurements that must fail the test."""
        messages = [r.verdict.message for r in self.results if r.verdict and r.verdict.failed]
        messages += [r.counter_message for r in self.results if r.counter_message]
        messages += [f for r in self.results for f in r.failures]
        return messages + self.failures + self.strict_failures


class PerfSession:
    """State of one pytest run (or one xdist worker)."""

    def __init__(self, settings: RunSettings, *, lock_path: Path | None = None) -> None:
        self.settings = settings
        self.store = BaselineStore(settings.storage)
        self.run_id = uuid.uuid4().hex[:12]
        self.lock_path = lock_path
        self._git_sha: str | None | bool = False
        self._fingerprints: dict[tuple[str, int], tuple[str, dict[str, Any]]] = {}
        #: >0 while a torchperf_profiler block is open: timing then would be inflated.
        self.profiling_depth = 0

    # ------------------------------------------------------------------------------------------
    def environment(self, device: str, threads: int) -> tuple[str, dict[str, Any]]:
        """Environment id and fingerprint for a device/thread count (cached)."""
        from .environment import environment_id, fingerprint

        key = (device, threads)
        if key not in self._fingerprints:
            fp = fingerprint(device, threads)
            self._fingerprints[key] = (environment_id(fp["exact"]), fp)
        return self._fingerprints[key]

    def git_sha(self) -> str | None:
        """Commit of the working tree, recorded with saved sessions (None outside git)."""
        if self._git_sha is False:
            from .environment import git

            self._git_sha = git("rev-parse", "HEAD")
        return self._git_sha or None

    @contextlib.contextmanager
    def timing_lock(self, device: str) -> Iterator[None]:
        """Serialise timed sections of sibling xdist workers on CPU (they would share the cores)."""
        if self.lock_path is None or not device.startswith("cpu"):
            yield
            return
        with file_lock(self.lock_path):
            yield

    # ------------------------------------------------------------------------------------------
    def resolve_options(self, call: Mapping[str, Any], marker: Mapping[str, Any],
                        where: str) -> tuple[MeasureOptions, str | None]:
        """Resolve a call's options over marker, CLI and ini; return options and the explicit name."""
        call_layer = parse_layer(call, f"{where}: torchperf(...) call")
        marker_layer = parse_layer(marker, f"{where}: @pytest.mark.torchperf")
        options = resolve(call_layer, marker_layer, self.settings.cli, self.settings.ini)
        name = call_layer.get("name") or marker_layer.get("name")
        return options, name

    def _claim_name(self, state: TestState, nodeid: str, name: str) -> None:
        if name in state.names:
            raise OptionError(
                f"{nodeid}: measurement name {name!r} is used twice in this test; give each "
                f"torchperf(...) call its own name=")
        state.names.add(name)

    def _sampler(self, measurer: Any, clock: list[str]) -> Callable[[], Sample]:
        """A function taking one (re-)measurement of ``measurer`` under the timing lock."""
        on_cpu = measurer.device.startswith("cpu")

        def take_sample() -> Sample:
            with self.timing_lock(measurer.device):
                timed = measurer.sample()
            clock.append(timed.clock)
            return _to_sample(timed.raw, on_cpu)
        return take_sample

    def measure(self, state: TestState, nodeid: str, name: str, target: Callable[..., Any],
                inputs: Sequence[Any], kwargs: Mapping[str, Any], options: MeasureOptions,
                device: str | None = None, *, gate: bool = True, kind: str = "torchperf") -> Result:
        """Measure ``target`` for test ``nodeid`` under measurement ``name``; see module docstring.

        ``gate=False`` (the ``torchperf_timer`` default) records the measurement without comparing
        or saving it.
        """
        __tracebackhide__ = True
        from .measure import Measurer

        self._check_not_profiling(nodeid, name)
        self._claim_name(state, nodeid, name)
        # Ungated timer measurements are never compared, so they skip the calibration blocks.
        measurer = Measurer(target, inputs, kwargs, options, device=device, calibrate=gate)
        if self.settings.disable:
            measurer.run_once()
            return self._disabled(state, nodeid, name, measurer, options, kind)

        eager = compiled_original(target) if options.counters else None
        # explain() resets dynamo's caches process-wide; skipped when graph counters are opted out.
        count_graphs = eager is not None and "graphs" not in options.ignore_counters
        graph = measurer.graph_counters(eager) if count_graphs else {}
        output = measurer.check_outputs(name)
        counters, again = self._counters(measurer, options, eager)
        counters = None if counters is None else {**counters, **graph}
        extra = None
        if kind == "torchperf":
            extra = VariantExtra("eager", fingerprint=self._fingerprint(output, again, measurer),
                                 metric=self._metric(measurer, options, name, state))
        graphs_before = dynamo_graph_total() if count_graphs else 0
        clock: list[str] = []
        take_sample = self._sampler(measurer, clock)
        first = take_sample()
        if counters is not None and count_graphs:
            counters["recompiles"] = dynamo_graph_total() - graphs_before
        return self._conclude(state, nodeid, name, measurer, options, counters, first, take_sample,
                              clock, gate=gate, kind=kind, extra=extra)

    def _check_not_profiling(self, nodeid: str, name: str) -> None:
        if self.profiling_depth:
            raise OptionError(
                f"{nodeid}: {name!r} was timed inside a torchperf_profiler block; the profiler adds "
                f"3-25% overhead, so time outside the block and profile in a separate pass")

    def _disabled(self, state: TestState, nodeid: str, name: str, measurer: Any,
                  options: MeasureOptions, kind: str, variant: str = "eager") -> Result:
        result = Result(name=name, nodeid=nodeid, samples=[], number_per_block=0,
                        device=measurer.device, threads=options.threads, cpu_share=None,
                        group=options.group, disabled=True, options=options, kind=kind,
                        variant=variant)
        state.results.append(result)
        return result

    def _counters(self, measurer: Any, options: MeasureOptions,
                  eager: Any = None) -> tuple[dict[str, Any] | None, Any]:
        """Counters of one call (None when off) and that call's output (for a determinism check)."""
        if not options.counters:
            return None, _NO_OUTPUT
        return measurer.counters(eager, capture=True)

    def _fingerprint(self, output: Any, again: Any, measurer: Any) -> dict[str, Any] | None:
        """Output fingerprint, or None when two calls disagree (random outputs cannot be gated)."""
        from .accuracy import fingerprint

        from .accuracy import fingerprint_drift

        first = fingerprint(output)
        if again is _NO_OUTPUT:
            again = measurer.run_once()
        # A compiled target's second output comes from its eager original: allow rounding noise.
        drift, problem = fingerprint_drift(first, fingerprint(again))
        return first if problem is None and drift <= DETERMINISM_TOLERANCE else None

    def _metric(self, measurer: Any, options: MeasureOptions, label: str,
                state: TestState) -> float | None:
        """The user metric ``metric(outputs, targets)`` on ``data`` for this target (or None)."""
        __tracebackhide__ = True
        if options.metric is None:
            return None
        if options.data is None:
            raise OptionError(f"{label}: metric= needs data=(inputs, targets) to compute it on")
        data_inputs, targets = options.data
        args = data_inputs if isinstance(data_inputs, (tuple, list)) else (data_inputs,)
        with measurer.prepared():
            outputs = measurer.target(*args)
        value = options.metric(outputs, targets)
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise OptionError(f"{label}: metric= returned {value!r}; it must return a number "
                              f"(e.g. accuracy as a float)") from None
        if not math.isfinite(number):
            raise OptionError(f"{label}: metric= returned {number} (not finite)")
        return number

    # ------------------------------------------------------------------------------------------
    def measure_variants(self, state: TestState, nodeid: str, name: str, target: Callable[..., Any],
                         inputs: Sequence[Any], kwargs: Mapping[str, Any], options: MeasureOptions,
                         variants: Sequence[str]) -> dict[str, Result]:
        """Measure ``variants`` of ``target`` side by side; returns variant -> Result.

        Eager fp32 is always run as the reference (outputs for accuracy, interleaved blocks for
        speedups) even when not listed; only listed variants get results, verdicts and baselines.
        A variant that cannot exist here is left out with a warning (or raises
        :class:`VariantSkipped` when it is the only one, so the test is skipped with the reason).
        """
        __tracebackhide__ = True
        from .accuracy import OutputMismatchError, check_limits, compare_outputs, fingerprint, tolerances
        from .measure import Measurer, NonFiniteOutputError, calibration_kernel, prepared
        from .sampling import collect_interleaved, round_ratios
        from .variants import COMPILED_VARIANTS, VariantBuildError, VariantUnavailable, build_variant

        labels = {v: name if v == "eager" else f"{name}[{v}]" for v in variants}
        self._check_not_profiling(nodeid, name)
        for label in labels.values():
            self._claim_name(state, nodeid, label)
        eager_m = Measurer(target, inputs, kwargs, options)
        if self.settings.disable:
            eager_m.run_once()
            return {v: self._disabled(state, nodeid, labels[v], eager_m, options, "torchperf", v)
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
        eager_counters, again = self._counters(eager_m, options)
        extras = {"eager": VariantExtra("eager", counters=eager_counters,
                                        fingerprint=self._fingerprint(reference, again, eager_m),
                                        metric=self._metric(eager_m, options, reference_label, state))}
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
                failed[variant] = self._failed_variant(state, nodeid, label, variant, options,
                                                       eager_m.device, message)
                if len(variants) == 1:
                    raise VariantFailed(message) from None
                continue
            measurer = Measurer(built.target, inputs, kwargs, options, device=eager_m.device,
                                module=module)
            try:
                output = measurer.check_outputs(label)
            except NonFiniteOutputError as exc:
                failed[variant] = self._failed_variant(state, nodeid, label, variant, options,
                                                       eager_m.device, str(exc))
                if len(variants) == 1:
                    raise
                continue
            extra = VariantExtra(variant, build_time=built.build_time, method=built.method,
                                 notes=list(built.notes), info=dict(built.info))
            extra.limits = tolerances(variant, overrides.get(variant), built.amp_dtype)
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
            extra.metric = self._metric(measurer, options, label, state)
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
        with self.timing_lock(eager_m.device):
            raws = collect_interleaved(runners, min_time=options.min_time, warmup=options.warmup,
                                       calibrate=calibrate)
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
            first = _to_sample(raws[variant], on_cpu)
            results[variant] = self._conclude(
                state, nodeid, labels[variant], measurer, options, extra.counters, first,
                self._sampler(measurer, clock), clock, gate=True, kind="torchperf", extra=extra)
        return {v: results.get(v) or failed[v] for v in variants if v in results or v in failed}

    def _failed_variant(self, state: TestState, nodeid: str, label: str, variant: str,
                        options: MeasureOptions, device: str, message: str) -> Result:
        """An untimed, failed result for a variant that could not be built or gave NaN/inf, so
        the summary and every report show it (and the test fails with its message)."""
        result = Result(name=label, nodeid=nodeid, samples=[], number_per_block=0, device=device,
                        threads=options.threads, cpu_share=None, group=options.group,
                        options=options, variant=variant, failures=[message], run_id=self.run_id,
                        run_failures=[message])
        state.results.append(result)
        return result

    def _conclude(self, state: TestState, nodeid: str, name: str, measurer: Any,
                  options: MeasureOptions, counters: dict[str, Any] | None, first: Sample,
                  take_sample: Callable[[], Sample], clock: list[str], *, gate: bool, kind: str,
                  extra: "VariantExtra | None") -> Result:
        """Judge a first sample against the baseline, build the Result, queue the baseline write."""
        from .measure import CALIBRATION_KERNEL

        def guard(sample: Sample) -> str | None:
            return guard_problem(sample, min_cpu_share=options.min_cpu_share,
                                 max_relative_iqr=options.max_spread)

        env_id, environment = self.environment(measurer.device, options.threads)
        compare, save = self.settings.compare and gate, self.settings.save and gate
        final, verdict, changes = first, None, []
        run_failures = list(extra.failures) if extra else []
        failures = list(run_failures)
        passes = [first]
        measure_again = take_sample

        def take_sample() -> Sample:
            sample = measure_again()
            passes.append(sample)  # every pass is reported, so an offline judge sees the same data
            return sample
        if compare:
            sessions = self.store.load_sessions(env_id, nodeid, name)
            judgement = judge(name, first, [s["statistic"] for s in sessions], options.max_slowdown,
                              take_sample, min_cpu_share=options.min_cpu_share,
                              max_relative_iqr=options.max_spread,
                              baseline_calibrated=[(s["statistic"], s["calibration"]) for s in sessions
                                                   if s.get("calibration") and s.get(
                                                       "calibration_kernel") == CALIBRATION_KERNEL])
            final, verdict = judgement.sample, judgement.verdict
            stored_counters = next((s["counters"] for s in reversed(sessions) if s.get("counters")), None)
            if counters is not None and stored_counters is not None:
                changes = diff_counters(stored_counters, counters, options.ignore_counters)
            if extra is not None:
                failures += self._compare_variant(name, extra, sessions, options, state)
            if verdict.outcome is Outcome.NEW:
                verdict = self._explain_new(verdict, environment, nodeid, name)
                if self.settings.cross_machine:
                    changes = self._cross_machine(state, environment, nodeid, name, first,
                                                  counters, options)
            elif verdict.outcome is Outcome.FAIL:
                explanation = self._explain_slowdown(measurer, sessions, nodeid, name, final)
                verdict = replace(verdict, message="\n".join([verdict.message, *explanation]))
            elif verdict.outcome is Outcome.INCONCLUSIVE:
                if options.strict:
                    state.strict_failures.append(verdict.message + " (failing: --torchperf-strict)")
                else:
                    state.warnings.append(verdict.message)
        elif save and guard(first):
            final = take_sample()  # a contaminated baseline would poison every later comparison

        result = Result(name=name, nodeid=nodeid, samples=list(final.times),
                        number_per_block=measurer.number_per_block or 0, device=measurer.device,
                        threads=options.threads, cpu_share=final.cpu_share, environment_id=env_id,
                        verdict=verdict, group=options.group, summary=final.summary,
                        options=options, counters=counters, counter_changes=changes, kind=kind,
                        clock=clock[-1], calibration=final.calibration, failures=failures,
                        run_id=self.run_id, run_failures=run_failures,
                        passes=[{"times": [float(f"{t:.6g}") for t in p.times],
                                 "cpu_share": p.cpu_share, "calibration": p.calibration}
                                for p in passes])
        if extra is not None:
            extra.apply(result)
        if gate and result.summary is not None:
            # What --torchperf-save would store: shipped in reports so `torchperf accept` can
            # promote this very measurement to a baseline later.
            result.session = self._session_record(result, options)
            if extra is not None:
                result.session.update(extra.record())
            result.environment = environment
        state.results.append(result)

        if save and not changes and not failures and (verdict is None or verdict.outcome in
                                                      (Outcome.PASS, Outcome.IMPROVED, Outcome.NEW)):
            problem = guard(final)
            if problem:
                times = "measured twice" if len(passes) > 1 else "measured once"
                state.warnings.append(
                    f"{name}: baseline not saved: {problem} ({times}). Save again on a "
                    f"quieter machine.")
            else:
                record = dict(result.session or {})
                record["top_ops"] = self._baseline_top_ops(measurer, final, state, name)
                state.pending.append(PendingSave(env_id, environment, nodeid, name, record, result))
        return result

    def _compare_variant(self, label: str, extra: "VariantExtra",
                         sessions: Sequence[Mapping[str, Any]], options: MeasureOptions,
                         state: TestState) -> list[str]:
        """Across-run checks of a measurement's speedup, output fingerprint and metric."""
        from .accuracy import tolerances
        from .drift import drift_checks

        limits = extra.limits or tolerances(extra.variant,
                                            dict(dict(options.accuracy).get(extra.variant, ())))
        failures, warnings = drift_checks(label, sessions, speedup=extra.speedup,
                                          fingerprint=extra.fingerprint, metric=extra.metric,
                                          limits=limits, max_slowdown=options.max_slowdown)
        state.warnings.extend(warnings)
        return failures

    def _profile_iterations(self, sample: Sample) -> int:
        """Enough profiled calls to cover ~0.2 s (3..100), so per-call op times are steady."""
        return max(3, min(100, int(0.2 / max(sample.statistic, 1e-9))))

    def _baseline_top_ops(self, measurer: Any, sample: Sample, state: TestState,
                          name: str) -> list[dict[str, Any]] | None:
        """Op table stored with a saved session, to explain later slowdowns (None if profiling fails)."""
        try:
            rows, _ = measurer.profile(self._profile_iterations(sample))
        except Exception as exc:  # noqa: BLE001 - a profiler problem must not lose the baseline
            state.warnings.append(f"{name}: op table not stored (profiling failed: {exc})")
            return None
        return [{**row, "self_cpu": float(f"{row['self_cpu']:.4g}"),
                 "self_device": float(f"{row['self_device']:.4g}")} for row in rows]

    def _explain_slowdown(self, measurer: Any, sessions: Sequence[Mapping[str, Any]], nodeid: str,
                          name: str, sample: Sample) -> list[str]:
        """Profile the target once more (after timing) and name the ops that got slower."""
        from .profiling import diff_top_ops, trace_path

        path = trace_path(self.settings.report_dir / "traces", nodeid, f"{name}-regression")
        try:
            rows, _ = measurer.profile(self._profile_iterations(sample), path)
        except Exception as exc:  # noqa: BLE001 - the verdict stands even if profiling breaks
            return [f"  (could not profile the slowdown: {type(exc).__name__}: {exc})"]
        stored = median_top_ops([s["top_ops"] for s in sessions if s.get("top_ops")])
        if stored:
            diffs = diff_top_ops(stored, rows)
            why = ("; ".join(diffs) if diffs else
                   "no op grew in the profile (the slowdown may be outside torch ops: Python, data, "
                   "allocator or machine)")
            lines = [f"  why (profiled, self time per call vs baseline): {why}"]
        else:
            top = ", ".join(f"{r['op']} {format_time(r['self_cpu'] + r['self_device'])}" for r in rows[:3])
            lines = [f"  top ops now (no op table stored with the baseline to compare): {top}"]
        return [*lines, f"  trace: {path}"]

    def _cross_machine(self, state: TestState, environment: dict[str, Any], nodeid: str, name: str,
                       sample: Sample, counters: dict[str, Any] | None,
                       options: MeasureOptions) -> list[str]:
        """``--torchperf-cross-machine``: warn on normalised time, gate counters of the same build.

        Returns the counter changes (which fail the test, as within one environment).
        """
        from .cross_machine import normalised_check, pick_environment, same_torch_build
        from .storage import BaselineFileError

        picked = pick_environment(environment["exact"], self.store.environments_with(nodeid, name))
        if picked is None:
            return []
        env_id, stored_env = picked
        try:
            sessions = self.store.load_sessions(env_id, nodeid, name)
        except BaselineFileError as exc:
            state.warnings.append(f"{name}: cross-machine comparison skipped: {exc}")
            return []
        if not sessions:
            return []
        state.warnings.append(normalised_check(name, sample.statistic, sample.calibration,
                                               sessions, env_id))
        stored_exact = stored_env.get("exact") if isinstance(stored_env.get("exact"), dict) else {}
        stored_counters = next((s["counters"] for s in reversed(sessions) if s.get("counters")), None)
        if counters is None or stored_counters is None or not same_torch_build(environment["exact"],
                                                                             stored_exact):
            return []
        return [f"{change} (vs {env_id}, same torch build)"
                for change in diff_counters(stored_counters, counters, options.ignore_counters)]

    def _explain_new(self, verdict: Verdict, environment: dict[str, Any], nodeid: str,
                     name: str) -> Verdict:
        """Say which fingerprint field differs when baselines exist only for other environments."""
        from .environment import describe_difference

        others = self.store.environments_with(nodeid, name)
        if not others:
            return verdict
        env_id, stored = others[0]
        exact = stored.get("exact")
        if not isinstance(exact, dict):
            path = self.store.root / env_id / "environment.json"
            return replace(verdict, message=(
                f"{name}: no baseline for this environment; baselines exist under "
                f"{self.store.root / env_id} but its {path.name} is unreadable or not a fingerprint, "
                f"so the difference cannot be named. Restore it from git or delete that folder."))
        diff = describe_difference(environment["exact"], exact)
        return replace(verdict, message=(
            f"{name}: no comparable baseline: {diff} (stored under {self.store.root / env_id}); "
            f"record one for this environment with pytest --torchperf-save"))

    def _session_record(self, result: Result, options: MeasureOptions) -> dict[str, Any]:
        """The JSON record of one saved session."""
        from .measure import CALIBRATION_KERNEL

        assert result.summary is not None
        return {
            "timestamp": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "run_id": self.run_id,
            "git_sha": self.git_sha(),
            "pytest_torchperf": __version__,
            "statistic": result.summary.p25,
            "stats": {k: v if k == "n" else float(f"{v:.6g}")
                      for k, v in result.summary.to_dict().items()},
            "times": [float(f"{t:.6g}") for t in result.samples],
            "number_per_block": result.number_per_block,
            "cpu_share": None if result.cpu_share is None else round(result.cpu_share, 4),
            "threads": result.threads,
            "device": result.device,
            "min_time": options.min_time,
            "group": result.group,
            "clock": result.clock,
            "calibration": None if result.calibration is None else float(f"{result.calibration:.6g}"),
            "calibration_kernel": CALIBRATION_KERNEL if result.calibration else None,
            "counters": result.counters,
            # The gate this measurement ran under, so `torchperf compare` judges it the same way.
            "gate": {"max_slowdown": options.max_slowdown, "min_cpu_share": options.min_cpu_share,
                     "max_spread": options.max_spread, "strict": options.strict,
                     "ignore_counters": list(options.ignore_counters)},
        }

    def flush(self, state: TestState) -> list[Path]:
        """Write the pending baseline sessions of a test that passed; return the files written."""
        written = []
        for pending in state.pending:
            written.append(self.store.record(pending.env_id, pending.environment, pending.nodeid,
                                             pending.name, pending.record, reset=self.settings.reset))
            pending.result.saved = True
        state.pending.clear()
        return written
