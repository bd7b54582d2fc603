"""Unit tests of pytest_torchperf.judge.counter_diff: the exact counter diff and its wording."""

from __future__ import annotations

import pytest

from pytest_torchperf.judge.counter_diff import (
    changes_since_stored,
    compared_counters,
    diff_counters,
    ignore_hint,
)

BASE = {
    "ops": {"aten::addmm": 2, "aten::relu": 1},
    "flops": 10_240,
    "params": 100,
    "param_bytes": 400,
    "peak_memory": 1000,
    "graphs": 1,
    "graph_breaks": 0,
    "recompiles": 0,
}


def test_identical_counters_have_no_change() -> None:
    assert diff_counters(BASE, dict(BASE)) == []


def test_every_change_is_worded_exactly() -> None:
    current = {
        **BASE,
        "ops": {"aten::addmm": 3, "aten::mul": 1},
        "flops": 15_360,
        "params": 120,
        "param_bytes": 480,
        "graphs": 2,
        "graph_breaks": 1,
        "break_reasons": ["call to a builtin"],
    }
    assert diff_counters(BASE, current) == [
        "ops changed: aten::addmm 2 -> 3, new aten::mul x1, removed aten::relu x1",
        "FLOPs +50.0% (10,240 -> 15,360)",
        "parameters 100 -> 120 (400 B -> 480 B)",
        "graphs 1 -> 2",
        "graph breaks 0 -> 1 (first reason: call to a builtin)",
    ]


def test_peak_memory_has_a_one_percent_tolerance() -> None:
    assert diff_counters(BASE, {**BASE, "peak_memory": 1009}) == []
    assert diff_counters(BASE, {**BASE, "peak_memory": 1100}) == [
        "peak memory +10.0% (1000 B -> 1.1 KiB)"
    ]


def test_ignored_and_missing_counters_are_not_compared() -> None:
    current = {**BASE, "flops": 1, "ops": {}, "peak_memory": 9999}
    assert diff_counters(BASE, current, ignore=("flops", "ops", "memory")) == []
    older = {"flops": 10_240}  # a baseline from before ops were counted
    assert diff_counters(older, {**BASE, "flops": 10_240}) == []
    assert diff_counters({**BASE, "flops": 0}, BASE) == ["FLOPs new (0 -> 10,240)"]


@pytest.mark.parametrize(
    ("key", "changed", "ignored_by"),
    [
        ("ops", {"aten::addmm": 3}, "ops"),
        ("model_ops", {"aten::addmm": 3}, "ops"),
        ("flops", 1, "flops"),
        ("params", 1, "params"),
        ("graphs", 2, "graphs"),
        ("graph_breaks", 1, "graphs"),
        ("recompiles", 1, "graphs"),
        ("peak_memory", 9999, "memory"),
    ],
)
def test_compared_counters_are_the_ones_the_diff_compares(
    key: str, changed: object, ignored_by: str
) -> None:
    """A counter both sides hold is compared (a change of it alone is a change) unless ignored:
    what the coverage line counts as gated is what the diff gates."""
    base = {**BASE, "model_ops": {"aten::addmm": 2, "aten::relu": 1}}
    alone = {key: base[key]}
    assert compared_counters(alone, {key: changed}) == [key]
    assert diff_counters(alone, {key: changed}) != []
    assert compared_counters(alone, {key: changed}, ignore=(ignored_by,)) == []
    assert diff_counters(alone, {key: changed}, ignore=(ignored_by,)) == []
    assert compared_counters(base, dict(base)) == [
        "ops", "model_ops", "flops", "params", "graphs", "graph_breaks", "recompiles",
        "peak_memory",
    ]  # fmt: skip


def test_counters_that_share_no_compared_key_compare_nothing() -> None:
    """A compiled variant with ignore_counters=["graphs"] against a session saved before its
    model's eager ops were kept: both have counters, none of them is compared."""
    saved = {"graphs": 1, "graph_breaks": 0, "recompiles": 0}
    now = {**saved, "model_ops": {"aten::addmm": 2}}
    assert compared_counters(saved, now, ignore=("graphs",)) == []
    assert compared_counters(saved, now) == ["graphs", "graph_breaks", "recompiles"]
    # FLOPs counted before the fused ops' formulas, where the model runs one: not compared.
    old = {"flops": 4096, "ops": {"aten::_transformer_encoder_layer_fwd": 1}}
    assert compared_counters(old, {**old, "flop_formulas": 2}, ignore=("ops",)) == []


