"""The ``instructions`` kind's plugin part: its options and its child-process schedule, counting
under Valgrind side by side before anything is timed (``--torchperf-instructions``, and
``--torchperf-fallback instructions`` for the ``time-or-instructions`` kind)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from pytest_torchperf.core.errors import OptionError
from pytest_torchperf.kinds.instructions import plugin_options, plugin_runs
from pytest_torchperf.kinds.instructions.options import CountSettings
from pytest_torchperf.pytest_plugin.child_schedule import Schedule
from pytest_torchperf.pytest_plugin.stash import CONTEXT_SETUP_KEY

if TYPE_CHECKING:
    from pytest_torchperf.run.context import RunContext

CLI_HELP, METAVARS, INI_HELP = (
    plugin_options.CLI_HELP,
    plugin_options.METAVARS,
    plugin_options.INI_HELP,
)


def settings(config: pytest.Config) -> CountSettings:
    """This run's instruction-count settings from the command line and ini file (usage errors
    for what cannot work)."""
    instructions = plugin_options.instructions_setting(config)
    fallback = plugin_options.fallback_setting(config)
    return CountSettings(
        instructions,
        fallback,
        # Checked only where it matters: a bad value must not break runs that count nothing.
        plugin_options.jobs_setting(config) if instructions or fallback else 0,
    )


def repeats_exactly(config: pytest.Config) -> bool:
    """The run gates on the instruction count, which repeats exactly between processes: a save
    needs no fresh processes. Read raw, before the run's settings exist (a bad ini value is
    :func:`settings`' error, reported after the process count's)."""
    from pytest_torchperf.options.values import parse_bool

    raw = config.getoption("torchperf_instructions", None)
    if raw is None:
        try:
            raw = parse_bool(config.getini("torchperf_instructions") or False)
        except OptionError:
            raw = False  # the kind's own check reports the bad value
    return bool(raw)


def configure_counting_child(config: pytest.Config) -> None:
    """In the child under Valgrind: tell the run's context where the profiles go, once it exists
    (the counting child's settings live on it)."""

    def setup(ctx: RunContext) -> None:
        from pytest_torchperf.kinds.instructions.measure_callgrind import counted_process
        from pytest_torchperf.kinds.instructions.run_counting import CountState

        ctx.state(CountState).folder = counted_process()

    config.stash[CONTEXT_SETUP_KEY].append(setup)


SCHEDULES = (
    Schedule(
        "counting under Valgrind",
        used=lambda settings, config: settings.of(CountSettings).counts,
        run=plugin_runs.run_counting_children,
        configure_child=configure_counting_child,
    ),
)
