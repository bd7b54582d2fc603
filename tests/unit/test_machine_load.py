"""Unit tests of the neighbour guard: /proc/stat parsing, the load formula, sampling and the guard
(fake stat files and fake clocks; nothing depends on this machine's CPUs)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_torchperf.core.stats import summarize
from pytest_torchperf.judge.outcome import Outcome
from pytest_torchperf.judge.samples import Sample, guard_problem
from pytest_torchperf.judge.verdict import judge
from pytest_torchperf.measure.machine_load import busy_cpu_seconds, neighbour_load
from pytest_torchperf.measure.sampling import Neighbours, collect


def test_busy_cpu_seconds_counts_busy_columns_including_steal(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    hz = os.sysconf("SC_CLK_TCK")
    # user nice system idle iowait irq softirq steal guest guest_nice
    stat.write_text(f"cpu  {hz} 0 {hz} {50 * hz} {7 * hz} 0 0 {hz} 0 0\ncpu0 1 2 3 4\n")
    assert busy_cpu_seconds(str(stat)) == pytest.approx(3.0)  # idle and iowait are not busy
    stat.write_text("intr 1 2 3\n")
    assert busy_cpu_seconds(str(stat)) is None
    assert busy_cpu_seconds(str(tmp_path / "missing")) is None


def test_neighbour_load_is_what_others_used_of_the_other_cpus() -> None:
    # 2 CPUs, 1 s: the machine was busy 2 CPU-seconds, we used 1: the other CPU was fully busy.
    assert neighbour_load(2.0, 1.0, 1.0, 2) == 1.0
    assert neighbour_load(1.05, 1.0, 1.0, 2) == pytest.approx(0.05)
    # 8 CPUs: one busy neighbour is 1/7 of the others' capacity.
    assert neighbour_load(2.0, 1.0, 1.0, 8) == pytest.approx(1 / 7)
    assert neighbour_load(0.9, 1.0, 1.0, 2) == 0.0  # tick rounding below our own time
    assert neighbour_load(2.0, 1.0, 1.0, 1) is None  # no other CPU to tell apart


class Clocks:
    """Fake wall, process-CPU and machine-busy clocks; a neighbour busy ``others`` CPUs."""

    def __init__(self, others: float) -> None:
        self.now, self.cpu, self.busy, self.others = 0.0, 0.0, 0.0, others

    def run_block(self, number: int) -> float:
        duration = number * 1e-3
        self.now += duration
        self.cpu += duration
        self.busy += duration * (1 + self.others)
        return duration


@pytest.mark.parametrize("others, expected", [(0.0, 0.0), (1.0, 1.0), (0.3, 0.3)])
def test_collect_measures_the_neighbours_over_the_timed_blocks(
    others: float, expected: float
) -> None:
    c = Clocks(others)
    raw = collect(
        c.run_block,
        min_time=0.5,
        warmup=0.01,
        clock=lambda: c.now,
        cpu_clock=lambda: c.cpu,
        neighbours=Neighbours(lambda: c.busy, 2),
    )
    assert raw.neighbour_load == pytest.approx(expected)
    fallback = collect(
        c.run_block,
        min_time=0.1,
        warmup=0.01,
        clock=lambda: c.now,
        cpu_clock=lambda: c.cpu,
        neighbours=Neighbours(None, 2, lambda: 0.75),
    )
    assert fallback.neighbour_load == 0.75  # no /proc/stat: the load-average fallback


def _sample(load: float | None) -> Sample:
    return Sample(summarize([1e-3] * 20), 0.99, (1e-3,) * 20, neighbour_load=load)


def test_guard_rejects_a_busy_neighbour_even_with_a_full_cpu_share() -> None:
    assert guard_problem(_sample(0.2)) is None
    assert guard_problem(_sample(None)) is None  # GPU or unknown
    problem = guard_problem(_sample(0.98))
    assert problem == (
        "other processes kept 98% of the other CPUs busy while timing (limit 50%): "
        "a busy neighbour shares caches, memory bandwidth and SMT cores with this one"
    )
    assert guard_problem(_sample(0.98), max_neighbour_load=1.0) is None  # 100 % disables it


def test_a_slowdown_with_a_busy_neighbour_is_inconclusive_not_fail() -> None:
    slow = Sample(summarize([1.3e-3] * 20), 0.99, (1.3e-3,) * 20, neighbour_load=0.97)
    verdict = judge("m", slow, [1e-3], 0.1, lambda: slow).verdict
    assert verdict.outcome is Outcome.INCONCLUSIVE
    assert "other processes kept 97% of the other CPUs busy" in verdict.message


def test_run_queue_seconds_reads_the_threads_scheduler_statistics(tmp_path: Path) -> None:
    from pytest_torchperf.measure.machine_load import run_queue_seconds

    stat = tmp_path / "schedstat"
    stat.write_text("2500000000 750000000 1200\n")  # on CPU, waiting on a run queue, slices
    assert run_queue_seconds(str(stat)) == pytest.approx(0.75)
    stat.write_text("garbage\n")
    assert run_queue_seconds(str(stat)) is None
    assert run_queue_seconds(str(tmp_path / "missing")) is None


def test_collect_measures_how_long_the_timing_thread_queued_for_its_cpu() -> None:
    c = Clocks(0.0)
    queued = {"s": 0.0}

    def crowded_block(number: int) -> float:
        queued["s"] += number * 1e-3  # as long queued as it ran: a CPU shared with a busy loop
        c.now += number * 1e-3
        return c.run_block(number)

    raw = collect(
        crowded_block,
        min_time=0.5,
        warmup=0.01,
        clock=lambda: c.now,
        cpu_clock=lambda: c.cpu,
        neighbours=Neighbours(lambda: c.busy, 2, queue_clock=lambda: queued["s"]),
    )
    assert raw.cpu_share == pytest.approx(0.5, abs=0.02)
    assert raw.queued_share == pytest.approx(0.5, abs=0.02)
    assert collect(c.run_block, min_time=0.1, warmup=0.01, clock=lambda: c.now).queued_share is None


@pytest.mark.parametrize(
    ("queued", "expected"),
    [
        (0.45, "another process (or the VM's host) competed for the CPU while timing (the timed"),
        (0.0, "the timed code itself left the CPU idle (it slept or waited on I/O"),
        (None, "another process competed for the CPU while timing"),
    ],
)
def test_a_low_cpu_share_is_blamed_on_what_the_run_queue_shows(
    queued: float | None, expected: str
) -> None:
    """Crowded off its CPU (it queued for it) or idle by itself (it slept): the guard's sentence
    says which, and does not blame another process for a target that sleeps."""
    sample = Sample(summarize([1e-3] * 20), 0.5, (1e-3,) * 20, queued_share=queued)
    problem = guard_problem(sample, min_cpu_share=0.9)
    assert problem is not None and problem.startswith("CPU share 0.50 < 0.90: " + expected)
    assert sample.crowded is (None if queued is None else queued > 0.2)


def test_steal_time_counts_as_kept_off_the_cpu(tmp_path, monkeypatch) -> None:
    """On a VM the host can take the timing thread's CPU away (steal time) without the guest's
    run queue seeing it: counted with the run-queue wait, such a pass is crowded, not idle."""
    import os

    from pytest_torchperf.measure import machine_load

    stat = tmp_path / "stat"
    ticks = os.sysconf("SC_CLK_TCK")
    stat.write_text(f"cpu  10 0 10 100 0 0 0 {3 * ticks} 0 0\\n")
    monkeypatch.setattr(machine_load, "cpu_count", lambda: 2)
    assert machine_load.steal_seconds_per_cpu(str(stat)) == pytest.approx(1.5)
    assert machine_load.steal_seconds_per_cpu(str(tmp_path / "missing")) is None
    monkeypatch.setattr(machine_load, "run_queue_seconds", lambda: 0.25)
    monkeypatch.setattr(machine_load, "steal_seconds_per_cpu", lambda: 1.5)
    clock = machine_load.run_queue_clock()
    assert clock is not None and clock() == pytest.approx(1.75)
