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

from pytest_torchperf.measure.exclusive import WorkerGate  # noqa: E402


def test_timing_waits_for_a_running_test_and_holds_new_ones_back(tmp_path: Path) -> None:
    worker1, worker2 = WorkerGate(tmp_path / "run"), WorkerGate(tmp_path / "run")
    events: list[str] = []
    worker1.enter_test()  # an ordinary test runs on worker 1

    def time_on_worker2() -> None:
        with worker2.exclusive():
            events.append("timing")
            time.sleep(0.3)
            events.append("timed")

    timer = threading.Thread(target=time_on_worker2)
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

    threading.Thread(target=perf_test).start()
    assert done.wait(5)
    assert gate._work_fd is not None  # back to holding its test's share
    gate.leave_test()
