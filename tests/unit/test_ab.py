"""A/B runs (``--torchperf-ab``), the pure parts: the paired interval and its verdicts, the turn
scheduler that keeps the two sides apart, the sides' data, and the engine's A/B branch. No torch,
no processes."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from pytest_torchperf.core.stats import summarize
from pytest_torchperf.judge.compare import Candidate, Gate, compare
from pytest_torchperf.judge.labels import outcome_label
from pytest_torchperf.judge.outcome import Outcome
from pytest_torchperf.judge.samples import Sample
from pytest_torchperf.kinds.ab.judge_pairs import (
    PairResult,
    classify,
    interval,
    judge_ab,
    outliers,
    t95,
    undecided,
)
from pytest_torchperf.kinds.ab.run_data import START, ABData, SideLine, TurnScheduler, read_side
from pytest_torchperf.store.record import Record
from pytest_torchperf.store.sessions import Session

A_TIMES = (1.00e-3, 1.01e-3, 0.99e-3, 1.00e-3, 1.02e-3)


def _pair(change: float, wobble: float = 0.0) -> PairResult:
    """A pair whose B blocks are ``change`` slower than A's, every round (plus a wobble)."""
    return PairResult(A_TIMES, tuple(t * (1 + change + wobble) for t in A_TIMES))


def test_t_quantiles_match_the_table_and_approach_the_normal() -> None:
    assert t95(1) == pytest.approx(12.706)
    assert t95(2) == pytest.approx(4.303)
    assert t95(30) == pytest.approx(2.042)
    assert 1.96 < t95(200) < 1.98
    with pytest.raises(ValueError):
        t95(0)


def test_pair_ratio_is_the_median_of_round_ratios_and_skips_unpaired_rounds() -> None:
    pair = PairResult((1.0, 1.0, 1.0, 1.0), (1.1, 1.2, 5.0))  # B's fourth round missing
    assert pair.rounds == 3
    assert pair.ratio == pytest.approx(1.2)
    assert PairResult.from_record(json.loads(json.dumps(pair.to_record()))) == pair


def test_interval_is_a_t_interval_on_log_ratios() -> None:
    iv = interval([1.10, 1.12, 1.08])
    assert iv is not None
    logs = [math.log(r) for r in (1.10, 1.12, 1.08)]
    mean = sum(logs) / 3
    assert iv.change == pytest.approx(math.exp(mean) - 1)
    assert iv.low < iv.change < iv.high
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / 2)
    assert iv.high == pytest.approx(math.exp(mean + 4.303 * sd / math.sqrt(3)) - 1)
    assert interval([1.1]) is None


@pytest.mark.parametrize(
    ("low", "high", "outcome"),
    [
        (0.06, 0.12, Outcome.FAIL),
        (-0.12, -0.06, Outcome.IMPROVED),
        (-0.04, 0.04, Outcome.PASS),
        (0.02, 0.08, Outcome.INCONCLUSIVE),
        (-0.08, -0.02, Outcome.PASS),  # straddles only -limit: no slowdown to gate
    ],
)
def test_classify_against_the_limit(low: float, high: float, outcome: Outcome) -> None:
    from pytest_torchperf.kinds.ab.judge_pairs import Interval

    assert classify(Interval((low + high) / 2, low, high, 3, 0.01), 0.05) is outcome


def test_a_clear_slowdown_fails_with_interval_pairs_and_side() -> None:
    verdict = judge_ab("mlp", [_pair(0.12, w) for w in (-0.01, 0.0, 0.01)], 0.05, "main (abc)")
    assert verdict.outcome is Outcome.FAIL
    assert verdict.message.startswith("mlp: +12.0% (95% CI +")
    assert "vs main (abc); limit 5%" in verdict.message
    assert "3 process pairs: +11.0%, +12.0%, +13.0%" in verdict.message


