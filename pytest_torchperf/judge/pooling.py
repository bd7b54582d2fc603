"""Pooling the passes of several fresh processes (``--torchperf-processes N``) into the sample a
verdict judges: the median of the per-process p25s. Pure.

Why: on a shared runner the noise that matters is between processes (memory layout, allocator
state, neighbours), not between the blocks of one process; judging the median of N processes'
statistics shrinks it by about sqrt(N).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Protocol, TypeVar

from pytest_torchperf.judge.samples import Sample


class ProcessPass(Protocol):
    """What pooling needs of another process's measurement."""

    @property
    def statistic(self) -> float: ...

    @property
    def calibration(self) -> float | None: ...

    @property
    def problem(self) -> str | None: ...


P = TypeVar("P", bound=ProcessPass)


def trusted(others: Iterable[P]) -> list[P]:
    """The child measurements that passed the contention/spread guard (the rest are dropped)."""
    return [s for s in others if s.problem is None]


def pooled(own: Sample, others: Iterable[ProcessPass]) -> Sample:
    """``own`` (this process's pass) pooled with the trusted child measurements of the target.

    The statistic becomes the median of the per-process p25s, and the machine-speed check uses
    the median of the per-process calibrations (``Sample.machine_calibration``), so it compares
    like with like. The spread, CPU share and the stored ``calibration`` stay this process's own:
    the guard judges the pass it can re-measure, and a saved session pairs its own p25 with its own
    calibration.
    """
    usable = trusted(others)
    if not usable:
        return own
    return replace(
        own,
        process_statistics=tuple(s.statistic for s in usable),
        process_calibrations=tuple(s.calibration for s in usable if s.calibration),
    )
