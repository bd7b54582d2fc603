"""The pytest plugin: options, marker, fixture, hooks. Thin glue over :mod:`pytest_torchperf.run`.

Loaded in every pytest run of an environment (entry point ``pytest11: torchperf``), so it imports
nothing heavy: torch is imported only when a measurement runs.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Generator, Iterator
from dataclasses import replace

import pytest

from pytest_torchperf.core.errors import OptionError
from pytest_torchperf.options.measure_options import OPTIONS, parse_layer
from pytest_torchperf.pytest_plugin import (
    child_runs,
    extensions,
    isolation,
    schedules,
    spelling,
    variant_items,
    xdist_runs,
)
from pytest_torchperf.pytest_plugin import options as plugin_options

# Fixtures are registered by being module attributes of this plugin module.
from pytest_torchperf.pytest_plugin.fixtures import (  # noqa: F401
    torchperf,
    torchperf_timer,
    torchperf_variant,
)
from pytest_torchperf.pytest_plugin.instrument_fixtures import (  # noqa: F401
    torchperf_device,
    torchperf_nvtx,
    torchperf_profiler,
    torchperf_quantized_model,
)
from pytest_torchperf.pytest_plugin.isolation import (  # noqa: F401 - hooks of this plugin
    pytest_runtest_setup,
    pytest_runtest_teardown,
)
from pytest_torchperf.pytest_plugin.stash import (
    CONTEXT_SETUP_KEY,
    FIXTURE,
    IS_PERF_KEY,
    MARKER,
    PERF_FIXTURES,
    PERF_KEY,
    SETTINGS_KEY,
    UNTIMED_BODY_FIXTURES,
    context_of,
    item_options,
    marker_options,
    state_of,
)
from pytest_torchperf.pytest_plugin.test_outcome import TEST_FAILED, finish
from pytest_torchperf.pytest_plugin.xdist_runs import (  # noqa: F401 - hooks of this plugin
    pytest_collection_finish,
    pytest_configure_node,
    pytest_runtest_protocol,
    pytest_testnodedown,
)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    """The ``pytest_torchperf_*`` hooks other plugins implement (:mod:`.hookspecs`)."""
    from pytest_torchperf.pytest_plugin import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register ``--torchperf-*`` options and ``torchperf_*`` ini keys (see :mod:`.options`)."""
    plugin_options.add_options(parser)


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(parser: pytest.Parser, args: list[str]) -> Generator[None]:
    """A misspelt ``--torchperf-*`` option is refused naming the one meant, before pytest parses
    the command line (its own error names no option); after the initial conftests load, so the
    options they add are known."""
    result = yield
    spelling.check_flags(parser, args)
    return result


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker, check option combinations and record the run's settings."""
    config.addinivalue_line(
        "markers",
        f"{MARKER}(**options): measure this test with pytest-torchperf. Options: "
        + ", ".join(sorted([*OPTIONS, "name"]))
        + ". Without the torchperf fixture the test body "
        "itself is timed.",
    )
    plugin_options.check_rootdir(config)
    spelling.check_ini_keys(config)
    extensions.register_kinds(config)
    _register_kinds_plugins(config)
    settings = plugin_options.run_settings(config)
    config.stash[SETTINGS_KEY] = settings  # the run's context is created on first use
    xdist_runs.configure(config)
    config.stash[CONTEXT_SETUP_KEY] = [
        lambda ctx: extensions.attach_environment_hook(config, ctx),
        lambda ctx: child_runs.attach_fresh_confirm(config, ctx),
        lambda ctx: xdist_runs.pool_children(config, ctx),
    ]
    # Before any profiler starts: Kineto logs noise (e.g. gpuGetDeviceCount errors) on CUDA wheels
    # without a GPU.
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    if settings.child:
        schedules.configure(config, settings)
        return  # a child writes no summary or reports: the controlling run does
    from pytest_torchperf.pytest_plugin.reporter import SummaryReporter

    config.pluginmanager.register(SummaryReporter(config), "torchperf-summary")


#: The kinds' plugin parts this run registered as pytest plugins (unregistered at its end).
_KINDS_PLUGINS_KEY = pytest.StashKey[list[object]]()


def _register_kinds_plugins(config: pytest.Config) -> None:
    """Each kind's plugin part is a pytest plugin for the run: its own hooks (a side's child of
    an A/B run keeps its end of the turn protocol) need no call from here. Registered at
    configure, after other plugins added their kinds; in every process (xdist workers and
    child runs configure too)."""
    from pytest_torchperf.kinds import parts

    registered: list[object] = []
    for module in parts("plugin"):
        # A plugin whose kind's plugin part is already one of pytest's plugins keeps it so.
        if not config.pluginmanager.is_registered(module):
            config.pluginmanager.register(module, f"torchperf-kind-{module.__name__}")
            registered.append(module)
    config.stash[_KINDS_PLUGINS_KEY] = registered


def pytest_report_header(config: pytest.Config) -> str | None:
    """One line naming the mode and storage (torch is not imported for it)."""
    settings = config.stash.get(SETTINGS_KEY, None)
    if settings is None or not settings.active:
        return None
    storage = f", storage={settings.storage}" if settings.save or settings.compare else ""
    return f"torchperf: {settings.mode}{storage}"


