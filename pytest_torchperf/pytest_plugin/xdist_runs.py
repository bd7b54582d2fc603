"""pytest-xdist: timing alone, and a save's fresh processes, in a run spread over workers.

Every test of a worker holds the workers' lock shared (:func:`pytest_runtest_protocol`), and so
does a worker while it collects; a timed section takes it exclusively
(:meth:`pytest_torchperf.run.context.RunContext.timing_lock`), so no other test runs while one
worker times (:mod:`pytest_torchperf.measure.exclusive`). Only workers and the plugin's own
children take part (:func:`pytest_torchperf.pytest_plugin.stash.gate_path`).

A save in several processes runs its fresh processes on the controller, which collects nothing,
before its loop hands out any test (:func:`run_children`); each worker pools them with its own
pass (:func:`pool_children`).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from pytest_torchperf.pytest_plugin import variant_items
from pytest_torchperf.pytest_plugin.child_runs import is_xdist, pooled, run_fresh_processes
from pytest_torchperf.pytest_plugin.stash import (
    COLLECTING_GATE_KEY,
    GATE_KEY,
    IS_PERF_KEY,
    SETTINGS_KEY,
    XDIST_CHILDREN_KEY,
    gate_path,
)

#: ``workerinput`` key: where an xdist save's fresh processes wrote their measurements.
XDIST_CHILDREN = "torchperf_children"


def run_children(config: pytest.Config) -> None:
    """Under pytest-xdist, before the workers run any test: the save's fresh processes, one after
    another, each timing alone (the workers hold the workers' lock while they collect). Each
    worker then pools what they measured with its own pass (:func:`pool_children`)."""
    from pytest_torchperf.measure.exclusive import GATE_ENV, lock_base

    settings = config.stash[SETTINGS_KEY]
    dsession = config.pluginmanager.getplugin("dsession")
    uid = getattr(getattr(dsession, "nodemanager", None), "testrunuid", None)
    env = {GATE_ENV: str(lock_base(str(uid)))} if uid else {}
    run_fresh_processes(
        config,
        settings.processes,
        config.stash[XDIST_CHILDREN_KEY],
        "the perf tests",
        ["-n", "0"],
        env,
        stop_if_empty=True,
    )


def pool_children(config: pytest.Config, perf_session: Any) -> None:
    """An xdist worker of a save in several processes: pool the controller's fresh processes."""
    folder = getattr(config, "workerinput", {}).get(XDIST_CHILDREN)
    if folder:
        perf_session.process_pool = pooled(Path(folder))


def runs_children(config: pytest.Config) -> bool:
    """This is the controller of an xdist save in several processes."""
    return XDIST_CHILDREN_KEY in config.stash


def configure(config: pytest.Config) -> None:
    """A worker holds the lock while it collects (importing torch and the test modules beside a
    worker that may already time); a save's controller makes the fresh processes' folder."""
    settings = config.stash[SETTINGS_KEY]
    worker = hasattr(config, "workerinput")
    if not (worker or settings.child or settings.processes <= 1 or config.option.collectonly):
        if is_xdist(config):  # the controller of a save in several processes
            config.stash[XDIST_CHILDREN_KEY] = Path(tempfile.mkdtemp(prefix="torchperf-processes-"))
    if not worker or settings.disable:
        return
    path = gate_path(config)
    if path is not None:
        from pytest_torchperf.measure.exclusive import shared_gate

        gate = shared_gate(path)
        gate.enter_test()
        config.stash[COLLECTING_GATE_KEY] = gate


def pytest_collection_finish(session: pytest.Session) -> None:
    gate = session.config.stash.get(COLLECTING_GATE_KEY, None)
    if gate is not None:
        gate.leave_test()


def attach_gate(config: pytest.Config, items: list[pytest.Item]) -> None:
    """An xdist worker of a run that times perf tests: its tests pause while another times (the
    lock it holds while it collects: :func:`configure`)."""
    gate = config.stash.get(COLLECTING_GATE_KEY, None)
    if gate is not None and any(item.stash[IS_PERF_KEY] for item in items):
        config.stash[GATE_KEY] = gate


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    """Under pytest-xdist, a test (setup, call, teardown) runs only while no other worker times."""
    gate = item.config.stash.get(GATE_KEY, None)
    if gate is None:
        return (yield)
    gate.enter_test()
    try:
        return (yield)
    finally:
        gate.leave_test()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """The controller of a save in several processes: tell each worker where the fresh
    processes write their measurements (they run before any worker runs a test)."""
    folder = node.config.stash.get(XDIST_CHILDREN_KEY, None)
    if folder is not None:
        node.workerinput[XDIST_CHILDREN] = str(folder)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """The controller: what a worker has to say that the worker's own terminal would have shown
    (its collection's header line: :func:`variant_items.worker_left_out`)."""
    variant_items.worker_left_out(node.config, getattr(node, "workeroutput", None) or {})


def unconfigure(config: pytest.Config) -> None:
    folder = config.stash.get(XDIST_CHILDREN_KEY, None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)
