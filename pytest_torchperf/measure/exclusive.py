"""Timing alone under pytest-xdist: while one worker times, the other workers run no test.

``pytest -n 2`` runs tests on two cores at once. A perf measurement timed beside another
worker's test shares the caches, memory bandwidth and (on a 2-vCPU VM) the core with it: a save
on two busy workers stored a conv net at 9.76 ms against 8.15 ms alone, and the guards refused
every pass beside a CPU-bound test. Serialising only the workers' timed sections is not enough:
the other worker's *ordinary* tests go on.

:class:`WorkerGate` is a readers-writer lock over two lock files shared by the workers of one
run. Every test a worker runs holds the *work* lock shared, taken after a brief pass through the
*gate* lock. A timed section releases its own test's share, takes the gate exclusively (no new
test starts anywhere), then the work lock exclusively (the tests already running finish first),
times, and gives both back. The gate gives a waiting timer priority over new tests, so timing
never starves behind a stream of short tests; ordinary tests keep running in parallel between
timed sections.

Advisory ``flock`` locks: where ``fcntl`` is missing (Windows) the gate does nothing. Pure
standard library.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType


def _fcntl() -> ModuleType | None:
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        return None
    return fcntl


class WorkerGate:
    """The readers-writer lock of one xdist run (see module docstring)."""

    def __init__(self, base: Path) -> None:
        self.gate_path = base.with_name(base.name + ".gate")
        self.work_path = base.with_name(base.name + ".work")
        #: The work lock this process holds shared while one of its tests runs.
        self._work_fd: int | None = None
        #: >0 while this process holds the gate and work locks exclusively.
        self._exclusive = 0

    def _open(self, path: Path) -> int:
        path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o666)

    @contextlib.contextmanager
    def _locked(self, fcntl: ModuleType, path: Path, mode: int) -> Iterator[None]:
        """The lock file at ``path`` held in ``mode`` (waiting for it) for the block."""
        fd = self._open(path)
        try:
            fcntl.flock(fd, mode)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def enter_test(self) -> None:
        """A test starts: wait while another worker times, then hold the work lock shared."""
        fcntl = _fcntl()
        if fcntl is None or self._work_fd is not None or self._exclusive:
            return
        # The gate is held exclusively while a worker times: taking it shared waits for that.
        with self._locked(fcntl, self.gate_path, fcntl.LOCK_SH):
            work = self._open(self.work_path)
            fcntl.flock(work, fcntl.LOCK_SH)
            self._work_fd = work

    def leave_test(self) -> None:
        """The test is over: give the work lock back."""
        fcntl = _fcntl()
        if fcntl is None or self._work_fd is None:
            return
        fcntl.flock(self._work_fd, fcntl.LOCK_UN)
        os.close(self._work_fd)
        self._work_fd = None

    @contextlib.contextmanager
    def released(self) -> Iterator[None]:
        """Give this test's share back for a while (this worker waits on a child process that
        times and takes the locks itself)."""
        held = self._work_fd is not None
        self.leave_test()
        try:
            yield
        finally:
            if held:
                self.enter_test()

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """Time alone: no other worker runs a test inside this block."""
        fcntl = _fcntl()
        with contextlib.ExitStack() as stack:
            if fcntl is not None and not self._exclusive:
                stack.enter_context(self.released())
                # First no new test starts on any worker, then the tests already running end.
                stack.enter_context(self._locked(fcntl, self.gate_path, fcntl.LOCK_EX))
                stack.enter_context(self._locked(fcntl, self.work_path, fcntl.LOCK_EX))
            self._exclusive += 1
            try:
                yield
            finally:
                self._exclusive -= 1


_GATES: dict[Path, WorkerGate] = {}


def shared_gate(base: Path) -> WorkerGate:
    """The one :class:`WorkerGate` of this process for the lock files at ``base`` (the plugin's
    per-test hook and the timed sections must use the same object: it knows the test's share)."""
    if base not in _GATES:
        _GATES[base] = WorkerGate(base)
    return _GATES[base]


#: Hands the lock files to a child pytest run the plugin starts on an xdist controller (the
#: save's fresh processes): only processes the plugin started itself take the lock, never a
#: subprocess a test starts (it would wait for the share its own parent test holds).
GATE_ENV = "PYTEST_TORCHPERF_GATE"


def lock_base(testrunuid: str) -> Path:
    """Where the lock files of the xdist run ``testrunuid`` live."""
    return Path(tempfile.gettempdir()) / f"pytest-torchperf-{testrunuid}.lock"
