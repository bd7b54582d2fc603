"""What a run gated or stored (judge/coverage.py, worded by judge/coverage_lines.py), the engine's verdict against sessions without
timing (judge/compare.py), and the baseline schema's untimed sessions."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from pytest_torchperf.core.stats import summarize
from pytest_torchperf.judge.compare import Candidate, Gate, compare
from pytest_torchperf.judge.coverage import coverage, strict_run
from pytest_torchperf.judge.coverage_lines import (
    BUSY_WHY,
    SPREAD_WHY,
    coverage_line,
    stored_lines,
    weak_gate_warning,
)
from pytest_torchperf.judge.labels import outcome_label
from pytest_torchperf.judge.outcome import Outcome
from pytest_torchperf.judge.run_failure import run_failure, thin_save_line
from pytest_torchperf.judge.samples import Sample
from pytest_torchperf.judge.tolerance import MAX_WIDENING, NOISY_BASELINE, stored_baseline
from pytest_torchperf.store.record import Record, RecordedVerdict
from pytest_torchperf.store.schema import BaselineFileError, validate_session
from pytest_torchperf.store.sessions import Session


def _read(records: Iterable[Mapping[str, object]]) -> list[Record]:
    """The records as the run's summary gets them: read once from their JSON form."""
    return [Record.from_json(r) for r in records]


COUNTERS = {"flops": 100, "ops": {"aten::addmm": 1}}
#: An output fingerprint of one value (one of no values, a target returning None, checks nothing).
FINGERPRINT = {"leaves": [{"path": "out", "shape": [1], "l2": 1.0, "probe": [1.0]}]}
TIMES = (1e-3,) * 8


def first() -> Sample:
    return Sample(summarize(TIMES), 1.0, TIMES)


def never() -> Sample:
    raise AssertionError("no pass may be taken without a timing baseline")


def untimed_raw(**extra: Any) -> dict[str, Any]:
    """A session saved without timing, as its file holds it."""
    return {"statistic": None, "times": [], "untimed": "CPU share 0.64 < 0.90", **extra}


def untimed_session(**extra: Any) -> Session:
    return Session.from_json(untimed_raw(**extra))


# -- the engine against sessions without timing -------------------------------------------------


def test_sessions_without_timing_give_no_timing_baseline_and_still_gate_counters() -> None:
    sessions = [untimed_session(counters=COUNTERS)]
    changed = {"flops": 100, "ops": {"aten::addmm": 1, "aten::mul": 1}}
    result = compare(Candidate("m", first(), changed), sessions, Gate(), remeasure=never)
    assert result.verdict.outcome is Outcome.NEW and result.verdict.untimed
    assert "no timing baseline: the save could not time it (CPU share 0.64 < 0.90)" in (
        result.verdict.message
    )
    assert "--torchperf-min-cpu-share=0" in result.verdict.message
    assert result.outcome == "fail" and result.counter_changes
    assert result.gated == ["counters"]


def test_strict_fails_a_measurement_without_timing_baseline() -> None:
    sessions = [untimed_session(counters=COUNTERS)]
    result = compare(
        Candidate("m", first(), COUNTERS), sessions, Gate(strict=True), remeasure=never
    )
    assert result.outcome == "fail"
    assert any("no timing baseline" in f for f in result.failures)
    # The failure names what made it strict (a newcomer's ini file read as the flag); the gate
    # keeps that out of the files, and equal to one without it.
    gate = Gate(strict=True, strict_by="ini torchperf_strict")
    by_ini = compare(Candidate("m", first(), COUNTERS), sessions, gate, remeasure=never)
    assert by_ini.failures[-1].endswith("(failing: ini torchperf_strict)")
    assert "strict_by" not in gate.to_record() and gate == Gate(strict=True)


def test_strictness_is_named_by_the_layer_that_set_it() -> None:
    from pytest_torchperf.options.settings import MARKER_STRICT, RunSettings

    assert RunSettings(Path("s"), cli={"strict": True}).strict_by == "--torchperf-strict"
    assert RunSettings(Path("s"), ini={"strict": True}).strict_by == "ini torchperf_strict"
    flag_over_ini = RunSettings(Path("s"), cli={"strict": True}, ini={"strict": False})
    assert flag_over_ini.strict_by == "--torchperf-strict"
    # The ini file says false: a test's strict=True made it strict.
    assert RunSettings(Path("s"), ini={"strict": False}).strict_by == MARKER_STRICT
    assert RunSettings(Path("s")).strict_by == MARKER_STRICT


def test_only_the_flag_or_the_ini_key_makes_the_run_strict_as_a_whole() -> None:
    """The rule that fails a compare judging timing for under half of its measurements is the
    run's: a marker's strict=True (no layer of the run says true) does not switch it on."""
    from pytest_torchperf.options.settings import RunSettings

    assert RunSettings(Path("s"), cli={"strict": True}).strict_run == "--torchperf-strict"
    assert RunSettings(Path("s"), ini={"strict": True}).strict_run == "ini torchperf_strict"
    flag_over_ini = RunSettings(Path("s"), cli={"strict": True}, ini={"strict": False})
    assert flag_over_ini.strict_run == "--torchperf-strict"
    assert RunSettings(Path("s"), ini={"strict": False}).strict_run is None
    assert RunSettings(Path("s")).strict_run is None


