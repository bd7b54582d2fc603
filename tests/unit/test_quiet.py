"""Waiting for a busy machine to quiet down before a save measures again (run/quiet.py), driven
by a fake clock and a fake load probe."""

from __future__ import annotations

from pytest_torchperf.run.quiet import MAX_QUIET_REFUSALS, QUIET_WINDOW, QuietWait


class FakeMachine:
    """A clock, and the other CPUs' load as a function of it; each pass takes ``pass_s``."""

    def __init__(self, busy_until: float, pass_s: float = 0.5) -> None:
        self.now, self.busy_until, self.pass_s = 0.0, busy_until, pass_s
        self.passes: list[float] = []

    def clock(self) -> float:
        return self.now

    def probe(self, window: float) -> float:
        self.now += window
        return 1.0 if self.now <= self.busy_until else 0.0

    def take(self) -> float:
        self.now += self.pass_s
        self.passes.append(self.now)
        return self.now

    def unfit(self, taken_at: float) -> str | None:
        return "busy" if taken_at <= self.busy_until else None


def wait(machine: FakeMachine, budget: float) -> QuietWait:
    return QuietWait(budget, probe=machine.probe, clock=machine.clock)


def test_a_pass_after_the_load_lifts_is_taken_and_kept() -> None:
    machine = FakeMachine(busy_until=5.0)
    quiet = wait(machine, budget=20)
    final = quiet.retry(machine.take, machine.unfit)
    assert machine.unfit(final) is None
    assert quiet.extra_passes == 1  # one pass after the wait, none taken while still busy
    assert 5.0 < quiet.spent <= 5.0 + QUIET_WINDOW + machine.pass_s


def test_a_load_that_never_lifts_spends_the_budget_once_and_no_more() -> None:
    machine = FakeMachine(busy_until=1e9)
    quiet = wait(machine, budget=10)
    quiet.retry(machine.take, machine.unfit)
    assert quiet.extra_passes == 0 and len(machine.passes) == 1  # the one immediate re-measure
    assert 10 <= quiet.spent <= 10 + QUIET_WINDOW
    # The next measurement of the run re-measures once and waits no more.
    before = machine.now
    quiet.retry(machine.take, machine.unfit)
    assert machine.now - before == machine.pass_s


def test_no_budget_re_measures_once() -> None:
    machine = FakeMachine(busy_until=1e9)
    quiet = wait(machine, budget=0)
    quiet.retry(machine.take, machine.unfit)
    assert len(machine.passes) == 1 and quiet.spent == 0


def test_a_fit_re_measure_needs_no_wait() -> None:
    machine = FakeMachine(busy_until=0.0)
    quiet = wait(machine, budget=60)
    quiet.retry(machine.take, machine.unfit)
    assert len(machine.passes) == 1 and quiet.spent == 0


def test_passes_refused_on_a_quiet_machine_stop_the_waiting() -> None:
    """A target that sleeps is refused however quiet the machine: waiting cannot help it."""
    machine = FakeMachine(busy_until=0.0)
    quiet = wait(machine, budget=600)
    quiet.retry(machine.take, lambda _taken: "CPU share 0.01 < 0.90")
    assert quiet.extra_passes == MAX_QUIET_REFUSALS
    assert quiet.spent < 10


def test_passes_crowded_off_their_cpu_keep_the_waiting_going() -> None:
    """The other CPUs look quiet, but something takes this one: its timing thread waited on the
    run queue (``crowded``). That is a busy machine, not a target that sleeps: the save waits on
    within its budget, and the pass after the crowding ends is kept."""
    machine = FakeMachine(busy_until=0.0)
    crowded_until = 20.0
    quiet = wait(machine, budget=60)
    final = quiet.retry(
        machine.take,
        lambda taken: "CPU share 0.50 < 0.90" if taken <= crowded_until else None,
        crowded=lambda taken: taken <= crowded_until,
    )
    assert final > crowded_until
    assert quiet.extra_passes > MAX_QUIET_REFUSALS
