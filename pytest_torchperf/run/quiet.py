"""Waiting for a busy machine to quiet down before a save measures a refused pass again.

A save refuses a pass a guard cannot trust (a busy neighbour, a starved process, gross spread, a
machine running slower than usual): stored, it would make unchanged code look faster or noisier
in every later compare. Much of the load on a developer's machine or a shared runner comes and
goes (a package install, another test run), so rather than give up after one re-measure, a save
waits until the other CPUs are quiet and measures again, within a budget of seconds
(``--torchperf-save-wait``) spread over the save's processes. When the load never lifts, the
budget bounds what that costs and the save stores the measurement without its timing.

Pytest-free and torch-free; the clock and the load probe are injected, so unit tests drive it
with a fake clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from pytest_torchperf.measure.machine_load import others_load

#: Seconds each look at the other CPUs' load covers while waiting.
QUIET_WINDOW = 1.0

#: Default budget of a whole save (``--torchperf-save-wait``), shared out over its processes.
DEFAULT_SAVE_WAIT = 60.0

#: Passes refused although the machine was quiet just before them, after which waiting stops:
#: the cause is then the measurement itself (a target that sleeps or waits on I/O), not a
#: neighbour, and more waiting would spend the budget of the measurements after it. A pass
#: whose timing thread was crowded off its CPU (it waited on the run queue) does not count: the
#: other CPUs looked quiet, but something took this one.
MAX_QUIET_REFUSALS = 3

P = TypeVar("P")


@dataclass
class QuietWait:
    """The waiting budget of one saving process."""

    #: Seconds this process may spend waiting and re-measuring beyond the first re-measure.
    budget: float
    #: Measures the other CPUs' load over a window (seconds), sleeping meanwhile.
    probe: Callable[[float], float | None] = others_load
    clock: Callable[[], float] = time.monotonic
    #: Seconds spent so far, and how many extra passes they bought.
    spent: float = 0.0
    extra_passes: int = 0
    #: Seconds the last :meth:`retry` spent (what its measurement's message reports).
    last_spent: float = 0.0

    @property
    def left(self) -> float:
        return max(0.0, self.budget - self.spent)

    def retry(
        self,
        take: Callable[[], P],
        unfit: Callable[[P], Any],
        max_load: float = 0.5,
        crowded: Callable[[P], bool] = lambda sample: False,
    ) -> P:
        """Measure again (``take``) until a pass is fit to store or the budget is spent: once at
        once, as a save always did, then each time after the other CPUs were quiet (at most
        ``max_load`` of them kept busy by other processes) for a window. ``crowded``: the pass
        was refused because other threads took its CPU (not counted as a refusal on a quiet
        machine)."""
        before = self.spent
        sample = take()
        refused_when_quiet = 0
        while unfit(sample) and self.left > 0 and refused_when_quiet < MAX_QUIET_REFUSALS:
            start = self.clock()
            self.wait_until_quiet(max_load)
            if self.budget - self.spent - (self.clock() - start) <= 0:
                self.spent += self.clock() - start
                break  # still busy when the budget ran out: a pass now would be refused too
            sample = take()
            self.extra_passes += 1
            if not crowded(sample):
                refused_when_quiet += 1
            self.spent += self.clock() - start
        self.last_spent = self.spent - before
        return sample

    def wait_until_quiet(self, max_load: float) -> None:
        """Return once the other CPUs were quiet for a window, or when the budget is spent."""
        start = self.clock()
        while self.budget - self.spent - (self.clock() - start) > 0:
            load = self.probe(min(QUIET_WINDOW, max(0.05, self.left)))
            if load is None or load <= max_load:
                return