def test_a_results_file_says_what_made_its_run_strict_older_ones_do_not() -> None:
    from pytest_torchperf.store.results import recorded_strict

    def doc(**ours: object) -> dict[str, Any]:
        return {"torchperf": {"format": 1, **ours}}

    assert recorded_strict([doc(strict="--torchperf-strict")]) == (True, "--torchperf-strict")
    assert recorded_strict([doc(strict=None)]) == (True, None)
    assert recorded_strict([doc()]) == (False, None)  # written before it was recorded
    # One run's shards: strict where one says so; unknown where one does not say.
    shards = [doc(strict=None), doc(strict="ini torchperf_strict")]
    assert recorded_strict(shards) == (True, "ini torchperf_strict")
    assert recorded_strict([doc(strict=None), doc()]) == (False, None)
    assert recorded_strict([]) == (False, None)


def test_timed_and_untimed_sessions_judge_on_the_timed_ones() -> None:
    timed = Session.from_json({"statistic": 1e-3, "times": list(TIMES), "counters": COUNTERS})
    sessions = [timed, untimed_session(counters=COUNTERS)]
    result = compare(Candidate("m", first(), COUNTERS), sessions, Gate(), remeasure=never)
    assert result.verdict.outcome is Outcome.PASS
    assert result.verdict.baseline_sessions == 1
    assert result.gated == ["time", "counters"]


def test_a_label_says_when_there_is_no_timing_baseline() -> None:
    record = {"outcome": "new", "verdict": {"outcome": "new", "untimed": True}}
    assert outcome_label(Record.from_json(record)) == "new (no timing baseline)"
    saved = {"outcome": "measured", "saved": True, "untimed": "CPU share 0.64 < 0.90"}
    assert (
        outcome_label(Record.from_json(saved))
        == "measured, saved without timing: CPU share 0.64 < 0.90"
    )


# -- the schema ---------------------------------------------------------------------------------


def test_an_untimed_session_is_valid_only_with_its_reason() -> None:
    validate_session(untimed_raw(), Path("f.json"), "s")
    with pytest.raises(BaselineFileError, match="statistic is None.*untimed"):
        validate_session({"statistic": None, "times": []}, Path("f.json"), "s")


# -- coverage -------------------------------------------------------------------------------------


def compared(basis: str | None, outcome: str, **verdict: Any) -> dict[str, Any]:
    gated = [*([basis] if basis else []), "counters", "numerics"]
    return {"outcome": outcome, "verdict": {"outcome": outcome, **verdict}, "gated": gated}


def test_an_idle_target_is_not_told_the_machine_is_busy() -> None:
    """Review: a strict compare of a target that slept said 'On a machine this busy, gate on
    instruction counts ...'; a quieter machine changes nothing there."""
    cov = coverage(_read([compared(None, "inconclusive", guard="idle target")]), comparing=True)
    warning = weak_gate_warning(cov) if cov else None
    assert warning is not None and "this busy" not in warning, warning
    assert "A quieter machine will not change that: time the work without the waiting" in warning


def test_a_compare_counts_each_gate_and_why_timing_was_not_judged() -> None:
    records = [
        compared("time", "pass"),
        compared(None, "inconclusive", guard="busy machine"),
        compared(None, "inconclusive", guard="busy machine"),
        compared(None, "new", untimed=True),
        {"outcome": "disabled", "disabled": True},
    ]
    cov = coverage(_read(records), comparing=True)
    assert cov is not None
    assert coverage_line(cov) == (
        "compared 4 measurements: timing judged for 1 of 4, counters 4 of 4, numerics 4 of 4; "
        "timing not judged: 2 busy machine, 1 no timing baseline"
    )
    warning = weak_gate_warning(cov)
    assert warning is not None
    assert "--torchperf-instructions" in warning and "--torchperf-ab REV" in warning
    assert "Store the missing timings" in warning
    assert run_failure(cov, strict=None) is None
    # It names what made the run strict: the ini key where that set it, not the flag.
    failure = run_failure(cov, strict="ini torchperf_strict") or ""
    assert "failing: ini torchperf_strict." in failure and "--torchperf-strict" not in failure


def test_a_measurement_without_any_baseline_says_so_for_counters_and_numerics_too() -> None:
    # Seen by a newcomer: a baseline stored for another environment (threads 2 vs 1) read
    # "counters not gated: mlp (no counters stored)" although its counters were stored there.
    new = compared(None, "new")
    new.update(name="mlp", gated=[], counters=COUNTERS)
    cov = coverage(_read([new]), comparing=True)
    assert cov is not None
    assert coverage_line(cov) == (
        "compared 1 measurement: timing judged for 0 of 1, counters 0 of 1, numerics 0 of 1; "
        "timing not judged: 1 no baseline (mlp); counters not gated: mlp (no baseline); "
        "numerics not gated: mlp (no baseline)"
    )


def test_a_missing_count_baseline_is_told_the_command_that_records_counts() -> None:
    """Review: an instruction compare without a count baseline was told to record baselines
    with pytest --torchperf-save, which stores a timing, not a count."""
    counted = compared(None, "new")
    counted.update(name="conv", session={"gate": {"kind": "instructions"}})
    cov = coverage(_read([counted]), comparing=True)
    assert cov is not None
    assert "Record baselines with pytest --torchperf-instructions --torchperf-save and commit" in (
        weak_gate_warning(cov) or ""
    )
    timed = coverage(_read([compared(None, "new")]), comparing=True)
    assert timed is not None
    assert "Record baselines with pytest --torchperf-save and commit" in (
        weak_gate_warning(timed) or ""
    )


