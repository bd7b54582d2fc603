"""Measurement kinds through the one comparison engine: the kind recorded in a gate (and read from
files written before it was), and ``time-or-instructions`` (``--torchperf-fallback
instructions``): time decides where it can, the count stored beside it where it cannot. Pure."""

from __future__ import annotations

import pytest

from pytest_torchperf.core.stats import summarize
from pytest_torchperf.judge.compare import Candidate, Gate, compare
from pytest_torchperf.judge.kinds import kind_of
from pytest_torchperf.judge.replay import replay
from pytest_torchperf.judge.samples import Sample
from pytest_torchperf.store.record import Record
from pytest_torchperf.store.sessions import Session

TIMES = (1e-3, 1.01e-3, 0.99e-3, 1e-3)
#: A busy pass's: 30 % slower, beyond the limit (a pass refused for what only adds time that is
#: within the limit passes).
BUSY_TIMES = tuple(t * 1.3 for t in TIMES)
WITH = {"valgrind": "valgrind-3.19.0", "counted_capability": "AVX2", "kernel_caps": ""}
GATE = Gate(kind="time-or-instructions")


def _count(per_call: float) -> dict:
    return {"per_call": per_call, "windows": [per_call, per_call], "functions": {}}


def _sample(scale: float = 1.0, cpu_share: float = 1.0) -> Sample:
    times = tuple(t * scale for t in TIMES)
    return Sample(summarize(times), cpu_share, times)


def _session(
    count: dict | None = None, counted_with: dict | None = None, **extra: object
) -> Session:
    session: dict = {"statistic": 1e-3, "times": list(TIMES)}
    if count is not None:
        session["instructions"] = count
        session["counted_with"] = dict(counted_with if counted_with is not None else WITH)
    return Session.from_json({**session, **extra})


def _busy_candidate(per_call: float | None, counted_with: dict | None = None) -> Candidate:
    # A third of a CPU: the contention guard refuses every pass.
    return Candidate(
        "mlp",
        _sample(1.0, cpu_share=0.3),
        sections={
            "instructions": None if per_call is None else _count(per_call),
            "uncounted": "its counting process was killed",
            "counted_with": WITH if counted_with is None else counted_with,
        },
    )


def _busy() -> Sample:
    return _sample(1.0, cpu_share=0.3)


def test_inconclusive_timing_is_judged_by_the_stored_count_and_says_so() -> None:
    sessions = [_session(_count(2_000_000.0)) for _ in range(3)]
    slower = compare(_busy_candidate(2_060_000.0), sessions, GATE, remeasure=_busy)
    assert slower.outcome == "fail" and slower.label == "FAIL (instructions)"
    assert slower.verdict.basis == "instructions" and slower.verdict.ratio == pytest.approx(1.03)
    assert slower.verdict.message.startswith(
        "mlp: timing could not decide (busy machine), judged by its instruction count instead: "
        "instructions +3.0% per call vs baseline (2.06 M vs 2.00 M; limit 1%)"
    )
    assert any(note.startswith("timing: mlp: inconclusive") for note in slower.verdict.notes)
    same = compare(_busy_candidate(2_000_000.0), sessions, GATE, remeasure=_busy)
    assert same.outcome == "pass" and same.verdict.basis == "instructions"
    assert same.gated[0] == "instructions"


def test_timing_that_decides_is_the_verdict_whatever_the_count() -> None:
    sessions = [_session(_count(2_000_000.0)) for _ in range(3)]
    candidate = Candidate(
        "mlp", _sample(), sections={"instructions": _count(3_000_000.0), "counted_with": WITH}
    )
    result = compare(candidate, sessions, GATE, remeasure=_sample)
    assert result.outcome == "pass" and result.verdict.basis == "time"


def test_without_a_count_to_fall_back_on_the_timing_verdict_stands_and_says_why() -> None:
    no_stored = compare(_busy_candidate(2_000_000.0), [_session()] * 3, GATE, remeasure=_busy)
    assert no_stored.outcome == "inconclusive" and no_stored.verdict.basis == "time"
    assert no_stored.verdict.notes[-1] == (
        "no instruction count stored beside the timing to fall back on; record one with "
        "pytest --torchperf-fallback instructions --torchperf-save"
    )
    sessions = [_session(_count(2_000_000.0))] * 3
    uncounted = compare(_busy_candidate(None), sessions, GATE, remeasure=_busy)
    assert uncounted.outcome == "inconclusive"
    assert uncounted.verdict.notes[-1] == (
        "no instruction count to fall back on: its counting process was killed"
    )
    other = compare(
        _busy_candidate(2_000_000.0, {**WITH, "valgrind": "valgrind-3.22.0"}),
        sessions,
        GATE,
        remeasure=_busy,
    )
    assert other.outcome == "inconclusive"
    assert other.verdict.notes[-1].startswith(
        "the stored instruction count was taken differently (valgrind differ)"
    )


