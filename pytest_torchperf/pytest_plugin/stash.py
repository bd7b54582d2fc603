"""What torchperf attaches to pytest items and config: stash keys, marker options, ini values
(read once, for every key: :func:`ini_value`), per-test state."""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal, overload

import pytest

from pytest_torchperf.core.errors import OptionError

if TYPE_CHECKING:  # the measuring machinery is imported lazily, on the first measurement
    from pytest_torchperf.measure.exclusive import WorkerGate  # noqa: F401 (named in a key's type)
    from pytest_torchperf.options.measure_options import MeasureOptions
    from pytest_torchperf.options.settings import RunSettings  # noqa: F401 (named in a key's type)
    from pytest_torchperf.run.context import RunContext
    from pytest_torchperf.run.state import TestState

MARKER = "torchperf"
FIXTURE = "torchperf"
SETTINGS_KEY = pytest.StashKey["RunSettings"]()
CONTEXT_KEY = pytest.StashKey["RunContext"]()
#: Called with the run's context when it is created (the plugin attaches its child runs).
CONTEXT_SETUP_KEY = pytest.StashKey[list[Callable[["RunContext"], None]]]()
STATE_KEY = pytest.StashKey["TestState"]()
#: Set during collection on marked test functions that do not use the fixture: their body is timed.
PERF_KEY = pytest.StashKey[bool]()
#: Set during collection on every perf test (marked, or using a perf fixture): seeded and isolated.
IS_PERF_KEY = pytest.StashKey[bool]()
#: An xdist worker's :class:`~pytest_torchperf.measure.exclusive.WorkerGate` (runs that time).
GATE_KEY = pytest.StashKey["WorkerGate"]()
#: The same lock, held while an xdist worker collects.
COLLECTING_GATE_KEY = pytest.StashKey["WorkerGate"]()
#: The xdist controller of a save in several processes: where its fresh processes write.
XDIST_CHILDREN_KEY = pytest.StashKey[Path]()
#: Fixtures whose use makes a test a perf test (for --torchperf-skip / --torchperf-only, the
#: isolation, the child runs): the ones that time, and the int8 model built for timing. The
#: instruments that time nothing (torchperf_profiler, torchperf_nvtx, torchperf_device) do not.
PERF_FIXTURES = ("torchperf", "torchperf_timer", "torchperf_quantized_model")
#: Fixtures whose use keeps a marked test's body from being timed whole: the perf fixtures (their
#: calls are its measurements) and the profiler (a body timed while it profiles is inflated).
UNTIMED_BODY_FIXTURES = (*PERF_FIXTURES, "torchperf_profiler")


def marker_options(item: pytest.Item) -> dict[str, object]:
    """Merged keyword arguments of the torchperf markers on ``item`` (closest marker wins)."""
    merged: dict[str, object] = {}
    for mark in reversed(list(item.iter_markers(MARKER))):
        if mark.args:
            raise OptionError(
                f"{item.nodeid}: @pytest.mark.torchperf takes keyword arguments only, "
                f"got positional {mark.args!r}"
            )
        merged.update(mark.kwargs)
    return merged


def item_options(
    item: pytest.Item, call: Mapping[str, object] | None = None, refused: Collection[str] = ()
) -> tuple[MeasureOptions, str | None]:
    """The options of a measurement in ``item`` (and its explicit name): ``call``'s keywords over
    its markers' and the run's (:func:`pytest_torchperf.run.kinds.resolve_options`)."""
    from pytest_torchperf.run.kinds import resolve_options

    ctx = context_of(item.config)
    return resolve_options(ctx, call or {}, marker_options(item), item.nodeid, refused)