def test_a_compare_that_saved_its_new_measurements_is_not_told_to_record_them() -> None:
    """A newcomer's `--torchperf-save --torchperf-compare` labelled its row `new, saved` and
    closed with `Record baselines with pytest --torchperf-save`."""
    saved = compared(None, "new")
    saved.update(name="mlp", saved=True)
    cov = coverage(_read([saved]), comparing=True)
    assert cov is not None and "Record baselines" not in (weak_gate_warning(cov) or "")
    unsaved = compared(None, "new")
    unsaved.update(name="conv")
    cov = coverage(_read([saved, unsaved]), comparing=True)
    assert cov is not None
    assert "Record baselines with pytest --torchperf-save" in (weak_gate_warning(cov) or "")


def test_an_ab_run_is_not_told_to_record_baselines_or_run_ab_pairs() -> None:
    """A newcomer's A/B run (one test new in B, one inconclusive on a busy machine) closed with
    "compare against the base revision in alternating process pairs (--torchperf-ab REV)" and
    "Record baselines with pytest --torchperf-save": the first is what it was doing, and an A/B
    run keeps no baselines."""
    new_in_b = compared(None, "new")
    new_in_b.update(name="new", session={"gate": {"kind": "ab"}})
    busy = compared(None, "inconclusive", guard="busy machine")
    busy.update(name="keep", session={"gate": {"kind": "ab"}})
    cov = coverage(_read([new_in_b, busy]), comparing=True)
    warning = weak_gate_warning(cov) if cov else None
    assert warning is not None and "--torchperf-ab REV" not in warning, warning
    assert "Record baselines" not in warning
    assert "On a machine this busy, gate on instruction counts" in warning


def test_half_judged_on_time_is_no_warning() -> None:
    records = [compared("time", "pass"), compared(None, "inconclusive", guard="spread")]
    cov = coverage(_read(records), comparing=True)
    assert cov is not None and weak_gate_warning(cov) is None
    assert run_failure(cov, strict="--torchperf-strict") is None


def test_instruction_and_ab_verdicts_count_as_judged_timing() -> None:
    records = [compared("instructions", "pass"), compared("ab", "fail")]
    cov = coverage(_read(records), comparing=True)
    assert cov is not None and cov.timed_total == 2
    assert "(1 on instructions + 1 on A/B pairs)" in coverage_line(cov)


def test_a_save_that_could_not_store_a_timing_fails_the_run_naming_the_remedy() -> None:
    session = {"fingerprint": FINGERPRINT}
    records = [
        {"outcome": "measured", "saved": True, "counters": COUNTERS, "session": session},
        {
            "outcome": "measured",
            "saved": True,
            "untimed": "other processes kept 100% of the other CPUs busy while timing",
            "counters": COUNTERS,
            "session": session,
        },
    ]
    cov = coverage(_read(records), comparing=False)
    assert cov is not None
    assert coverage_line(cov) == (
        "stored 2 measurements: timing for 1 of 2, counters 2 of 2, numerics 2 of 2; timing "
        "not stored: 1 busy machine"
    )
    failure = run_failure(cov, strict=None)
    assert failure is not None
    assert "no timing for 1 of 2 measurements" in failure
    assert "--torchperf-save-wait=SECONDS" in failure
    assert "--torchperf-max-neighbour-load=100%" in failure
    assert (
        run_failure(
            coverage(_read(records[:1]), comparing=False) or cov, strict="--torchperf-strict"
        )
        is None
    )


def test_a_run_that_gated_nothing_has_no_coverage_and_strict_is_read_from_the_gate() -> None:
    assert coverage(_read([{"outcome": "measured"}]), comparing=True) is None
    assert strict_run(_read([{"session": {"gate": {"strict": True}}}]))
    assert not strict_run(_read([{"session": {"gate": {"strict": False}}}, {}]))
    # One marker's strict=True (a baseline folder as candidate records no run-wide strictness).
    strict, loose = {"session": {"gate": {"strict": True}}}, {"session": {"gate": {}}}
    assert not strict_run(_read([strict, loose])) and not strict_run([])


def test_a_compare_that_also_saved_fails_for_a_timing_it_stored_without() -> None:
    record = compared("time", "pass")
    record["untimed"] = "CPU share 0.5 < 0.90"
    cov = coverage(_read([record]), comparing=True)
    assert cov is not None
    assert "no timing for 1 of 1" in (run_failure(cov, strict=None) or "")


def test_a_fallback_save_stored_timing_with_the_count_beside_it() -> None:
    """A save of --torchperf-fallback instructions stores time (the count rides along); only an
    instruction-count run's save stores counts as its figure."""
    count = {"per_call": 1e6, "windows": [1e6, 1e6]}

    def saved(kind: str) -> dict:
        session = {"gate": {"kind": kind}, "counters": COUNTERS}
        return {"outcome": "measured", "saved": True, "instructions": count, "session": session}

    fallback = coverage(_read([saved("time-or-instructions")]), comparing=False)
    assert fallback is not None and dict(fallback.timed) == {"time": 1}
    counted = coverage(_read([saved("instructions")]), comparing=False)
    assert counted is not None and dict(counted.timed) == {"instructions": 1}
    # The save's line says the figure it stored is a count, as a compare's says what it judged.
    assert coverage_line(counted).startswith(
        "stored 1 measurement: timing for 1 of 1 (1 on instructions), counters"
    ), coverage_line(counted)
    assert "(1 on" not in coverage_line(fallback)


