"""``torchperf bisect --mode instructions``: each revision's selected tests counted under
Valgrind; deterministic, so a +3 % pure-Python slowdown is found exactly. GOOD and BAD are counted
first; a revision is bad where a measurement that changed between them has moved more than
halfway from GOOD's count to BAD's. Pytest-free.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from typing import Any

from pytest_torchperf.run.bisect_mode import BisectError, BisectMode, Classify, Key
from pytest_torchperf.store.json_values import json_number, json_object
from pytest_torchperf.store.record import Record


def _count(record: Record) -> float | None:
    counted = json_number(json_object(record.extra("instructions")).get("per_call"))
    return float(counted) if counted else None


def _classifier(good: Mapping[Key, Any], bad: Mapping[Key, Any]) -> Classify:
    # Halfway from GOOD's count to BAD's decides, for the measurements that BAD made slower (one
    # that got faster is not what is looked for: its commit would pass for the first bad one).
    moved = {k: (good[k], bad[k]) for k in good if k in bad and bad[k] >= good[k] * 1.002}
    if not moved:
        raise BisectError(
            "BAD does not count 0.2 % or more instructions per call than GOOD for any selected "
            "measurement: nothing to bisect. Check -k and the order of the revisions, or "
            "bisect a timing change with --mode ab"
        )

    def instructions(figures: Mapping[Key, Any]) -> tuple[str, str]:
        details, verdict = [], "good"
        for key, (g, b) in moved.items():
            if key not in figures:
                continue
            x = figures[key]
            details.append(f"{key[1]}: {x:,.0f} instr/call, {(x / g - 1) * 100:+.2f}% vs GOOD")
            if (x - g) / (b - g) > 0.5:
                verdict = "bad"
        if not details:
            return "skip", "no instruction count of the measurements that changed"
        return verdict, "; ".join(details)

    return instructions


BISECT = BisectMode(
    "instructions",
    args=lambda good: ("--torchperf-instructions",),
    figure=_count,
    what="an instruction count (a GPU measurement? those need --mode ab)",
    classifier=_classifier,
    default_rank=0,
    available=lambda: shutil.which("valgrind") is not None,
)
