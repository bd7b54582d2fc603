"""The one outcome label (judge.labels.outcome_label) shared by every report and the CLI."""

from __future__ import annotations

import pytest

from pytest_torchperf.judge.labels import outcome_label


@pytest.mark.parametrize(
    ("record", "label"),
    [
        ({"outcome": "pass", "verdict": {"outcome": "pass"}}, "pass"),
        ({"outcome": "fail", "verdict": {"outcome": "fail"}}, "FAIL"),
        (
            {"outcome": "fail", "verdict": {"outcome": "pass"}, "counter_changes": ["ops"]},
            "FAIL (counters)",
        ),
        (
            {"outcome": "fail", "verdict": {"outcome": "fail"}, "counter_changes": ["ops"]},
            "FAIL (time+counters)",
        ),
        (
            {"outcome": "fail", "verdict": {"outcome": "inconclusive"}, "counter_changes": ["x"]},
            "FAIL (counters), time inconclusive",
        ),
        (
            {"outcome": "fail", "verdict": {"outcome": "pass"}, "failures": ["a drifted: ..."]},
            "FAIL (accuracy)",
        ),
        (
            {"outcome": "pass", "verdict": {"outcome": "pass", "suspicious": True}},
            "pass (re-measured)",
        ),
        ({"outcome": "measured", "saved": True}, "measured, saved"),
        (
            {"outcome": "measured", "not_saved": "machine +32.9% slower"},
            "measured, not saved: machine +32.9% slower",
        ),
        (
            # --torchperf-processes: the other processes' sessions were stored, this one's not.
            {
                "outcome": "measured",
                "saved": True,
                "not_saved": "this process's session (machine +32.9% slower)",
            },
            "measured, saved but not this process's session (machine +32.9% slower)",
        ),
    ],
)
def test_outcome_label(record: dict, label: str) -> None:
    assert outcome_label(record) == label