def test_a_fallback_save_without_timing_but_with_its_count_does_not_fail_the_run() -> None:
    """A guard refused the timing of a --torchperf-fallback save: the session holds the count
    instead, which a fallback compare judges, so the save gated something and passes; without
    the count (its windows disagreed, or a plain save) it fails as any save without timing."""
    count = {"per_call": 1e6, "windows": [1e6, 1e6]}

    def untimed(kind: str, with_count: bool) -> dict:
        session: dict[str, Any] = {"gate": {"kind": kind}, "counters": COUNTERS}
        if with_count:
            session["instructions"] = count
        return {
            "outcome": "measured",
            "saved": True,
            "untimed": "other processes kept 100% of the other CPUs busy while timing",
            "counters": COUNTERS,
            "session": session,
        }

    cov = coverage(_read([untimed("time-or-instructions", True)]), comparing=False)
    assert cov is not None and run_failure(cov, strict=None) is None
    assert coverage_line(cov) == (
        "stored 1 measurement: timing for 0 of 1, counters 1 of 1, numerics 0 of 1; timing not "
        "stored: 1 busy machine; 1 session stored without timing but with the instruction "
        "count, which a --torchperf-fallback compare judges instead"
    )
    # A compare that also saved says it too.
    compared = {**untimed("time-or-instructions", True), "verdict": {"outcome": "pass"}}
    compared["gated"] = ["instructions", "counters"]
    line = coverage_line(coverage(_read([compared]), comparing=True) or cov)
    assert line.endswith(
        "1 session stored without timing but with the instruction count, "
        "which a --torchperf-fallback compare judges instead"
    ), line
    for kind, with_count in (("time-or-instructions", False), ("time", True)):
        cov = coverage(_read([untimed(kind, with_count)]), comparing=False)
        assert cov is not None and "no timing for 1 of 1" in (run_failure(cov, strict=None) or "")


# -- what a save stored, and a stored baseline too noisy to gate ---------------------------------


def saved_with(name: str, stats: list[float], this_save: int, asked: int) -> dict[str, Any]:
    """A saved record whose timing baseline is now ``stats`` (p25s, seconds)."""
    stored = stored_baseline(stats, this_save, asked, 0.10, MAX_WIDENING)
    return {
        "name": name,
        "outcome": "measured",
        "saved": True,
        "counters": COUNTERS,
        "session": {"fingerprint": FINGERPRINT},
        "stored": stored.to_dict(),
    }


#: Issue 36's jumpy VM: five save processes of a 160 us MLP.
JUMPY = [262e-6, 163e-6, 256e-6, 323e-6, 156e-6]
STEADY = [160e-6, 161e-6, 159e-6, 162e-6, 160e-6]


def test_a_save_whose_sessions_imply_no_gate_fails_naming_them_and_the_fix() -> None:
    cov = coverage(_read([saved_with("mlp", JUMPY, 5, 5), saved_with("gru", STEADY, 5, 5)]), False)
    assert cov is not None
    assert coverage_line(cov) == (
        "stored 2 measurements: timing for 1 of 2 (+1 stored, unable to gate), counters 2 of 2, "
        "numerics 2 of 2; the "
        "timing sessions stored disagree too much to gate: 1 (mlp)"
    )
    failure = run_failure(cov, strict=None)
    assert failure is not None
    assert failure.startswith(
        "the timing sessions now stored disagree too much to gate for 1 of 2 "
        "measurements: mlp (5 sessions, process noise 46.02%: 10% widened to 138.07%, over 30%)"
    ), failure
    assert "--torchperf-save --torchperf-reset" in failure
    # 138 %: no widening factor makes that a gate (a loaded save was told
    # --torchperf-max-widening=33 for 482 %); the modes that gate there are named instead.
    assert failure.endswith(
        "over 30%). Timing cannot gate on this machine (a limit over 100% lets code twice as "
        "slow pass): gate on instruction counts (--torchperf-instructions) or A/B pairs "
        "(--torchperf-ab REV) instead, or save the baseline again on a quieter machine, "
        "replacing its sessions (pytest --torchperf-save --torchperf-reset)"
    ), failure
    assert "--torchperf-max-widening" not in failure
    # Under the save's list of what it stored (a pytest run) the line names them, the remedy once.
    listed = run_failure(cov, strict=None, listed=True) or ""
    assert listed.startswith(
        "the timing sessions now stored disagree too much to gate for 1 of 2 measurements: mlp "
        '(see "what the save stored" above). Timing cannot gate'
    ), listed
    # A limit under 100 % can still be accepted with the factor that admits it.
    wavy = [160e-6, 185e-6, 150e-6, 175e-6, 165e-6]
    limit = stored_baseline(wavy, 5, 5, 0.10, MAX_WIDENING).limit
    assert 0.3 < limit < 1.0, limit
    wide = run_failure(coverage(_read([saved_with("mlp", wavy, 5, 5)]), False), strict=None)
    assert wide is not None and wide.endswith(
        f"or accept the wider limit with --torchperf-max-widening={math.ceil(limit / 0.1)}"
    ), wide
    lines = stored_lines(cov)
    assert lines[0].startswith("what the save stored, per measurement")
    assert lines[1] == (
        "  mlp: timing of 5 of 5 processes stored, baseline p25 256 us, process noise 46.02%; a compare "
        "judges at 138.07%: no gate (over 30%)"
    ), lines[1]
    assert lines[2].startswith("  gru: timing of 5 of 5 processes stored, baseline p25 160 us")
    # The save table's row says so too, not a bare 'measured, saved' beside the failure line.
    mlp, gru = _read([saved_with("mlp", JUMPY, 5, 5), saved_with("gru", STEADY, 5, 5)])
    assert outcome_label(mlp) == (
        "measured, saved; no gate: the timing sessions stored disagree too much (limit "
        "138.07% > 30%)"
    )
    assert outcome_label(gru) == "measured, saved"
    # Steady sessions alone: the save passes and lists nothing.
    steady = coverage(_read([saved_with("gru", STEADY, 5, 5)]), False)
    assert steady is not None and run_failure(steady, strict=None) is None
    assert stored_lines(steady) == []


