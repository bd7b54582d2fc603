"""The ``ab`` kind's plugin part: its child-process schedule (the A/B controller runs the process
pairs instead of timing anything itself) and its options."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_torchperf.kinds.ab import plugin_runs, plugin_side
from pytest_torchperf.kinds.ab.options import ABSettings
from pytest_torchperf.pytest_plugin.child_schedule import Schedule
from pytest_torchperf.pytest_plugin.stash import SETTINGS_KEY, context_of

add_options = plugin_runs.add_options
#: This run's A/B settings from the command line (usage errors for what cannot work).
settings = plugin_runs.ab_setting


def records_of_run(config: pytest.Config) -> list[dict[str, Any]]:
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
