"""``--torchperf-instructions`` through the one comparison engine, the replay, the baseline schema
and the reports: pure, no Valgrind and no torch."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

from pytest_torchperf.core.stats import summarize
from pytest_torchperf.judge.compare import Candidate, Gate, compare
from pytest_torchperf.judge.labels import outcome_label
from pytest_torchperf.judge.replay import replay
from pytest_torchperf.judge.samples import Sample
from pytest_torchperf.kinds.instructions.run_counting import (
    counted_time,
    instruction_environment,
    read_counts,
    vs_eager,
)
from pytest_torchperf.report.markdown import markdown_report
from pytest_torchperf.report.terminal import render_table
from pytest_torchperf.store.environment import describe_difference
from pytest_torchperf.store.record import Record
from pytest_torchperf.store.schema import BaselineFileError, validate_session
from pytest_torchperf.store.sessions import Session


def _read(records: Iterable[Mapping[str, object]]) -> list[Record]:
    """The records as the reports get them: read once from their JSON form."""
    return [Record.from_json(r) for r in records]


TIMES = (1e-3, 1.1e-3, 0.9e-3, 1e-3)
GATE = Gate(kind="instructions")


def _count(per_call: float, second: float | None = None, **functions: float) -> dict:
    return {
        "per_call": per_call if second is None else second,
        "windows": [per_call, per_call if second is None else second],
        "functions": {"_PyEval_EvalFrameDefault": 50_000.0, **functions},
    }


def _sample(scale: float = 1.0) -> Sample:
    times = tuple(t * scale for t in TIMES)
    return Sample(summarize(times), 1.0, times)


def _raw(count: dict | None, statistic: float = 1e-3, **extra: object) -> dict:
    """A counted session as its file holds it."""
    session = {
        "statistic": statistic,
        "times": list(TIMES),
        "counters": {"ops": {"aten::addmm": 2}},
    }
    if count is not None:
        session["instructions"] = count
    return {**session, **extra}


def _session(count: dict | None, statistic: float = 1e-3, **extra: object) -> Session:
    return Session.from_json(_raw(count, statistic, **extra))


def _no_remeasure() -> Sample:
    raise AssertionError("an instruction-count run never re-measures time")


def test_the_engine_gates_instructions_and_ignores_a_far_slower_time() -> None:
    # 5x slower on the clock (a busy runner), 3 % more instructions: the instructions decide.
    candidate = Candidate(
        "mlp",
        _sample(5.0),
        {"ops": {"aten::addmm": 2}},
        sections={"instructions": _count(2_060_000.0, _PyEval_EvalFrameDefault=110_000.0)},
    )
    result = compare(candidate, [_session(_count(2_000_000.0))], GATE, remeasure=_no_remeasure)
    assert result.outcome == "fail" and result.label == "FAIL (instructions)"
    assert result.verdict.basis == "instructions"
    assert result.verdict.message.startswith(
        "mlp: instructions +3.0% per call vs baseline (2.06 M vs 2.00 M; limit 1%)"
    )
    assert (
        "why (self instructions per call vs baseline): _PyEval_EvalFrameDefault +60.0 k/call"
        in (result.verdict.message)
    )
    assert result.verdict.ratio == pytest.approx(1.03)


def test_below_the_noise_floor_a_small_target_passes_what_a_large_one_fails() -> None:
    # +1.5 % of 110 k instructions is 1,650 per call: within what processes of the same code
    # differ by (up to ~4 k); the same share of 2 M is not.
    small = Candidate("v", _sample(), sections={"instructions": _count(111_650.0)})
    result = compare(small, [_session(_count(110_000.0))], GATE, remeasure=_no_remeasure)
    assert result.outcome == "pass"
    assert "limit 1%, at least 8.00 k per call: smaller changes are process-to-process noise" in (
        result.verdict.message
    )
    assert result.verdict.effective_tolerance == pytest.approx(8000 / 110_000)
    large = Candidate("m", _sample(), sections={"instructions": _count(2_030_000.0)})
    assert (
        compare(large, [_session(_count(2_000_000.0))], GATE, remeasure=_no_remeasure).outcome
        == "fail"
    )
    tiny_jump = Candidate("v", _sample(), sections={"instructions": _count(120_000.0)})
    assert (
        compare(tiny_jump, [_session(_count(110_000.0))], GATE, remeasure=_no_remeasure).outcome
        == "fail"
    )


def test_unchanged_counts_pass_on_any_clock_and_counters_still_gate() -> None:
    same = Candidate(
        "mlp",
        _sample(0.2),
        {"ops": {"aten::addmm": 2}},
        sections={"instructions": _count(200_100.0)},
    )
    assert (
        compare(same, [_session(_count(200_000.0))], GATE, remeasure=_no_remeasure).outcome
        == "pass"
    )
    more_ops = Candidate(
        "mlp", _sample(), {"ops": {"aten::addmm": 3}}, sections={"instructions": _count(200_000.0)}
    )
    result = compare(more_ops, [_session(_count(200_000.0))], GATE, remeasure=_no_remeasure)
    assert result.label == "FAIL (counters)" and result.counter_changes


def test_the_latest_session_with_a_count_is_the_baseline() -> None:
    sessions = [_session(_count(100_000.0)), _session(_count(200_000.0)), _session(None)]
    candidate = Candidate("mlp", _sample(), sections={"instructions": _count(200_000.0)})
    result = compare(candidate, sessions, GATE, remeasure=_no_remeasure)
    assert result.outcome == "pass" and result.verdict.baseline_sessions == 2


def test_no_count_fails_with_the_reason_and_no_baseline_is_new() -> None:
    missing = Candidate(
        "mlp", _sample(), sections={"uncounted": "the pytest process under Valgrind exited"}
    )
    result = compare(missing, [_session(_count(1.0))], GATE, remeasure=_no_remeasure)
    assert result.outcome == "fail"
    assert result.verdict.message == (
        "mlp: no instruction count: the pytest process under Valgrind exited"
    )
    new = compare(
        Candidate("mlp", _sample(), sections={"instructions": _count(1e5)}),
        [],
        GATE,
        remeasure=_no_remeasure,
    )
    assert new.outcome == "new"
    strict = compare(
        Candidate("mlp", _sample(), sections={"instructions": _count(1e5)}),
        [],
        Gate(kind="instructions", strict=True),
        remeasure=_no_remeasure,
    )
    assert strict.outcome == "fail"


def test_windows_that_disagree_are_inconclusive_and_strict_fails_them() -> None:
    candidate = Candidate("mlp", _sample(), sections={"instructions": _count(200_000.0, 201_000.0)})
    loose = compare(candidate, [_session(_count(200_000.0))], GATE, remeasure=_no_remeasure)
    assert loose.outcome == "inconclusive" and loose.verdict.message.startswith("mlp: inconclusive")
    strict = compare(
        candidate,
        [_session(_count(200_000.0))],
        Gate(kind="instructions", strict=True),
        remeasure=_no_remeasure,
    )
    assert strict.outcome == "fail"


def test_a_timed_speedup_is_not_gated_in_an_instruction_run() -> None:
    sessions = [_session(_count(1e5), speedup={"median": 2.0, "p25": 1.9, "p75": 2.1, "n": 9})]
    candidate = Candidate(
        "m[compiled]",
        _sample(),
        variant="compiled",
        speedup={"median": 1.0, "p25": 0.95, "p75": 1.05, "n": 9},
        sections={"instructions": _count(1e5)},
    )
    assert compare(candidate, sessions, GATE, remeasure=_no_remeasure).outcome == "pass"
    timed = compare(candidate, sessions, Gate(), remeasure=lambda: _sample())
    assert timed.outcome == "fail"  # the same speedup loss fails a timing run


def test_the_gate_round_trips_and_old_records_mean_time() -> None:
    gate = Gate(kind="instructions", limits=(("max_instruction_increase", 0.02),))
    assert Gate.from_record(gate.to_record()) == gate
    assert Gate.from_record({}).instructions is False
    again = Gate.from_record(gate.to_record(), max_instruction_increase=0.05)
    assert again.limit("max_instruction_increase") == 0.05
    # Every kind's limit is recorded, at its option's default where not given.
    assert gate.to_record()["max_kernel_slowdown"] == 0.03
    with pytest.raises(ValueError, match="unknown gate limits"):
        Gate(limits=(("max_typo_increase", 0.1),))


def test_replay_judges_a_recorded_instruction_measurement_like_the_run() -> None:
    record = {
        "name": "mlp",
        "nodeid": "t.py::test",
        "samples": list(TIMES),
        "instructions": _count(212_000.0),
        "session": {"gate": Gate(kind="instructions").to_record(), "times": list(TIMES)},
        "passes": [{"times": list(TIMES), "cpu_share": 1.0}],
    }
    result = replay(Record.from_json(record), [_session(_count(200_000.0))])
    assert result.label == "FAIL (instructions)"
    looser = replay(
        Record.from_json(record), [_session(_count(200_000.0))], max_instruction_increase=0.07
    )
    assert looser.outcome == "pass"
    record.pop("instructions")
    assert (
        "no instruction count"
        in replay(Record.from_json(record), [_session(_count(2e5))]).verdict.message
    )


def test_the_baseline_schema_checks_instruction_records(tmp_path: Path) -> None:
    validate_session(_raw(_count(2e5)), tmp_path / "b.json", "s")
    for bad in ({"per_call": -1, "windows": [1, 1]}, {"per_call": 5, "windows": [5]}, "many"):
        with pytest.raises(BaselineFileError, match="instructions must hold a positive per_call"):
            validate_session(_raw(bad), tmp_path / "b.json", "s")  # type: ignore[arg-type]


def test_labels_name_instructions() -> None:
    failed = {"outcome": "fail", "verdict": {"outcome": "fail", "basis": "instructions"}}
    assert outcome_label(Record.from_json(failed)) == "FAIL (instructions)"
    both = {**failed, "counter_changes": ["ops changed"]}
    assert outcome_label(Record.from_json(both)) == "FAIL (instructions, counters)"
    assert (
        outcome_label(Record.from_json({"outcome": "fail", "verdict": {"outcome": "fail"}}))
        == "FAIL"
    )


def _record(name: str, **extra: object) -> dict:
    return {
        "nodeid": "t.py::test",
        "name": name,
        "outcome": "pass",
        "stats": {"median": 1e-3, "p25": 1e-3},
        **extra,
    }


def test_reports_show_counts_and_baselines_in_their_units() -> None:
    records = [
        _record(
            "mlp",
            instructions=_count(206_000.0),
            verdict={
                "outcome": "pass",
                "basis": "instructions",
                "baseline_statistic": 200_000.0,
                "ratio": 1.03,
            },
        ),
        _record("mlp[amp]", instructions=_count(412_000.0), instructions_vs_eager=2.0),
        _record("timed", verdict={"outcome": "pass", "baseline_statistic": 2e-3, "ratio": 0.5}),
    ]
    table = "\n".join(render_table(_read(records), width=200))
    assert "instr/call" in table.splitlines()[0]
    rows = {line.split()[1]: line for line in table.splitlines()[1:]}
    assert "206 k" in rows["mlp"] and "200 k" in rows["mlp"] and "+3.0%" in rows["mlp"]
    assert "412 k (x2.00 eager)" in rows["mlp[amp]"]
    assert "2 ms" in rows["timed"]
    markdown = markdown_report(_read(records), "env")
    assert "| instr/call | baseline |" in markdown and "| 206 k | 200 k | +3.0% |" in markdown


def test_read_counts_skips_torn_and_foreign_lines(tmp_path: Path) -> None:
    path = tmp_path / "counts.jsonl"
    good = {
        "kind": "count",
        "nodeid": "t.py::a",
        "name": "a",
        "instructions": _count(5e5),
        "capability": "AVX2",
    }
    # A line of another kind, even one holding a count, is not a count.
    timing = {"kind": "sample", "nodeid": "t.py::b", "name": "b", "instructions": _count(5e5)}
    path.write_text(
        json.dumps(good) + "\n" + json.dumps(timing) + "\n" + '{"nodeid": "t.py::c", "na'
    )
    counts, capability = read_counts(path)
    assert list(counts) == [("t.py::a", "a")] and capability == "AVX2"
    assert read_counts(tmp_path / "missing.jsonl") == ({}, None)


def test_the_childs_time_splits_into_start_up_counting_and_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "counts.jsonl"
    lines = [
        {
            "kind": "count",
            "nodeid": "t.py::a",
            "name": "a",
            "instructions": _count(5e5),
            "started": 1040.0,
            "seconds": 12.5,
        },
        {
            "kind": "count",
            "nodeid": "t.py::b",
            "name": "b",
            "instructions": _count(5e5),
            "started": 1060.0,
            "seconds": 7.5,
        },
        {"kind": "count", "nodeid": "t.py::c", "name": "c", "instructions": _count(5e5)},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    split = counted_time(path, launched=1000.0, ended=1100.0)
    assert split is not None
    assert (split.start_up, split.counting, split.other) == (40.0, 20.0, 40.0)
    assert split.describe().startswith("40 s to the first count (start-up, ")
    assert "20 s counting, 40 s the rest (" in split.describe()
    assert split.describe().endswith("; longest counts: a 12 s, b 8 s")
    assert counted_time(tmp_path / "missing.jsonl", 0.0, 1.0) is None


def test_the_instruction_environment_adds_valgrind_and_the_capability() -> None:
    timing = {"exact": {"device": "cpu", "cpu_model": "Xeon", "torch": "2.14.1", "threads": 1}}
    env_id, env = instruction_environment(
        timing, {"valgrind": "valgrind-3.19.0", "counted_capability": "AVX2"}
    )
    assert env_id.startswith("instructions-cpu-xeon-torch2.14.1-t1-")
    other_id, other = instruction_environment(
        timing, {"valgrind": "valgrind-3.24.0", "counted_capability": "AVX2"}
    )
    assert other_id != env_id
    assert describe_difference(env["exact"], other["exact"]) == (
        "valgrind valgrind-3.19.0 here vs valgrind-3.24.0 stored"
    )
    assert vs_eager({"per_call": 50.0}, {"per_call": 100.0}) == 0.5
    assert vs_eager({"per_call": 50.0}, None) is None


def test_a_missing_count_is_explained_by_other_instruction_environments_only() -> None:
    from pytest_torchperf.judge.compare import Where

    timing_env = ("cpu-xeon-torch2.14.1-t1-aaaa", {"exact": {"device": "cpu"}})
    counted_env = (
        "instructions-cpu-xeon-torch2.14.1-t1-bbbb",
        {"exact": {"device": "cpu", "valgrind": "valgrind-3.24.0"}},
    )
    where = Where(
        "instructions-cpu-xeon-torch2.14.1-t1-cccc",
        {"device": "cpu", "valgrind": "valgrind-3.19.0"},
        "b.json",
        ".torchperf",
        others=lambda: [timing_env],
    )
    candidate = Candidate("mlp", _sample(), sections={"instructions": _count(2e6)})
    lone = compare(
        candidate, [], Gate(kind="instructions", strict=True), remeasure=_no_remeasure, where=where
    )
    assert lone.outcome == "fail" and timing_env[0] not in lone.verdict.message
    assert "record one with pytest --torchperf-instructions --torchperf-save" in lone.failures[0]
    both = Where(
        where.environment_id,
        where.exact,
        "b.json",
        ".torchperf",
        others=lambda: [timing_env, counted_env],
    )
    new = compare(candidate, [], GATE, remeasure=_no_remeasure, where=both)
    assert new.verdict.message == (
        "mlp: no comparable baseline: valgrind valgrind-3.19.0 here vs valgrind-3.24.0 stored "
        "(stored under .torchperf/instructions-cpu-xeon-torch2.14.1-t1-bbbb); record one for "
        "this environment with pytest --torchperf-instructions --torchperf-save"
    )


def test_accept_refuses_an_instruction_session_without_a_count() -> None:
    from pytest_torchperf.judge.replay import accept_problem

    gate = Gate(kind="instructions").to_record()
    counted = {"gate": gate, "instructions": _count(2e6), "times": [1.0]}
    assert accept_problem(Session.from_json(counted)) is None
    uncounted = {"gate": gate, "times": [1.0]}
    assert accept_problem(Session.from_json(uncounted)) == "no instruction count"


class _Ctx:
    def __init__(self, counts: dict) -> None:
        from pytest_torchperf.kinds.instructions.run_counting import CountState

        self.counting = CountState(
            counts=counts,
            problems={"t.py::test[amp]": "the pytest process under Valgrind exited with code 7"},
        )

    def state(self, kind_state: type) -> object:
        return self.counting


def _result(name: str) -> object:
    from pytest_torchperf.run.result import Result

    return Result(
        name=name,
        nodeid="t.py::test[amp]",
        samples=[1e-3],
        number_per_block=1,
        device="cpu",
        threads=1,
        cpu_share=1.0,
    )


def test_attach_count_puts_the_count_and_the_ratio_to_eager_on_the_result() -> None:
    from pytest_torchperf.kinds.instructions.run_counting import attach_count
    from pytest_torchperf.run.state import VariantExtra

    key = "t.py::test[amp]"
    ctx = _Ctx({(key, "mlp[amp]"): _count(3e6), (key, "mlp"): _count(1e6)})
    result = _result("mlp[amp]")
    result.session = Session(statistic=1e-3)
    assert attach_count(ctx, key, "mlp[amp]", VariantExtra("amp"), result, comparing=False) is None
    assert result.sections["instructions"]["per_call"] == 3e6
    assert result.sections["instructions_vs_eager"] == 3.0
    assert result.session.instructions["per_call"] == 3e6
    missing = _result("other")
    assert attach_count(ctx, key, "other", None, missing, comparing=False) == (
        "no instruction count",
        "",
    )
    assert missing.failures == [
        "other: no instruction count: the pytest process under Valgrind exited with code 7"
    ]
    shaky = _result("shaky")
    ctx.counting.counts[(key, "shaky")] = _count(2e6, 2.1e6)
    short, warning = attach_count(ctx, key, "shaky", None, shaky, comparing=False)
    assert short == "counted windows disagree" and warning.startswith(
        "shaky: not saved: the two counted windows disagree by 5.00% (2,000,000 vs 2,100,000"
    )


class _Cache:
    def __init__(self) -> None:
        self.values: dict[str, object] = {}

    def get(self, key: str, default: object) -> object:
        return self.values.get(key, default)

    def set(self, key: str, value: object) -> None:
        self.values[key] = value


def test_the_start_up_note_quotes_only_what_this_machine_took_last_time() -> None:
    from types import SimpleNamespace

    from pytest_torchperf.kinds.instructions import plugin_runs as instruction_runs

    config = SimpleNamespace(cache=_Cache())
    assert "minutes on a small machine" in instruction_runs._start_up_note(config, 2)
    child = SimpleNamespace(split=SimpleNamespace(start_up=71.4))
    slower = SimpleNamespace(split=SimpleNamespace(start_up=83.0))
    instruction_runs._remember_start_up(config, [child, slower])
    assert instruction_runs._start_up_note(config, 2) == (
        " (each one's start-up and imports took 83 s on this machine last time)"
    )
    # Another number of processes side by side: not known yet.
    assert "minutes on a small machine" in instruction_runs._start_up_note(config, 1)
    # Without pytest's cache (-p no:cacheprovider): no figure.
    assert "minutes" in instruction_runs._start_up_note(SimpleNamespace(), 2)


def test_a_counter_change_names_the_save_of_the_runs_own_kind() -> None:
    """A newcomer's fallback compare told them to save with --torchperf-instructions: that
    would have turned a timing baseline into an instruction-count one."""
    from pytest_torchperf.judge.kinds import judging

    result = _result("gru")
    result.counter_changes = ["FLOPs +5.0% (100 -> 105)"]
    test = result.nodeid.partition("[")[0]  # a variant item: its whole test
    assert f"(pytest {test} --torchperf-save --torchperf-reset)" in (result.counter_message or "")
    result.save_command = judging("time-or-instructions").save
    assert (
        f"(pytest {test} --torchperf-fallback instructions --torchperf-save --torchperf-reset)"
        in (result.counter_message or "")
    )
    result.save_command = judging("instructions").save
    assert f"(pytest {test} --torchperf-instructions --torchperf-save --torchperf-reset)" in (
        result.counter_message or ""
    )