def test_unchanged_passes_and_a_faster_b_is_improved() -> None:
    same = judge_ab("mlp", [_pair(0.0, w) for w in (-0.005, 0.0, 0.004)], 0.05, "HEAD")
    assert same.outcome is Outcome.PASS
    faster = judge_ab("mlp", [_pair(-0.3, w) for w in (-0.01, 0.0, 0.01)], 0.05, "HEAD")
    assert faster.outcome is Outcome.IMPROVED
    assert faster.message.startswith("mlp: improved -30.0%")


def test_pairs_that_disagree_are_inconclusive_and_ask_for_more_pairs() -> None:
    pairs = [_pair(0.0), _pair(0.09), _pair(-0.02)]
    verdict = judge_ab("cnn", pairs, 0.05, "HEAD")
    assert verdict.outcome is Outcome.INCONCLUSIVE
    assert "straddles the limit after 3 process pairs" in verdict.message
    # Pairs 11 % apart against a 5 % limit: the processes, not the pair count, are the cause.
    assert "The processes differ more than the limit allows: a dedicated" in verdict.message
    assert "--torchperf-ab-max-pairs" not in verdict.message
    assert undecided(pairs, 0.05)
    # Pairs that agree (1 % apart) on a change at the limit: more pairs narrow it (a newcomer's
    # 1.6 % spread beside a 5 % limit was told the processes differ more than it allows).
    close = [_pair(0.05, w) for w in (-0.005, 0.0, 0.005)]
    on_limit = judge_ab("cnn", close, 0.05, "HEAD")
    assert on_limit.outcome is Outcome.INCONCLUSIVE, on_limit.message
    assert "The pairs agree, and the change sits near the limit: more pairs" in on_limit.message
    assert "differ more than the limit" not in on_limit.message
    # Two pairs that agree on no change: the interval is wide for want of pairs (t = 12.7),
    # not because the change is near the limit (review).
    few = judge_ab("cnn", [_pair(0.0, w) for w in (-0.012, 0.012)], 0.05, "HEAD")
    assert few.outcome is Outcome.INCONCLUSIVE, few.message
    assert "The pairs agree, but 2 leave the interval wide: more pairs" in few.message
    assert not undecided([_pair(0.0, w) for w in (-0.005, 0.0, 0.004)], 0.05)


def test_a_test_that_failed_on_side_a_is_inconclusive_not_new() -> None:
    data = ABData("main (abc)")
    key = ("t::broken_on_main", "m")
    data.add_pair(
        {}, {key: SideLine(A_TIMES, Session())}, {"A": {"t::broken_on_main"}, "B": {key[0]}}
    )
    assert data.measured[key].one_sided == "A-failed"
    verdict = judge_ab("m", [], 0.05, "main (abc)", one_sided="A-failed")
    assert verdict.outcome is Outcome.INCONCLUSIVE
    assert "side A (main (abc)) ran this test but did not measure it" in verdict.message
    # A test side A does not have at all is new in B.
    data.add_pair(
        {}, {("t::added", "m"): SideLine(A_TIMES, Session())}, {"A": set(), "B": {"t::added"}}
    )
    assert data.measured[("t::added", "m")].one_sided == "B"


def test_no_pair_is_added_where_the_cap_could_not_decide() -> None:
    """A conv net's processes spread +-20-40 % here: eight pairs cannot fit that in 5 %."""
    wide = [_pair(c) for c in (0.134, -0.150, -0.185)]  # measured: a conv net, unchanged
    assert undecided(wide, 0.05)  # without a cap, more pairs are asked for
    assert not undecided(wide, 0.05, most=8)
    near = [_pair(c) for c in (0.0, 0.03, -0.02)]  # straddles now; 8 such pairs would decide
    assert undecided(near, 0.05, most=8)
    assert not undecided(near, 0.05, most=3)  # already at the cap
    slower = [_pair(c) for c in (0.06, 0.33, 0.48)]  # spread too, but 8 pairs would fail it
    assert undecided(slower, 0.05, most=8)