@overload
def ini_value(config: pytest.Config, key: str, names: Literal[False] = False) -> str: ...
@overload
def ini_value(config: pytest.Config, key: str, names: bool) -> str | list[str]: ...
def ini_value(config: pytest.Config, key: str, names: bool = False) -> str | list[str]:
    """An ini key's value as an ini file gives it: a string, or a list of strings where the key
    takes ``names`` (``torchperf_variants``, ``torchperf_ignore_counters``: comma-separated or
    one per line in an ini file, a list of strings in TOML).

    Every ``torchperf_*`` key is read here. pytest 9's native ``[tool.pytest]`` table in
    pyproject.toml keeps TOML's types, and ``getini`` refuses a non-string for a string key with
    a TypeError (an internal error in every run). A TOML number or boolean is read as its string
    form (``torchperf_threads = 1`` as ``"1"``, ``true`` as ``"true"``), as
    ``[tool.pytest.ini_options]`` reads it; anything else is a usage error naming the key, the
    value and what to write.
    """
    try:
        value: object = config.getini(key)
    except TypeError as exc:
        # No public API gives the value getini refused; pytest keeps it in ``_inicfg``.
        entry = getattr(config, "_inicfg", {}).get(key)
        if entry is None or not hasattr(entry, "value"):
            raise pytest.UsageError(
                f'torchperf: {exc}. Write the value in quotes, e.g. {key} = "1"'
            ) from None
        value = entry.value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        # An ini file's list is one name per line: read as the commas a command line takes.
        return ",".join(value.splitlines()) if names else value
    if names and isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [str(v) for v in value]
    where = f" in {config.inipath}" if config.inipath else ""
    takes = (
        "a comma-separated string or a list of strings"
        if names
        else "one value (a string, a number or true/false), not a list"
        if isinstance(value, list)
        else "a string, a number or true/false"
    )
    raise pytest.UsageError(
        f"torchperf: ini key {key}{where} is {value!r} ({type(value).__name__}); it takes "
        f"{takes}. pytest --help says what {key} takes"
    )


def context_of(config: pytest.Config) -> "RunContext":
    """The run's :class:`~pytest_torchperf.run.context.RunContext`, created on first use.

    Created lazily so that a run without perf tests never imports the measuring machinery.
    """
    context = config.stash.get(CONTEXT_KEY, None)
    if context is None:
        from pytest_torchperf.run.context import RunContext

        context = config.stash[CONTEXT_KEY] = RunContext(
            config.stash[SETTINGS_KEY], lock_path=gate_path(config)
        )
        for setup in config.stash.get(CONTEXT_SETUP_KEY, []):
            setup(context)
    return context


def gate_path(config: pytest.Config) -> Path | None:
    """The xdist workers' lock files (:mod:`pytest_torchperf.measure.exclusive`) this process
    takes part in: an xdist worker's, or those the plugin handed to a child it started; None
    elsewhere (a pytest run that a test starts takes no part, whatever its environment)."""
    from pytest_torchperf.measure.exclusive import GATE_ENV, lock_base

    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and workerinput.get("testrunuid"):
        return lock_base(str(workerinput["testrunuid"]))
    handed = os.environ.get(GATE_ENV)
    return Path(handed) if handed and config.getoption("torchperf_child", None) else None


def state_of(item: pytest.Item) -> "TestState":
    """The measurements of one test item (created on first use)."""
    state = item.stash.get(STATE_KEY, None)
    if state is None:
        from pytest_torchperf.run.state import TestState

        state = item.stash[STATE_KEY] = TestState(exists=lambda nodeid: _exists(item, nodeid))
    return state


def _exists(item: pytest.Item, nodeid: str) -> bool:
    """Whether the module of ``item`` still defines the test ``nodeid`` (of the same module):
    a test deselected (``-k``) or not selected by node id still does; a renamed one does not."""
    obj = getattr(item, "module", None)
    if obj is None:  # not a Python test item: nothing to look in, so nothing is called gone
        return True
    for part in nodeid.split("[", 1)[0].split("::")[1:]:
        obj = getattr(obj, part, None)
    return obj is not None
