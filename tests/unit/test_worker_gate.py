"""The xdist workers' readers-writer lock (measure/exclusive.py): a timed section waits for the
tests already running and keeps new ones from starting. Two gate objects on the same files stand
for two workers (flock locks are per open file, so threads of one process conflict like
processes)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("fcntl")

from pytest_torchperf.measure.exclusive import WorkerGate


def test_timing_waits_for_a_running_test_and_holds_new_ones_back(tmp_path: Path) -> None:
    worker1, worker2 = WorkerGate(tmp_path / "run"), WorkerGate(tmp_path / "run")
    events: list[str] = []
    worker1.enter_test()  # an ordinary test runs on worker 1

    def time_on_worker2() -> None:
        with worker2.exclusive():
            events.append("timing")
            time.sleep(0.3)
            events.append("timed")

    timer = threading.Thread(target=time_on_worker2, daemon=True)  # a broken gate fails, not hangs
    timer.start()
    time.sleep(0.3)
    assert events == []  # the running test holds the timer back
    events.append("test ends")
    worker1.leave_test()
    time.sleep(0.1)
    # Worker 1's next test must wait until the timed section is over.
    worker1.enter_test()
    events.append("next test")
    worker1.leave_test()
    timer.join(5)
    assert not timer.is_alive()
    assert events == ["test ends", "timing", "timed", "next test"]


def test_a_worker_times_inside_its_own_test_and_gets_its_share_back(tmp_path: Path) -> None:
    gate = WorkerGate(tmp_path / "run")
    gate.enter_test()
    done = threading.Event()

    def perf_test() -> None:
        with gate.exclusive():  # releases its own share first: no self-deadlock
            with gate.exclusive():  # nested timed sections are one
                pass
        done.set()

    threading.Thread(target=perf_test, daemon=True).start()
    assert done.wait(5)
    assert gate._work_fd is not None  # back to holding its test's share
    gate.leave_test()


def test_the_locks_are_given_back_when_the_timed_block_raises(tmp_path: Path) -> None:
    worker1, worker2 = WorkerGate(tmp_path / "run"), WorkerGate(tmp_path / "run")
    with pytest.raises(RuntimeError), worker1.exclusive():
        raise RuntimeError("timing failed")
    entered = threading.Event()

    def next_test() -> None:
        worker2.enter_test()
        entered.set()
        worker2.leave_test()

    threading.Thread(target=next_test, daemon=True).start()
    assert entered.wait(5)


class FakeConfig:
    def __init__(self, workerinput: dict | None = None, child: str | None = None) -> None:
        if workerinput is not None:
            self.workerinput = workerinput
        self.child = child

    def getoption(self, name: str, default: object = None) -> object:
        return self.child if name == "torchperf_child" else default


def test_only_workers_and_the_plugins_own_children_take_part_in_the_lock(monkeypatch) -> None:
    from pytest_torchperf.measure.exclusive import GATE_ENV, lock_base
    from pytest_torchperf.pytest_plugin.stash import gate_path

    # A pytest run that a test starts inherits the worker's environment but takes no part: it
    # would wait for the share its own parent test holds.
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    monkeypatch.setenv("PYTEST_XDIST_TESTRUNUID", "abc")
    monkeypatch.setenv(GATE_ENV, "/tmp/elsewhere.lock")
    assert gate_path(FakeConfig()) is None
    assert gate_path(FakeConfig({"testrunuid": "abc"})) == lock_base("abc")
    # A child the plugin started with the lock handed to it.
    assert gate_path(FakeConfig(child="out.jsonl")) == Path("/tmp/elsewhere.lock")