def test_a_fallback_run_left_inconclusive_names_only_ab_pairs() -> None:
    """It falls back on the count already: where none is stored, A/B pairs are what is left."""
    no_stored = compare(_busy_candidate(2_000_000.0), [_session()] * 3, GATE, remeasure=_busy)
    message = no_stored.verdict.message
    assert "judge it with --torchperf-ab REV (times this tree" in message
    assert "--torchperf-fallback" not in message
    timed = compare(_busy_candidate(None), [_session()] * 3, Gate(), remeasure=_busy)
    assert "judge it with --torchperf-fallback instructions" in timed.verdict.message


def test_sessions_stored_without_timing_fall_back_to_their_count() -> None:
    untimed = _session(_count(2_000_000.0), untimed="busy machine", statistic=None)
    result = compare(_busy_candidate(2_100_000.0), [untimed], GATE, remeasure=_busy)
    assert result.label == "FAIL (instructions)"
    assert "timing could not decide (no timing baseline)" in result.verdict.message


def test_the_kind_is_recorded_and_read_back_from_older_gates() -> None:
    assert Gate.from_record(GATE.to_record()).kind == "time-or-instructions"
    assert Gate.from_record({"instructions": True}).kind == "instructions"
    assert Gate.from_record({"ab": "main (abc)"}).kind == "ab"
    assert Gate.from_record({}).kind == "time"
    assert GATE.to_record()["instructions"] is False  # older readers: not an instruction run
    assert kind_of(Gate(kind="ab", facts=(("ab", "x"),))).save == ""
    with pytest.raises(ValueError, match="unknown measurement kind 'walltime'"):
        Gate(kind="walltime")


def test_a_results_file_replays_the_fallback_verdict() -> None:
    sessions = [_session(_count(2_000_000.0)) for _ in range(3)]
    busy = _busy()
    record = {
        "name": "mlp",
        "instructions": _count(2_060_000.0),
        "passes": [{"times": list(busy.times), "cpu_share": busy.cpu_share}] * 4,
        "session": {"gate": GATE.to_record(), "counted_with": WITH},
    }
    replayed = replay(Record.from_json(record), sessions)
    assert replayed.label == "FAIL (instructions)"
    assert replayed.verdict.message.startswith("mlp: timing could not decide (busy machine)")


def test_only_the_latest_saves_count_is_a_baseline() -> None:
    """A plain save after a fallback save stores no count: the older count describes code saved
    over since, so it is not used."""
    old = [_session(_count(2_000_000.0), run_id="old") for _ in range(3)]
    plain = [_session(run_id="new")]
    result = compare(_busy_candidate(2_100_000.0), [*old, *plain], GATE, remeasure=_busy)
    assert result.outcome == "inconclusive" and result.verdict.basis == "time"
    assert result.verdict.notes[-1].startswith(
        "the latest save stored no instruction count beside its timing to fall back on"
    )


def test_a_slowdown_seen_on_a_trusted_pass_is_never_passed_by_an_unchanged_count() -> None:
    """The first pass was trusted and +30 %; its confirmations were disturbed. An unchanged
    count does not explain it (memory, threads, code Valgrind does not run): inconclusive, with
    the count beside it; a count that grew too fails."""
    sessions = [_session(_count(2_000_000.0), run_id="r") for _ in range(3)]

    def candidate(per_call: float) -> Candidate:
        return Candidate(
            "mlp", _sample(1.3), sections={"instructions": _count(per_call), "counted_with": WITH}
        )

    def disturbed() -> Sample:
        return _sample(1.3, cpu_share=0.3)

    same = compare(candidate(2_000_000.0), sessions, GATE, remeasure=disturbed)
    assert same.outcome == "inconclusive" and same.verdict.basis == "time"
    # Said once, by the summary from the verdict: not again as one of the engine's warnings.
    assert same.verdict.message not in same.warnings
    assert same.verdict.notes[-1].startswith(
        "its instruction count does not explain the slowdown: instructions +0.0% per call"
    )
    grew = compare(candidate(2_100_000.0), sessions, GATE, remeasure=disturbed)
    assert grew.label == "FAIL (instructions)"


