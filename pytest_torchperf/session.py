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
from .profiling import median_top_ops
from .result import Result
from .settings import RunSettings
from .stats import summarize
from .units import format_time
from .storage import BaselineStore, file_lock
from .verdict import Outcome, Sample, Verdict, guard_problem, judge


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
    strict_failures: list[str] = field(default_factory=list)
    #: Messages to show as TorchperfWarning, attributed to the test by the plugin.
    warnings: list[str] = field(default_factory=list)

    def failure_messages(self) -> list[str]:
        """Messages of measurements that must fail the test."""
        messages = [r.verdict.message for r in self.results if r.verdict and r.verdict.failed]
        messages += [r.counter_message for r in self.results if r.counter_message]
        return messages + self.strict_failures


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

    def measure(self, state: TestState, nodeid: str, name: str, target: Callable[..., Any],
                inputs: Sequence[Any], kwargs: Mapping[str, Any], options: MeasureOptions,
                device: str | None = None, *, gate: bool = True, kind: str = "torchperf") -> Result:
        """Measure ``target`` for test ``nodeid`` under measurement ``name``; see module docstring.

        ``gate=False`` (the ``torchperf_timer`` default) records the measurement without comparing
        or saving it.
        """
        __tracebackhide__ = True
        from .measure import CALIBRATION_KERNEL, Measurer

        if self.profiling_depth:
            raise OptionError(
                f"{nodeid}: {name!r} was timed inside a torchperf_profiler block; the profiler adds "
                f"3-25% overhead, so time outside the block and profile in a separate pass")
        if name in state.names:
            raise OptionError(
                f"{nodeid}: measurement name {name!r} is used twice in this test; give each "
                f"torchperf(...) call its own name=")
        state.names.add(name)

        # Ungated timer measurements are never compared, so they skip the calibration blocks.
        measurer = Measurer(target, inputs, kwargs, options, device=device, calibrate=gate)
        if self.settings.disable:
            measurer.run_once()
            result = Result(name=name, nodeid=nodeid, samples=[], number_per_block=0,
                            device=measurer.device, threads=options.threads, cpu_share=None,
                            group=options.group, disabled=True, options=options, kind=kind)
            state.results.append(result)
            return result

        eager = compiled_original(target) if options.counters else None
        # explain() resets dynamo's caches process-wide; skipped when graph counters are opted out.
        count_graphs = eager is not None and "graphs" not in options.ignore_counters
        graph = measurer.graph_counters(eager) if count_graphs else {}
        measurer.check_outputs(name)
        counters = {**measurer.counters(eager), **graph} if options.counters else None
        graphs_before = dynamo_graph_total() if count_graphs else 0
        on_cpu = measurer.device.startswith("cpu")
        clock: list[str] = []

        def guard(sample: Sample) -> str | None:
            return guard_problem(sample, min_cpu_share=options.min_cpu_share,
                                 max_relative_iqr=options.max_spread)

        def take_sample() -> Sample:
            with self.timing_lock(measurer.device):
                timed = measurer.sample()
            clock.append(timed.clock)
            times = tuple(timed.raw.times)
            calibration = (summarize(timed.raw.calibration).p25 if timed.raw.calibration else None)
            return Sample(summarize(times), timed.raw.cpu_share if on_cpu else None, times,
                          calibration)

        first = take_sample()
        if counters is not None and count_graphs:
            counters["recompiles"] = dynamo_graph_total() - graphs_before
        env_id, environment = self.environment(measurer.device, options.threads)
        compare, save = self.settings.compare and gate, self.settings.save and gate
        final, verdict, changes = first, None, []
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
            if verdict.outcome is Outcome.NEW:
                verdict = self._explain_new(verdict, environment, nodeid, name)
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
        passes = len(clock)

        result = Result(name=name, nodeid=nodeid, samples=list(final.times),
                        number_per_block=measurer.number_per_block or 0, device=measurer.device,
                        threads=options.threads, cpu_share=final.cpu_share, environment_id=env_id,
                        verdict=verdict, group=options.group, summary=final.summary,
                        options=options, counters=counters, counter_changes=changes, kind=kind,
                        clock=clock[-1], calibration=final.calibration)
        state.results.append(result)

        if save and not changes and (verdict is None or verdict.outcome in
                                     (Outcome.PASS, Outcome.IMPROVED, Outcome.NEW)):
            problem = guard(final)
            if problem:
                times = "measured twice" if passes > 1 else "measured once"
                state.warnings.append(
                    f"{name}: baseline not saved: {problem} ({times}). Save again on a "
                    f"quieter machine.")
            else:
                record = self._session_record(result, options)
                record["top_ops"] = self._baseline_top_ops(measurer, final, state, name)
                state.pending.append(PendingSave(env_id, environment, nodeid, name, record, result))
        return result

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