def test_a_save_that_stored_fewer_sessions_than_processes_lists_each_measurement() -> None:
    cov = coverage(
        _read([saved_with("mlp", STEADY, 5, 5), saved_with("gru", STEADY[:2], 2, 5)]),
        comparing=False,
    )
    assert cov is not None and run_failure(cov, strict=None) is None
    assert stored_lines(cov)[1:] == [
        "  mlp: timing of 5 of 5 processes stored, baseline p25 160 us, process noise 0.93%; a compare "
        "judges at 10%",
        "  gru: timing of 2 of 5 processes stored, baseline p25 160 us, process noise 0.55%; a compare "
        "judges at 10%",
    ], stored_lines(cov)
    one = coverage(_read([saved_with("amp", STEADY[:1], 1, 5)]), comparing=False)
    assert one is not None
    assert stored_lines(one)[1] == (
        "  amp: timing of 1 of 5 processes stored, baseline p25 160 us, one session: its noise is "
        "unknown, judged at the limit as asked; a compare judges at 10%"
    )
    # Such a save passes, and its last line says what it stored less of (a newcomer's thin
    # save ended with pytest's green "5 passed, 10 warnings").
    assert thin_save_line(cov) == (
        "torchperf: the save passed, but stored timing from fewer processes than the 5 asked for "
        '1 of 2 measurements (gru): see "what the save stored" above; a save on a quieter machine '
        "stores them all"
    )
    full = coverage(_read([saved_with("mlp", STEADY, 5, 5)]), comparing=False)
    assert full is not None and thin_save_line(full) is None


def test_a_busy_save_says_once_why_it_stores_no_timing_an_idle_target_not() -> None:
    def refused(name: str, why: str) -> dict[str, Any]:
        record = saved_with(name, [], 0, 1)
        left_out = [f"this process ({why.split(':')[0]}; measured twice)"]
        return {**record, "untimed": why, "stored": {**record["stored"], "left_out": left_out}}

    busy = [refused("mlp", "CPU share 0.64 < 0.90"), refused("gru", "spread IQR/median 80% > 25%")]
    cov = coverage(_read(busy), comparing=False)
    assert cov is not None and stored_lines(cov).count(BUSY_WHY) == 1, stored_lines(cov)
    assert len(BUSY_WHY) <= 220
    idle = refused("nap", "CPU share 0.08 < 0.90: the timed code left the CPU idle")
    cov = coverage(_read([idle]), comparing=False)
    assert cov is not None and BUSY_WHY not in stored_lines(cov), stored_lines(cov)


def test_the_busy_why_line_follows_the_guards_that_refused_the_left_out_processes() -> None:
    """Review: decided from the measurements saved without any timing, the line blamed a busy
    machine for a GPU's clock (and suggested CPU instruction counts), and was missing where
    one measurement's target idled and another's processes met a busy machine."""

    def left_out(name: str, guards: list[str], sessions: int = 3) -> dict[str, Any]:
        record = saved_with(name, STEADY[:sessions], sessions, 5)
        stored = {**record["stored"], "left_out": ["process 2 (...)"], "refused_by": guards}
        return {**record, "stored": stored}

    gpu = coverage(_read([left_out("conv", ["GPU clock"])]), comparing=False)
    assert gpu is not None and BUSY_WHY not in stored_lines(gpu), stored_lines(gpu)
    nap = saved_with("nap", [], 0, 1)
    nap = {**nap, "untimed": "CPU share 0.08 < 0.90: the timed code left the CPU idle"}
    nap["stored"] = {
        **nap["stored"],
        "left_out": ["this process (...)"],
        "refused_by": ["idle target"],
    }
    mixed = coverage(_read([nap, left_out("mlp", ["busy machine"])]), comparing=False)
    assert mixed is not None and stored_lines(mixed).count(BUSY_WHY) == 1, stored_lines(mixed)
    # Spread alone may be the call's own: not blamed on the machine (a newcomer's save whose
    # processes were each refused for spread read "a busy machine's baseline ...").
    spread = coverage(_read([left_out("mlp", ["spread"])]), comparing=False)
    assert spread is not None
    assert BUSY_WHY not in stored_lines(spread) and SPREAD_WHY in stored_lines(spread)
    both = coverage(_read([left_out("mlp", ["spread", "busy machine"])]), comparing=False)
    assert both is not None and SPREAD_WHY not in stored_lines(both)
    assert BUSY_WHY in stored_lines(both)


