"""Pooling of measurements from fresh processes (``--torchperf-processes``): pure logic."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_torchperf.core.child_protocol import SampleLine
from pytest_torchperf.core.stats import summarize
from pytest_torchperf.judge.outcome import Outcome
from pytest_torchperf.judge.samples import Sample, pooled
from pytest_torchperf.judge.tolerance import effective_tolerance
from pytest_torchperf.judge.verdict import judge
from pytest_torchperf.run.children import (
    ChildSink,
    child_session_records,
    merge,
    read_child_file,
)
from pytest_torchperf.store.baselines import same_run
from pytest_torchperf.store.sessions import Session


def sample(p25_ms: float, calibration: float | None = None, cpu_share: float = 1.0) -> Sample:
    times = tuple(p25_ms / 1000 * f for f in (1.0, 1.0, 1.01, 1.02, 1.03))
    return Sample(summarize(times), cpu_share, times, calibration)


def child(
    process: int, p25_ms: float, problem: str | None = None, calibration: float | None = None
) -> SampleLine:
    return SampleLine("t.py::t", "m", process, sample(p25_ms).times, 1.0, calibration, problem)


def test_pooled_statistic_is_the_median_of_the_processes() -> None:
    own = sample(10.0)
    pool = pooled(own, [child(1, 12.0), child(2, 11.0)])
    assert pool.processes == 3
    assert pool.statistic == pytest.approx(0.011)
    assert pool.what == "median p25 of 3 processes"
    # Own spread and CPU share are kept: the guard judges the pass this process can re-measure.
    assert pool.summary is own.summary and pool.cpu_share == own.cpu_share


def test_untrusted_children_are_left_out_of_the_pool() -> None:
    own = sample(10.0)
    assert pooled(own, [child(1, 30.0, problem="CPU share 0.40 < 0.90")]) is own
    pool = pooled(own, [child(1, 30.0, problem="busy"), child(2, 12.0)])
    assert pool.processes == 2 and pool.statistic == pytest.approx(0.011)


def test_pooled_calibration_is_the_median_of_the_processes() -> None:
    pool = pooled(
        sample(10.0, calibration=1.0),
        [child(1, 10.0, calibration=3.0), child(2, 10.0, calibration=2.0)],
    )
    assert pool.machine_calibration == 2.0
    assert pool.calibration == 1.0  # a saved session pairs its own p25 with its own calibration


def test_child_file_round_trip_survives_a_torn_last_line(tmp_path: Path) -> None:
    path = tmp_path / "child-1.jsonl"
    sink = ChildSink(path, 1)
    sink.write("t.py::test_a", "mlp", sample(5.0), None)
    sink.write("t.py::test_b", "cnn", sample(7.0), "spread too high")
    with open(path, "a") as handle:
        handle.write('{"nodeid": "t.py::test_c", "na')  # the child died mid-write
    found = read_child_file(path)
    assert set(found) == {("t.py::test_a", "mlp"), ("t.py::test_b", "cnn")}
    assert found[("t.py::test_a", "mlp")].statistic == pytest.approx(0.005)
    assert found[("t.py::test_b", "cnn")].problem == "spread too high"
    assert read_child_file(tmp_path / "missing.jsonl") == {}


def test_each_line_says_its_message_type_and_each_reader_reads_its_own(tmp_path: Path) -> None:
    from pytest_torchperf.core.child_protocol import SideResultLine, SkippedLine, read_messages

    path = tmp_path / "child.jsonl"
    sink = ChildSink(path, 1)
    sink.write("t.py::test_a", "mlp", sample(5.0), None)
    sink.send(SkippedLine("t.py::test_a", "mlp[amp]", "no op"))
    with open(path, "a") as handle:  # an older revision's side A wrote lines without a type
        handle.write('{"nodeid": "t.py::test_b", "name": "cnn", "times": [1.0]}\n')
    kinds = [json.loads(line).get("kind") for line in path.read_text().splitlines()]
    assert kinds == ["sample", "skipped", None]
    older = read_messages(path, (SideResultLine,), untyped="side")
    assert [line.name for line in older] == ["cnn"]
    assert set(read_child_file(path)) == {("t.py::test_a", "mlp")}


def test_merge_keeps_process_order() -> None:
    key = ("t.py::test_a", "mlp")
    merged = merge([{key: child(1, 5.0)}, {}, {key: child(3, 6.0)}])
    assert [s.process for s in merged[key]] == [1, 3]


def test_child_session_records_take_timing_from_the_child_and_the_rest_from_this_run() -> None:
    record = Session.from_json(
        {
            "run_id": "abc",
            "statistic": 0.010,
            "times": [0.010],
            "counters": {"flops": 5},
            "speedup": {"median": 1.5},
            "top_ops": [{"op": "aten::addmm"}],
            "variant": "eager",
            "cpu_share": 0.99,
            "calibration": 1e-5,
        }
    )
    records = child_session_records(
        record, [child(1, 12.0, calibration=2e-5), child(2, 99.0, problem="busy")], "abc"
    )
    assert len(records) == 1  # the contaminated child is not stored
    stored = records[0]
    assert stored.run_id == "abc-p1" and stored.process == 1
    assert stored.statistic == pytest.approx(0.012)
    assert stored.calibration == 2e-5 and stored.counters == {"flops": 5}
    assert stored.speedup is None and not stored.has("top_ops")  # not measured by the child
    assert record.run_id == "abc"  # the controller's own record is untouched
    json.dumps(stored.to_json())
    # A variant's child reports its own speedup: stored as its own, never the controller's.
    measured = replace(child(1, 12.0), speedup={"median": 1.8, "p25": 1.7, "p75": 1.9, "n": 10})
    (stored,) = child_session_records(record, [measured], "abc")
    assert stored.speedup == {"median": 1.8, "p25": 1.7, "p75": 1.9, "n": 10}
    # A newcomer's stored child session read neighbour_load 1.0 (the controller's) beside its own
    # cpu_share 0.9994: what the child measured of its machine is its own, or nothing.
    controller = record.updated(
        {
            "neighbour_load": 1.0,
            "gpu_clock": {"share": 0.9},
            "settle": {"blocks": 30, "settled": True},
            "nodes": {"k": [1]},
        }
    )
    (stored,) = child_session_records(
        controller, [replace(child(1, 12.0), neighbour_load=0.25)], "abc"
    )
    assert stored.neighbour_load == 0.25
    assert not any(stored.has(key) for key in ("gpu_clock", "settle", "nodes"))
    (stored,) = child_session_records(controller, [child(1, 12.0)], "abc")
    assert stored.neighbour_load is None


def test_a_runs_own_child_sessions_are_recognised() -> None:
    assert same_run("abc-p2", "abc") and same_run("abc", "abc") and same_run("abc-p1", "abc-p3")
    assert not same_run("abd-p1", "abc") and not same_run(None, "abc") and not same_run("abc", None)


def test_machine_check_uses_the_pooled_calibration() -> None:
    """Three processes say the machine ran 3x slower: the slowdown is the machine's, not the code's."""
    others = [child(1, 30.0, calibration=3.0), child(2, 30.0, calibration=3.0)]
    first = pooled(sample(30.0, calibration=3.0), others)
    judgement = judge(
        "mlp",
        first,
        [0.010],
        0.10,
        lambda: pooled(sample(30.0, calibration=3.0), others),
        baseline_calibrated=[(0.010, 1.0)],
    )
    assert judgement.verdict.outcome is Outcome.INCONCLUSIVE
    assert judgement.verdict.machine_ratio == pytest.approx(3.0)


def test_noise_floor_shrinks_with_candidate_processes() -> None:
    history = [1.00, 1.04, 0.97, 1.02, 0.99, 1.05, 0.96, 1.01]  # robust CV ~3.7%
    one, cv = effective_tolerance(0.05, history)
    three, _ = effective_tolerance(0.05, history, candidate_processes=3)
    assert cv is not None and one == pytest.approx(3 * cv)
    assert 0.05 <= three < one
    # Never narrower than the user's limit.
    assert effective_tolerance(0.20, history, candidate_processes=10)[0] == 0.20


def test_judge_fails_a_pooled_slowdown_and_says_it_pooled() -> None:
    others = [child(1, 12.0), child(2, 12.2)]
    first = pooled(sample(12.1), others)
    judgement = judge("mlp", first, [0.010], 0.10, lambda: pooled(sample(12.3), others))
    assert judgement.verdict.outcome is Outcome.FAIL
    assert "median p25 of 3 processes" in judgement.verdict.message
    # Two fresh processes and this one: it said "median of 3 fresh processes".
    assert (
        "candidate: median of 3 processes (2 fresh, then this one: p25s 12 ms, 12.2 ms, 12.3 ms)"
        in judgement.verdict.message
    )


def test_one_slow_process_does_not_fail_a_pooled_verdict() -> None:
    """The point of pooling: one unlucky process (+30%) is outvoted by the other two."""
    others = [child(1, 13.0), child(2, 10.1)]
    first = pooled(sample(10.2), others)
    judgement = judge("mlp", first, [0.010], 0.10, lambda: pooled(sample(10.2), others))
    assert judgement.verdict.outcome is Outcome.PASS


class OptionsOnly:
    """A pytest config as far as the process count reads it: options and ini values."""

    def __init__(self, options: dict[str, object], ini: dict[str, str] | None = None) -> None:
        self.options = options
        self.ini = ini or {}

    def getoption(self, name: str, default: object = None) -> object:
        return self.options.get(name, default)

    def getini(self, name: str) -> str:
        return self.ini.get(name, "")


def test_a_save_measures_in_fresh_processes_unless_a_kind_repeats_exactly() -> None:
    """The process count asks the kinds (their plugin parts' ``repeats_exactly``), read before
    the run's settings exist: an instruction count repeats exactly, so its save needs one."""
    from pytest_torchperf.kinds import parts
    from pytest_torchperf.pytest_plugin.child_runs import SAVE_PROCESSES, processes_setting

    def exact(config: OptionsOnly) -> bool:
        modules = parts("plugin", having="repeats_exactly")
        return any(m.repeats_exactly(config) for m in modules)

    save = {"torchperf_save": True}
    assert processes_setting(OptionsOnly(save), exact(OptionsOnly(save))) == SAVE_PROCESSES  # type: ignore[arg-type]
    for counting in (
        OptionsOnly({**save, "torchperf_instructions": True}),
        OptionsOnly(save, {"torchperf_instructions": "true"}),
    ):
        assert exact(counting)
        assert processes_setting(counting, exact(counting)) == 1  # type: ignore[arg-type]
    # A bad ini value is the kind's own error, reported once the settings are read.
    assert not exact(OptionsOnly(save, {"torchperf_instructions": "maybe"}))
    assert not exact(OptionsOnly({**save, "torchperf_fallback": "instructions"}))