# ------------------------------------------------------------------------------------------------
# Collection: marker validation, --torchperf-skip / --torchperf-only
# ------------------------------------------------------------------------------------------------


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Marker variants: one item per variant (see :mod:`.variant_items`)."""
    variant_items.parametrize(metafunc)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Reject bad marker arguments up front and apply --torchperf-skip / --torchperf-only."""
    skip_perf = config.getoption("torchperf_skip")
    only_perf = config.getoption("torchperf_only")
    # Every bad marker at once (a fix per run was a run per typo), each test's once: its
    # parametrized items share the marker.
    bad_markers: dict[str, str] = {}
    for item in items:
        marked = item.get_closest_marker(MARKER) is not None
        names = getattr(item, "fixturenames", ())
        perf = marked or any(f in names for f in PERF_FIXTURES)
        item.stash[IS_PERF_KEY] = perf  # read by the per-test isolation hooks
        # Decided once here, so the per-test hooks below cost one stash lookup for ordinary tests.
        whole = not any(f in names for f in UNTIMED_BODY_FIXTURES)
        item.stash[PERF_KEY] = marked and isinstance(item, pytest.Function) and whole
        if marked and item.stash[PERF_KEY] and type(item).__name__ == "TestCaseFunction":
            raise pytest.UsageError(
                f"{item.nodeid}: @pytest.mark.torchperf cannot time a unittest.TestCase method as a "
                f"whole (unittest runs it outside pytest's call hook); use a plain test function, "
                f"or call pytest_torchperf.BlockTimer inside the method"
            )
        if marked:
            try:
                parse_layer(marker_options(item), f"{item.nodeid}: @pytest.mark.torchperf")
            except OptionError as exc:
                test = item.nodeid.split("[", 1)[0]
                said = str(exc).replace(item.nodeid, test)  # the test's marker, not an item's
                bad_markers.setdefault(said, said)
                continue
            variant_items.check_variant_item(config, item, FIXTURE in names)
        if skip_perf and perf:
            item.add_marker(pytest.mark.skip(reason="perf test skipped by --torchperf-skip"))
        elif only_perf and not perf:
            item.add_marker(pytest.mark.skip(reason="not a perf test (--torchperf-only)"))
    if bad_markers:
        raise pytest.UsageError("\n".join(bad_markers.values()))
    variant_items.deselect(config, items)
    if config.stash[SETTINGS_KEY].child:
        child_runs.keep_perf_items(config, items)
    elif not skip_perf:
        xdist_runs.attach_gate(config, items)


def pytest_report_collectionfinish(config: pytest.Config) -> str | None:
    """Say what ``--torchperf-variants`` deselected, and why."""
    return variant_items.left_out_line(config)


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> None:
    """The child processes of the run's schedules (:mod:`.schedules`) go first; a child run
    points at its output file."""
    settings = session.config.stash[SETTINGS_KEY]
    if settings.child:
        child_runs.start_child_sink(session.config)
        return
    if session.testsfailed:  # collection errors: nothing is worth measuring
        return
    schedules.run_children(session, settings)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """The run's kinds and their plugin parts leave with it. A part's own ``trylast``
    ``pytest_unconfigure`` (registered later) runs after this one all the same: pluggy calls
    the implementations a hook had when the call began (pluggy >= 1.1; pytest 8 needs 1.3)."""
    from pytest_torchperf.kinds import forget_added

    forget_added()  # another plugin's kinds belong to this run (an in-process pytester run too)
    for module in config.stash.get(_KINDS_PLUGINS_KEY, []):
        config.pluginmanager.unregister(module)
    xdist_runs.unconfigure(config)


# ------------------------------------------------------------------------------------------------
# Running: whole-test measurement, verdicts into the test outcome, baseline writes
# ------------------------------------------------------------------------------------------------


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """A marked test that does not request the fixture is timed as a whole: its body is the workload."""
    __tracebackhide__ = True
    if not pyfuncitem.stash.get(PERF_KEY, False):  # marked, and not using the fixture
        return None
    ctx = context_of(pyfuncitem.config)
    function = pyfuncitem.obj
    if inspect.iscoroutinefunction(function):
        pytest.skip(
            "torchperf cannot time async test functions as a whole; call the torchperf "
            "fixture on a synchronous callable instead"
        )
    args = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    body = functools.partial(function, **args)
    try:
        options, name = item_options(pyfuncitem)
    except OptionError as exc:
        raise pytest.UsageError(str(exc)) from None
    from pytest_torchperf.measure.devices import default_device
    from pytest_torchperf.run.pipeline import measure
    from pytest_torchperf.run.state import Call, MeasurementSkipped
    from pytest_torchperf.store.baselines import BaselineFileError

    # A test body is not a module and returns None: no eval()/no_grad handling, no output check.
    options = replace(options, check_finite=False, inference=False)
    try:
        call = Call(pyfuncitem.nodeid, name or pyfuncitem.originalname, body, (), {}, options)
        measure(ctx, state_of(pyfuncitem), call, device=default_device())
        return True
    except MeasurementSkipped as exc:
        pytest.skip(str(exc))
    except (BaselineFileError, OptionError) as exc:
        message = f"torchperf: {exc}"
    pytest.fail(message, pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Turn failed verdicts into a failure of the test itself; save baselines of passing tests.

    Perf tests also get torch's global state (threads, inductor/dynamo config, deterministic flags,
    ...) put back afterwards, and dynamo reset if they built compiled variants.
    """
    saved = isolation.torch_snapshot(item)
    try:
        result = yield
    except BaseException as exc:
        isolation.restore_torch(item, saved)
        # What a save then stored of it says why not (a skip is no failure).
        skipped = isinstance(exc, pytest.skip.Exception)
        finish(item, passed=False, why="the test was skipped" if skipped else TEST_FAILED)
        raise
    isolation.restore_torch(item, saved)
    message = finish(item, passed=True)
    if message:
        pytest.fail(message, pytrace=False)
    return result
