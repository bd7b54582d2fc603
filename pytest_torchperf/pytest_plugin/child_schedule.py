"""One way a run starts child pytest processes (:class:`Schedule`): what a measurement kind's
``plugin`` part gives (``SCHEDULES`` in ``kinds/<kind>/plugin.py``) and the shared schedules of
fresh processes; the table of them is :mod:`pytest_torchperf.pytest_plugin.schedules`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from pytest_torchperf.options.settings import RunSettings


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
