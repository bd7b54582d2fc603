"""The ``ab`` kind's plugin part: its child-process schedule (the A/B controller runs the process
pairs instead of timing anything itself), its options, and the pytest hooks of a side's child
(this module is registered as a pytest plugin for the run: ``pytest_plugin/hooks.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from pytest_torchperf.kinds.ab import plugin_runs, plugin_side
from pytest_torchperf.kinds.ab.options import ABSettings
from pytest_torchperf.pytest_plugin.child_schedule import Schedule
from pytest_torchperf.pytest_plugin.stash import SETTINGS_KEY, context_of

if TYPE_CHECKING:
    from pytest_torchperf.store.records import MeasurementRecord

add_options = plugin_runs.add_options
#: This run's A/B settings from the command line (usage errors for what cannot work).
settings = plugin_runs.ab_setting


def records_of_run(config: pytest.Config) -> list[MeasurementRecord]:
    """The records of the measurements only side A has (removed or renamed in B)."""
    if not config.stash[SETTINGS_KEY].of(ABSettings).against:
        return []
    return plugin_runs.removed_records(context_of(config))


def summary_lines(config: pytest.Config) -> list[str]:
    """What the terminal summary adds in an A/B run: the sides and the one-sided measurements."""
    if not config.stash[SETTINGS_KEY].of(ABSettings).against:
        return []
    return plugin_runs.summary_lines(context_of(config))


SCHEDULES = (
    Schedule(
        "A/B pairs",
        used=lambda settings, config: bool(settings.of(ABSettings).against),
        run=plugin_runs.run_ab,
        configure_child=plugin_side.configure_side,  # pins it; its first turn comes after collection
        alone=True,
    ),
)


# -- a side's child: pytest hooks (each does nothing outside a side's child) --------------------


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep the tests the controller selected for this pair; after the plugin's own
    deselection (a child runs only perf tests), as it was when this was called from there."""
    plugin_side.keep_only(config, items)


def pytest_runtestloop(session: pytest.Session) -> None:
    """Tell the controller this side's tests and wait for the first turn: after the plugin's
    own ``tryfirst`` hook (the child's output file) and, registered later than pytest's main
    plugin, before pytest's test loop."""
    plugin_side.announce_tests(session)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Keep the exit status (the side says it when it leaves)."""
    plugin_side.finished(session.config, int(exitstatus))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """The side has measured and reported everything: it hands the turn back for good (what is
    left is pytest's and the interpreter's teardown)."""
    plugin_side.leave(config)