def test_a_change_is_confirmed_by_a_fourth_pair_before_it_fails() -> None:
    three = [_pair(c) for c in (0.11, 0.12, 0.13)]
    assert judge_ab("m", three, 0.05, "HEAD").outcome is Outcome.FAIL
    assert undecided(three, 0.05, most=8)  # ask one more pair first
    assert not undecided(three, 0.05, most=3)  # unless the cap says three
    four = [*three, _pair(0.12)]
    assert not undecided(four, 0.05, most=8)
    passing = [_pair(c) for c in (0.0, 0.003, -0.002)]
    assert not undecided(passing, 0.05, most=8)  # a pass needs no confirmation


def test_one_sided_measurements_are_new_or_removed_not_errors() -> None:
    new = judge_ab("fresh", [], 0.05, "HEAD", one_sided="B")
    assert new.outcome is Outcome.NEW
    assert "new in B" in new.message
    removed = judge_ab("old", [], 0.05, "HEAD", one_sided="A")
    assert removed.outcome is Outcome.REMOVED
    assert "removed in B" in removed.message


def test_a_measurement_new_in_b_is_worded_with_its_time_in_b() -> None:
    """No pair holds a measurement only side B took: its figure is B's own blocks (the table's
    p25), not a ``?``."""
    gate = Gate(max_slowdown=0.05, kind="ab", facts=(("ab", "HEAD (abc)"),))
    candidate = Candidate(
        "fresh", Sample(summarize(A_TIMES), None, A_TIMES), sections={"ab": {"one_sided": "B"}}
    )
    verdict = compare(candidate, [], gate, remeasure=_never).verdict
    assert verdict.outcome is Outcome.NEW
    assert verdict.message.endswith("; 1 ms per call in B"), verdict.message
    assert verdict.candidate_statistic == pytest.approx(summarize(A_TIMES).p25)


def _removed_record() -> Record:
    """The record an A/B run reports of a measurement only side A took (renamed in B)."""
    from pytest_torchperf.kinds.ab.run_data import removed_result

    data = ABData("HEAD (abc)")
    for _ in range(2):
        data.add_pair(
            {("t::old", "m"): SideLine(A_TIMES, Session.from_json({"times": A_TIMES}))}, {}
        )
    return Record.from_json(removed_result(data, ("t::old", "m")).to_record())


def test_a_measurement_removed_in_b_is_labelled_and_counted_so_everywhere() -> None:
    from pytest_torchperf.report.markdown import markdown_report
    from pytest_torchperf.report.terminal import count_line

    removed = _removed_record()
    assert removed.outcome == "removed" and removed.label == "removed in B"
    assert outcome_label(removed) == "removed in B"
    assert removed.extra("ab")["one_sided"] == "A"
    assert count_line([removed, removed]) == "2 removed in B"
    markdown = markdown_report([removed], "env")
    assert markdown.startswith("## torchperf: 1 removed in B")
    assert "| 🗑️ removed in B | `t::old` | m |" in markdown, markdown


def test_a_measurement_removed_in_b_is_kept_in_the_results_file() -> None:
    """Untimed in B, it is still a record of the file (not left out as a disabled run's), and
    the file reads back to the same record; it gated nothing, so it is no measurement the run's
    coverage counts. It is no benchmark: pytest-benchmark reads none without stats ("Failed to
    load ...: 'mean'" dropped the whole file, review)."""
    from pytest_torchperf.judge.coverage import coverage
    from pytest_torchperf.report.benchmark_json import benchmark_json
    from pytest_torchperf.store.results import records_of

    removed = _removed_record()
    document = benchmark_json([removed], {}, {})
    assert document["benchmarks"] == []
    assert [r["name"] for r in document["torchperf"]["removed"]] == ["m"]
    (back,) = records_of(document)
    assert (back.outcome, back.label, back.extra("ab")["one_sided"]) == (
        "removed",
        "removed in B",
        "A",
    )
    assert coverage([removed], comparing=True) is None


# -- the turn scheduler -----------------------------------------------------------------------


