"""Unit tests of the across-run checks (pure): speedup vs eager, output fingerprint, user metric."""

from __future__ import annotations

import pytest

from pytest_torchperf.judge.drift import drift_checks, other_code, speedup_check
from pytest_torchperf.store.sessions import Session


def _speedup(median: float, spread: float = 0.02) -> dict[str, float]:
    return {"median": median, "p25": median - spread, "p75": median + spread, "n": 20}


def test_a_speedup_that_fell_beyond_the_limit_fails_and_says_by_how_much() -> None:
    failure, warning = speedup_check("m[compiled]", [2.0, 2.0, 2.0], _speedup(1.5), 0.1)
    assert warning is None and failure is not None
    assert failure.startswith(
        "m[compiled]: speedup vs eager fell from x2.00 to x1.50 (relative "
        "to eager this variant is +33% slower; IQR of 20 interleaved rounds "
        "x1.48-x1.52; limit 10% = x1.82). Eager ran in the same rounds"
    )
    assert speedup_check("m[compiled]", [2.0], _speedup(1.9), 0.1) == (None, None)
    # Only the median below the limit: inconclusive, a warning.
    failure, warning = speedup_check("m[amp]", [2.0], _speedup(1.80, spread=0.05), 0.1)
    assert failure is None and "inconclusive: the rounds' spread overlaps the limit" in warning


def test_stored_speedups_that_disagree_widen_the_limit() -> None:
    """A video model's amp speedup ranged x0.64-x1.02 over 40 fresh processes on a shared VM."""
    stored = [0.95, 0.80, 0.88]  # three processes of unchanged code
    # Within three of their standard deviations (33 %), with the 3x bound off:
    failure, warning = speedup_check("v[amp]", stored, _speedup(0.72), 0.1, max_widening=0)
    assert failure is None and warning is None
    failure, _ = speedup_check("v[amp]", stored, _speedup(0.40), 0.1)
    assert failure is not None and "widened from 10% by the 3 stored sessions' spread" in failure


def test_a_speedup_limit_widened_beyond_the_bound_judges_nothing_and_says_so() -> None:
    stored = [0.95, 0.80, 0.88]  # they widen 10 % to 33 %, over 3x
    failure, warning = speedup_check("v[amp]", stored, _speedup(0.72), 0.1)
    assert failure is None and warning is not None
    assert warning.startswith(
        "v[amp]: speedup vs eager not judged (x0.72 now, x0.88 stored): the 3 stored sessions' "
        "speedups (x0.80-x0.95) widen the 10% limit to 33.23%, beyond the 30% allowed: no gate."
    ), warning
    # Steady stored speedups still gate at 10 %.
    assert speedup_check("v[amp]", [0.90, 0.91, 0.90], _speedup(0.90), 0.1) == (None, None)


def test_a_fall_must_be_confirmed_by_the_fresh_processes() -> None:
    calls = []

    def fresh() -> list[dict[str, float]]:
        calls.append(1)
        return [_speedup(1.95), _speedup(1.5)]  # one fresh process contradicts

    failure, warning = speedup_check("m[compiled]", [2.0], _speedup(1.5), 0.1, confirm=fresh)
    assert failure is None and calls == [1]
    assert warning.endswith("not confirmed by fresh processes (x1.95, x1.50)")
    failure, _ = speedup_check(
        "m[compiled]", [2.0], _speedup(1.4), 0.1, confirm=lambda: [_speedup(1.5), _speedup(1.45)]
    )
    assert failure is not None and "confirmed in 2 fresh processes: x1.50, x1.45" in failure
    # Headed by the median of the three passes, as a time verdict is (it was this run's x1.40).
    assert failure.startswith(
        "m[compiled]: speedup vs eager fell from x2.00 to x1.45, the median of this run's x1.40 "
        "and theirs (relative to eager this variant is +38% slower;"
    ), failure
    failure, warning = speedup_check("m[compiled]", [2.0], _speedup(1.5), 0.1, confirm=lambda: [])
    assert failure is None and "none measured" in warning
    # No fall, no fresh process started.
    assert speedup_check("m[compiled]", [2.0], _speedup(2.0), 0.1, confirm=lambda: 1 / 0) == (
        None,
        None,
    )


