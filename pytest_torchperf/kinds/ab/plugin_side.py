"""pytest glue of one side of an A/B run, in its child process: keep its end of the turn protocol
(:mod:`pytest_torchperf.kinds.ab.measure_turns`), take the controller's selection of tests after
collection, wait for the first turn, and give the turn back for good when done. The controlling
run's part is :mod:`pytest_torchperf.kinds.ab.plugin_runs`.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_torchperf.pytest_plugin import child_runs
from pytest_torchperf.pytest_plugin.stash import context_of


def configure_side(config: pytest.Config) -> None:
    """A side's child: keep its end of the turn protocol (the first turn comes after
    collection, see :func:`announce_tests`)."""
    from pytest_torchperf.kinds.ab.measure_turns import TurnClient

    client = TurnClient.from_environment()
    if client is not None:
        config.stash[_CLIENT_KEY] = client


_CLIENT_KEY = pytest.StashKey[Any]()


def side_client(config: pytest.Config) -> Any:
    return config.stash.get(_CLIENT_KEY, None)


def announce_tests(session: pytest.Session) -> None:
    """A side's child: give the run's context the turn client, tell the controller which perf
    tests this side runs, and wait for the first turn."""
    client = side_client(session.config)
    if client is None:
        return
    if session.testsfailed and not session.config.option.continue_on_collection_errors:
        # Collection failed (a test module that does not import on this side): pytest stops
        # right after this hook; the controller sees the exit and names this side.
        return
    from pytest_torchperf.kinds.ab.run_data import ABState

    ctx = context_of(session.config)
    ctx.state(ABState).turns = client
    ctx.waits_for_turns = True
    # Both sides start up and collect (imports, torch) at the same time: nothing is timed yet.
    # From here on this side runs only on its turns.
    client.tests([item.nodeid for item in child_runs.perf_items(session)])
    client.ready()


_EXIT_KEY = pytest.StashKey[int]()


def finished(config: pytest.Config, exitstatus: int) -> None:
    config.stash[_EXIT_KEY] = exitstatus


def leave(config: pytest.Config) -> None:
    """A side's child after its last test and its report: give the turn back for good (with
    its exit status) and move off the shared CPUs. What is left, pytest's and the interpreter's
    teardown (seconds with torch loaded), then runs beside the other side's work or the next
    pair's start-up instead of before them."""
    import sys

    client = side_client(config)
    if client is not None:
        sys.stdout.flush()  # the controller may show the end of this side's output now
        sys.stderr.flush()
        client.bye(config.stash.get(_EXIT_KEY, 0))


def keep_only(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Extra pairs measure only the tests whose verdicts were undecided (the controller says
    which once this process has collected: it may have started while the pair before ran)."""
    client = side_client(config)
    if client is None:
        return
    from pytest_torchperf.measure.torch_state import preload

    # What the first measurement would import, imported while both sides start up (and, for a
    # pair started ahead, while the pair before it measures), not one side after the other.
    preload()
    only = client.selection()
    if only is None:
        return
    others = [item for item in items if item.nodeid not in only]
    if others:
        config.hook.pytest_deselected(items=others)
        items[:] = [item for item in items if item.nodeid in only]
