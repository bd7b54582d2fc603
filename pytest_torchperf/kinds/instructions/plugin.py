"""The ``instructions`` kind's plugin part: its options and its child-process schedule, counting
under Valgrind side by side before anything is timed (``--torchperf-instructions``, and
``--torchperf-fallback instructions`` for the ``time-or-instructions`` kind)."""

from __future__ import annotations

import pytest

from pytest_torchperf.kinds.instructions import plugin_options, plugin_runs
from pytest_torchperf.pytest_plugin.child_schedule import Schedule
from pytest_torchperf.pytest_plugin.stash import CONTEXT_SETUP_KEY

add_options = plugin_options.add_options


def _configure_counting_child(config: pytest.Config) -> None:
    # Set up once the run's context exists (the counting child's settings live on it).
    config.stash[CONTEXT_SETUP_KEY].append(lambda ctx: plugin_runs.configure_counting_child(config))


SCHEDULES = (
    Schedule(
        "counting under Valgrind",
        used=lambda settings, config: settings.counts_instructions,
        run=plugin_runs.run_counting_children,
        configure_child=_configure_counting_child,
    ),
)
