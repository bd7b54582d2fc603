"""A count above its limit counted again in a fresh process (``--torchperf-instructions``
compares): which counts are recounted, how the two are judged and worded, what a save keeps and
what a replay sees. Pure: no Valgrind, no torch."""

from __future__ import annotations

from pathlib import Path

from pytest_torchperf.core.child_protocol import CountLine, append_message, read_messages
from pytest_torchperf.core.stats import summarize
from pytest_torchperf.judge.compare import Candidate, Gate, compare
from pytest_torchperf.judge.outcome import Outcome
from pytest_torchperf.judge.replay import replay
from pytest_torchperf.judge.samples import Sample
from pytest_torchperf.kinds.instructions.judge_counts import judge_instructions
from pytest_torchperf.kinds.instructions.measure_callgrind import InstructionCount
from pytest_torchperf.kinds.instructions.run_counting import CountState, attach_count
from pytest_torchperf.kinds.instructions.run_recount import above_limit, listed
from pytest_torchperf.store.record import Record
from pytest_torchperf.store.schema import BaselineFileError
from pytest_torchperf.store.sessions import Session

LOOKUPS = {"_Py_dict_lookup": 50_000.0, "unicodekeys_lookup_unicode": 40_000.0, "gemm": 9e5}
BASE = InstructionCount((1_180_000.0, 1_180_000.0), LOOKUPS)


def _count(per_call: float, second: float | None = None, **functions: float) -> InstructionCount:
    return InstructionCount(
        (per_call, per_call if second is None else second), {**LOOKUPS, **functions}
    )


def _record(count: InstructionCount) -> dict:
    return {
        "per_call": count.per_call,
        "windows": list(count.windows),
        "functions": count.functions,
    }


def test_a_first_count_above_its_limit_passes_on_a_fresh_count_within_it() -> None:
    """The unchanged 1.27 M model that read +2.5 % in one counting process, all in lookups."""
    collided = _count(1_209_500.0, _Py_dict_lookup=58_570.0, unicodekeys_lookup_unicode=49_220.0)
    fresh = _count(1_180_900.0)
    verdict = judge_instructions("deep20", collided, BASE, recount=fresh)
    assert verdict.outcome is Outcome.PASS and verdict.per_call == fresh.per_call
    assert verdict.message == (
        "deep20: instructions +0.1% per call vs baseline (1.18 M vs 1.18 M; limit 1%), as counted "
        "again in a fresh process; the run's counting process read +2.5%: that difference was "
        "the process's (what it ran before moves Python's type cache and the memory allocators' "
        "pools), not the code's"
    )
    # Without the recount it fails, as before.
    assert judge_instructions("deep20", collided, BASE).outcome is Outcome.FAIL


def test_a_change_of_the_code_fails_both_counts_and_the_lower_is_judged() -> None:
    first, again = _count(1_217_000.0, gemm=937_000.0), _count(1_215_800.0, gemm=935_800.0)
    verdict = judge_instructions("deep20", first, BASE, recount=again)
    assert verdict.outcome is Outcome.FAIL and verdict.per_call == again.per_call
    assert verdict.message.startswith(
        "deep20: instructions +3.0% per call vs baseline (1.22 M vs 1.18 M; limit 1%); counted "
        "again in a fresh process: +3.1% in the run's counting process, +3.0% in the fresh one, "
        "above the limit both times\n  why (self instructions per call vs baseline): gemm +35.8 "
        "k/call"
    ), verdict.message
    # Confirmed in a fresh process: no advice to run the compare again.
    looked_up = _count(1_217_000.0, _Py_dict_lookup=87_000.0)
    twice = judge_instructions("deep20", looked_up, BASE, recount=looked_up)
    assert twice.outcome is Outcome.FAIL and "run the compare again" not in twice.message
    assert "run the compare again" in judge_instructions("deep20", looked_up, BASE).message
    # The first count is judged where it is the lower one.
    lower_first = judge_instructions("deep20", again, BASE, recount=first)
    assert lower_first.per_call == again.per_call and "+3.0% per call" in lower_first.message


def test_a_recount_is_ignored_where_the_first_passed_or_its_windows_disagree() -> None:
    within = judge_instructions("deep20", _count(1_181_000.0), BASE, recount=_count(1_100_000.0))
    assert within.outcome is Outcome.PASS and "fresh process" not in within.message
    shaky = _count(1_100_000.0, 1_150_000.0)
    failing = judge_instructions("deep20", _count(1_217_000.0), BASE, recount=shaky)
    assert failing.outcome is Outcome.FAIL and "fresh process" not in failing.message


