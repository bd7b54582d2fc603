"""What a save says when a guard refuses its pass (run.saving.queue_save), and the run's failure
line for it (judge.run_failure.run_failure): the cause named is the guard's own, said once, by
the summary (no warning repeats it)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from pytest_torchperf.core.stats import summarize
from pytest_torchperf.judge.coverage import Coverage
from pytest_torchperf.judge.refusals import BUSY, IDLE, loosening_option, refusing_guard
from pytest_torchperf.judge.run_failure import run_failure
from pytest_torchperf.judge.samples import Sample
from pytest_torchperf.options.measure_options import MeasureOptions
from pytest_torchperf.run.saving import queue_save, save_guard
from pytest_torchperf.run.state import TestState
from pytest_torchperf.store.sessions import Session

SUMMARY = summarize([1e-3, 1.01e-3, 1.02e-3, 1.03e-3])


def _save(
    sample: Sample,
    others: list[Any] | None = None,
    wait_left: float = 12.0,
    session: dict[str, Any] | None = None,
    options: MeasureOptions | None = None,
) -> tuple[Any, TestState]:
    """Queue the save of ``sample`` in one process, with the default guards switched on."""
    options = options or MeasureOptions(min_cpu_share=0.9, max_neighbour_load=0.5)
    quiet = SimpleNamespace(last_spent=0.0, budget=12.0, left=wait_left)
    ctx = SimpleNamespace(quiet=quiet, run_id="run")
    state = TestState()
    m = SimpleNamespace(name="mlp", nodeid="t.py::t", options=options, beside={})
    result = SimpleNamespace(
        session=Session.from_json({"statistic": 1e-3, **(session or {})}),
        untimed=None,
        not_saved=None,
    )
    queue_save(
        ctx,  # type: ignore[arg-type]
        state,
        m,  # type: ignore[arg-type]
        result,  # type: ignore[arg-type]
        sample,
        others or [],
        save_guard(options, []),
        1,
        "env",
        {},
    )
    return result, state


def test_every_process_left_out_is_named_with_why_once() -> None:
    """A newcomer's save said '4 of 5 processes stored' and named no reason for the fifth. A
    busy one then said each reason twice: in "what the save stored" and in a ~300-character
    warning per measurement."""
    from pytest_torchperf.core.child_protocol import SampleLine

    good = SampleLine("t.py::t", "m", 1, (1e-3,) * 5, 1.0)
    busy = SampleLine("t.py::t", "m", 2, (1e-3,) * 5, 0.5, problem="CPU share 0.50 < 0.90: another")
    starved = Sample(SUMMARY, cpu_share=0.5, queued_share=0.5)  # this process's, refused too
    result, state = _save(starved, [good, busy])
    assert result.left_out == [
        "process 2 (CPU share 0.50 < 0.90)",
        "this process (CPU share 0.50 < 0.90; measured once)",
    ]
    assert state.warnings == []


def test_a_save_out_of_waiting_time_says_so() -> None:
    """After the first measurement spent the wait, later ones read 'measured twice' as if they
    had not tried to wait."""
    starved = Sample(SUMMARY, cpu_share=0.5, queued_share=0.5)
    result, _ = _save(starved, wait_left=0.0)
    assert result.left_out == [
        "this process (CPU share 0.50 < 0.90; measured once, this process's 12 s of "
        "--torchperf-save-wait spent)"
    ]


def test_a_busy_neighbour_is_blamed_not_the_timed_code() -> None:
    """Seen on a busy VM: the pass kept its CPU (not crowded) while other processes kept 99.71 %
    of the other CPUs busy. The neighbour guard refused it: a quieter machine is the remedy."""
    sample = Sample(SUMMARY, cpu_share=0.99, neighbour_load=0.9971, queued_share=0.0)
    assert sample.crowded is False
    result, state = _save(sample)
    assert result.untimed == "other processes kept 99.71% of the other CPUs busy while timing " + (
        "(limit 50%)"
    )
    assert refusing_guard(result.untimed) == BUSY
    assert state.warnings == []  # said by the summary, once
    # Its figures are the table's label; the list of processes left out says it in a word.
    assert result.left_out == ["this process (busy machine; measured once)"]
    failure = run_failure(Coverage("save", 1, untimed_reasons=[result.untimed]), strict=None)
    assert failure is not None
    assert "1 busy machine" in failure and "Save again when the machine is quiet" in failure
    assert "left the CPU idle" not in failure and "will not change that" not in failure
    assert failure.endswith(
        "store the timing anyway with --torchperf-max-neighbour-load=100% (in the ini file: "
        "torchperf_max_neighbour_load = 100%, so that compares judge under the same guards)"
    ), failure


def test_a_target_that_left_its_cpu_idle_is_blamed_on_the_timed_code() -> None:
    sample = Sample(SUMMARY, cpu_share=0.05, neighbour_load=0.0, queued_share=0.0)
    result, state = _save(sample)
    assert result.untimed == "CPU share 0.05 < 0.90: the timed code left the CPU idle"
    assert refusing_guard(result.untimed) == IDLE
    assert state.warnings == []
    failure = run_failure(Coverage("save", 1, untimed_reasons=[result.untimed]), strict=None)
    assert failure is not None and "A quieter machine will not change that" in failure


def test_a_pass_crowded_off_its_cpu_is_blamed_on_other_processes() -> None:
    sample = Sample(SUMMARY, cpu_share=0.5, neighbour_load=0.0, queued_share=0.45)
    result, state = _save(sample)
    assert result.untimed == "CPU share 0.50 < 0.90"
    assert refusing_guard(result.untimed) == BUSY
    failure = run_failure(Coverage("save", 1, untimed_reasons=[result.untimed]), strict=None)
    assert failure is not None and "Save again when the machine is quiet" in failure


def test_processes_refused_by_a_busy_neighbour_share_one_entry() -> None:
    """Beside `load.sh hog 300` a save listed 'other processes kept 99.46% of the other CPUs
    busy while timing (limit 50%)' once per process, four times in one line."""
    from pytest_torchperf.core.child_protocol import SampleLine

    busy = [
        SampleLine(
            "t.py::t", "m", k, (1e-3,) * 5, 1.0, problem=f"other processes kept 9{k}% of the x"
        )
        for k in (1, 2, 3)
    ]
    starved = Sample(SUMMARY, cpu_share=0.5, queued_share=0.5)
    result, _ = _save(starved, busy)
    assert result.left_out[0] == "processes 1, 2, 3 (busy machine)", result.left_out


