"""The run's schedules of child pytest processes, in one table: which ones a run uses, how a child
of each is set up, and what the controlling run does before pytest's own test loop.

Each schedule runs its children through :class:`pytest_torchperf.run.child_process.ChildProcess`
(one launcher, one line protocol); what differs is when and how many:

- A/B pairs (``--torchperf-ab``): the two revisions' processes take turns; the controller runs
  them instead of timing anything itself (:mod:`.ab_runs`, the sides: :mod:`.ab_side`).
- Counting (``--torchperf-instructions``, ``--torchperf-fallback instructions``): processes
  under Valgrind, side by side, before anything is timed (:mod:`.instruction_runs`).
- Fresh processes of an xdist save (:mod:`.xdist_runs`) or of ``--torchperf-processes``
  (:mod:`.child_runs`): one after another, before the test loop pools them.

Adding a schedule is a row here and its own module; ``hooks.py`` asks this table, never the
run mode.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from pytest_torchperf.kinds.ab import plugin_runs as ab_runs
from pytest_torchperf.kinds.ab import plugin_side as ab_side
from pytest_torchperf.kinds.instructions import plugin_runs as instruction_runs
from pytest_torchperf.options.settings import RunSettings
from pytest_torchperf.pytest_plugin import child_runs, xdist_runs
from pytest_torchperf.pytest_plugin.stash import CONTEXT_SETUP_KEY, SETTINGS_KEY


@dataclass(frozen=True)
class Schedule:
    """One way this run starts child pytest processes."""

    name: str
    #: This run uses it (the controller) or is one of its children (``settings.child``).
    used: Callable[[RunSettings, pytest.Config], bool]
    #: The controller, before pytest's test loop: start the children, read what they measured.
    run: Callable[[pytest.Session], None]
    #: Set up a child of this schedule (at configure time).
    configure_child: Callable[[pytest.Config], None] = lambda config: None
    #: No later schedule runs in the same controller (the A/B controller times nothing).
    alone: bool = False


def _settings(session: pytest.Session) -> RunSettings:
    return session.config.stash[SETTINGS_KEY]


def _configure_counting_child(config: pytest.Config) -> None:
    # Set up once the run's context exists (the counting child's settings live on it).
    config.stash[CONTEXT_SETUP_KEY].append(
        lambda ctx: instruction_runs.configure_counting_child(config)
    )


SCHEDULES: tuple[Schedule, ...] = (
    Schedule(
        "A/B pairs",
        used=lambda settings, config: bool(settings.ab),
        run=ab_runs.run_ab,
        configure_child=ab_side.configure_side,  # pins it; its first turn comes after collection
        alone=True,
    ),
    # Counting first: its processes take every core and are done before anything is timed.
    Schedule(
        "counting under Valgrind",
        used=lambda settings, config: settings.counts_instructions,
        run=instruction_runs.run_counting_children,
        configure_child=_configure_counting_child,
    ),
    Schedule(
        "fresh processes of an xdist save",
        used=lambda settings, config: xdist_runs.runs_children(config),
        run=lambda session: xdist_runs.run_children(session.config),
        alone=True,
    ),
    Schedule(
        "fresh processes",
        used=lambda settings, config: settings.processes > 1,
        run=lambda session: child_runs.run_children(session, _settings(session).processes),
    ),
)


def configure(config: pytest.Config, settings: RunSettings) -> None:
    """A child process: set up for every schedule that started it."""
    if not settings.child:
        return
    child_runs.configure_child(config)
    for schedule in SCHEDULES:
        if schedule.used(settings, config):
            schedule.configure_child(config)


def run_children(session: pytest.Session, settings: RunSettings) -> None:
    """The controller: run each schedule it uses, in the table's order, before the test loop."""
    for schedule in SCHEDULES:
        if schedule.used(settings, session.config):
            schedule.run(session)
            if schedule.alone:
                return
