"""The context of one run of measurements (a pytest run, or one xdist worker): its settings, the
baseline store, identity, caches and the state shared by its measurements. No measuring logic
lives here: the pipeline (:mod:`pytest_torchperf.run.pipeline`) takes this context as an input.
Pytest-free.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pytest_torchperf.measure.exclusive import shared_gate
from pytest_torchperf.measure.torch_state import quiet_trace_logger
from pytest_torchperf.options.measure_options import short_min_time
from pytest_torchperf.options.settings import RunSettings
from pytest_torchperf.run.children import FreshRuns
from pytest_torchperf.run.quiet import QuietWait
from pytest_torchperf.store.baselines import BaselineStore

if TYPE_CHECKING:
    from pytest_torchperf.core.child_protocol import SampleLine
    from pytest_torchperf.run.children import ChildSink


S = TypeVar("S")


class RunContext:
    """State of one run of measurements."""

    def __init__(self, settings: RunSettings, *, lock_path: Path | None = None) -> None:
        self.settings = settings
        self.store = BaselineStore(settings.storage)
        self.run_id = uuid.uuid4().hex[:12]
        #: Under pytest-xdist: the lock that keeps the other workers from running tests while
        #: this one times (:mod:`pytest_torchperf.measure.exclusive`).
        self.worker_gate = shared_gate(lock_path) if lock_path is not None else None
        self._git_sha: str | None | bool = False
        self._fingerprints: dict[tuple[str, int], tuple[str, dict[str, Any]]] = {}
        #: >0 while a torchperf_profiler block is open: timing then would be inflated.
        self.profiling_depth = 0
        #: ``--torchperf-processes``: other processes' measurements by (nodeid, name) (controller);
        #: see :mod:`pytest_torchperf.run.children`.
        self.process_pool: dict[tuple[str, str], list[SampleLine]] = {}
        #: Where a child process writes its measurements (child runs only).
        self.child_sink: ChildSink | None = None
        #: ``--torchperf-confirm fresh``: the fresh processes that confirm suspected slowdowns
        #: (set by the plugin on comparing runs).
        self.fresh_runs: FreshRuns | None = None
        #: Calibration kernel p25s of this run's CPU measurements so far (the machine's speed).
        self.calibrations: list[float] = []
        #: The measurement kinds' own state in this run, by its type (:meth:`state`).
        self._states: dict[type[Any], Any] = {}
        #: Its timed blocks wait for turns (an A/B side's): it must not hold the workers' lock
        #: while it waits, or the other side could never give the turn back.
        self.waits_for_turns = False
        #: Fields other plugins add to the exact environment fingerprint, by device and threads
        #: (the ``pytest_torchperf_environment`` hook; set by the plugin).
        self.extra_fingerprint: Callable[[str, int], Mapping[str, Any]] | None = None
        #: A save's budget for waiting until a busy machine quiets down (this process's share).
        self.quiet = QuietWait(settings.save_wait)
        #: Warnings that hold for the whole run (its settings, GPU clocks not checked), each said
        #: once (:meth:`warn_once`): shown at the end of the next test
        #: (``pytest_plugin/test_outcome.py:finish``).
        self.run_warnings: list[str] = []
        self._said: set[str] = set()
        quiet_trace_logger()

    def state(self, kind_state: type[S]) -> S:
        """A measurement kind's own state in this run (an instruction-count run's counts), of
        the type the kind defines; created empty on first use."""
        if kind_state not in self._states:
            self._states[kind_state] = kind_state()
        found: S = self._states[kind_state]
        return found

    def environment(
        self, device: str, threads: int, keep: bool = True
    ) -> tuple[str, dict[str, Any]]:
        """Environment id and fingerprint for a device/thread count (cached; ``keep=False``
        leaves a new one uncached: asked before the test loop, where a fingerprint hook may not
        see what the session's fixtures set up yet)."""
        from pytest_torchperf.store.environment import environment_id, fingerprint

        key = (device, threads)
        if key in self._fingerprints:
            return self._fingerprints[key]
        fp = fingerprint(device, threads)
        if self.extra_fingerprint is not None:
            fp["exact"].update(self.extra_fingerprint(device, threads))
        found = (environment_id(fp["exact"]), fp)
        if keep:
            self._fingerprints[key] = found
        return found

    def git_sha(self) -> str | None:
        """Commit of the working tree, recorded with saved sessions (None outside git)."""
        if self._git_sha is False:
            from pytest_torchperf.store.environment import git

            self._git_sha = git("rev-parse", "HEAD")
        return self._git_sha if isinstance(self._git_sha, str) and self._git_sha else None

    @contextlib.contextmanager
    def timing_lock(self, device: str) -> Iterator[None]:
        """Under pytest-xdist, time a CPU measurement alone: no other worker runs a test (or
        times) meanwhile, since it would share the cores, caches and memory bandwidth."""
        if self.worker_gate is None or self.waits_for_turns or not device.startswith("cpu"):
            yield
            return
        with self.worker_gate.exclusive():
            yield

    def check_min_time(
        self, min_time: float, layers: tuple[tuple[Mapping[str, Any], str], ...]
    ) -> None:
        """Warn once per run about a ``min_time`` shorter than the docs advise, naming the layer
        that set it (a child process measures for its controller, which warns; a disabled run
        times nothing)."""
        if "min_time" in self._said or self.settings.child or self.settings.disable:
            return
        source = next((where for layer, where in layers if layer.get("min_time") is not None), "")
        warning = short_min_time(min_time, source) if source else None
        if warning:
            self.warn_once(warning, topic="min_time")

    def warn_once(self, warning: str, topic: str | None = None) -> None:
        """Say ``warning`` once a run (once per ``topic`` when given: a setting's warning whose
        figures differ between measurements)."""
        key = topic or warning
        if key not in self._said:
            self._said.add(key)
            self.run_warnings.append(warning)
