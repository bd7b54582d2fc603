"""What a measurement's comparison concluded, in one word: the vocabulary every verdict, label,
report and record shares (:class:`Outcome`), apart from how a timing verdict is decided
(:mod:`pytest_torchperf.judge.decision`). Pure.
"""

from __future__ import annotations

import enum


class Outcome(str, enum.Enum):
    """What a measurement's comparison concluded."""

    PASS = "pass"
    FAIL = "fail"
    INCONCLUSIVE = "inconclusive"
    IMPROVED = "improved"
    NEW = "new"  #: no baseline yet (for this environment)
    #: only the baseline has it: this run no longer measures it (side A's measurement of an A/B
    #: run, removed or renamed in B); nothing of it is judged
    REMOVED = "removed"
    MEASURED = "measured"  #: measured without comparing (no --torchperf-compare)

    def __str__(self) -> str:  # "fail", not "Outcome.FAIL", in messages and JSON
        return self.value