def _run(events: list[tuple[str, object]], tests: dict[str, set[str]] | None = None) -> list[str]:
    """Feed a scheduler arrivals (side, key) and exits (side, None); return who ran after each."""
    scheduler = TurnScheduler()
    for side, names in (tests or {}).items():
        scheduler.tests[side] = names
    ran = [scheduler.begin("A") or "-"]
    for side, key in events:
        nxt = scheduler.exit(side) if key is None else scheduler.arrive(side, key)  # type: ignore[arg-type]
        ran.append(nxt or "-")
    return ran


def test_sides_alternate_block_by_block_on_the_same_measurement() -> None:
    k = ("t.py::test_a", "mlp")
    # A starts, reaches k; B starts, reaches k; then each block alternates.
    ran = _run([("A", k), ("B", k), ("A", k), ("B", k), ("A", k), ("B", k)])
    assert ran == ["A", "B", "A", "B", "A", "B", "A"]


def test_a_side_that_finished_a_measurement_waits_for_the_other_to_finish_it() -> None:
    k, nxt = ("t.py::test_a", "mlp"), ("t.py::test_b", "mlp")
    scheduler = TurnScheduler()
    assert scheduler.begin("A") == "A"
    assert scheduler.arrive("A", k) == "B"
    assert scheduler.arrive("B", k) == "A"
    assert scheduler.arrive("A", nxt) == "B"  # A is done with k, B has one more block there
    assert scheduler.arrive("B", k) == "B"  # A waits elsewhere but already passed k: B goes on
    assert scheduler.arrive("B", nxt) == "A"  # both at nxt now: alternate
    assert scheduler.blocks["A"][nxt] == 1 and scheduler.blocks["B"][k] == 2


def test_a_test_only_one_side_has_runs_alone_then_they_pair_again() -> None:
    only_b, both = ("t.py::test_new", "x"), ("t.py::test_z", "y")
    scheduler = TurnScheduler()
    scheduler.tests = {"A": {"t.py::test_z"}, "B": {"t.py::test_new", "t.py::test_z"}}
    assert scheduler.begin("A") == "A"
    assert scheduler.arrive("A", both) == "B"
    assert scheduler.arrive("B", only_b) == "B"  # A will never get there: B runs it alone
    assert scheduler.arrive("B", only_b) == "B"
    assert scheduler.arrive("B", both) == "A"
    assert scheduler.arrive("A", both) == "B"


def test_when_one_side_exits_the_other_runs_alone_and_both_done_ends() -> None:
    k = ("t.py::test_a", "mlp")
    scheduler = TurnScheduler()
    scheduler.begin("B")
    assert scheduler.exit("B") == "A"
    assert scheduler.arrive("A", k) == "A"
    assert scheduler.exit("A") is None


def test_only_one_side_ever_holds_the_token() -> None:
    """A random walk of arrivals: the side told to run is always the only one not waiting."""
    import random

    rng = random.Random(0)
    keys = [("t::a", "x"), ("t::b", "x"), ("t::c", "x")]
    scheduler = TurnScheduler()
    holder = scheduler.begin("A")
    position = {"A": 0, "B": 0}
    for _ in range(200):
        assert holder is not None
        other = TurnScheduler.other(holder)
        assert scheduler.waiting[holder] is None
        assert other in scheduler.done or scheduler.waiting[other] is not None
        if rng.random() < 0.3 and position[holder] < len(keys) - 1:
            position[holder] += 1
        holder = scheduler.arrive(holder, keys[position[holder]])


def test_a_side_that_is_done_tears_down_off_the_shared_cpus(monkeypatch) -> None:
    """Pinned on its first turn, a side's own affinity is the shared CPUs alone; on its way out
    it must move to the CPUs it had before (the others), not stay beside the next pair's
    turns (pair N's teardown ran on the shared CPU while pair N+1, started ahead, timed)."""
    import os

    from pytest_torchperf.core.child_protocol import Go, encode
    from pytest_torchperf.kinds.ab import measure_turns

    affinity = {0, 1}  # this fake process's CPUs, as the OS would keep them

    def place(cpus: set[int], pid: int | None = None) -> None:
        affinity.clear()
        affinity.update(cpus)

    monkeypatch.setattr(measure_turns, "place", place)
    monkeypatch.setattr(measure_turns, "allowed_cpus", lambda: set(affinity))
    to_side_r, to_side_w = os.pipe()
    from_side_r, from_side_w = os.pipe()
    os.write(to_side_w, (encode(Go()) + "\n").encode())
    client = measure_turns.TurnClient(to_side_r, from_side_w, "A", 2, {1})
    try:
        client.ready()
        assert affinity == {1}  # its turns: on the shared CPU
        client.bye(0)
        assert affinity == {0}  # its teardown: off it
    finally:
        for fd in (to_side_w, from_side_r):
            os.close(fd)
        client._in.close()
        client._out.close()


