"""The ``ab`` kind's plugin part: its child-process schedule (the A/B controller runs the process
pairs instead of timing anything itself: :mod:`pytest_torchperf.kinds.ab.plugin_runs`), its
options, and the pytest glue of one side of an A/B run in its child process (this module is
registered as a pytest plugin for the run: ``pytest_plugin/hooks.py``): keep its end of the
turn protocol (:mod:`pytest_torchperf.kinds.ab.measure_turns`), take the controller's selection
of tests after collection, wait for the first turn, and give the turn back for good when done.
Each hook does nothing outside a side's child."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from pytest_torchperf.core.units import counted
from pytest_torchperf.kinds.ab import plugin_runs
from pytest_torchperf.kinds.ab.options import ABSettings
from pytest_torchperf.pytest_plugin import child_runs
from pytest_torchperf.pytest_plugin.child_schedule import Schedule
from pytest_torchperf.pytest_plugin.stash import SETTINGS_KEY, context_of

if TYPE_CHECKING:
    from pytest_torchperf.kinds.ab.measure_turns import TurnClient
    from pytest_torchperf.kinds.ab.run_data import ABData
    from pytest_torchperf.store.records import MeasurementRecord

CLI_HELP, METAVARS = plugin_runs.CLI_HELP, plugin_runs.METAVARS
#: This run's A/B settings from the command line (usage errors for what cannot work).
settings = plugin_runs.ab_setting


def _data(config: pytest.Config) -> ABData | None:
    """The controller's A/B data (None outside an A/B run's controller)."""
    if not config.stash[SETTINGS_KEY].of(ABSettings).against:
        return None  # not an A/B run: no run context is made for asking
    from pytest_torchperf.kinds.ab.run_data import ABState

    return context_of(config).state(ABState).data


def records_of_run(config: pytest.Config) -> list[MeasurementRecord]:
    """Records of the measurements only side A has (removed or renamed in B): no test of this
    run measures them, so they join the reports here (``removed in B`` rows)."""
    from pytest_torchperf.kinds.ab.run_data import removed_result

    data = _data(config)
    if data is None:
        return []
    return [
        removed_result(data, key).to_record()
        for key, entry in sorted(data.measured.items())
        if entry.one_sided == "A"
    ]


def summary_lines(config: pytest.Config) -> list[str]:
    """What the terminal summary adds in an A/B run: the sides and the one-sided measurements."""
    data = _data(config)
    if data is None:
        return []
    lines = [
        f"A/B: side A = {s.label} (torch {s.torch})"
        if n == "A"
        else f"     side B = {s.label} (torch {s.torch}); {counted(data.pairs_run, 'process pair')}"
        for n, s in data.sides.items()
    ]
    for (nodeid, name), entry in sorted(data.measured.items()):
        if entry.one_sided == "A":
            lines.append(f"removed in B: {nodeid} {name} (only side A measured it)")
    return lines


# -- a side's child ------------------------------------------------------------------------------


def configure_side(config: pytest.Config) -> None:
    """A side's child: keep its end of the turn protocol (the first turn comes after
    collection, see :func:`pytest_runtestloop`)."""
    from pytest_torchperf.kinds.ab.measure_turns import TurnClient

    client = TurnClient.from_environment()
    if client is not None:
        config.stash[_CLIENT_KEY] = client


_CLIENT_KEY = pytest.StashKey["TurnClient"]()
_EXIT_KEY = pytest.StashKey[int]()


def side_client(config: pytest.Config) -> TurnClient | None:
    return config.stash.get(_CLIENT_KEY, None)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep the tests the controller selected for this pair; after the plugin's own
    deselection (a child runs only perf tests), as it was when this was called from there.
    Extra pairs measure only the tests whose verdicts were undecided (the controller says
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


def pytest_runtestloop(session: pytest.Session) -> None:
    """Give the run's context the turn client, tell the controller which perf tests this side
    runs, and wait for the first turn: after the plugin's own ``tryfirst`` hook (the child's
    output file) and, registered later than pytest's main plugin, before pytest's test loop."""
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


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Keep the exit status (the side says it when it leaves)."""
    session.config.stash[_EXIT_KEY] = int(exitstatus)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """The side has measured and reported everything: it hands the turn back for good (with its
    exit status) and moves off the shared CPUs. What is left, pytest's and the interpreter's
    teardown (seconds with torch loaded), then runs beside the other side's work or the next
    pair's start-up instead of before them."""
    import sys

    client = side_client(config)
    if client is not None:
        sys.stdout.flush()  # the controller may show the end of this side's output now
        sys.stderr.flush()
        client.bye(config.stash.get(_EXIT_KEY, 0))


SCHEDULES = (
    Schedule(
        "A/B pairs",
        used=lambda settings, config: bool(settings.of(ABSettings).against),
        run=plugin_runs.run_ab,
        configure_child=configure_side,  # its first turn (which pins it) comes after collection
        alone=True,
    ),
)