def test_a_compare_names_the_looser_guards_its_baseline_was_saved_with() -> None:
    """A newcomer saved beside load with the remedy the save gave
    (--torchperf-max-neighbour-load=100%); the compare beside the same load said only 'Re-run
    on a quieter machine'."""
    busy = Sample(summarize(BUSY_TIMES), 1.0, BUSY_TIMES, neighbour_load=0.99)
    saved = _session(gate={"max_neighbour_load": 1.0, "min_cpu_share": 0.9})
    result = compare(
        Candidate("mlp", busy), [saved], Gate(max_neighbour_load=0.5), remeasure=lambda: busy
    )
    assert result.verdict.outcome.value == "inconclusive"
    assert (
        "its baseline was saved with --torchperf-max-neighbour-load=100%: passing the same to "
        "this compare judges it the way its baseline was taken, and then a pass slowed by a "
        "busier machine than at save time fails as a slower model would"
    ) in result.verdict.notes
    # Within the limit, judged as its baseline was taken: a pass (as it is with no option: a
    # pass busy neighbours refused that is within the limit passes), and no note.
    within = Sample(summarize(TIMES), 1.0, TIMES, neighbour_load=0.99)
    same = compare(Candidate("mlp", within), [saved], Gate(max_neighbour_load=1.0), remeasure=never)
    assert same.verdict.outcome.value == "pass" and not any(
        "saved with" in n for n in same.verdict.notes
    )
    # A pass refused by another guard (its own CPU crowded) is not told to loosen the
    # neighbour guard: that would not let it be judged.
    crowded = Sample(summarize(BUSY_TIMES), 0.49, BUSY_TIMES, neighbour_load=0.1, queued_share=0.5)
    other = compare(
        Candidate("mlp", crowded), [saved], Gate(max_neighbour_load=0.5), remeasure=lambda: crowded
    )
    assert other.verdict.outcome.value == "inconclusive", other.verdict.message
    assert "CPU share 0.49" in other.verdict.message
    assert not any("saved with" in n for n in other.verdict.notes), other.verdict.notes


def test_the_looser_guards_note_names_every_option_at_once() -> None:
    """A save on a busy machine loosened two guards; the compare's note named only
    --torchperf-min-cpu-share=0, and only once that was passed did the next run name
    --torchperf-max-neighbour-load=100%."""
    busy = Sample(summarize(BUSY_TIMES), 0.3, BUSY_TIMES, neighbour_load=0.99, queued_share=0.7)
    saved = _session(gate={"max_neighbour_load": 1.0, "min_cpu_share": 0.0})
    result = compare(Candidate("mlp", busy), [saved], Gate(), remeasure=lambda: busy)
    assert result.verdict.outcome.value == "inconclusive"
    assert (
        "its baseline was saved with --torchperf-min-cpu-share=0 and "
        "--torchperf-max-neighbour-load=100%: passing the same to this compare judges it the "
        "way its baseline was taken, and then a pass slowed by a busier machine than at save "
        "time fails as a slower model would"
    ) in result.verdict.notes, result.verdict.notes


def test_the_looser_guards_note_says_a_lowered_cpu_guard_still_bounds_crowding() -> None:
    busy = Sample(summarize(BUSY_TIMES), 0.3, BUSY_TIMES, queued_share=0.7)
    saved = _session(gate={"min_cpu_share": 0.0})
    result = compare(Candidate("mlp", busy), [saved], Gate(), remeasure=lambda: busy)
    assert (
        "its baseline was saved with --torchperf-min-cpu-share=0: passing the same to this "
        "compare judges it the way its baseline was taken, and then a pass whose CPU other "
        "processes took more than at save time is inconclusive unless it is slower than that "
        "explains (where the run queue is read: Linux)"
    ) in result.verdict.notes, result.verdict.notes


def test_an_untimed_baseline_names_every_option_the_save_named() -> None:
    """The save said to store it anyway with --torchperf-min-cpu-share=0 and
    --torchperf-max-neighbour-load=100%; the compare named only the first."""
    options = ["--torchperf-min-cpu-share=0", "--torchperf-max-neighbour-load=100%"]
    untimed = _session(run_id="r").without_timing("CPU share 0.30 < 0.90", options)
    assert untimed.untimed_options == tuple(options)
    assert Session.from_json(untimed.to_json()) == untimed  # as its file holds it
    result = compare(Candidate("mlp", _sample()), [untimed], Gate(), remeasure=never)
    assert result.outcome == "new"
    assert result.verdict.message.endswith(
        "or store it anyway with --torchperf-min-cpu-share=0 and "
        "--torchperf-max-neighbour-load=100%"
    ), result.verdict.message
    # Files written before the session kept them name the first guard's option.
    older = untimed.without("untimed_options")
    old = compare(Candidate("mlp", _sample()), [older], Gate(), remeasure=never)
    assert old.verdict.message.endswith("or store it anyway with --torchperf-min-cpu-share=0")


