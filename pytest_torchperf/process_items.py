"""pytest glue of ``--torchperf-processes N``: options, child-run mode, starting the children.

The pooling itself is pure logic in :mod:`.processes`. Here: the controlling run starts N-1 child
pytest runs before its own test loop, each with the controller's own arguments plus
``--torchperf-child FILE``, one after another (never concurrently: they would share the cores the
timing needs). A child runs only the perf tests, judges and saves nothing, writes no reports or
JUnit XML, and leaves one line per measurement in FILE for the controller to pool.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from .items import IS_PERF_KEY, SETTINGS_KEY, session_of

#: Environment variable carrying a child's process number (1..N-1; the controller is N).
CHILD_PROCESS_ENV = "PYTEST_TORCHPERF_CHILD_PROCESS"
#: Most processes accepted: each costs a pytest start-up (torch import, compiles).
MAX_PROCESSES = 20


def add_options(group: Any, parser: pytest.Parser) -> None:
    """``--torchperf-processes`` (and ini) plus the internal ``--torchperf-child``."""
    group.addoption("--torchperf-processes", metavar="N", default=None,
                    help="Measure each perf test in N fresh processes (N-1 extra pytest runs "
                         "before this one, interleaving the targets) and judge the median; with "
                         "--torchperf-save, stores N sessions (ini torchperf_processes)")
    group.addoption("--torchperf-child", metavar="FILE", default=None, help=argparse.SUPPRESS)
    parser.addini("torchperf_processes", "Fresh processes per perf test (default 1)")


def processes_setting(config: pytest.Config) -> int:
    """The validated process count (1 = the normal single-process run)."""
    raw = config.getoption("torchperf_processes") or config.getini("torchperf_processes") or "1"
    try:
        count = int(str(raw).strip())
    except ValueError:
        count = 0
    if not 1 <= count <= MAX_PROCESSES:
        raise pytest.UsageError(
            f"torchperf: --torchperf-processes must be a whole number from 1 to {MAX_PROCESSES}, "
            f"got {raw!r}. 3 is a good start for a 5-10% gate on a dedicated runner")
    if count > 1:
        if config.getoption("torchperf_disable"):
            raise pytest.UsageError("--torchperf-processes measures timings; it cannot be combined "
                                    "with --torchperf-disable")
        if config.pluginmanager.hasplugin("xdist") and config.getoption("numprocesses", None):
            raise pytest.UsageError(
                "--torchperf-processes starts its own fresh processes one after another; with "
                "pytest-xdist (-n) they would time on shared cores. Drop -n for the perf run "
                "(e.g. pytest -n 2 --torchperf-skip, then pytest --torchperf-only "
                "--torchperf-processes 3)")
    return count


def child_output(config: pytest.Config) -> Path | None:
    """In a child run: the file to write measurements to; None in a normal or controlling run."""
    value = config.getoption("torchperf_child")
    return Path(value) if value else None


def configure_child(config: pytest.Config) -> None:
    """A child measures only: no save/compare, whatever the shared arguments say."""
    from dataclasses import replace

    settings = config.stash[SETTINGS_KEY]
    config.stash[SETTINGS_KEY] = replace(settings, save=False, compare=False, reset=False,
                                         cross_machine=False)


def start_child_sink(config: pytest.Config) -> None:
    """Point the run's session at its output file (children only)."""
    path = child_output(config)
    if path is None:
        return
    from .processes import ChildSink

    session_of(config).child_sink = ChildSink(path, int(os.environ.get(CHILD_PROCESS_ENV, "1")))


def keep_perf_items(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A child runs only perf tests (the controller runs everything else once)."""
    others = [item for item in items if not item.stash.get(IS_PERF_KEY, False)]
    if others:
        config.hook.pytest_deselected(items=others)
        items[:] = [item for item in items if item.stash.get(IS_PERF_KEY, False)]


def run_children(session: pytest.Session, count: int) -> None:
    """Run the ``count - 1`` child processes and hand their measurements to the session."""
    config = session.config
    perf = [item for item in session.items if item.stash.get(IS_PERF_KEY, False)]
    if count <= 1 or not perf or config.option.collectonly:
        return
    from .processes import merge, read_child_file

    terminal = config.pluginmanager.get_plugin("terminalreporter")
    folder = Path(tempfile.mkdtemp(prefix="torchperf-processes-"))
    found, problems = [], []
    try:
        for process in range(1, count):
            out, log = folder / f"child-{process}.jsonl", folder / f"child-{process}.log"
            args = [sys.executable, "-m", "pytest", *config.invocation_params.args,
                    # Last wins in argparse: an empty path turns the child's JUnit XML off.
                    "--torchperf-child", str(out), "--junitxml="]
            env = {**os.environ, CHILD_PROCESS_ENV: str(process)}
            _say(terminal, f"torchperf: fresh process {process} of {count}: measuring "
                           f"{len(perf)} perf test(s) ...")
            start = time.perf_counter()
            with open(log, "wb") as handle:
                code = subprocess.call(args, cwd=config.invocation_params.dir, env=env,
                                       stdout=handle, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL)
            measured = read_child_file(out)
            found.append(measured)
            _say(terminal, f"torchperf: fresh process {process} of {count}: {len(measured)} "
                           f"measurement(s) in {time.perf_counter() - start:.1f} s")
            if code not in (0, 1) or not measured:
                problems.append(_child_problem(process, code, log, args))
        # The controller's own pass is the last process.
        _say(terminal, f"torchperf: process {count} of {count}: this run")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    perf_session = session_of(config)
    perf_session.process_pool = merge(found)
    perf_session.process_problems = problems
    for problem in problems:
        _say(terminal, problem, yellow=True)


def _child_problem(process: int, code: int, log: Path, args: list[str]) -> str:
    tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-15:]
    return (f"torchperf: fresh process {process} exited with code {code} and its measurements are "
            f"missing from the pooled verdicts (they use the processes that did measure). "
            f"Command: {' '.join(args)}\n    " + "\n    ".join(tail))


def _say(terminal: Any, line: str, yellow: bool = False) -> None:
    if terminal is not None:
        terminal.write_line(line, yellow=yellow)