def test_drift_checks_gate_fingerprint_and_metric() -> None:
    stored = [
        Session.from_json(
            {
                "fingerprint": {
                    "leaves": [{"path": "out", "shape": [2], "l2": 1.0, "probe": [1.0, 0.0]}]
                },
                "metric": 0.9,
            }
        )
    ]
    moved = {"leaves": [{"path": "out", "shape": [2], "l2": 1.1, "probe": [1.1, 0.0]}]}

    def check(fingerprint: dict, metric: float | None = None, save: str | None = None) -> tuple:
        limits = {"rel_l2": 1e-5, **({"metric": 0.02} if metric is not None else {})}
        saved = {} if save is None else {"save": save}
        return drift_checks(
            "m",
            stored,
            speedup=None,
            fingerprint=fingerprint,
            metric=metric,
            limits=limits,
            max_slowdown=0.1,
            **saved,
        )

    failures, warnings = check(moved, metric=0.8)
    assert warnings == []
    assert failures[0].startswith(
        "m: numerics changed since the baseline: outputs moved by 1.00e-01"
    )
    assert failures[1].startswith("m: metric changed since the baseline: 0.9 -> 0.8 (-0.1; limit")
    # Outputs that moved by 10 % are other outputs (another seed or model): no tolerance is
    # offered for them (a newcomer's other seed was told rel_l2 5 "admits it").
    assert "admits it" not in failures[0] and "--torchperf-seed" in failures[0]
    small = {"leaves": [{"path": "out", "shape": [2], "l2": 1.0 + 1e-4, "probe": [1.0001, 0.0]}]}
    rounding, _ = check(small)
    assert "accuracy={'eager': {'rel_l2': " in rounding[0] and "admits it" in rounding[0]
    # A variant with a wider limit (amp's 3e-2) is offered one up to 3x its limit (review).
    amp_drift = {"leaves": [{"path": "out", "shape": [2], "l2": 1.05, "probe": [1.05, 0.0]}]}
    [amp], _ = drift_checks(
        "m[amp]",
        stored,
        speedup=None,
        fingerprint=amp_drift,
        metric=None,
        limits={"rel_l2": 3e-2},
        max_slowdown=0.1,
        variant="amp",
    )
    assert "accuracy={'amp': {'rel_l2': 1e-01}} admits it" in amp, amp
    # An A/B run keeps no baseline (no save command): the change is B's against side A.
    ab, _ = check(moved, metric=0.8, save="")
    assert ab[0].startswith("m: numerics changed in B vs side A: outputs moved by 1.00e-01"), ab
    assert ab[1].startswith("m: metric changed in B vs side A: 0.9 -> 0.8"), ab
    assert "an A/B run keeps no baseline" in ab[0]
    same, _ = check(dict(stored[0].fingerprint or {}), metric=0.9)
    assert same == []
    reshaped = {"leaves": [{"path": "out", "shape": [3], "l2": 1.0, "probe": [1.0, 0.0, 0.0]}]}
    [shape], _ = check(reshaped)
    assert "out: shape (3,) in this run vs (2,) in the baseline" in shape


@pytest.mark.parametrize("stored", [[], [{"speedup": None}]])
def test_no_stored_speedup_means_no_speedup_check(stored: list) -> None:
    assert drift_checks(
        "m",
        [Session.from_json(s) for s in stored],
        speedup=_speedup(0.1),
        fingerprint=None,
        metric=None,
        limits={},
        max_slowdown=0.1,
    ) == ([], [])


def test_other_code_is_told_by_ops_counters_else_by_the_outputs() -> None:
    """A compiled-only test of a model with one more Linear kept `graphs 1`: a plain save
    appended the new code's time to the old code's sessions. Where the counters count no ops,
    the outputs tell."""
    out = {"leaves": [{"path": "out", "shape": [2], "l2": 1.0, "probe": [1.0, 0.0]}]}
    moved = {"leaves": [{"path": "out", "shape": [2], "l2": 2.0, "probe": [2.0, 0.0]}]}
    graphs = {"graphs": 1, "graph_breaks": 0, "break_reasons": [], "recompiles": 0}
    stored = [Session.from_json({"counters": graphs, "fingerprint": out})]
    found = other_code(stored, graphs, moved, 1e-5)
    assert found is not None and found.changes == []
    assert str(found) == (
        "outputs moved by 1.00e+00 relative, above the limit 1.00e-05 (accuracy rel_l2), and its "
        "counters (graphs, graph_breaks, recompiles) cannot tell whether the code changed"
    )
    # The same outputs, or a drift within the limit: the same code as far as anyone can tell.
    assert other_code(stored, graphs, out, 1e-5) is None
    assert other_code(stored, graphs, moved, 2.0) is None
    # No counters at all (an amp item): said so.
    bare = [Session.from_json({"fingerprint": out})]
    assert "it records no counters that would" in str(other_code(bare, None, moved, 1e-5))
    # Op counters tell: equal ones are the same code even with other outputs (new weights).
    ops = {"ops": {"aten::addmm": 1}, "flops": 10}
    counted = [Session.from_json({"counters": ops, "fingerprint": out})]
    assert other_code(counted, ops, moved, 1e-5) is None
    changed = other_code(counted, {"ops": {"aten::addmm": 2}, "flops": 20}, out, 1e-5)
    assert changed is not None and changed.moved is None
    assert str(changed).startswith("ops changed: aten::addmm 1 -> 2")
    # Nothing to hold the outputs against: no verdict.
    assert other_code([Session.from_json({"counters": graphs})], graphs, moved, 1e-5) is None
    assert other_code(stored, graphs, None, 1e-5) is None
