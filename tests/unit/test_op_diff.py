"""The "why" line's op diff names an op only where the evidence supports it (pure: op tables)."""

from __future__ import annotations

from pytest_torchperf.measure.op_tables import OUTSIDE_OPS, diff_top_ops, quickest_per_op


def _row(op: str, us: float, calls: float = 1.0) -> dict:
    return {"op": op, "calls": calls, "self_cpu": us * 1e-6, "self_device": 0.0}


BASE = [
    _row(OUTSIDE_OPS, 100),
    _row("aten::addmm", 20, 3),
    _row("aten::mm", 15),
    _row("aten::bmm", 8, 2),
]


def test_python_between_ops_is_named_and_op_noise_is_not() -> None:
    # Measured on a transformer with a 6,000-step Python loop (one thread): only the time
    # outside ops grew; ops moved by a few hundred nanoseconds, their profile noise.
    now = [
        _row(OUTSIDE_OPS, 270),
        _row("aten::addmm", 20.6, 3),
        _row("aten::mm", 15.3),
        _row("aten::bmm", 8),
    ]
    assert diff_top_ops(BASE, now) == [
        f"{OUTSIDE_OPS} self time +170% (+170 us per call): the time went to Python code "
        f"between the ops"
    ]


def test_ops_slowed_after_more_python_work_are_not_blamed() -> None:
    # Two threads: after the Python work each op waits for the pool to wake up, so ops' self
    # times grow (aten::mm +533 % there, most of the gain) although no op changed.
    now = [
        _row(OUTSIDE_OPS, 300),
        _row("aten::addmm", 60, 3),
        _row("aten::mm", 700),
        _row("aten::bmm", 20, 2),
    ]
    phrases = diff_top_ops(BASE, now)
    assert phrases[0] == (
        f"{OUTSIDE_OPS} self time +200% (+200 us per call): more Python code runs between the ops"
    )
    assert phrases[1] == (
        "ops' self time grew too, with the same calls (largest: aten::mm +685 us, aten::addmm "
        "+40 us): ops slow down after more Python work between them (threads waking up, cold "
        "caches), so look at the Python change first"
    )
    assert len(phrases) == 2


def test_growth_spread_over_ops_with_the_same_calls_blames_none_of_them() -> None:
    now = [
        _row(OUTSIDE_OPS, 101),
        _row("aten::addmm", 40, 3),
        _row("aten::mm", 32),
        _row("aten::bmm", 20, 2),
    ]
    [phrase] = diff_top_ops(BASE, now)
    assert phrase.startswith(
        "self time grew across 3 ops with the same calls (largest: aten::addmm +20 us, aten::mm "
        "+17 us): "
    ), phrase
    assert "no one op stands out" in phrase


def test_one_op_that_carries_the_growth_is_named() -> None:
    now = [
        _row(OUTSIDE_OPS, 102),
        _row("aten::addmm", 220, 3),
        _row("aten::mm", 16),
        _row("aten::bmm", 8, 2),
    ]
    assert diff_top_ops(BASE, now) == [
        "aten::addmm self time +1000% (+200 us), the same calls: this op got slower"
    ]


def test_an_op_that_runs_more_often_is_named_with_its_calls() -> None:
    now = [*BASE[:1], _row("aten::addmm", 27, 4), *BASE[2:]]
    assert diff_top_ops(BASE, now) == ["aten::addmm runs 3 -> 4 times per call (+7 us)"]
    # An op under the stored table's cut-off before: named only when it carries the growth.
    now = [*BASE, _row("aten::mul", 60, 1)]
    assert diff_top_ops(BASE, now) == [
        "aten::mul new in the top ops, +52 us at least (under the stored table's cut-off of 8 us "
        "before): this op got slower or runs more often"
    ]


def test_the_share_of_the_measured_slowdown_the_profile_explains_is_said() -> None:
    now = [_row(OUTSIDE_OPS, 150), *BASE[1:]]
    [outside, rest] = diff_top_ops(BASE, now, slowdown=400e-6)
    assert outside.startswith(OUTSIDE_OPS)
    assert rest.startswith("the profile accounts for +50 us of the +400 us per call measured")


def test_tables_stored_before_the_outside_row_do_not_compare_it() -> None:
    old = BASE[1:]
    now = [_row(OUTSIDE_OPS, 900), *BASE[1:]]
    assert diff_top_ops(old, now) == []


def test_a_preempted_wrapper_op_is_not_blamed_when_chunks_are_combined() -> None:
    # The slowdown is in aten::addmm (+40 us); on a busy machine each profiled chunk had a
    # preemption land in a different op: in one chunk aten::mm (a 15 us op read 315 us), in
    # another the time outside ops. One chunk alone names the op that got preempted.
    chunks = [
        [_row(OUTSIDE_OPS, 100), _row("aten::addmm", 60, 3), _row("aten::mm", 315)],
        [_row(OUTSIDE_OPS, 400), _row("aten::addmm", 61, 3), _row("aten::mm", 15)],
        [_row(OUTSIDE_OPS, 101), _row("aten::addmm", 330, 3), _row("aten::mm", 16)],
    ]
    assert "aten::mm self time" in " ".join(diff_top_ops(BASE, chunks[0]))
    combined = quickest_per_op(chunks)
    assert [r["op"] for r in combined] == [OUTSIDE_OPS, "aten::addmm", "aten::mm"]
    assert combined[1] == _row("aten::addmm", 60, 3)
    (why,) = diff_top_ops(BASE, combined)
    assert why.startswith("aten::addmm self time +200% (+40 us)"), why