def test_a_compare_names_what_each_gate_left_out_and_why() -> None:
    noisy = compared("time", "inconclusive")
    noisy.update(name="mlp", gated=["counters", "numerics"])
    noisy["verdict"]["guard"] = NOISY_BASELINE
    amp = compared("time", "pass")
    amp.update(name="mobilenet[amp]", variant="amp", counters=None, gated=["time", "numerics"])
    gru = {**noisy, "name": "gru"}
    cov = coverage(_read([noisy, amp, gru]), comparing=True)
    assert cov is not None
    line = coverage_line(cov)
    assert "timing not judged: 2 noisy baseline (mlp, gru)" in line, line
    assert (
        "counters not gated: mobilenet[amp] (counters off, ops ignored, or a low-precision "
        "model, whose ops depend on the CPU class)"
    ) in line, line
    assert "numerics not gated" not in line
    assert "save them again on a quieter machine" in (weak_gate_warning(cov) or ""), cov


def test_a_saves_table_shows_what_it_left_stored_not_this_runs_p25() -> None:
    """Issue 36: a save's table showed 156 us (this run) while 256 us was stored."""
    from pytest_torchperf.report.terminal import format_baseline

    record = Record.from_json(saved_with("mlp", JUMPY, 5, 5))
    assert format_baseline(None, record) == "256 us stored"
    assert (
        format_baseline(RecordedVerdict(baseline_statistic=1e-4), record) == "100 us"
    )  # a compare's
    assert format_baseline(None, Record()) == "-"


def untimed_saved(name: str, why: str, earlier: list[float]) -> dict[str, Any]:
    """A save that could not time ``name``; ``earlier``: timing sessions of earlier saves."""
    stored = stored_baseline(earlier, 0, 5, 0.10, MAX_WIDENING, ("this process (busy)",))
    return {
        "name": name,
        "outcome": "measured",
        "saved": True,
        "untimed": why,
        "counters": COUNTERS,
        "session": {"fingerprint": FINGERPRINT},
        "stored": stored.to_dict(),
    }


def test_an_untimed_save_names_only_what_else_it_stored() -> None:
    """A save that stored no timing for an amp item (no counters) of a target returning None
    (no values) said its counters and numerics were stored and gate from now on."""
    bare = untimed_saved("mlp[amp]", BUSY, [])
    bare.update(counters=None, session={"fingerprint": {"leaves": []}})
    cov = coverage(_read([bare]), comparing=False)
    failure = (run_failure(cov, strict=None) if cov else None) or ""
    assert "; nothing else of it gates (no counters or numerics), its timing does not." in failure
    numerics_only = untimed_saved("mlp[amp]", BUSY, [])
    numerics_only.update(counters=None)
    cov = coverage(_read([numerics_only]), comparing=False)
    failure = (run_failure(cov, strict=None) if cov else None) or ""
    assert "what else it records (numerics) was stored and gates from now on" in failure


BUSY = "other processes kept 99% of the other CPUs busy while timing (limit 50%)"
STARVED = "CPU share 0.41 < 0.90: another process competed for the CPU while timing"


def test_an_untimed_save_says_which_earlier_timing_still_gates() -> None:
    """A newcomer's save beside load said 'their timing does not [gate]' while the sessions
    of the save before still gated every one of them."""
    records = [untimed_saved("mlp", BUSY, STEADY), untimed_saved("gru", BUSY, [])]
    cov = coverage(_read(records), comparing=False)
    assert cov is not None
    failure = run_failure(cov, strict=None) or ""
    assert (
        "what else they record (counters, numerics) was stored and gates from now on, timing sessions of "
        "earlier saves still gate 1 of them (mlp), the timing of the other 1 is not gated."
    ) in failure, failure
    assert (
        "  mlp: timing of 0 of 5 processes stored (not: this process (busy)), 5 timing sessions in "
        in ("\n".join(stored_lines(cov)))
    )


def test_an_untimed_save_whose_earlier_timing_gates_all_counts_no_other() -> None:
    """It said 'the timing of the other 0 is not gated'."""
    for names, words in ((["mlp"], "still gate it."), (["mlp", "gru"], "still gate them.")):
        cov = coverage(_read([untimed_saved(n, BUSY, STEADY) for n in names]), comparing=False)
        assert cov is not None
        failure = run_failure(cov, strict=None) or ""
        assert f"timing sessions of earlier saves {words}" in failure, failure
        assert "other 0" not in failure


def test_an_untimed_save_refused_by_several_guards_needs_each_option() -> None:
    records = [
        untimed_saved("mlp", BUSY, []),
        untimed_saved("gru", STARVED, []),
        untimed_saved("resnet", STARVED, []),
    ]
    cov = coverage(_read(records), comparing=False)
    assert cov is not None
    failure = run_failure(cov, strict=None) or ""
    assert failure.endswith(
        "store the timing anyway with --torchperf-max-neighbour-load=100% for mlp and "
        "--torchperf-min-cpu-share=0 for gru, resnet (in the ini file: "
        "torchperf_max_neighbour_load = 100%, torchperf_min_cpu_share = 0, so that compares "
        "judge under the same guards)"
    ), failure
    # A single option needs no names.
    cov = coverage(_read(records[1:]), comparing=False)
    assert cov is not None
    assert (run_failure(cov, strict=None) or "").endswith(
        "store the timing anyway with --torchperf-min-cpu-share=0 (in the ini file: "
        "torchperf_min_cpu_share = 0, so that compares judge under the same guards)"
    )