def test_a_side_compiles_in_its_own_process_on_its_turn(monkeypatch, tmp_path) -> None:
    """Inductor's pool of compile processes, started at a side's first Triton compile where the
    sides share 2+ CPUs, started up in the background for ~3 CPU-s on those CPUs, into the
    other side's timed blocks: a side compiles in its own process (unless the user chose
    otherwise)."""
    from pytest_torchperf.kinds.ab import run_pairs
    from pytest_torchperf.kinds.ab.run_sides import Side
    from pytest_torchperf.run.child_process import ChildCommand

    started: list[ChildCommand] = []

    def start(command: ChildCommand, log: object, pass_fds: object = ()) -> object:
        started.append(command)
        raise OSError("not started in a unit test")

    monkeypatch.setattr(ChildCommand, "start", start)
    monkeypatch.delenv(run_pairs.COMPILE_THREADS, raising=False)
    sides = {"A": Side("a", "python", tmp_path), "B": Side("b", "python", tmp_path)}
    with pytest.raises(run_pairs.SideError):
        run_pairs.start_pair(["t.py"], sides, 1, [1])
    assert started[0].env[run_pairs.COMPILE_THREADS] == "1"
    monkeypatch.setenv(run_pairs.COMPILE_THREADS, "4")
    with pytest.raises(run_pairs.SideError):
        run_pairs.start_pair(["t.py"], sides, 1, [1])
    assert started[1].env[run_pairs.COMPILE_THREADS] == "4"


# -- the sides' data --------------------------------------------------------------------------


def test_read_side_skips_torn_lines(tmp_path) -> None:
    path = tmp_path / "A.jsonl"
    line = {
        "nodeid": "t::a",
        "name": "mlp",
        "times": [1e-3, 2e-3],
        "session": {"x": 1},
        "limit": 0.05,
    }
    path.write_text(json.dumps(line) + "\n" + '{"nodeid": "t::b", "na')
    found = read_side(path)
    assert list(found) == [("t::a", "mlp")]
    assert found[("t::a", "mlp")].limit == 0.05
    assert read_side(tmp_path / "missing.jsonl") == {}


def test_ab_data_pairs_sides_and_keeps_one_sided_keys() -> None:
    data = ABData("HEAD (abc)")
    both, renamed_a, renamed_b = ("t::a", "m"), ("t::old", "m"), ("t::new", "m")
    for change in (0.0, 0.002, -0.003):
        a = {
            both: SideLine(A_TIMES, Session.from_json({"side": "A"}), limit=0.05),
            renamed_a: SideLine(A_TIMES, Session()),
        }
        b = {
            both: SideLine(
                tuple(t * (1 + change) for t in A_TIMES),
                Session.from_json({"side": "B"}),
                limit=0.05,
            ),
            renamed_b: SideLine(A_TIMES, Session()),
        }
        data.add_pair(a, b)
    assert data.pairs_run == 3
    assert len(data.measured[both].pairs) == 3
    assert data.measured[renamed_a].one_sided == "A"
    assert data.measured[renamed_b].one_sided == "B"
    assert data.undecided() == []
    for _ in range(2):
        data.add_pair(
            {both: SideLine(A_TIMES, Session(), limit=0.05)},
            {both: SideLine(tuple(t * 1.3 for t in A_TIMES), Session(), limit=0.05)},
        )
    assert data.undecided() == [both]