def _candidate(first: InstructionCount, recount: InstructionCount | None) -> dict:
    times = [1e-3, 1.1e-3, 0.9e-3]
    return {
        "name": "deep20",
        "nodeid": "t.py::test",
        "samples": times,
        "instructions": _record(first),
        "recount": _record(recount) if recount else None,
        "session": {"gate": Gate(kind="instructions").to_record(), "times": times},
        "passes": [{"times": times, "cpu_share": 1.0}],
    }


def test_the_engine_and_the_replay_judge_the_lower_count_alike() -> None:
    times = (1e-3, 1.1e-3, 0.9e-3)
    sample = Sample(summarize(times), 1.0, times)
    stored = [Session.from_json({"statistic": 1e-3, "instructions": _record(BASE)})]
    record = _candidate(_count(1_209_500.0), _count(1_180_900.0))
    candidate = Candidate.from_record(sample, record)
    live = compare(candidate, stored, Gate(kind="instructions"), remeasure=_no_remeasure)
    assert live.verdict.outcome is Outcome.PASS
    assert live.verdict.candidate_statistic == 1_180_900.0
    assert "counting process read +2.5%" in live.verdict.message
    replayed = replay(Record.from_json(record), stored)
    assert replayed.outcome == "pass" and replayed.verdict.message == live.verdict.message
    record["recount"] = None
    assert replay(Record.from_json(record), stored).label == "FAIL (instructions)"


def _no_remeasure() -> Sample:
    raise AssertionError("an instruction-count run never re-measures time")


class _Store:
    def __init__(self, sessions: dict[tuple[str, str, str], list[Session]]) -> None:
        self.sessions, self.asked = sessions, []

    def load_sessions(self, env_id: str, nodeid: str, name: str) -> list[Session]:
        self.asked.append(env_id)
        if nodeid == "bad.py::test":
            raise BaselineFileError(Path("bad.json"), "not JSON")
        return self.sessions.get((env_id, nodeid, name), [])


class _Ctx:
    def __init__(self, store: _Store) -> None:
        self.store, self.counting = store, CountState()

    def environment(self, device: str, threads: int) -> tuple[str, dict]:
        return f"{device}-{threads}", {"exact": {"device": device, "threads": threads}}

    def state(self, kind_state: type) -> object:
        return self.counting


def _line(nodeid: str, name: str, per_call: float, limit: float | None = 0.01) -> CountLine:
    return CountLine(nodeid, name, _record(_count(per_call)), device="cpu", threads=2, limit=limit)


def test_the_counts_recounted_are_those_above_their_limits_against_their_own_baselines(
    tmp_path: Path,
) -> None:
    from pytest_torchperf.kinds.instructions.run_counting import instruction_environment

    counted_with = {"valgrind": "valgrind-3.19.0"}
    env_id, _ = instruction_environment({"exact": {"device": "cpu", "threads": 2}}, counted_with)
    stored = [Session.from_json({"statistic": 1e-3, "instructions": _record(BASE)})]
    store = _Store({(env_id, "t.py::test", n): stored for n in ("a", "b", "c", "d", "e")})
    path = tmp_path / "counts.jsonl"
    for line in (
        _line("t.py::test", "a", 1_209_500.0),  # +2.5 %: above 1 %
        _line("t.py::test", "b", 1_185_000.0),  # +0.4 %: within it
        _line("t.py::test", "c", 1_209_500.0, limit=0.05),  # its own limit: 5 %
        _line("t.py::test", "d", 1_100_000.0),  # improved
        _line("t.py::test", "e", 1_209_500.0, limit=None),  # no limit said: left to the engine
        _line("t.py::test", "new", 2e6),  # no baseline
        _line("bad.py::test", "x", 2e6),  # a damaged file: the measurement's own error says it
    ):
        append_message(path, line)
    ctx = _Ctx(store)
    found = above_limit(ctx, read_messages(path, (CountLine,)), counted_with)  # type: ignore[arg-type]
    assert list(found) == [("t.py::test", "a")]
    assert round(found[("t.py::test", "a")], 4) == 0.025
    assert set(store.asked) == {env_id}  # the instruction environment of each line's threads
    assert listed({("t", n): 0.031 for n in "abcdef"}) == (
        "a +3.1%, b +3.1%, c +3.1%, d +3.1% and 2 more"
    )