def test_a_list_of_names_names_a_last_one_rather_than_counting_it() -> None:
    from pytest_torchperf.judge.coverage_lines import named

    assert named(list("abcde")) == "a, b, c, d, e"
    assert named(list("abcdef")) == "a, b, c, d and 2 more"


def test_without_timing_an_amp_variant_is_not_said_to_have_its_counters_gated() -> None:
    """A newcomer's amp variant read 'its counters and numerics were gated' while the coverage
    line said its counters were not (a variant other than compiled records none)."""
    amp = Candidate("m[amp]", first(), None, variant="amp")
    result = compare(amp, [untimed_session(counters=COUNTERS)], Gate(), remeasure=never)
    assert "; its numerics were gated against the 1 stored session." in result.verdict.message
    eager = Candidate("m", first(), COUNTERS)
    result = compare(eager, [untimed_session(counters=COUNTERS)], Gate(), remeasure=never)
    assert "; its counters were gated against the 1 stored session." in result.verdict.message


def test_a_variants_speedup_judged_is_counted_as_a_speed_gate() -> None:
    """A newcomer's compare judged mobilenet[compiled]'s speedup (x1.65 vs x1.68 stored) and
    ended 'this run did not gate speed'."""
    variant = compared(None, "inconclusive", guard="busy machine")
    variant["gated"].append("speedup")
    variant["variant"] = "compiled"
    unjudged = {**compared(None, "inconclusive", guard="busy machine"), "variant": "amp"}
    cov = coverage(
        _read([variant, unjudged, compared(None, "inconclusive", guard="busy machine")]),
        comparing=True,
    )
    assert cov is not None
    # Said as a save says it: of how many variants (it said "speedup vs eager for 1").
    assert coverage_line(cov).startswith(
        "compared 3 measurements: timing judged for 0 of 3, counters 3 of 3, numerics 3 of 3, "
        "speedup vs eager 1 of 2;"
    ), coverage_line(cov)
    assert "this run did not gate their time (it did gate the speedup vs eager of 1 variant)." in (
        weak_gate_warning(cov) or ""
    )


def test_speedup_gated_needs_a_stored_speedup_and_a_limit_that_gates() -> None:
    from pytest_torchperf.judge.drift import speedup_gated

    now = {"median": 1.6, "p25": 1.5, "p75": 1.7, "n": 10}
    steady = [Session(speedup={"median": m}) for m in (1.68, 1.70, 1.66)]
    assert speedup_gated(steady, now, 0.10)
    assert not speedup_gated([Session()], now, 0.10) and not speedup_gated(steady, None, 0.10)
    scattered = [Session(speedup={"median": m}) for m in (0.6, 1.7, 3.0)]
    assert not speedup_gated(scattered, now, 0.10)


def test_a_fallback_save_with_the_count_stored_does_not_fail_for_noisy_earlier_timing() -> None:
    """A newcomer's --torchperf-fallback save stored mlp's count (its timing refused) and still
    exited 1: 'the timing sessions now stored disagree too much ... mlp', the earlier save's.
    A fallback compare judges mlp by its count where its timing cannot decide."""
    counted = untimed_saved("mlp", BUSY, JUMPY)
    counted["session"] = {
        "gate": {"kind": "time-or-instructions"},
        "instructions": {"per_call": 5.53e6},
    }
    cov = coverage(_read([counted]), comparing=False)
    assert cov is not None and cov.no_gate == {}
    assert run_failure(cov, strict=None) is None, run_failure(cov, strict=None)
    timing_only = coverage(_read([saved_with("mlp", JUMPY, 5, 5)]), comparing=False)
    assert timing_only is not None and "disagree too much" in (
        run_failure(timing_only, strict=None) or ""
    )


def test_a_save_counts_gated_timer_blocks_and_says_what_a_failed_test_did_not_store() -> None:
    """A newcomer's save printed `2 measured` but `stored 1 measurement` (a torchperf_timer
    block with gate=True was stored, not counted), and a test that failed stored nothing while
    the line said nothing of it (or was missing where every test failed)."""
    session = {"fingerprint": FINGERPRINT}
    stored = {"outcome": "measured", "saved": True, "counters": COUNTERS, "session": session}
    records = [
        {**stored, "name": "a"},
        {**stored, "name": "mm", "kind": "timer", "counters": None},
        {"outcome": "fail", "name": "b", "not_saved": "the test failed", "session": session},
        {"outcome": "measured", "name": "ungated", "kind": "timer"},  # neither judged nor stored
    ]
    cov = coverage(_read(records), comparing=False)
    assert cov is not None
    assert coverage_line(cov) == (
        "stored 2 of 3 measurements: timing for 2 of 3, counters 1 of 3, numerics 2 of 3; timing "
        "not stored: 1 the test failed (b); counters not stored: mm (counters off)"
    )
    assert run_failure(cov, strict=None) is None  # the failed test fails the run already
    timer = {**compared("time", "pass"), "kind": "timer"}
    compare_cov = coverage(_read([compared("time", "pass"), timer]), comparing=True)
    assert compare_cov is not None and compare_cov.measurements == 2