def test_one_pair_far_from_the_others_is_left_out_and_named() -> None:
    """Measured: an unchanged MLP's eighth pair at -12.8 % among seven within +-2.1 %."""
    changes = (-0.128, -0.021, -0.021, 0.007, 0.004, 0.016, 0.0, 0.013)
    pairs = [_pair(c) for c in changes]
    verdict = judge_ab("mlp", pairs, 0.05, "HEAD")
    assert verdict.outcome is Outcome.PASS, verdict.message
    assert "8 process pairs" in verdict.message
    assert "1 left out as far from the others: -12.8%" in verdict.message
    # Symmetric, at most a quarter, and never below four pairs or within 3 %.
    assert outliers([math.log(1 + c) for c in (0.128, 0.0, 0.01, -0.01)]) == [0]
    assert outliers([math.log(1 + c) for c in (0.128, 0.0, 0.01)]) == []
    assert outliers([math.log(1 + c) for c in (0.02, 0.0, 0.01, -0.01, 0.0)]) == []
    bimodal = [math.log(1 + c) for c in (0.12, 0.07, -0.36, 0.07, -0.26, -0.29, 0.66, -0.05)]
    assert outliers(bimodal) == []  # a conv net's processes spread this way: no pair stands out


# -- the engine's A/B branch ------------------------------------------------------------------


def _candidate(change: float, counters: dict | None = None, **extra: object) -> Candidate:
    pairs = [_pair(change, w).to_record() for w in (-0.004, 0.0, 0.004)]
    times = tuple(t for p in pairs for t in p["b"])
    return Candidate(
        "mlp",
        Sample(summarize(times), None, times),
        counters,
        sections={"ab": {"pairs": pairs}},
        **extra,  # type: ignore[arg-type]
    )


def _never() -> Sample:
    raise AssertionError("an A/B verdict never re-measures")


def test_engine_judges_the_pairs_not_stored_statistics() -> None:
    gate = Gate(max_slowdown=0.05, kind="ab", facts=(("ab", "main (abc)"),))
    # A stored 1 s would be -99.9%.
    sessions = [Session.from_json({"statistic": 1.0, "counters": {"flops": 10}})]
    fail = compare(_candidate(0.5, {"flops": 10}), sessions, gate, remeasure=_never)
    assert fail.verdict.outcome is Outcome.FAIL
    assert fail.verdict.basis == "ab"
    assert fail.verdict.ratio == pytest.approx(1.5, rel=1e-3)
    assert (
        outcome_label(
            Record.from_json({"outcome": fail.outcome, "verdict": fail.verdict.to_dict()})
        )
        == "FAIL"
    )
    same = compare(_candidate(0.0, {"flops": 10}), sessions, gate, remeasure=_never)
    assert same.outcome == "pass"


def test_engine_checks_counters_and_fingerprints_against_side_a() -> None:
    gate = Gate(max_slowdown=0.05, kind="ab", facts=(("ab", "HEAD (abc)"),))
    sessions = [Session.from_json({"statistic": 1e-3, "counters": {"flops": 10}})]
    changed = compare(_candidate(0.0, {"flops": 20}), sessions, gate, remeasure=_never)
    assert changed.verdict.outcome is Outcome.PASS
    assert changed.counter_changes and changed.outcome == "fail"


def test_one_sided_measurement_does_not_fail_in_strict_mode() -> None:
    gate = Gate(max_slowdown=0.05, kind="ab", facts=(("ab", "HEAD (abc)"),), strict=True)
    times = A_TIMES
    candidate = Candidate(
        "x", Sample(summarize(times), None, times), sections={"ab": {"one_sided": "B"}}
    )
    comparison = compare(candidate, [], gate, remeasure=_never)
    assert comparison.verdict.outcome is Outcome.NEW
    assert comparison.outcome == "new" and not comparison.failures


