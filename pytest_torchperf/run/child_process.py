"""One child pytest run, started the same way by every mode that needs fresh processes: the
processes of a save and the confirmations of a compare
(:mod:`pytest_torchperf.pytest_plugin.child_runs`), the counting processes under Valgrind
(:mod:`pytest_torchperf.kinds.instructions.plugin_runs`), the two sides of an A/B pair
(:mod:`pytest_torchperf.kinds.ab.run_pairs`) and a revision of ``torchperf bisect``
(:mod:`pytest_torchperf.run.revision_probe`, in its own session). Pytest-free.

A child writes one line per message to its file (:class:`pytest_torchperf.run.children.
ChildSink`; the messages: :mod:`pytest_torchperf.core.child_protocol`) and its output to a log
(:class:`ChildProcess`). What differs between the modes is the schedule: one after another,
side by side, in pairs taking turns.

Every such command line is built here, by :class:`ChildCommand` (``tests/unit/
test_child_protocol.py`` fails when another module spells ``--torchperf-child`` or ``-m pytest``).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

#: Environment variable carrying a fresh child's process number (1..N-1 of a save's processes,
#: 0 for a confirmation or a counting process; the controller is N).
CHILD_PROCESS_ENV = "PYTEST_TORCHPERF_CHILD_PROCESS"


def python_interpreter() -> tuple[str, ...]:
    """The interpreter (and its flags) that starts a child so it imports what this run imports.

    ``python -m pytest`` puts the working folder first on ``sys.path``; the ``pytest`` console
    script does not. In a src-layout project that decides whether the source tree or the installed
    package is timed, so a child started from the console script gets ``-P`` (Python 3.11+).
    """
    script = os.path.basename(sys.argv[0]) if sys.argv else ""
    safe_path = script in ("pytest", "py.test") and sys.version_info >= (3, 11)
    return (sys.executable, *(["-P"] if safe_path else []))


@dataclass(frozen=True)
class ChildCommand:
    """The command line and environment of one child pytest run; the one place they are built.

    :meth:`argv` is ``[*launcher, *python, -m, pytest, *leading, *args, *own,
    --torchperf-child=FILE, --torchperf-child-only=NODEID, --torchperf-child-items=FILE,
    --junitxml=, *overrides]``, each child option only where it is set. The order matters where
    pytest's "last one wins" decides: ``own`` and ``overrides`` come after the controller's
    ``args`` so they replace what the user passed (``--junitxml=``, an empty path, turns the
    child's JUnit XML off; ``--maxfail``, ``--torchperf-save-wait``).
    """

    #: The controller's arguments, as this child gets them (an A/B side's with paths mapped
    #: into its checkout).
    args: tuple[str, ...]
    #: The folder pytest runs from.
    cwd: Path
    #: The interpreter and its flags (another one for side A of ``--torchperf-ab-python``).
    python: tuple[str, ...] = field(default_factory=python_interpreter)
    #: Where the child writes its messages (:mod:`pytest_torchperf.core.child_protocol`); None
    #: for a plain pytest run (a revision of ``torchperf bisect``, which writes a results file).
    child_file: Path | None = None
    #: The one test a confirming child runs.
    child_only: str | None = None
    #: A JSON list of the tests a counting child runs (its slice).
    child_items: Path | None = None
    #: Options before the controller's arguments (``torchperf bisect``: the mode, the results
    #: file), so a ``--`` among those arguments cannot swallow them.
    leading: tuple[str, ...] = ()
    #: The mode's own options, right after the controller's arguments (``-n 0``).
    own: tuple[str, ...] = ()
    #: Options after the child's own, overriding the controller's (``--maxfail``, a concurrent
    #: child's folders: :func:`pytest_torchperf.run.children.concurrent_child_args`).
    overrides: tuple[str, ...] = ()
    #: A command the child runs under (``valgrind --tool=callgrind ...``).
    launcher: tuple[str, ...] = ()
    #: Variables set on top of this process's environment.
    env: Mapping[str, str] = field(default_factory=dict)
    #: Variables removed from it (``PYTEST_ADDOPTS``, where the arguments must be only these).
    unset_env: tuple[str, ...] = ()
    #: The fresh child's process number, in :data:`CHILD_PROCESS_ENV` (None: not set).
    process: int | None = None

    def argv(self) -> list[str]:
        """The command line (see the class docstring for its order)."""
        child: list[str] = []
        if self.child_file is not None:
            # '=': a separate value would be read as a test path by pytest's check_rootdir.
            child.append(f"--torchperf-child={self.child_file}")
        if self.child_only is not None:
            child.append(f"--torchperf-child-only={self.child_only}")
        if self.child_items is not None:
            child.append(f"--torchperf-child-items={self.child_items}")
        if self.child_file is not None:
            child.append("--junitxml=")  # last wins in argparse: the child writes no JUnit XML
        return [
            *self.launcher,
            *self.python,
            "-m",
            "pytest",
            *self.leading,
            *self.args,
            *self.own,
            *child,
            *self.overrides,
        ]

    def environment(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """``base`` (this process's environment) with :attr:`env` and the process number set
        and :attr:`unset_env` removed."""
        env = {**(os.environ if base is None else base), **self.env}
        if self.process is not None:
            env[CHILD_PROCESS_ENV] = str(self.process)
        for name in self.unset_env:
            env.pop(name, None)
        return env

    def start(
        self, log: Path, pass_fds: Sequence[int] = (), own_session: bool = False
    ) -> ChildProcess:
        """Start it (:class:`ChildProcess`, its output in ``log``); ``OSError`` when it cannot
        start."""
        return ChildProcess(
            self.argv(), self.cwd, self.environment(), log, pass_fds, own_session=own_session
        )


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

    def told(self, lines: int, where: str = "") -> str:
        """Its command (run ``where``: `` (in DIR)``) and the last ``lines`` lines of its output,
        for a message saying it failed."""
        return f"Command{where}: {shlex.join(self.args)}\n    " + "\n    ".join(
            self.log_tail(lines)
        )

    def log_tail(self, lines: int) -> list[str]:
        """The last ``lines`` lines of its output."""
        try:
            text = self.log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return []
        return text.strip().splitlines()[-lines:]
