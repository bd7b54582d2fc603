"""What torchperf attaches to pytest items and config: stash keys, marker options, per-test state."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from .config import OptionError

if TYPE_CHECKING:  # the session module is imported lazily, on the first measurement
    from .session import PerfSession, TestState
    from .settings import RunSettings

MARKER = "torchperf"
FIXTURE = "torchperf"
SETTINGS_KEY = pytest.StashKey["RunSettings"]()
SESSION_KEY = pytest.StashKey["PerfSession"]()
STATE_KEY = pytest.StashKey["TestState"]()
#: Set during collection on marked test functions that do not use the fixture: their body is timed.
PERF_KEY = pytest.StashKey[bool]()
#: Set during collection on every perf test (marked, or using a perf fixture): seeded and isolated.
IS_PERF_KEY = pytest.StashKey[bool]()
#: Fixtures whose use makes a test a perf test (for --torchperf-skip / --torchperf-only).
PERF_FIXTURES = ("torchperf", "torchperf_timer", "torchperf_profiler", "torchperf_quantized_model")


def marker_options(item: pytest.Item) -> dict[str, Any]:
    """Merged keyword arguments of the torchperf markers on ``item`` (closest marker wins)."""
    merged: dict[str, Any] = {}
    for mark in reversed(list(item.iter_markers(MARKER))):
        if mark.args:
            raise OptionError(f"{item.nodeid}: @pytest.mark.torchperf takes keyword arguments only, "
                              f"got positional {mark.args!r}")
        merged.update(mark.kwargs)
    return merged


def session_of(config: pytest.Config) -> "PerfSession":
    """The run's :class:`~pytest_torchperf.session.PerfSession`, created on first use.

    Created lazily so that a run without perf tests never imports the measuring machinery.
    """
    session = config.stash.get(SESSION_KEY, None)
    if session is None:
        from .session import PerfSession
        from .settings import default_lock_path

        session = config.stash[SESSION_KEY] = PerfSession(config.stash[SETTINGS_KEY],
                                                          lock_path=default_lock_path())
        from .process_items import attach_fresh_confirm

        attach_fresh_confirm(config, session)
    return session


def state_of(item: pytest.Item) -> "TestState":
    """The measurements of one test item (created on first use)."""
    state = item.stash.get(STATE_KEY, None)
    if state is None:
        from .session import TestState

        state = item.stash[STATE_KEY] = TestState()
    return state