def test_gate_records_side_a() -> None:
    """Side A is the ab kind's fact in the gate (KindSpec.gate_facts), under the file's key."""
    gate = Gate(kind="ab", facts=(("ab", "origin/main (abc)"),))
    assert gate.fact("ab") == gate.to_record()["ab"] == "origin/main (abc)"
    assert Gate.from_record(gate.to_record()) == gate
    # Files without it, or with null there: no side A.
    assert Gate.from_record({}).fact("ab") == Gate.from_record({"ab": None}).fact("ab") == ""
    assert Gate().to_record()["ab"] == ""
    with pytest.raises(ValueError, match="unknown gate facts"):
        Gate(facts=(("side_c", "x"),))
    assert START == ("", "")


# -- variant speedups in an A/B run: judged on the pairs --------------------------------------


def test_one_pair_that_lost_speedup_is_not_a_failure() -> None:
    from pytest_torchperf.kinds.ab.judge_pairs import judge_ab_speedup

    # The case: x1.25 in A, x0.77 in B in one pair, the others unchanged.
    failure, warning = judge_ab_speedup(
        "r[amp]", [(1.25, 0.77), (1.25, 1.24), (1.24, 1.25)], 0.05, "HEAD (abc)"
    )
    assert failure is None
    assert warning is not None and "straddles the limit" in warning
    assert "stored sessions" not in warning and "3 process pairs" in warning


def test_every_pair_losing_speedup_fails_with_the_interval() -> None:
    from pytest_torchperf.kinds.ab.judge_pairs import judge_ab_speedup

    failure, warning = judge_ab_speedup(
        "r[amp]", [(1.25, 0.98), (1.24, 1.0), (1.26, 0.99)], 0.05, "HEAD (abc)"
    )
    assert warning is None and failure is not None
    assert "x0.99 in B vs x1.25 in A (HEAD (abc))" in failure
    assert "(95% CI +" in failure and "limit 5%" in failure


def test_unchanged_speedups_pass_and_one_pair_only_warns() -> None:
    from pytest_torchperf.kinds.ab.judge_pairs import judge_ab_speedup

    same = [(1.25, 1.24), (1.24, 1.26), (1.26, 1.25)]
    assert judge_ab_speedup("r[amp]", same, 0.05, "HEAD") == (None, None)
    failure, warning = judge_ab_speedup("r[amp]", [(1.25, 0.77)], 0.05, "HEAD")
    assert failure is None and warning is not None and "one pair cannot decide" in warning


def test_engine_judges_ab_speedups_on_pairs_not_side_a_sessions() -> None:
    gate = Gate(max_slowdown=0.05, kind="ab", facts=(("ab", "HEAD (abc)"),))
    # Side A's sessions say x1.25 each; B's first pair x0.77: the stored-session check would fail.
    speedup = {"median": 1.25, "p25": 1.2, "p75": 1.3}
    sessions = [Session.from_json({"statistic": 1e-3, "speedup": speedup})] * 3
    base = _candidate(0.0, {"flops": 10})
    lucky = replace(
        base,
        variant="amp",
        speedup={"median": 0.77, "p25": 0.75, "p75": 0.79, "n": 9},
        sections={
            "ab": {
                **base.sections["ab"],
                "speedups": [(1.25, 0.77), (1.25, 1.24), (1.24, 1.25)],
            }
        },
    )
    comparison = compare(lucky, sessions, gate, remeasure=_never)
    assert not comparison.failures, comparison.failures
    assert any("straddles" in w for w in comparison.warnings)


def test_a_measurement_a_side_skipped_on_purpose_is_skipped_not_missing(tmp_path) -> None:
    # amp of a model with no autocast-eligible op: both sides' tests ran and skipped it. The
    # controller must skip it with the reason, not fail it as "not measured by side B".
    from pytest_torchperf.core.child_protocol import SkippedLine
    from pytest_torchperf.kinds.ab.run_data import ABSkipped, ab_measured
    from pytest_torchperf.run.children import ChildSink

    path = tmp_path / "b.jsonl"
    ChildSink(path, 1).send(SkippedLine("t::amp", "m[amp]", "autocast ran no op"))
    b = read_side(path)
    assert b[("t::amp", "m[amp]")].skipped == "autocast ran no op"
    data = ABData("HEAD (abc)")
    a = {("t::amp", "m[amp]"): SideLine((), Session(), skipped="autocast ran no op")}
    data.add_pair(a, b, {"A": {"t::amp"}, "B": {"t::amp"}})
    entry = data.measured[("t::amp", "m[amp]")]
    assert entry.missing_in_a == 0 and not entry.pairs and entry.skipped["B"]
    with pytest.raises(ABSkipped, match="m\\[amp\\]: not measured: autocast ran no op"):
        ab_measured(data, "t::amp", "m[amp]", None, "torchperf")


