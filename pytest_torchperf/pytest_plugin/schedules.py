"""The run's schedules of child pytest processes, in one table: which ones a run uses, how a child
of each is set up, and what the controlling run does before pytest's own test loop.

Each schedule runs its children through :class:`pytest_torchperf.run.child_process.ChildProcess`
(one launcher, one line protocol); what differs is when and how many:

- The measurement kinds' own, from their ``plugin`` parts (``kinds/<kind>/plugin.py``): A/B
  pairs, whose two sides' processes take turns while the controller times nothing itself;
  counting under Valgrind, side by side, before anything is timed.
- Fresh processes of an xdist save (:mod:`.xdist_runs`) or of ``--torchperf-processes``
  (:mod:`.child_runs`): one after another, before the test loop pools them.

Adding a schedule is a row here (or in a kind's plugin part) and its own module; ``hooks.py``
asks this table, never the run mode.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from pytest_torchperf.kinds import parts
from pytest_torchperf.options.settings import RunSettings
from pytest_torchperf.pytest_plugin import child_runs, xdist_runs
from pytest_torchperf.pytest_plugin.child_schedule import Schedule
from pytest_torchperf.pytest_plugin.stash import SETTINGS_KEY

#: The fresh processes every timed kind uses.
FRESH_PROCESSES: tuple[Schedule, ...] = (
    Schedule(
        "fresh processes of an xdist save",
        used=lambda settings, config: xdist_runs.runs_children(config),
        run=lambda session: xdist_runs.run_children(session.config),
        alone=True,
    ),
    Schedule(
        "fresh processes",
        used=lambda settings, config: settings.processes > 1,
        run=child_runs.run_children,
    ),
)


def schedules() -> tuple[Schedule, ...]:
    """Every schedule, in the order a controller runs them: the kinds' own (their plugin parts'
    ``SCHEDULES``, in the registry's order) first (A/B pairs: the controller times nothing else;
    counting: its processes take every core and are done before anything is timed), then the
    fresh processes. Asked after configure, so kinds other plugins registered are in it."""
    return (*(s for module in parts("plugin") for s in module.SCHEDULES), *FRESH_PROCESSES)


def configure(config: pytest.Config, settings: RunSettings) -> None:
    """A child process: it measures only (no save or compare, whatever the arguments it shares
    with its controller say), set up for every schedule that started it."""
    config.stash[SETTINGS_KEY] = replace(
        settings, save=False, compare=False, reset=False, cross_machine=False
    )
    for schedule in schedules():
        if schedule.used(settings, config):
            schedule.configure_child(config)


def run_children(session: pytest.Session, settings: RunSettings) -> None:
    """The controller: run each schedule it uses, in the table's order, before the test loop."""
    for schedule in schedules():
        if schedule.used(settings, session.config):
            schedule.run(session)
            if schedule.alone:
                return
