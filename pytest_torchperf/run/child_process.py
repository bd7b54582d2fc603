"""One child pytest run, started the same way by every mode that needs fresh processes: the
processes of a save and the confirmations of a compare (:mod:`pytest_torchperf.pytest_plugin.
child_runs`), the counting processes under Valgrind (:mod:`pytest_torchperf.pytest_plugin.
instruction_runs`), the two sides of an A/B pair (:mod:`pytest_torchperf.kinds.ab.run_pairs`) and a
revision of ``torchperf bisect`` (:mod:`pytest_torchperf.run.revision_probe`, in its own session).
Pytest-free.

A child is ``<python> -m pytest <the controller's arguments> <its own> --torchperf-child=FILE``:
it writes one JSON line per message to FILE (:class:`pytest_torchperf.run.children.ChildSink`,
read back by :func:`pytest_torchperf.run.children.read_lines`) and its output to a log, whose
tail a problem report quotes. What differs between the modes is the schedule: one after
another, side by side, in pairs taking turns.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path


def python_command() -> list[str]:
    """How to start pytest so a child imports what this run imports.

    ``python -m pytest`` puts the working folder first on ``sys.path``; the ``pytest`` console
    script does not. In a src-layout project that decides whether the source tree or the installed
    package is timed, so a child started from the console script gets ``-P`` (Python 3.11+).
    """
    script = os.path.basename(sys.argv[0]) if sys.argv else ""
    safe_path = script in ("pytest", "py.test") and sys.version_info >= (3, 11)
    return [sys.executable, *(["-P"] if safe_path else []), "-m", "pytest"]


class ChildProcess:
    """A child pytest run: started with its output in ``log``, waited for or killed, its log's
    tail read for a problem report.

    Raises ``OSError`` when the command cannot be started.
    """

    def __init__(
        self,
        args: Sequence[str],
        cwd: Path | str,
        env: Mapping[str, str],
        log: Path,
        pass_fds: Sequence[int] = (),
        own_session: bool = False,
    ) -> None:
        self.args = list(args)
        self.log = Path(log)
        #: Wall clock at the start (epoch seconds), and how long it ran once waited for.
        self.launched = time.time()
        self.took = 0.0
        #: The exit code, or why there is none (``none: killed after 60 s``) once waited for.
        self.code: int | str | None = None
        self._started = time.perf_counter()
        with open(self.log, "wb") as handle:  # the child holds its own copy of the descriptor
            self.process = subprocess.Popen(
                self.args,
                cwd=cwd,
                env=dict(env),
                stdout=handle,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                pass_fds=tuple(pass_fds),
                # Its own process group: stop() then ends what it started too (a Valgrind
                # child, an A/B pair), not only pytest.
                start_new_session=own_session,
            )
        self._own_session = own_session

    @property
    def pid(self) -> int:
        return self.process.pid

    def running(self) -> bool:
        return self.process.poll() is None

    def wait(self, timeout: float) -> int | str:
        """The exit code, or why there is none: killed after ``timeout`` seconds."""
        try:
            self.code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            self.code = f"none: killed after {timeout:.0f} s"
        self.took = time.perf_counter() - self._started
        return self.code

    def stop(self) -> None:
        """Kill it if it still runs (Ctrl-C, a failure elsewhere: no child outlives the run)."""
        if self._own_session:
            with contextlib.suppress(ProcessLookupError):  # the group is gone already
                os.killpg(self.process.pid, signal.SIGKILL)
        elif self.process.poll() is None:
            self.process.kill()
        self.process.wait()

    def log_tail(self, lines: int) -> list[str]:
        """The last ``lines`` lines of its output."""
        try:
            text = self.log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return []
        return text.strip().splitlines()[-lines:]