def test_an_op_the_counters_say_is_new_is_not_called_the_same_calls() -> None:
    # Seen by a newcomer: a loop of x.abs().sum() added to forward. Both ops were under the stored
    # table's cut-off, so the table alone cannot tell they are new; the counters can.
    now = [
        _row(OUTSIDE_OPS, 300),
        _row("aten::addmm", 20, 3),
        _row("aten::mm", 15),
        _row("aten::bmm", 8, 2),
        _row("aten::abs", 1300, 200),
        _row("aten::sum", 500, 200),
    ]
    then = {"ops": {"aten::addmm": 3, "aten::mm": 1, "aten::bmm": 2}, "flops": 1000}
    counted = {"ops": {**then["ops"], "aten::abs": 200, "aten::sum": 200}, "flops": 1000}
    phrases = diff_top_ops(BASE, now, counters=(then, counted))
    assert "aten::abs runs 0 -> 200 times per call (+1.29 ms)" in phrases, phrases
    assert "aten::sum runs 0 -> 200 times per call (+492 us)" in phrases, phrases
    assert not any("the same calls" in p for p in phrases), phrases
    # Without the counters (a baseline stored without them) the calls then are unknown, as before.
    assert any("the same calls" in p for p in diff_top_ops(BASE, now)), diff_top_ops(BASE, now)
    # Stored counters without the op table's composite ops do not make those ops "new".
    linear = [*now, _row("aten::linear", 400, 3)]
    assert not any("aten::linear runs" in p for p in diff_top_ops(BASE, linear, None, (then, then)))


def test_the_same_calls_doing_more_work_are_not_called_a_slower_op() -> None:
    # Seen by a newcomer: a hidden width 256 -> 1024 made aten::addmm's self time +873 % with the
    # same calls, while the counters read FLOPs +300 %: more work per call, not a slower kernel.
    now = [
        _row(OUTSIDE_OPS, 102),
        _row("aten::addmm", 220, 3),
        _row("aten::mm", 16),
        _row("aten::bmm", 8, 2),
    ]
    ops = {"ops": {"aten::addmm": 3, "aten::mm": 1, "aten::bmm": 2}}
    wider = ({**ops, "flops": 1_000_000}, {**ops, "flops": 4_000_000})
    assert diff_top_ops(BASE, now, counters=wider) == [
        "aten::addmm self time +1000% (+200 us), the same calls, while the call's FLOPs grew "
        "+300.0%: each call does more work (larger shapes), not a slower op"
    ]
    # FLOPs within profile noise: the op itself got slower.
    same = ({**ops, "flops": 1_000_000}, {**ops, "flops": 1_010_000})
    assert diff_top_ops(BASE, now, counters=same) == [
        "aten::addmm self time +1000% (+200 us), the same calls: this op got slower"
    ]
    # FLOPs grown with an op added: that op may carry them, so nothing is credited to addmm.
    added = (wider[0], {"ops": {**ops["ops"], "aten::mul": 1}, "flops": 4_000_000})
    assert diff_top_ops(BASE, now, counters=added) == [
        "aten::addmm self time +1000% (+200 us), the same calls: this op got slower"
    ]


def test_an_ops_runs_are_the_counters_where_they_counted_it() -> None:
    """20 x `h @ torch.eye(128)` added: the why line said `aten::eye runs 0 -> 40 times` (the
    profiler keys aten::eye and its nested eye.m_out both as aten::eye) and `aten::resolve_conj
    runs 4 -> 64` (run inside aten::matmul), while the counters line said `new aten::eye x20`.
    The counts come from the counters, and an op they do not count whose calls follow a
    counted op's is not named as running more often."""
    base = [*BASE, _row("aten::resolve_conj", 2, 4)]
    now = [
        _row(OUTSIDE_OPS, 100),
        _row("aten::addmm", 20, 3),
        _row("aten::mm", 15),
        _row("aten::bmm", 8, 2),
        _row("aten::eye", 400, 40),
        _row("aten::matmul", 300, 20),
        _row("aten::resolve_conj", 30, 64),
    ]
    then = {"ops": {"aten::addmm": 3, "aten::mm": 1, "aten::bmm": 2}, "flops": 1000}
    counted = {"ops": {**then["ops"], "aten::eye": 20, "aten::matmul": 20}, "flops": 2000}
    phrases = diff_top_ops(base, now, counters=(then, counted))
    assert "aten::eye runs 0 -> 20 times per call (+398 us)" in phrases, phrases
    assert "aten::matmul runs 0 -> 20 times per call (+298 us)" in phrases, phrases
    assert not any("resolve_conj" in p for p in phrases), phrases
