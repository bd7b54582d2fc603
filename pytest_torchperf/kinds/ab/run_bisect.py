"""``torchperf bisect --mode ab``: each revision against GOOD in alternating process pairs
(``--torchperf-ab GOOD``); bad where the A/B verdict fails (the tests' own ``max_slowdown``). For
GPU measurements or where Valgrind is missing; the verdicts are statistical, so a step has to be
well over the limit to be found every time. Pytest-free.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_torchperf.run.bisect_mode import BisectMode, Classify, Key
from pytest_torchperf.store.record import Record


def _verdict(record: Record) -> tuple[str, str] | None:
    if not (record.extra("ab") and record.outcome):
        return None
    ratio = record.verdict.ratio if record.verdict else None
    change = f" ({(ratio - 1) * 100:+.1f}% vs GOOD)" if ratio else ""
    return record.outcome, change


def _classifier(good: Mapping[Key, Any], bad: Mapping[Key, Any]) -> Classify:
    # Each run judged the revision against GOOD itself: GOOD's and BAD's figures are not needed.
    def ab(figures: Mapping[Key, Any]) -> tuple[str, str]:
        said = ", ".join(f"{k[1]}: {outcome}{change}" for k, (outcome, change) in figures.items())
        outcomes = {outcome for outcome, _ in figures.values()}
        if "fail" in outcomes:
            return "bad", said
        if "inconclusive" in outcomes:
            return "skip", f"{said}: the A/B verdict could not decide (a busy machine?)"
        return "good", said

    return ab


BISECT = BisectMode(
    "ab",
    args=lambda good: ("--torchperf-ab", good),
    figure=_verdict,
    what="an A/B verdict",
    classifier=_classifier,
    measures_good=False,
    retry_hint=", or retry on a quieter machine (A/B verdicts are statistical)",
    default_rank=1,
)