def test_a_save_keeps_the_lower_count_and_the_result_carries_both() -> None:
    from pytest_torchperf.run.result import Result

    ctx = _Ctx(_Store({}))
    key = ("t.py::test", "deep20")
    ctx.counting.counts[key] = _record(_count(1_209_500.0))
    ctx.counting.recounts[key] = _record(_count(1_180_900.0))
    result = Result(
        name="deep20",
        nodeid="t.py::test",
        samples=[1e-3],
        number_per_block=1,
        device="cpu",
        threads=1,
        cpu_share=1.0,
    )
    result.session = Session(statistic=1e-3)
    assert attach_count(ctx, *key, None, result, comparing=True) is None  # type: ignore[arg-type]
    assert result.sections["instructions"]["per_call"] == 1_209_500.0
    assert result.sections["recount"]["per_call"] == 1_180_900.0
    assert result.session.instructions["per_call"] == 1_180_900.0
    assert result.to_record()["recount"]["per_call"] == 1_180_900.0
    # A recount above the first count leaves the first to be judged and stored.
    ctx.counting.recounts[key] = _record(_count(1_250_000.0))
    result.session = Session(statistic=1e-3)
    attach_count(ctx, *key, None, result, comparing=True)  # type: ignore[arg-type]
    assert result.session.instructions["per_call"] == 1_209_500.0


def test_the_reports_show_the_judged_count_beside_its_change() -> None:
    """a read 318 k (+6 %) in the run's counting process and 300 k in the fresh one: the table
    showed 318 k beside -0.1 %."""
    from pytest_torchperf.report.terminal import render_table
    from pytest_torchperf.store.results import _rows

    times = (1e-3, 1.1e-3, 0.9e-3)
    stored = [Session.from_json({"statistic": 1e-3, "instructions": _record(BASE)})]
    record = _candidate(_count(1_251_000.0), _count(1_179_000.0))
    verdict = compare(
        Candidate.from_record(Sample(summarize(times), 1.0, times), record),
        stored,
        Gate(kind="instructions"),
        remeasure=_no_remeasure,
    ).verdict
    record["verdict"] = {
        "outcome": verdict.outcome.value,
        "basis": verdict.basis,
        "ratio": verdict.ratio,
        "baseline_statistic": verdict.baseline_statistic,
        "candidate_statistic": verdict.candidate_statistic,
    }
    row = render_table([Record.from_json(record)], width=200)[1]
    assert "1.18 M" in row and "1.25 M" not in row and "-0.1%" in row, row
    assert _rows([Record.from_json(record)])[0]["instructions"] == 1_179_000.0


WITH = {"valgrind": "valgrind-3.19.0", "counted_capability": "AVX2", "kernel_caps": ""}


def _beside(count: InstructionCount, run_id: str, counted_with: dict = WITH) -> Session:
    """A timing session with its count stored beside it (--torchperf-fallback instructions)."""
    return Session.from_json(
        {
            "statistic": 1e-3,
            "times": [1e-3, 1e-3],
            "run_id": run_id,
            "instructions": _record(count),
            "counted_with": counted_with,
        }
    )


def test_a_fallback_count_is_recounted_against_the_latest_save_s_count_taken_the_same_way(
    tmp_path: Path,
) -> None:
    """--torchperf-fallback instructions: the baseline is the count beside the timing, of the
    latest save, taken with the same Valgrind and capability."""
    old, latest = _beside(_count(1_000_000.0), "r1"), _beside(BASE, "r2")
    other = _beside(_count(1_000_000.0), "r3", {**WITH, "valgrind": "valgrind-3.22.0"})
    store = _Store(
        {
            ("cpu-2", "t.py::test", "a"): [old, latest],
            ("cpu-2", "t.py::test", "b"): [latest, other],  # the latest save counted otherwise
        }
    )
    path = tmp_path / "counts.jsonl"
    for name in ("a", "b"):
        append_message(path, _line("t.py::test", name, 1_209_500.0))
    lines = list(read_messages(path, (CountLine,)))
    found = above_limit(_Ctx(store), lines, WITH, beside_timing=True)  # type: ignore[arg-type]
    assert list(found) == [("t.py::test", "a")] and round(found[("t.py::test", "a")], 3) == 0.025
    assert set(store.asked) == {"cpu-2"}  # the timing environment, not the instruction one


def test_a_fallback_verdict_judges_the_lower_count_where_timing_cannot_decide() -> None:
    times = (1e-3, 1.01e-3, 0.99e-3, 1e-3)
    busy = Sample(summarize(times), 0.3, times)  # a third of a CPU: the timing is refused
    sessions = [_beside(BASE, "r1") for _ in range(3)]
    candidate = Candidate(
        "mlp",
        busy,
        sections={
            "instructions": _record(_count(1_209_500.0)),
            "counted_with": WITH,
            "recount": _record(_count(1_180_900.0)),
        },
    )
    result = compare(candidate, sessions, Gate(kind="time-or-instructions"), remeasure=lambda: busy)
    assert result.outcome == "pass" and result.verdict.basis == "instructions"
    assert "judged by its instruction count instead: instructions +0.1% per call" in (
        result.verdict.message
    )
    assert "the run's counting process read +2.5%" in result.verdict.message