def test_what_an_untimed_session_still_stores_is_said_as_it_is() -> None:
    """A newcomer's amp variant read 'its counters and numerics were'; amp records no counters
    (torchperf accept says it of a session it stores)."""
    from pytest_torchperf.run.saving import kept_too

    for session, kept in [
        ({"counters": {"flops": 1}, "fingerprint": {"n": 1}}, "its counters and numerics were"),
        ({"accuracy": {"rel_l2": 0.01}}, "its numerics were"),
        ({}, "nothing else of it was"),
        (
            {"counters": {}, "accuracy": {"rel_l2": 0.0}, "instructions": {"per_call": 9.0}},
            "its counters, numerics and instruction count were: a --torchperf-fallback compare "
            "judges it by the count",
        ),
    ]:
        assert kept_too(Session.from_json({"statistic": None, **session})) == kept


def test_an_untimed_session_keeps_a_speedup_its_rounds_earned() -> None:
    """A speedup vs eager whose interleaved rounds passed the guards (the variant's own pass was
    refused later, or for the machine's speed) is a same-moment ratio: stored, and said to be.
    One whose rounds a guard refused never reaches the session (VariantExtra.record)."""
    from pytest_torchperf.run.state import VariantExtra

    starved = Sample(SUMMARY, cpu_share=0.5, queued_share=0.5)
    speedup = {"median": 2.0, "p25": 1.9, "p75": 2.1, "n": 8}
    session = {"accuracy": {"rel_l2": 0.01}, "speedup": speedup}
    _, state = _save(starved, session=session)
    [pending] = state.pending
    assert pending.record.statistic is None and pending.record.speedup == speedup
    refused = VariantExtra("amp", speedup=speedup, speedup_refused="CPU share 0.50 < 0.90: x")
    assert refused.record()["speedup"] is None
    assert VariantExtra("amp", speedup=speedup).record()["speedup"] == speedup
    # `torchperf compare` replays the speedup the run judged, stored or not.
    from pytest_torchperf.judge.inputs import Candidate

    record = {"name": "mlp[amp]", "speedup": speedup, "session": refused.record()}
    assert Candidate.from_record(starved, record).speedup == speedup


def test_a_refused_save_names_every_guard_its_pass_trips() -> None:
    """A newcomer followed 'store it anyway with --torchperf-min-cpu-share=0' and saved again for
    five minutes, to be refused by the neighbour guard: both tripped the first pass."""
    both = Sample(SUMMARY, cpu_share=0.5, queued_share=0.5, neighbour_load=0.99)
    result, _ = _save(both)
    assert result.untimed_options == [
        "--torchperf-min-cpu-share=0",
        "--torchperf-max-neighbour-load=100%",
    ]
    cov = Coverage(mode="save", measurements=1)
    cov.untimed_reasons.append(result.untimed)
    cov.untimed_names.append("mlp")
    cov.untimed_options.append(result.untimed_options)
    failure = run_failure(cov, strict=None) or ""
    assert failure.endswith(
        "store the timing anyway with --torchperf-max-neighbour-load=100% and "
        "--torchperf-min-cpu-share=0 (in the ini file: torchperf_max_neighbour_load = 100%, "
        "torchperf_min_cpu_share = 0, so that compares judge under the same guards)"
    ), failure