def never() -> Sample:
    raise AssertionError("no pass may be taken")


def test_records_keep_the_file_formats_key_order() -> None:
    """A kind's keys are written where the files had them before the kinds owned them: a
    baseline saved again reads the same (no reordering diff in a committed file)."""
    from pytest_torchperf.run.result import Result

    assert list(Gate().to_record())[-6:] == [
        "kind",
        "instructions",
        "max_instruction_increase",
        "ab",
        "max_widening",
        "max_kernel_slowdown",
    ]
    record = Result("m", "t.py::t", [1e-3], 1, "cpu", 1, 1.0).to_record()
    keys = list(record)
    assert keys.index("instructions") < keys.index("instructions_vs_eager") < keys.index("ab")
    assert keys.index("ab") < keys.index("gated")


def test_the_registry_takes_a_plugins_kind_first_and_refuses_what_it_cannot_serve() -> None:
    from pytest_torchperf.kinds import KindSpec, forget_added, names, register

    spec = KindSpec("budget", "budget_kind", "p25 within a budget")
    try:
        register(spec)
        register(spec)  # the same spec twice: once
        assert names()[0] == "budget" and names().count("budget") == 1
        with pytest.raises(ValueError, match="registered already"):
            register(KindSpec("budget", "other", "another"))
        with pytest.raises(ValueError, match="pytest_addoption"):
            register(KindSpec("limited", "x", "y", gate_keys=("max_budget",)))
        with pytest.raises(ValueError, match="pytest_addoption"):
            register(KindSpec("optioned", "x", "y", parts=("options", "judge", "run")))
    finally:
        forget_added()
    assert "budget" not in names()


def test_an_instruction_count_run_refuses_to_save_what_it_only_timed_whatever_its_kind() -> None:
    """A measurement opted out of counting (``instructions=False``) is timed in one process beside
    the Valgrind children: not saved, be it a CPU one (``time``) or a CUDA one
    (``time-and-kernels``); a counted one is saved with its count."""
    from dataclasses import replace
    from pathlib import Path
    from types import SimpleNamespace

    from pytest_torchperf.kinds.instructions.options import CountOptions, CountSettings
    from pytest_torchperf.options.measure_options import MeasureOptions
    from pytest_torchperf.options.settings import RunSettings
    from pytest_torchperf.run.kinds import kind_name, run_refusal

    states: dict[type, object] = {}
    ctx = SimpleNamespace(
        settings=RunSettings(Path("s"), sections=(CountSettings(instructions=True),)),
        state=lambda cls: states.setdefault(cls, cls()),
    )
    counted = MeasureOptions()
    opted_out = replace(counted, sections=(CountOptions(instructions=False),))

    def measured(options: MeasureOptions, device: str) -> SimpleNamespace:
        return SimpleNamespace(
            name="m", options=options, gate=True, measurer=SimpleNamespace(device=device)
        )

    for device, kind in (("cpu", "time"), ("cuda:0", "time-and-kernels")):
        m = measured(opted_out, device)
        assert kind_name(ctx, opted_out, device) == kind  # type: ignore[arg-type]
        refused = run_refusal(ctx, m)  # type: ignore[arg-type]
        assert refused is not None and refused[0] == "timed in an instruction-count run"
    assert run_refusal(ctx, measured(counted, "cpu")) is None  # type: ignore[arg-type]
    plain = SimpleNamespace(settings=RunSettings(Path("s")), state=ctx.state)
    assert run_refusal(plain, measured(opted_out, "cuda:0")) is None  # type: ignore[arg-type]


def test_the_kind_that_decided_says_whether_a_profile_explains_the_slowdown() -> None:
    """A timed verdict is explained by profiling the call; an A/B run's only for eager (it
    rebuilds no variant in the controller); a count, or a basis no kind has, never."""
    from pytest_torchperf.run.kinds import explains_slowdown

    assert explains_slowdown("time", "eager") and explains_slowdown("time", "compiled")
    assert explains_slowdown("ab", "eager") and not explains_slowdown("ab", "compiled")
    assert not explains_slowdown("instructions", "eager")
    assert not explains_slowdown("time-and-kernels", "eager")  # its verdicts' basis is time
    assert not explains_slowdown("budget", "eager")
