"""pytest glue of A/B runs: ``--torchperf-ab REV`` and ``--torchperf-ab-python PYTHON``.

Before this run's own test loop, pairs of fresh child pytest runs measure the perf tests: side A
(REV in a temporary worktree, or the other interpreter;
:mod:`pytest_torchperf.kinds.ab.run_sides`) and side B (the working tree), each with this run's
arguments plus ``--torchperf-child FILE``. The two children of a pair take turns, their timed
blocks alternating on the same CPU (why: :mod:`pytest_torchperf.kinds.ab.measure_turns`; one
pair: :mod:`pytest_torchperf.kinds.ab.run_pairs`). After the first pairs (3 by default),
measurements whose interval is still undecided get more pairs, up to a cap (8).

This run then executes the tests itself without timing them: each measurement's Result is judged
by the comparison engine on the pairs' data (B against A's session records). A side's own end, in
the child, is :mod:`pytest_torchperf.kinds.ab.plugin`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_torchperf.core.units import counted
from pytest_torchperf.kinds.ab.options import DEFAULT_MAX_PAIRS, DEFAULT_PAIRS, ABSettings
from pytest_torchperf.pytest_plugin import child_runs
from pytest_torchperf.pytest_plugin.stash import SETTINGS_KEY, context_of
from pytest_torchperf.run.child_process import python_interpreter

if TYPE_CHECKING:
    from pytest_torchperf.kinds.ab.run_data import ABData, Key
    from pytest_torchperf.kinds.ab.run_pairs import PairOutcome
    from pytest_torchperf.kinds.ab.run_sides import Side
    from pytest_torchperf.run.child_process import ChildProcess

#: Pairs measured first, and the most an A/B run goes to while verdicts are undecided.
MAX_PAIRS = 30


#: The A/B run's ``--torchperf-<name>`` options (registered with the run's others:
#: :mod:`pytest_torchperf.pytest_plugin.options`): name -> help, and their metavars.
CLI_HELP = {
    "ab": "A/B run: measure the perf tests of git revision REV (side A, checked out in a "
    "temporary worktree) and of the working tree (side B) in the same job, taking turns "
    "block by block, and fail those where B is slower than A (default limit 5%%). No "
    "stored baseline needed: e.g. --torchperf-ab origin/main, or HEAD for uncommitted changes",
    "ab_python": "A/B run against another environment: side A runs the working tree with "
    "interpreter PYTHON (e.g. a venv with another torch), side B with this one",
    "ab_pairs": f"A/B runs: fresh process pairs measured first (default {DEFAULT_PAIRS}); "
    f"undecided measurements get more, up to --torchperf-ab-max-pairs",
    "ab_max_pairs": f"A/B runs: most process pairs for an undecided measurement (default "
    f"{DEFAULT_MAX_PAIRS})",
}
METAVARS = {"ab": "REV", "ab_python": "PYTHON", "ab_pairs": "N", "ab_max_pairs": "N"}


def _count(config: pytest.Config, name: str, default: int, low: int) -> int:
    raw = config.getoption(name)
    if raw is None:
        return default
    try:
        value = int(str(raw))
    except ValueError:
        value = 0
    if not low <= value <= MAX_PAIRS:
        flag = "--" + name.replace("_", "-")
        raise pytest.UsageError(
            f"torchperf: {flag} must be a whole number from {low} to {MAX_PAIRS}, got {raw!r} "
            f"(each pair costs two pytest start-ups; {default} is the default)"
        )
    return value


def ab_setting(config: pytest.Config) -> ABSettings:
    """What side A is (``rev:REV`` / ``python:PATH``; empty outside an A/B run) and the pair
    counts. Combinations that cannot work are usage errors that say why."""
    revision = config.getoption("torchperf_ab")
    python = config.getoption("torchperf_ab_python")
    if revision is None and python is None:
        for option in ("torchperf_ab_pairs", "torchperf_ab_max_pairs"):
            if config.getoption(option) is not None:
                flag = "--" + option.replace("_", "-")
                raise pytest.UsageError(
                    f"torchperf: {flag} sets the process pairs of an A/B run; add "
                    f"--torchperf-ab REV (or --torchperf-ab-python PYTHON), or drop it"
                )
        return ABSettings()
    if revision is not None and python is not None:
        raise pytest.UsageError(
            "torchperf: --torchperf-ab and --torchperf-ab-python both name a side A; give one "
            "(a revision, or another interpreter for the same working tree)"
        )
    flag = "--torchperf-ab" if revision is not None else "--torchperf-ab-python"
    if not (revision or python or "").strip():
        raise pytest.UsageError(f"torchperf: {flag} needs a value (e.g. {flag} origin/main)")
    refused = {
        "torchperf_save": "stores nothing (both sides are measured now, no baseline is "
        "needed); save baselines in a separate run",
        "torchperf_compare": "compares against side A instead of stored baselines; drop "
        "--torchperf-compare (or run the stored-baseline gate as a separate job)",
        "torchperf_instructions": "times the two sides; instruction counts are their own mode. "
        "Run them as separate jobs",
        "torchperf_disable": "times the perf tests; it cannot be combined with --torchperf-disable",
    }
    child = config.getoption("torchperf_child")
    for option, why in refused.items():
        if config.getoption(option) and not child:
            raise pytest.UsageError(f"torchperf: {flag} {why}")
    processes = config.getoption("torchperf_processes")
    if processes is not None and str(processes).strip() != "1" and not child:
        raise pytest.UsageError(
            f"torchperf: {flag} measures in its own fresh process pairs; drop "
            f"--torchperf-processes (--torchperf-ab-pairs N sets how many pairs)"
        )
    if child_runs.is_xdist(config) and not child:
        raise pytest.UsageError(
            f"torchperf: {flag} runs its two sides one at a time; pytest-xdist (-n) would time "
            f"on shared cores. Drop -n for the A/B run (e.g. pytest -n 2 --torchperf-skip, then "
            f"pytest --torchperf-only {flag} ...)"
        )
    pairs = _count(config, "torchperf_ab_pairs", DEFAULT_PAIRS, 2)
    most = _count(config, "torchperf_ab_max_pairs", max(DEFAULT_MAX_PAIRS, pairs), pairs)
    if revision is not None and not child:
        _check_revision(config, revision)
    side = f"rev:{revision}" if revision is not None else f"python:{python}"
    return ABSettings(side, pairs, most)


def _check_revision(config: pytest.Config, revision: str) -> None:
    """A revision side A cannot have is a usage error before anything is collected (two git
    calls, a few milliseconds)."""
    from pytest_torchperf.kinds.ab.run_sides import SideError, repository_root, resolve_revision

    try:
        resolve_revision(repository_root(Path(config.invocation_params.dir)), revision)
    except SideError as exc:
        raise pytest.UsageError(f"torchperf: {exc}") from None


# -- in the controlling run -------------------------------------------------------------------


def run_ab(session: pytest.Session) -> None:
    """Measure every perf test in process pairs of side A and side B; hand the data to the run."""
    from pytest_torchperf import __version__
    from pytest_torchperf.kinds.ab.run_sides import Side, SideError, python_side, revision_side

    config = session.config
    settings = config.stash[SETTINGS_KEY]
    perf = child_runs.perf_items(session)
    if not perf or config.option.collectonly:
        return
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    invocation = Path(config.invocation_params.dir)
    side_type, _, value = settings.of(ABSettings).against.partition(":")
    import torch

    python, *flags = python_interpreter()  # [python, maybe -P]
    b_side = Side("working tree", python, invocation, {}, torch.__version__, tuple(flags))
    try:
        if side_type == "python":
            a_side = python_side(invocation, value, __version__, tuple(flags))
            _measure(session, perf, a_side, b_side, terminal)
        else:
            with revision_side(invocation, value, tuple(flags)) as a_side:
                a_side.torch = torch.__version__
                _measure(session, perf, a_side, b_side, terminal)
    except SideError as exc:
        # A usage error like the others (``ERROR: ...``, exit 4), not pytest.exit's banner.
        raise pytest.UsageError(f"torchperf: {exc}") from None


def _measure(
    session: pytest.Session,
    perf: Sequence[pytest.Item],
    a_side: Side,
    b_side: Side,
    terminal: pytest.TerminalReporter | None,
) -> None:
    from pytest_torchperf.kinds.ab.run_data import ABData, ABState
    from pytest_torchperf.kinds.ab.run_pairs import reap

    config = session.config
    settings = config.stash[SETTINGS_KEY]
    data = ABData(a_side.label, sides={"A": a_side, "B": b_side})
    cpus = _shared_cpus(config, perf)
    child_runs.say(
        terminal,
        f"torchperf: A/B: side A = {a_side.label}, torch {a_side.torch}; side B = "
        f"{b_side.label}, torch {b_side.torch}; {counted(len(perf), 'perf test')}, "
        f"{settings.of(ABSettings).pairs} process pairs taking turns"
        + (f" on CPU {','.join(map(str, cpus))}" if cpus else "")
        + " ...",
    )
    start = time.perf_counter()
    lingering: list[ChildProcess] = []
    try:
        _pairs(config, data, cpus, lingering, terminal)
    finally:
        reap(lingering)
    child_runs.say(
        terminal,
        f"torchperf: A/B: {counted(data.pairs_run, 'pair')} in {time.perf_counter() - start:.1f} s",
    )
    context_of(config).state(ABState).data = data


def _pairs(
    config: pytest.Config,
    data: ABData,
    cpus: list[int],
    lingering: list[ChildProcess],
    terminal: pytest.TerminalReporter | None,
) -> None:
    """Pairs until every measurement is decided, cannot be, or the cap is reached. While one
    pair measures on the shared CPUs, the next one (where it is likely to run) starts up and
    collects on the others: its two start-ups cost no wall time."""
    from pytest_torchperf.kinds.ab.run_pairs import abandon, can_start_ahead, run_pair, start_pair

    settings = config.stash[SETTINGS_KEY].of(ABSettings)
    args = list(config.invocation_params.args)
    sides = data.sides
    ahead = can_start_ahead(cpus)
    only: list[str] | None = None
    undecided: list[Key] = []
    upcoming = None
    try:
        while True:
            number = data.pairs_run + 1
            took = time.perf_counter()
            started = upcoming or start_pair(args, sides, number, cpus)
            upcoming = None
            # The next pair runs for sure below --torchperf-ab-pairs, and likely where this
            # pair's predecessor left measurements undecided.
            if ahead and number < settings.max_pairs and (number < settings.pairs or undecided):
                upcoming = start_pair(args, sides, number + 1, cpus, ahead=True)
            pair = run_pair(started, only)
            took = time.perf_counter() - took
            lingering.extend(pair.lingering)
            a, b = pair.lines["A"], pair.lines["B"]
            took_a, took_b = (sum(line.skipped is None for line in x.values()) for x in (a, b))
            if number == 1:
                _check_first_pair(pair, data)
            data.add_pair(a, b, pair.tests)
            for problem in pair.problems:
                child_runs.say(terminal, problem, yellow=True)
            undecided = (
                data.undecided(settings.max_pairs) if data.pairs_run >= settings.pairs else []
            )
            child_runs.say(
                terminal,
                f"torchperf: A/B pair {number}: {counted(took_a, 'measurement')} in A, {took_b} in B, "
                f"{took:.1f} s" + _undecided_note(data, undecided),
            )
            if data.pairs_run < settings.pairs:
                continue
            if not undecided or data.pairs_run >= settings.max_pairs:
                break
            only = sorted({nodeid for nodeid, _ in undecided})
    finally:
        if upcoming is not None:
            abandon(upcoming)


def _undecided_note(data: ABData, undecided: list[Key]) -> str:
    """Why more pairs run: intervals that straddle their limit, or changes that already lie
    beyond it and that a further pair confirms (a newcomer read `1 still undecided` beside
    three pairs of +31 to +34 % at a 20 % limit)."""
    from pytest_torchperf.kinds.ab.judge_pairs import MIN_PAIRS_FOR_CHANGE

    confirming = data.confirming(undecided)
    said = []
    if confirming:
        its = "its" if len(confirming) == 1 else "their"
        said.append(
            f"{len(confirming)} beyond {its} limit, which more pairs confirm (a change rests on "
            f"at least {MIN_PAIRS_FOR_CHANGE})"
        )
    if len(undecided) > len(confirming):
        said.append(f"{len(undecided) - len(confirming)} still undecided")
    return "".join(f"; {part}" for part in said)


def _check_first_pair(pair: PairOutcome, data: ABData) -> None:
    """A side that could not start or collect at all is an error naming it; a side that simply
    has no perf tests (the first one is being added) is not."""
    from pytest_torchperf.kinds.ab.run_sides import SideError

    for side in ("A", "B"):
        started = pair.tests.get(side) is not None or pair.codes.get(side) in (0, 1, 5)
        if not started:
            raise SideError(
                f"side {side} ({data.sides[side].label}) could not run its tests: "
                + " ".join(p for p in pair.problems if f"side {side}" in p)
            )
    if not pair.lines["A"] and not pair.lines["B"]:
        raise SideError(
            "neither side measured anything (the perf tests failed or were skipped there): "
            + " ".join(pair.problems)
        )


def _shared_cpus(config: pytest.Config, perf: Sequence[pytest.Item]) -> list[int]:
    """The CPUs both sides are pinned to: as many as the most intra-op threads the run asks for
    (command line, ini, markers; 1 by default), the last ones this process may use (CPU 0 takes
    most interrupts). A ``threads=`` given only in a ``torchperf(...)`` call is not seen here."""
    if not hasattr(os, "sched_getaffinity"):
        return []
    allowed = sorted(os.sched_getaffinity(0))
    settings = config.stash[SETTINGS_KEY]
    wanted = [settings.cli.get("threads"), settings.ini.get("threads")]
    for item in perf:
        marker = item.get_closest_marker("torchperf")
        wanted.append(marker.kwargs.get("threads") if marker is not None else None)
    try:
        threads = max([1, *(int(t) for t in wanted if t)])
    except (TypeError, ValueError):
        threads = 1  # the option's own parser reports a bad value
    return allowed[-threads:] if threads <= len(allowed) else allowed