def test_a_save_refused_by_spread_alone_does_not_blame_the_machine_in_its_failure() -> None:
    session = {"fingerprint": FINGERPRINT}
    record = {
        "outcome": "measured",
        "saved": True,
        "untimed": "spread IQR/median 1.41% > 0.01%",
        "counters": COUNTERS,
        "session": session,
    }
    cov = coverage(_read([record]), comparing=False)
    assert cov is not None
    failure = run_failure(cov, strict=None) or ""
    assert "(1 spread)" in failure
    assert "Save again when the machine is quiet, if the spread was the machine's, or" in failure
    assert "--torchperf-max-spread" in failure and "--torchperf-save-wait" not in failure
    assert "where the machine or the call is always like that" in failure


def test_a_compare_names_the_variants_whose_speedup_it_did_not_judge() -> None:
    """Newcomer: a compiled variant whose baseline held no speedup fell from x0.49 to x0.20 and
    passed at a wide time limit, and the line left the speedup out altogether."""
    judged = {**compared("time", "pass"), "name": "a[compiled]", "variant": "compiled"}
    judged["gated"] = [*judged["gated"], "speedup"]
    judged["speedup"] = {"median": 1.2}
    unstored = {**compared("time", "pass"), "name": "b[compiled]", "variant": "compiled"}
    unstored["speedup"] = {"median": 0.2}
    untimed = {**compared("time", "pass"), "name": "c[amp]", "variant": "amp"}
    eager = {**compared("time", "pass"), "name": "d"}
    cov = coverage(_read([judged, unstored, untimed, eager]), comparing=True)
    assert cov is not None
    line = coverage_line(cov)
    assert ", speedup vs eager 1 of 3;" in line, line
    assert line.endswith(
        "; speedup vs eager not judged: b[compiled] (the baseline holds none, or ones too noisy "
        "to gate; save again), c[amp] (this run timed none: a guard refused its rounds)"
    ), line
    nothing = coverage(_read([unstored]), comparing=True)
    assert nothing is not None and ", speedup vs eager 0 of 1;" in coverage_line(nothing)


def test_counters_are_gated_only_where_a_compared_counter_is_shared() -> None:
    """Review: a compiled variant with ignore_counters=["graphs"] against a baseline saved
    before model_ops existed was counted `counters 1 of 1` while the diff compared nothing (its
    only counters in common were the ignored graph counters)."""
    saved = Session.from_json(
        {"statistic": 1e-3, "times": list(TIMES), "counters": {"graphs": 1, "graph_breaks": 0}}
    )
    now = {"graphs": 1, "graph_breaks": 0, "model_ops": {"aten::addmm": 2}}
    candidate = Candidate("m", first(), now, variant="compiled")
    assert "counters" not in candidate.gates_besides_time([saved], ("graphs",))
    assert "counters" in candidate.gates_besides_time([saved])  # the graph counters gate
    # The newest session with counters is the one compared, as the diff takes it.
    newer = Session.from_json(
        {"statistic": 1e-3, "times": list(TIMES), "counters": {"model_ops": {"aten::addmm": 2}}}
    )
    assert "counters" in candidate.gates_besides_time([saved, newer], ("graphs",))
    assert "counters" not in candidate.gates_besides_time([newer, saved], ("graphs",))
    # The coverage line says why, not that no counters were stored.
    record = {**compared("time", "pass"), "name": "m[compiled]", "variant": "compiled"}
    record.update(gated=["time", "numerics", "speedup"], counters=now)
    cov = coverage(_read([record]), comparing=True)
    assert cov is not None and coverage_line(cov).endswith(
        "counters 0 of 1, numerics 1 of 1, speedup vs eager 1 of 1; counters not gated: "
        "m[compiled] (the stored counters hold none it counts and does not ignore: save again "
        "to store its own, unless ignore_counters names every counter on purpose)"
    ), coverage_line(cov)
    # The engine says what it gated from the same answer.
    gate = Gate(ignore_counters=("graphs",))
    result = compare(candidate, [saved], gate, remeasure=never)
    assert "counters" not in result.gated and result.counter_changes == []
    assert "counters" in compare(candidate, [saved], Gate(), remeasure=never).gated


def test_outputs_of_no_values_are_not_counted_as_numerics_gated() -> None:
    """Newcomer: a target returning None got `rel-L2 nan` and `numerics 5 of 5`."""
    from pytest_torchperf.judge.numerics import NO_VALUES, degenerate_reference, unjudged_numerics

    assert degenerate_reference({"n": 0.0, "int_mismatch": 0.0, "n_int": 0.0}) == NO_VALUES
    assert degenerate_reference({}) is None  # eager itself: no accuracy compared
    # Labels or a mask are compared exactly: judged (review), as in files without n_int.
    assert degenerate_reference({"n": 0.0, "int_mismatch": 3.0, "n_int": 8.0}) is None
    assert degenerate_reference({"n": 0.0, "int_mismatch": 0.0}) is None
    none = {"n": 0.0, "n_int": 0.0}
    assert "return the model's outputs" in (unjudged_numerics("m[amp]", none) or "")
    empty = {"fingerprint": {"leaves": []}}
    record = {"outcome": "measured", "saved": True, "counters": COUNTERS, "session": empty}
    cov = coverage(_read([record]), comparing=False)
    assert cov is not None and cov.numerics == 0
    candidate = Candidate("m", first(), COUNTERS, fingerprint={"leaves": []})
    assert "numerics" not in candidate.gates_besides_time([Session.from_json(empty)])