def test_flops_counted_before_the_fused_op_formulas_are_not_compared_where_they_ran() -> None:
    # A baseline saved before the fast path's formula: its encoder counted 4,096 FLOPs (the head).
    old = {"flops": 4096, "ops": {"aten::_transformer_encoder_layer_fwd": 1, "aten::addmm": 1}}
    new = {**old, "flops": 2232320, "flop_formulas": 2}
    assert diff_counters(old, new) == []
    # Models without those ops were counted the same way: still gated.
    plain = {"flops": 4096, "ops": {"aten::addmm": 1}}
    assert diff_counters(plain, {**plain, "flops": 8192, "flop_formulas": 2}) == [
        "FLOPs +100.0% (4,096 -> 8,192)"
    ]
    # Counted alike on both sides: a change is a change, and a partial figure says so.
    partial = {**new, "flops_partial": ["aten::_weight_int8pack_mm"]}
    [change] = diff_counters(new, {**partial, "flops": 2232320 * 2})
    assert change.endswith("; partial: no FLOP formula for aten::_weight_int8pack_mm)")


def test_the_ignore_hint_names_the_changed_counters_as_ignore_counters_takes_them() -> None:
    """A newcomer read 'to stop gating a counter pass ignore_counters=[...]' beside a peak memory
    change and had to find the name 'memory' in the docs."""
    memory = diff_counters(BASE, {**BASE, "peak_memory": 2000})
    assert ignore_hint(memory) == 'to stop gating it pass ignore_counters=["memory"]'
    several = diff_counters(
        BASE, {**BASE, "ops": {"aten::addmm": 3}, "flops": 1, "params": 1, "graph_breaks": 1}
    )
    assert ignore_hint(several) == (
        'to stop gating them pass ignore_counters=["ops", "flops", "params", "graphs"]'
    )
    assert ignore_hint(["something a newer version words"]) == (
        "to stop gating them pass ignore_counters=[...]"
    )


def test_changes_since_stored_read_the_newest_session_with_counters() -> None:
    """A save and a compare hold a measurement against the newest stored counters; sessions
    without counters (a variant that records none, an old file) are skipped, and either side
    without any compares nothing."""
    old, new = {"ops": {"aten::addmm": 1}}, {"ops": {"aten::addmm": 2}}
    assert changes_since_stored([old, new, None], new) == []
    assert changes_since_stored([new, old, None], new) == ["ops changed: aten::addmm 1 -> 2"]
    assert changes_since_stored([new, old], new, ignore=["ops"]) == []
    assert changes_since_stored([None], new) == []
    assert changes_since_stored([old], None) == []
    assert changes_since_stored([old], {}) == []


def test_a_saves_counter_failure_resets_that_test_alone_and_a_variant_items_whole_test() -> None:
    """A plain save's counter failure named a bare --torchperf-reset (in CI: every test's
    sessions replaced); a variant item's remedy resets its test's other variants too (they were
    saved beside it, and a compiled variant's own counters may not have changed)."""
    from pytest_torchperf.run.result import Result

    def message(nodeid: str, other_code: bool) -> str:
        result = Result(
            name="m",
            nodeid=nodeid,
            samples=[1e-3],
            number_per_block=1,
            device="cpu",
            threads=1,
            cpu_share=1.0,
            other_code=other_code,
        )
        result.counter_changes = ["FLOPs +5.0% (100 -> 105)"]
        return result.counter_message or ""

    assert "(pytest t.py::test_m --torchperf-save --torchperf-reset)" in message(
        "t.py::test_m", other_code=True
    )
    assert "Nothing of this measurement was saved" in message("t.py::test_m", other_code=True)
    assert "(pytest t.py::test_m --torchperf-save --torchperf-reset)" in message(
        "t.py::test_m[eager]", other_code=True
    )
    assert "(pytest 't.py::test_m[bs1]' --torchperf-save" in message("t.py::test_m[bs1]", True)
    # A compare's: this test's save too (a bare --torchperf-reset re-baselines the suite),
    # nothing said of saving.
    compare = message("t.py::test_m", other_code=False)
    assert "(pytest t.py::test_m --torchperf-save --torchperf-reset)" in compare
    assert "Nothing of this measurement" not in compare
