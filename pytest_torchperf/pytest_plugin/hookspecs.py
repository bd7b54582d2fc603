"""Hooks other plugins and ``conftest.py`` files implement to extend pytest-torchperf (registered
by :func:`pytest_torchperf.pytest_plugin.hooks.pytest_addhooks`). Documented in
docs/fixtures-and-api.md, "Hooks for other plugins"."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest


def pytest_torchperf_environment(
    config: pytest.Config, device: str, threads: int
) -> dict[str, Any] | None:
    """Extra fields of the environment fingerprint of measurements on ``device`` (``cpu``,
    ``cuda:0``, ...) with ``threads`` intra-op threads.

    Each field joins the *exact* fingerprint: measurements whose values differ are stored under
    different environments and never compared (a compare says which field differs). Return
    ``None`` to add nothing; keys are strings that do not name a field the plugin fingerprints
    itself, values are JSON scalars (``{"runner_pool": "ci-large"}``). Every implementation's
    fields are merged. Called once per device and thread count per process, in child processes
    too.
    """


def pytest_torchperf_record(
    config: pytest.Config, item: pytest.Item, record: dict[str, Any]
) -> None:
    """A measurement's record (docs/file-formats.md), just before it is attached to ``item``'s
    report, from where it reaches the results file (``--torchperf-json``), every report and
    JUnit XML. Add keys in place (``record["ci"] = {...}``); the plugin's own keys must stay.
    """


def pytest_torchperf_report(
    config: pytest.Config, records: list[dict[str, Any]]
) -> list[str] | None:
    """Extra report output at the end of the run, from every measurement's record: return lines
    to print at the end of the ``torchperf`` terminal summary (or None), or write files of your
    own. Not called in child processes; under pytest-xdist once, in the controller.
    """


def pytest_torchperf_kinds(config: pytest.Config) -> Sequence[Any] | None:
    """Measurement kinds this plugin adds: a sequence of
    :class:`pytest_torchperf.kinds.KindSpec` (or None). Each names the package that holds its
    parts: ``<package>.judge`` with ``KIND`` (the :class:`pytest_torchperf.judge.kind_protocol.Kind`
    protocol), ``<package>.run`` with ``RUN`` (a :class:`pytest_torchperf.run.kind_run.KindRun`:
    when it is chosen, what it keeps), if the reports show anything of its own,
    ``<package>.report`` with ``REPORT`` (a
    :class:`pytest_torchperf.report.kind_report.KindReport`: its columns, its figures' words)
    and, if it starts child processes, ``<package>.plugin`` with ``SCHEDULES``. A plugin's kinds are asked before the built-in ones whether they take a
    measurement. Called once, at configure time; a plugin adds its own options itself
    (``pytest_addoption``).
    """