def test_a_measurement_only_side_a_skipped_is_new_in_b_not_failed_in_a() -> None:
    key = ("t::amp", "m[amp]")
    data = ABData("HEAD (abc)")
    data.add_pair(
        {key: SideLine((), Session(), skipped="no eligible op")},
        {key: SideLine(A_TIMES, Session())},
        {"A": {"t::amp"}, "B": {"t::amp"}},
    )
    assert data.measured[key].one_sided == "B"


def test_a_measurement_both_sides_skip_asks_for_no_more_pairs() -> None:
    # It has no pairs and never will: asking for more ran the run to its cap of pairs (8).
    key = ("t::amp", "m[amp]")
    data = ABData("HEAD (abc)")
    for _ in range(3):
        data.add_pair(
            {key: SideLine((), Session(), skipped="no eligible op")},
            {key: SideLine((), Session(), skipped="no eligible op")},
            {"A": {"t::amp"}, "B": {"t::amp"}},
        )
    assert data.undecided(8) == []


def test_the_decision_is_made_before_and_apart_from_its_wording() -> None:
    """decide_ab says the outcome and the case that decided it; word_ab only words it (the same
    decision worded for another side A changes no outcome)."""
    from pytest_torchperf.kinds.ab.judge_pairs import decide_ab, word_ab

    slower = [_pair(0.3, w) for w in (0.0, 0.01, -0.01)]
    decision = decide_ab(slower, 0.1)
    assert (decision.outcome, decision.case) == (Outcome.FAIL, "interval")
    assert decision.interval is not None and decision.interval.low > 0.1
    assert len(decision.usable) == 3
    assert (
        word_ab("m", decision, 0.1, "main (abc)")
        == judge_ab("m", slower, 0.1, "main (abc)").message
    )
    assert "vs v1 (def)" in word_ab("m", decision, 0.1, "v1 (def)")
    assert decide_ab(slower, 0.1, "B").case == "new"
    assert decide_ab(slower, 0.1, "A").case == "removed"
    assert decide_ab(slower, 0.1, "A-failed").outcome is Outcome.INCONCLUSIVE
    assert decide_ab(slower[:1], 0.1).case == "few-pairs"


def test_a_change_beyond_the_limit_waits_for_a_confirming_pair_and_is_said_to() -> None:
    """A newcomer read `pair 3: ...; 1 still undecided` beside three pairs of +31 to +34 % at a
    20 % limit: the fourth pair confirms a change, which the line now says."""
    from pytest_torchperf.kinds.ab.judge_pairs import beyond_limit
    from pytest_torchperf.kinds.ab.plugin_runs import _undecided_note

    slower = [_pair(c) for c in (0.31, 0.34, 0.32)]
    straddling = [_pair(c) for c in (0.0, 0.09, -0.02)]
    assert beyond_limit(slower, 0.2) and undecided(slower, 0.2, most=8)
    assert not beyond_limit(straddling, 0.05) and not beyond_limit([], 0.05)
    from pytest_torchperf.kinds.ab.run_data import Paired

    data = ABData("main (abc)")
    data.measured[("t::0", "m")] = Paired(pairs=slower, limit=0.2)
    data.measured[("t::1", "m")] = Paired(pairs=straddling)  # the default 5 %
    keys = list(data.measured)
    assert data.confirming(keys) == [("t::0", "m")]
    assert _undecided_note(data, keys) == (
        "; 1 beyond its limit, which more pairs confirm (a change rests on at least 4); 1 still "
        "undecided"
    )
    assert _undecided_note(data, []) == ""
