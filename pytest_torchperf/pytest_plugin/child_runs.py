"""pytest glue of ``--torchperf-processes N``: options, child-run mode, starting the children.

The pooling itself is pure logic in :func:`pytest_torchperf.judge.samples.pooled`. Here: the
controlling run starts N-1 child pytest runs before its own test loop, each with the controller's
own arguments plus ``--torchperf-child FILE``, one after another (never concurrently: they would
share the cores the timing needs). A child runs only the perf tests, judges and saves nothing,
writes no reports or JUnit XML, and leaves one line per measurement in FILE for the controller to
pool.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_torchperf.core.units import counted
from pytest_torchperf.pytest_plugin.stash import IS_PERF_KEY, SETTINGS_KEY, context_of, ini_value
from pytest_torchperf.run.child_process import CHILD_PROCESS_ENV, ChildCommand, ChildProcess

if TYPE_CHECKING:
    from pytest_torchperf.core.child_protocol import SampleLine
    from pytest_torchperf.run.children import Key
    from pytest_torchperf.run.context import RunContext

#: Most processes accepted: each costs a pytest start-up (torch import, compiles), and each stores
#: one session of the 10 a baseline history keeps.
MAX_PROCESSES = 10
#: Where a suspected slowdown is confirmed (``--torchperf-confirm``).
CONFIRM_MODES = ("fresh", "same")
#: Time limit of the first child run; later ones get 5x what the first took (at least 10 min).
FIRST_CHILD_TIMEOUT_S = 3600.0


#: ``--torchperf-processes``, ``--torchperf-confirm`` and the internal ``--torchperf-child*``
#: options, registered with the run's others (:mod:`.options`): name -> help, metavars, ini keys,
#: the values one takes.
CLI_HELP = {
    "processes": "Measure each perf test in N fresh processes (N-1 extra pytest runs "
    "before this one, interleaving the targets) and judge the median; with "
    "--torchperf-save, stores N sessions; default 1, and 5 when saving "
    "(ini torchperf_processes)",
    "confirm": "Where a suspected slowdown is re-measured before it fails: fresh (a new "
    "pytest process runs that test again, and an instruction count above its limit is "
    "counted again in one; default) or same (this process) (ini torchperf_confirm)",
    "child": argparse.SUPPRESS,
    "child_only": argparse.SUPPRESS,
    # A JSON list of node ids: the child runs only those perf tests (its slice).
    "child_items": argparse.SUPPRESS,
}
METAVARS = {
    "processes": "N",
    "confirm": "WHERE",
    "child": "FILE",
    "child_only": "NODEID",
    "child_items": "FILE",
}
INI_HELP = {
    "processes": "Fresh processes per perf test (default 1)",
    "confirm": "Where a suspected slowdown is re-measured: fresh or same",
}
CHOICES = {"confirm": CONFIRM_MODES}


#: Fresh processes a ``--torchperf-save`` run measures in when no count is given: one saved
#: session cannot show how much a machine varies between processes, and a baseline process that
#: happened to run fast or slow then decides every later verdict. On a shared 2-vCPU VM a 20-test
#: suite of unchanged code failed 3-6 % of compare runs against 3 saved processes and 1-2 %
#: against 5 (docs/reliability.md).
SAVE_PROCESSES = 5


def processes_setting(config: pytest.Config, repeats_exactly: bool = False) -> int:
    """The validated process count (1 = the normal single-process run).

    A run that times nothing (``--torchperf-skip``, or ``--torchperf-disable`` with the count from
    the ini file) runs in one process, so an ini default does not get in the way of
    ``pytest -n 2 --torchperf-skip``. A saving run with no count given measures in
    :data:`SAVE_PROCESSES` fresh processes (under pytest-xdist the controller runs the fresh ones
    before the workers run any test, and each worker measures once:
    :mod:`pytest_torchperf.pytest_plugin.xdist_runs`), unless the run's figure
    ``repeats_exactly`` between processes (the kinds say: their plugin parts' ``repeats_exactly``).
    """
    opt = config.getoption
    on_cli = opt("torchperf_processes")
    raw = on_cli or ini_value(config, "torchperf_processes")
    if opt("torchperf_child"):
        return 1  # a child measures once; only the controlling run starts processes
    if not raw:
        implicit = (
            opt("torchperf_save")
            and not opt("torchperf_skip")
            and not opt("torchperf_disable")
            and not hasattr(config, "workerinput")
            and not repeats_exactly
        )
        return SAVE_PROCESSES if implicit else 1
    try:
        count = int(str(raw).strip())
    except ValueError:
        count = 0
    if not 1 <= count <= MAX_PROCESSES:
        given = "--torchperf-processes" if on_cli else "ini key torchperf_processes"
        raise pytest.UsageError(
            f"torchperf: {given} must be a whole number from 1 to {MAX_PROCESSES}, got {raw!r}. "
            f"3 is a good start for a 5-10% gate on a dedicated runner"
        )
    if count == 1 or opt("torchperf_skip") or (opt("torchperf_disable") and not on_cli):
        return 1
    if opt("torchperf_disable"):
        raise pytest.UsageError(
            "--torchperf-processes measures timings; it cannot be combined with --torchperf-disable"
        )
    # The controller ran the fresh processes; a worker pools theirs.
    return 1 if hasattr(config, "workerinput") else count


def is_xdist(config: pytest.Config) -> bool:
    """pytest-xdist spreads this run over workers (``-n N``, N > 0), or this is one of them."""
    if hasattr(config, "workerinput"):
        return True
    return bool(config.pluginmanager.hasplugin("xdist") and config.getoption("numprocesses", None))


def child_output(config: pytest.Config) -> Path | None:
    """In a child run: the file to write measurements to; None in a normal or controlling run."""
    value = config.getoption("torchperf_child")
    return Path(value) if value else None


def start_child_sink(config: pytest.Config) -> None:
    """Point the run's session at its output file (children only)."""
    path = child_output(config)
    if path is None:
        return
    from pytest_torchperf.run.children import ChildSink

    context_of(config).child_sink = ChildSink(path, int(os.environ.get(CHILD_PROCESS_ENV, "1")))


def confirm_setting(config: pytest.Config) -> str:
    """``fresh`` or ``same`` (validated; the ini value too)."""
    on_cli = config.getoption("torchperf_confirm")
    value = on_cli or ini_value(config, "torchperf_confirm") or "fresh"
    if value not in CONFIRM_MODES:
        given = "--torchperf-confirm" if on_cli else "ini key torchperf_confirm"
        raise pytest.UsageError(
            f"torchperf: {given} must be one of {', '.join(CONFIRM_MODES)}, got {value!r}"
        )
    return value


def keep_perf_items(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A child runs only perf tests (the controller runs everything else once), or only the one
    test it was started to confirm, or only its slice of them (``--torchperf-child-items``)."""
    only = config.getoption("torchperf_child_only")
    listed = config.getoption("torchperf_child_items")
    wanted = {only} if only is not None else None
    if listed:
        import json

        part = set(json.loads(Path(listed).read_text(encoding="utf-8")))
        wanted = part if wanted is None else wanted & part
    others = [
        item
        for item in items
        if not item.stash.get(IS_PERF_KEY, False)
        or (wanted is not None and item.nodeid not in wanted)
    ]
    if others:
        config.hook.pytest_deselected(items=others)
        items[:] = [item for item in items if item not in others]


def perf_items(session: pytest.Session) -> list[pytest.Item]:
    """Perf items this run will execute (not skipped by a marker known at collection)."""
    return [
        item
        for item in session.items
        if item.stash.get(IS_PERF_KEY, False) and item.get_closest_marker("skip") is None
    ]


def run_children(session: pytest.Session) -> None:
    """Run the ``--torchperf-processes`` count's child processes but one and hand their
    measurements to the session."""
    config = session.config
    count = config.stash[SETTINGS_KEY].processes
    perf = perf_items(session)
    if count <= 1 or not perf or config.option.collectonly:
        return
    folder = Path(tempfile.mkdtemp(prefix="torchperf-processes-"))
    try:
        run_fresh_processes(config, count, folder, counted(len(perf), "perf test"))
        context_of(config).process_pool = pooled(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def pooled(folder: Path) -> dict[Key, list[SampleLine]]:
    """What the fresh processes that wrote into ``folder`` measured, by target, in process
    order (at most 9 of them: ``child-1`` to ``child-9`` sort as numbers)."""
    from pytest_torchperf.run.children import merge, read_child_file

    return merge(read_child_file(path) for path in sorted(folder.glob("child-*.jsonl")))


def run_fresh_processes(
    config: pytest.Config,
    count: int,
    folder: Path,
    what: str,
    extra_args: Sequence[str] = (),
    extra_env: Mapping[str, str] | None = None,
    stop_if_empty: bool = False,
) -> None:
    """Run the ``count - 1`` fresh child processes one after another, each writing
    ``folder/child-K.jsonl``, and say their problems on the terminal.
    ``stop_if_empty``: a first child that found no perf test to run (a controller that did not
    collect cannot know) ends them without a problem."""
    from pytest_torchperf.run.children import read_child_file

    settings = config.stash[SETTINGS_KEY]
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    problems: list[str] = []
    timeout = FIRST_CHILD_TIMEOUT_S
    for process in range(1, count):
        out, log = folder / f"child-{process}.jsonl", folder / f"child-{process}.log"
        command = ChildCommand(
            tuple(config.invocation_params.args),
            config.invocation_params.dir,
            child_file=out,
            own=tuple(extra_args),
            # Its share of the save's waiting budget (this run keeps its own share).
            overrides=(f"--torchperf-save-wait={settings.save_wait:g}",),
            env=dict(extra_env or {}),
            process=process,
        )
        say(
            terminal,
            f"torchperf: fresh process {process} of {count}: measuring {what} ...",
        )
        child = command.start(log)
        code = child.wait(timeout)
        took = child.took
        if process == 1:
            timeout = max(600.0, 5 * took)
        measured = read_child_file(out)
        if stop_if_empty and process == 1 and not measured and code in (0, 5):
            say(terminal, "torchperf: no perf test to measure in fresh processes")
            return
        # A busy save's process waits for quiet: said here, or a slow process reads as a hang.
        waited = max((line.waited or 0.0 for line in measured.values()), default=0.0)
        say(
            terminal,
            f"torchperf: fresh process {process} of {count}: "
            f"{counted(len(measured), 'measurement')} in {took:.1f} s"
            + (
                f" ({waited:.0f} s of it waiting for a busy machine to quiet down and measuring "
                f"again)"
                if waited >= 1.0
                else ""
            ),
        )
        if code not in (0, 1) or not measured:
            problems.append(_child_problem(process, child, bool(measured)))
    # The controller's own pass (each worker's, under xdist) is the last process.
    say(terminal, f"torchperf: process {count} of {count}: this run")
    for problem in problems:
        say(terminal, problem, yellow=True)


def attach_fresh_confirm(config: pytest.Config, perf_session: RunContext) -> None:
    """Give a comparing run's session the means to confirm a slowdown in a fresh process."""
    settings = config.stash[SETTINGS_KEY]
    # With --torchperf-processes too: re-measuring in this process and pooling again with the
    # same children would repeat the first verdict, not confirm it.
    if settings.compare and not settings.child and settings.confirm == "fresh":
        from pytest_torchperf.run.children import FreshRuns

        perf_session.fresh_runs = FreshRuns(lambda nodeid: confirm_in_fresh_process(config, nodeid))


def confirm_in_fresh_process(config: pytest.Config, nodeid: str) -> dict[Any, Any]:
    """Run test ``nodeid`` once more in a fresh pytest process; its measurements by key.

    Empty when the child could not measure (the caller then confirms in this process). Under
    pytest-xdist the worker holds the workers' lock for the child's whole run, and the child (it
    inherits the worker's environment) measures on the same GPU as the worker.
    """
    from pytest_torchperf.run.children import read_child_file

    folder = Path(tempfile.mkdtemp(prefix="torchperf-confirm-"))
    try:
        out, log = folder / "confirm.jsonl", folder / "confirm.log"
        no_xdist = ("-n", "0") if config.pluginmanager.hasplugin("xdist") else ()
        command = ChildCommand(
            tuple(config.invocation_params.args),
            config.invocation_params.dir,
            child_file=out,
            child_only=nodeid,
            own=no_xdist,
            overrides=("--torchperf-save-wait=0",),  # a confirming pass is judged, never stored
            process=0,
        )
        gate = context_of(config).worker_gate
        # Under xdist the other workers wait for the child's whole run, its start-up (an import
        # of torch beside a timed section is a busy neighbour) and its timing alike; the child
        # itself takes no lock.
        with gate.exclusive() if gate is not None else contextlib.nullcontext():
            command.start(log).wait(FIRST_CHILD_TIMEOUT_S)
        return read_child_file(out)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _child_problem(process: int, child: ChildProcess, measured: bool) -> str:
    code = child.code
    what = (
        "its measurements are missing from the pooled verdicts (they use the processes that "
        "did measure)"
        if not measured
        else "the measurements it made before are pooled"
    )
    if code == 0 and not measured:
        what = (
            "it measured nothing (its perf tests were skipped there, or only ungated "
            "torchperf_timer/profiler tests ran)"
        )
    return f"torchperf: fresh process {process} exited with code {code}: {what}. {child.told(15)}"


def say(terminal: pytest.TerminalReporter | None, line: str, yellow: bool = False) -> None:
    if terminal is not None:
        terminal.write_line(line, yellow=yellow)
