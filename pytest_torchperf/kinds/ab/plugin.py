"""The ``ab`` kind's plugin part: its child-process schedule (the A/B controller runs the process
pairs instead of timing anything itself) and its options."""

from __future__ import annotations

from pytest_torchperf.kinds.ab import plugin_runs, plugin_side
from pytest_torchperf.pytest_plugin.child_schedule import Schedule

add_options = plugin_runs.add_options

SCHEDULES = (
    Schedule(
        "A/B pairs",
        used=lambda settings, config: bool(settings.ab),
        run=plugin_runs.run_ab,
        configure_child=plugin_side.configure_side,  # pins it; its first turn comes after collection
        alone=True,
    ),
)