def test_a_wider_spread_suggested_lies_above_the_spread_measured() -> None:
    """Seen: a save run with the flags a refused save suggested (--torchperf-max-spread=50%
    among them) was told 'spread IQR/median 113.11% > 50% ... store it anyway with a wider
    --torchperf-max-spread (e.g. 50%)': the value already in use."""
    wide = summarize([1e-3, 1e-3, 2.2e-3, 3.5e-3, 3.5e-3])
    assert wide.relative_iqr > 1.0
    loosened = MeasureOptions(min_cpu_share=0.0, max_neighbour_load=1.0, max_spread=0.5)
    result, _ = _save(Sample(wide, cpu_share=1.0), options=loosened)
    assert result.untimed.startswith("spread IQR/median ") and result.untimed.endswith("> 50%")
    assert result.untimed_options == ["a wider --torchperf-max-spread (e.g. 200%)"]
    # A compare (or the run's failure line) reads the stored head alone: the same value.
    assert loosening_option(result.untimed) == "a wider --torchperf-max-spread (e.g. 200%)"
    assert loosening_option("spread IQR/median 30% > 25%") == (
        "a wider --torchperf-max-spread (e.g. 50%)"
    )


def test_a_machine_slowdown_suggested_lies_above_the_slowdown_measured() -> None:
    assert loosening_option("machine +61.0% slower than the stored sessions") == (
        "--torchperf-max-machine-slowdown=1000%"
    )
    assert loosening_option("machine +1234.5% slower than the stored sessions") == (
        "--torchperf-max-machine-slowdown=2000%"
    )


def test_an_untimed_session_keeps_the_option_of_every_guard_it_tripped() -> None:
    """The save named two options; the session it stored must, for a compare to name both."""
    sample = Sample(SUMMARY, cpu_share=0.5, neighbour_load=0.99, queued_share=0.45)
    result, state = _save(sample)
    both = ["--torchperf-min-cpu-share=0", "--torchperf-max-neighbour-load=100%"]
    assert result.untimed_options == both
    [pending] = state.pending
    assert pending.record.untimed == "CPU share 0.50 < 0.90"
    assert list(pending.record.untimed_options) == both


def test_a_fresh_process_leaves_out_a_refused_speedup_only_where_it_is_saved() -> None:
    """A save's extra process (number 1 and up) writes no speedup of refused rounds: it would be
    stored. A compare's confirmation (process 0) writes it, also in a run that saves too: the
    controller judges it as it judges its own (a busy machine keeps the speedup gate)."""
    from pytest_torchperf.run.roles import FreshProcess
    from pytest_torchperf.run.state import VariantExtra

    speedup = {"median": 2.0, "p25": 1.9, "p75": 2.1, "n": 8}
    extra = VariantExtra("amp", speedup=speedup, speedup_refused="CPU share 0.50 < 0.90: x")
    m = SimpleNamespace(nodeid="t.py::t", name="m[amp]", options=MeasureOptions(), extra=extra)
    m.beside = None
    written: list[object] = []
    for process, saving, kept in [(1, True, None), (0, True, speedup), (1, False, speedup)]:
        sink = SimpleNamespace(process=process, write=lambda *line: written.append(line))
        ctx = SimpleNamespace(
            settings=SimpleNamespace(save=saving),
            child_sink=sink,
            quiet=SimpleNamespace(spent=7.5),
        )
        FreshProcess().report(ctx, None, m, Sample(SUMMARY), None)  # type: ignore[arg-type]
        assert written[-1][4] == kept, (process, saving)
        # What the process spent waiting for quiet so far, for the controller to say.
        assert written[-1][6] == 7.5


def test_accept_tells_a_target_that_slept_from_a_busy_machine_as_the_save_does() -> None:
    """A results file's session keeps the timed thread's run-queue share: ``torchperf accept``
    leaves its timing out as "left the CPU idle" (whose remedy is to time the work without the
    waiting), not as a busy machine's (whose remedy, a quieter machine, would not help)."""
    from pytest_torchperf.judge.replay import untimed_session

    gate = {"min_cpu_share": 0.9, "max_neighbour_load": 1.0, "max_spread": 10.0}
    times = (1e-3, 1.01e-3, 1.02e-3, 1.03e-3)
    slept = Session(statistic=1e-3, times=times, cpu_share=0.1, queued_share=0.001, gate=gate)
    crowded = Session(statistic=1e-3, times=times, cpu_share=0.1, queued_share=0.8, gate=gate)
    unread = Session(statistic=1e-3, times=times, cpu_share=0.1, gate=gate)  # an older file
    whys = [untimed_session(s).untimed for s in (slept, crowded, unread)]  # type: ignore[union-attr]
    assert [refusing_guard(why) for why in whys] == [IDLE, BUSY, BUSY], whys
