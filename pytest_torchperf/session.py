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
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from . import __version__
from .config import MeasureOptions, OptionError, parse_layer, resolve
from .counters import compiled_original, diff_counters, dynamo_graph_total
from .result import Result
from .settings import RunSettings
from .storage import BaselineStore, file_lock
from .torch_state import quiet_trace_logger
from . import explain
from .variant_run import VariantExtra, measure_variants, to_sample
from .outputs import NO_OUTPUT, output_fingerprint, user_metric
from .processes import (FreshRuns, child_session_records, fresh_confirmer, fresh_speedups, pooled,
                        trusted)
from .units import format_change, format_percent, format_time
from .verdict import (CONFIRMATIONS, Outcome, Sample, guard_problem, judge,
                      machine_disturbance)


class TorchperfWarning(UserWarning):
    """Inconclusive verdicts, unsaved baselines and other things a user should see but not fail on."""






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
        return messages + self.failures


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
        #: ``--torchperf-processes``: other processes' measurements by (nodeid, name) (controller),
        #: or where this child process writes its own (child); see :mod:`.processes`.
        self.process_pool: dict[tuple[str, str], list[Any]] = {}
        self.child_sink: Any = None
        #: ``--torchperf-confirm fresh``: the fresh processes that confirm suspected slowdowns
        #: (set by the plugin on comparing runs; see :class:`.processes.FreshRuns`).
        self.fresh_runs: FreshRuns | None = None
        quiet_trace_logger()
        self.process_problems: list[str] = []
        #: Calibration kernel p25s of this run's CPU measurements so far (the machine's speed).
        self.calibrations: list[float] = []

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
            return to_sample(timed.raw, on_cpu)
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
            extra = VariantExtra("eager", fingerprint=output_fingerprint(output, again, measurer),
                                 metric=user_metric(measurer, options, name))
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
            return None, NO_OUTPUT
        return measurer.counters(eager, capture=True)

    # ------------------------------------------------------------------------------------------
    def measure_variants(self, state: TestState, nodeid: str, name: str, target: Callable[..., Any],
                         inputs: Sequence[Any], kwargs: Mapping[str, Any], options: MeasureOptions,
                         variants: Sequence[str]) -> dict[str, Result]:
        """Measure ``variants`` of ``target`` side by side (see :mod:`.variant_run`)."""
        __tracebackhide__ = True
        return measure_variants(self, state, nodeid, name, target, inputs, kwargs, options, variants)

    def _conclude(self, state: TestState, nodeid: str, name: str, measurer: Any,
                  options: MeasureOptions, counters: dict[str, Any] | None, first: Sample,
                  take_sample: Callable[[], Sample], clock: list[str], *, gate: bool, kind: str,
                  extra: "VariantExtra | None") -> Result:
        """Judge a first sample against the baseline, build the Result, queue the baseline write."""
        from .measure import CALIBRATION_KERNEL

        def guard(sample: Sample) -> str | None:
            return guard_problem(sample, min_cpu_share=options.min_cpu_share,
                                 max_relative_iqr=options.max_spread,
                                 max_neighbour_load=options.max_neighbour_load)

        env_id, environment = self.environment(measurer.device, options.threads)
        compare, save = self.settings.compare and gate, self.settings.save and gate
        references = self._calibration_references(env_id, nodeid, name) if save else []

        def disturbed(sample: Sample | Any) -> tuple[float, float, str] | None:
            return machine_disturbance(sample.calibration, references, options.max_machine_slowdown)
        final, verdict, changes = first, None, []
        run_failures = list(extra.failures) if extra else []
        failures = list(run_failures)
        passes = [first]
        measure_again = take_sample
        others = self.process_pool.get((nodeid, name), []) if gate else []
        first = pooled(first, others) if others else first

        def take_sample() -> Sample:
            sample = measure_again()
            passes.append(sample)  # every pass is reported, so an offline judge sees the same data
            return pooled(sample, others) if others else sample
        if compare:
            sessions = self.store.load_sessions(env_id, nodeid, name)
            judgement = judge(name, first, [s["statistic"] for s in sessions], options.max_slowdown,
                              take_sample, min_cpu_share=options.min_cpu_share,
                              max_relative_iqr=options.max_spread,
                              max_neighbour_load=options.max_neighbour_load,
                              max_machine_slowdown=options.max_machine_slowdown,
                              baseline_calibrated=[(s["statistic"], s["calibration"]) for s in sessions
                                                   if s.get("calibration") and s.get(
                                                       "calibration_kernel") == CALIBRATION_KERNEL],
                              confirm=fresh_confirmer(self.fresh_runs, nodeid, name,
                                                      measurer.device, passes)
                              if not others else None)
            final, verdict = judgement.sample, judgement.verdict
            stored_counters = next((s["counters"] for s in reversed(sessions) if s.get("counters")), None)
            if counters is not None and stored_counters is not None:
                changes = diff_counters(stored_counters, counters, options.ignore_counters)
            if extra is not None:
                confirm_speedups = fresh_speedups(self.fresh_runs if not others else None, nodeid,
                                                  name, CONFIRMATIONS)
                failures += self._compare_variant(name, extra, sessions, options, state,
                                                  confirm_speedups)
            if verdict.outcome is Outcome.NEW:
                verdict = explain.explain_new(self, verdict, environment, nodeid, name)
                if options.strict and not save:
                    # In CI a typo in --torchperf-storage or a forgotten `git add` would otherwise
                    # pass with every test "new". A run that saves is creating the baseline.
                    failures.append(self._strict_new_message(name, nodeid, env_id))
                if self.settings.cross_machine:
                    changes, notes = explain.cross_machine(self, state, environment, nodeid, name,
                                                           first, counters, options)
                    verdict = replace(verdict, notes=(*verdict.notes, *notes))
            elif verdict.outcome is Outcome.FAIL:
                explanation = explain.explain_slowdown(self, measurer, sessions, nodeid, name, final)
                verdict = replace(verdict, message="\n".join([verdict.message, *explanation]))
            elif verdict.outcome is Outcome.INCONCLUSIVE:
                if options.strict:
                    failures.append(verdict.message + " (failing: --torchperf-strict)")
                else:
                    state.warnings.append(verdict.message)
        elif (save or self.child_sink) and (guard(first) or disturbed(first)):
            final = take_sample()  # a contaminated baseline would poison every later comparison
        if self.child_sink is not None and gate:
            self.child_sink.write(nodeid, name, final, guard(final),
                                  extra.speedup if extra is not None else None)

        result = Result(name=name, nodeid=nodeid, samples=list(final.times),
                        number_per_block=measurer.number_per_block or 0, device=measurer.device,
                        threads=options.threads, cpu_share=final.cpu_share,
                        neighbour_load=None if final.neighbour_load is None
                        else round(final.neighbour_load, 3), environment_id=env_id,
                        verdict=verdict, group=options.group, summary=final.summary,
                        options=options, counters=counters, counter_changes=changes, kind=kind,
                        clock=clock[-1], calibration=final.calibration, failures=failures,
                        run_id=self.run_id, run_failures=run_failures,
                        # Full precision: `torchperf compare` must replay the very same figures.
                        passes=[{"times": list(p.times),
                                 "cpu_share": p.cpu_share, "calibration": p.calibration,
                                 "neighbour_load": p.neighbour_load, "fresh": p.fresh,
                                 "process_statistics": [s.statistic for s in trusted(others)],
                                 "process_calibrations": [s.calibration for s in trusted(others)
                                                          if s.calibration]}
                                for p in passes],
                        processes=[*final.process_statistics, final.summary.p25]
                        if final.process_statistics else [])
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
            problem, slower = guard(final), disturbed(final)
            times = "measured twice" if len(passes) > 1 else "measured once"
            if problem:
                result.not_saved = problem.split(":")[0]
                state.warnings.append(
                    f"{name}: baseline not saved: {problem} ({times}). Save again on a "
                    f"quieter machine.")
            elif slower:
                ratio, reference, what = slower
                result.not_saved = f"machine {format_change(ratio)} slower"
                state.warnings.append(
                    f"{name}: measured, not saved: the machine ran the calibration kernel "
                    f"{format_change(ratio)} slower than {what} ({format_time(final.calibration)} "
                    f"vs {format_time(reference)} per call; {times}). Stored now, this baseline "
                    f"would make unchanged code look faster in every later compare. Save again "
                    f"when the machine is quiet.")
            else:
                record = dict(result.session or {})
                record["top_ops"] = explain.baseline_top_ops(self, measurer, final, state, name)
                kept = [o for o in others if not disturbed(o)]
                if len(kept) < len(others):
                    state.warnings.append(
                        f"{name}: {len(others) - len(kept)} of the other processes' sessions not "
                        f"saved: the machine ran the calibration kernel more than "
                        f"{format_percent(options.max_machine_slowdown)} slower than in the stored "
                        f"sessions or this run while they measured")
                state.pending += [PendingSave(env_id, environment, nodeid, name, r, result) for r in
                                  [*child_session_records(record, kept, self.run_id), record]]
        if final.calibration and measurer.device.startswith("cpu"):
            self.calibrations.append(final.calibration)
        return result

    def _calibration_references(self, env_id: str, nodeid: str,
                                name: str) -> list[tuple[str, list[float]]]:
        """What a saved pass's machine speed is held against: the stored sessions' calibration
        kernel (unless --torchperf-reset replaces them) and this run's other measurements'."""
        from .measure import CALIBRATION_KERNEL
        from .storage import BaselineFileError

        references = []
        if not self.settings.reset:
            try:
                stored = [s["calibration"] for s in self.store.load_sessions(env_id, nodeid, name)
                          if s.get("calibration") and s.get("calibration_kernel") == CALIBRATION_KERNEL]
            except BaselineFileError:
                stored = []  # the save itself reports the bad file
            references.append(("the stored sessions", stored))
        references.append(("this run's other measurements", list(self.calibrations)))
        return references

    def _strict_new_message(self, name: str, nodeid: str, env_id: str) -> str:
        path = self.store.module_file(env_id, nodeid)
        found = self.store.environments_with(nodeid, name)
        elsewhere = (f"; baselines of it exist only for {', '.join(e for e, _ in found)}" if found
                     else "")
        return (f"{name}: no baseline for this measurement in {path} (environment {env_id}"
                f"{elsewhere}), failing: --torchperf-strict. Record one with pytest "
                f"--torchperf-save and commit it (git add {self.store.root}), or point "
                f"--torchperf-storage at the folder that holds it")

    def _compare_variant(self, label: str, extra: "VariantExtra",
                         sessions: Sequence[Mapping[str, Any]], options: MeasureOptions,
                         state: TestState,
                         confirm_speedups: Callable[[], list[dict[str, float]]] | None,
                         ) -> list[str]:
        """Across-run checks of a measurement's speedup, output fingerprint and metric."""
        from .accuracy import tolerances
        from .drift import drift_checks

        limits = extra.limits or tolerances(extra.variant,
                                            dict(dict(options.accuracy).get(extra.variant, ())))
        confirmed: list[dict[str, float]] = []

        def recorded() -> list[dict[str, float]]:
            # Kept in the record, so `torchperf compare` replays the same confirmation.
            confirmed.extend(confirm_speedups() if confirm_speedups is not None else [])
            return confirmed
        failures, warnings = drift_checks(label, sessions, speedup=extra.speedup,
                                          fingerprint=extra.fingerprint, metric=extra.metric,
                                          limits=limits, max_slowdown=options.max_slowdown,
                                          confirm_speedups=recorded if confirm_speedups else None)
        extra.confirm_speedups = confirmed
        state.warnings.extend(warnings)
        return failures

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
            "neighbour_load": result.neighbour_load,
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
                     "max_spread": options.max_spread,
                     "max_neighbour_load": options.max_neighbour_load,
                     "max_machine_slowdown": options.max_machine_slowdown,
                     "confirm": self.settings.confirm if self.fresh_runs else "same",
                     "strict": options.strict,
                     "ignore_counters": list(options.ignore_counters)},
        }

    def flush(self, state: TestState) -> list[Path]:
        """Write the pending baseline sessions of a test that passed; return the files written."""
        written, reset_done = [], set()
        for pending in state.pending:
            # --torchperf-reset replaces a history once; the other processes' sessions of the same
            # measurement (--torchperf-processes) are then appended to the fresh one.
            key = (pending.env_id, pending.nodeid, pending.name)
            reset = self.settings.reset and key not in reset_done
            reset_done.add(key)
            written.append(self.store.record(pending.env_id, pending.environment, pending.nodeid,
                                             pending.name, pending.record, reset=reset))
            pending.result.saved = True
        state.pending.clear()
        return written
