"""Isolation of perf tests: seeding before a perf test's fixtures run (this module's hooks), and
torch's global state put back after it (see :mod:`pytest_torchperf.measure.torch_state`), which
the plugin's call hook asks for."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from pytest_torchperf.core.errors import OptionError
from pytest_torchperf.pytest_plugin.stash import IS_PERF_KEY, STATE_KEY, item_options

if TYPE_CHECKING:  # the measuring machinery is imported lazily, by the first perf test
    from pytest_torchperf.measure.torch_state import RandomStates, TorchState

SEED_KEY: pytest.StashKey[RandomStates] = pytest.StashKey()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Seed torch, random and numpy before a perf test's fixtures run (restored at teardown)."""
    if not item.stash.get(IS_PERF_KEY, False):
        return
    try:
        options, _ = item_options(item)
    except OptionError:
        return  # reported when the test calls the fixture
    from pytest_torchperf.options.values import SEED_OFF

    if options.seed == SEED_OFF:
        return
    from pytest_torchperf.measure.torch_state import seed_everything

    item.stash[SEED_KEY] = seed_everything(options.seed)


def pytest_runtest_teardown(item: pytest.Item) -> None:
    """Put back the random states a perf test's seeding replaced."""
    saved = item.stash.get(SEED_KEY, None)
    if saved is not None:
        from pytest_torchperf.measure.torch_state import restore_random

        restore_random(saved)
        del item.stash[SEED_KEY]


def torch_snapshot(item: pytest.Item) -> TorchState | None:
    if not item.stash.get(IS_PERF_KEY, False):
        return None
    from pytest_torchperf.measure.torch_state import snapshot

    return snapshot()


def restore_torch(item: pytest.Item, saved: TorchState | None) -> None:
    state = item.stash.get(STATE_KEY, None)
    if saved is None and not (state and state.built_variants):
        return
    from pytest_torchperf.measure.torch_state import restore

    restore(saved, reset_dynamo=bool(state and state.built_variants))
