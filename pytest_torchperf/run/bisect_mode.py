"""What a ``torchperf bisect`` mode is (:class:`BisectMode`): the pytest arguments each revision
runs with, the figure read from its results file, and how a revision's figures are judged given
GOOD's and BAD's. The measurement kinds give theirs (``instructions``: the count; ``ab``: an A/B
run against GOOD) from their run parts (``KindRun.bisect``); the ``counters`` mode, which every
kind records, is here (:data:`COUNTERS`). Which modes there are is
:func:`pytest_torchperf.run.revision_probe.modes`. Pytest-free.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pytest_torchperf.judge.counter_diff import diff_counters
from pytest_torchperf.store.record import Record

#: A measurement: test id and measurement name.
Key = tuple[str, str]
#: How a revision's figures are judged: ``(verdict, detail)``, the verdict ``good``, ``bad`` or
#: ``skip``.
Classify = Callable[[Mapping[Key, Any]], tuple[str, str]]


class BisectError(Exception):
    """The bisection cannot start or go on; the message says why and what to do."""


@dataclass(frozen=True)
class BisectMode:
    """One way ``torchperf bisect`` runs and judges a revision."""

    name: str
    #: The pytest arguments of each revision's run, given GOOD's commit.
    args: Callable[[str], tuple[str, ...]]
    #: A record's figure in a revision's results file, or None when it has none.
    figure: Callable[[Record], Any]
    #: What a revision that measured none of them lacks (``an instruction count``).
    what: str
    #: How a revision's figures are judged, given GOOD's and BAD's (a BisectError where BAD
    #: does not differ from GOOD in what the mode sees).
    classifier: Callable[[Mapping[Key, Any], Mapping[Key, Any]], Classify]
    #: GOOD is measured once before the search (False: every run measures it beside the
    #: revision, as an A/B run's side A).
    measures_good: bool = True
    #: Added to "BAD is not slower than GOOD here" (an A/B verdict is statistical).
    retry_hint: str = ""
    #: Chosen by default where :attr:`available`, the lowest rank first (None: never by
    #: default).
    default_rank: int | None = None
    available: Callable[[], bool] = lambda: True


def _counters_classifier(good: Mapping[Key, Any], bad: Mapping[Key, Any]) -> Classify:
    changed = [k for k in good if k in bad and diff_counters(good[k], bad[k], ())]
    if not changed:
        raise BisectError(
            "BAD's counters (FLOPs, ops, parameters, memory) are the same as GOOD's for "
            "every selected measurement: nothing to bisect by counters. Use --mode "
            "instructions or --mode ab for a slowdown the counters do not see"
        )

    def counters(figures: Mapping[Key, Any]) -> tuple[str, str]:
        for key in changed:
            if key in figures:
                diff = diff_counters(good[key], figures[key], ())
                if diff:
                    return "bad", f"{key[1]}: {'; '.join(diff)} vs GOOD"
        return "good", "counters as GOOD's"

    return counters


#: The exact counters (FLOPs, op counts, parameters, peak memory): bad where they differ from
#: GOOD's. Seconds per revision: for "which commit added that op".
COUNTERS = BisectMode(
    "counters",
    # The counters are what is compared: time as little as possible.
    args=lambda good: ("--torchperf-min-time=0.01s",),
    figure=lambda record: record.counters or None,
    what="counters",
    classifier=_counters_classifier,
)
