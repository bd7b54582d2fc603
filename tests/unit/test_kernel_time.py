"""GPU kernel time (kinds/kernels/judge_times.py): profiles summarised, judged and explained, on
synthetic profiles (no GPU, no torch): the figures are made up to exercise each case."""

from __future__ import annotations

import pytest

from pytest_torchperf.judge.outcome import Outcome
from pytest_torchperf.judge.tolerance import NOISY_BASELINE
from pytest_torchperf.kinds.kernels.judge_times import (
    UNSTEADY,
    judge_kernels,
    kernel_changes,
    launch_note,
    short,
)
from pytest_torchperf.kinds.kernels.measure import (
    OTHER,
    Kernel,
    KernelTimes,
    calls_per_session,
    device_activities,
    summarize_sessions,
)

US = 1e-6
GEMM = "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32_warpgroupsize1x1x1_execute"
RELU = "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous)::relu>"


def profile(gemm: float, relu: float = 10 * US, calls: int = 4, **extra: float):
    """One profiler session of ``calls`` calls: per call, 2 GEMMs of ``gemm`` s and a ReLU."""
    session = {GEMM: (2.0 * calls, 2 * gemm * calls), RELU: (1.0 * calls, relu * calls)}
    session.update({name: (1.0 * calls, t * calls) for name, t in extra.items()})
    return session


def times(gemm: float, **extra: float) -> KernelTimes:
    return summarize_sessions([profile(gemm, **extra)] * 3, calls=4)


def test_sessions_are_summed_per_call_and_ranked() -> None:
    t = summarize_sessions([profile(50 * US), profile(51 * US), profile(49 * US)], calls=4)
    assert t.per_call == pytest.approx(110 * US)
    assert t.sessions == pytest.approx((110 * US, 112 * US, 108 * US))
    assert t.launches == pytest.approx(3.0)
    assert [k.name for k in t.kernels] == [GEMM, RELU]
    assert t.kernels[0].launches == pytest.approx(2.0)
    assert t.kernels[0].seconds == pytest.approx(100 * US)


def test_kernels_beyond_the_top_are_summed_as_other() -> None:
    many = {f"k{i}": 1.0 * (i + 1) * US for i in range(5)}
    t = summarize_sessions([profile(50 * US, **many)], calls=4, top=3)
    assert [k.name for k in t.kernels] == [GEMM, RELU, "k4", OTHER]
    assert t.kernels[-1].seconds == pytest.approx((1 + 2 + 3 + 4) * US)
    assert t.kernels[-1].launches == pytest.approx(4.0)


def test_a_kernel_missing_from_a_session_counts_as_zero_there() -> None:
    t = summarize_sessions([profile(50 * US, extra=30 * US), profile(50 * US)], calls=4)
    (extra,) = [k for k in t.kernels if k.name == "extra"]
    assert extra.seconds == pytest.approx(15 * US)  # median of 30 and 0


def test_no_session_is_an_error() -> None:
    with pytest.raises(ValueError, match="at least one profiler session"):
        summarize_sessions([], calls=4)


def test_records_round_trip() -> None:
    t = summarize_sessions([profile(50 * US)], calls=4, wall=300 * US)
    back = KernelTimes.from_record(t.to_record())
    assert back.to_record() == t.to_record()  # six significant digits, as stored
    assert back.per_call == pytest.approx(t.per_call) and back.kernels[0].name == GEMM


def test_busy_share_and_launch_bound() -> None:
    t = summarize_sessions([profile(50 * US)], calls=4, wall=400 * US)
    assert t.busy == pytest.approx(110 / 400)
    assert t.launch_bound
    note = launch_note(t)
    assert note is not None and note.startswith("launch-bound: the kernels filled only 27.5% ")
    busy = summarize_sessions([profile(50 * US)], calls=4, wall=120 * US)
    assert not busy.launch_bound and launch_note(busy) is None
    assert summarize_sessions([profile(50 * US)], calls=4).busy is None


#: Five save processes' kernel times: 0.4 % apart.
STORED = [times(g * US) for g in (50.0, 50.1, 49.9, 50.05, 50.0)]


def test_unchanged_kernels_pass_at_the_tight_limit() -> None:
    v = judge_kernels("mlp", times(50.02 * US), STORED, 0.03, 3.0)
    assert v.outcome is Outcome.PASS
    assert v.limit == pytest.approx(0.03)
    assert v.message.startswith("mlp: GPU kernel time +0.0% vs baseline (110 us vs 110 us")


def test_a_slower_kernel_fails_and_is_named() -> None:
    v = judge_kernels("mlp", times(53 * US), STORED, 0.03, 3.0)  # GEMMs +6 %: +5.5 % in all
    assert v.outcome is Outcome.FAIL
    assert v.ratio == pytest.approx(116 / 110, rel=1e-3)
    assert "every profiler session over it" in v.message
    assert f"Kernels that changed: {short(GEMM)} 100 us -> 106 us (+6.0%)" in v.message, v.message


def test_an_added_kernel_fails_and_is_named_new() -> None:
    v = judge_kernels("resnet", times(50 * US, spin=33 * US), STORED, 0.03, 3.0)
    assert v.outcome is Outcome.FAIL
    assert "new kernel spin x1: +33 us" in v.message, v.message


def test_sessions_that_disagree_are_unsteady_not_a_failure() -> None:
    current = summarize_sessions([profile(55 * US), profile(50 * US), profile(56 * US)], calls=4)
    v = judge_kernels("mlp", current, STORED, 0.03, 3.0)
    assert v.outcome is Outcome.INCONCLUSIVE and v.guard == UNSTEADY
    assert "sessions disagree" in v.message


def test_a_noisy_kernel_baseline_is_no_gate() -> None:
    stored = [times(g * US) for g in (40.0, 60.0, 50.0, 45.0, 55.0)]
    v = judge_kernels("mlp", times(50 * US), stored, 0.03, 3.0)
    assert v.outcome is Outcome.INCONCLUSIVE and v.guard == NOISY_BASELINE
    assert "beyond the 9% allowed" in v.message


def test_no_stored_kernel_time_is_new() -> None:
    v = judge_kernels("mlp", times(50 * US), [], 0.03, 3.0)
    assert v.outcome is Outcome.NEW


def test_kernel_changes_lists_the_largest_first_and_skips_the_unchanged() -> None:
    before = KernelTimes(1.0, (1.0,), 3, (Kernel("a", 1, 10 * US), Kernel("b", 1, 50 * US)))
    after = KernelTimes(
        1.0, (1.0,), 3, (Kernel("a", 1, 10.1 * US), Kernel("c", 2, 5 * US), Kernel("b", 1, 80 * US))
    )
    assert kernel_changes(before, after) == [
        "b 50 us -> 80 us (+60.0%)",
        "new kernel c x2: +5 us",
    ]
    assert kernel_changes(after, before)[1] == "kernel c gone: -5 us"


def test_long_kernel_names_are_cut() -> None:
    assert len(short("x" * 300)) == 72 and short("x" * 300).endswith("...")
    assert short("gemm") == "gemm"


# -- reading profiler events (duck-typed like torch.autograd.profiler_util.FunctionEvent) -------


class _Range:
    def __init__(self, us: float) -> None:
        self.us = us

    def elapsed_us(self) -> float:
        return self.us


class _DeviceType:
    def __init__(self, name: str) -> None:
        self.name = name


class Event:
    """The attributes of a FunctionEvent that device_activities reads."""

    def __init__(
        self, name: str, device: str, us: float, activity: str | None = "kernel", **extra: bool
    ) -> None:
        self.name, self.device_type = name, _DeviceType(device)
        self.activity_type, self.time_range = activity, _Range(us)
        self.is_user_annotation = extra.get("annotation", False)


def test_device_activities_sum_kernels_copies_and_fills_by_name() -> None:
    events = [
        Event("aten::addmm", "CPU", 40.0, "cpu_op"),
        Event("cudaLaunchKernel", "CPU", 4.0, "cuda_runtime"),
        Event(GEMM, "CUDA", 20.0),
        Event(GEMM, "CUDA", 22.0),
        Event("Memcpy HtoD (Pageable -> Device)", "CUDA", 3.0, "gpu_memcpy"),
        Event("Memset (Device)", "CUDA", 1.0, "gpu_memset"),
        # Not work the call asked for: our range's GPU side, user annotations, Kineto syncs.
        Event("torchperf::call", "CUDA", 90.0, "gpu_user_annotation"),
        Event("my_range", "CUDA", 90.0, None, annotation=True),
        Event("Context Sync", "CUDA", 5.0, "cuda_sync"),
    ]
    found = device_activities(events)
    assert found == {
        GEMM: (2.0, pytest.approx(42e-6)),
        "Memcpy HtoD (Pageable -> Device)": (1.0, pytest.approx(3e-6)),
        "Memset (Device)": (1.0, pytest.approx(1e-6)),
    }


def test_sessions_cover_twenty_milliseconds_within_bounds() -> None:
    assert calls_per_session(1e-3) == 20
    assert calls_per_session(1.0) == 3
    assert calls_per_session(1e-6) == 200
    assert calls_per_session(None) == 10


# -- the time-and-kernels kind through the one engine (and its replay) -----------------------

from pytest_torchperf.core.stats import summarize  # noqa: E402
from pytest_torchperf.judge.compare import Candidate, Gate, compare  # noqa: E402
from pytest_torchperf.judge.coverage import coverage  # noqa: E402
from pytest_torchperf.judge.coverage_lines import coverage_line  # noqa: E402
from pytest_torchperf.judge.labels import outcome_label  # noqa: E402
from pytest_torchperf.judge.replay import replay  # noqa: E402
from pytest_torchperf.judge.samples import Sample  # noqa: E402
from pytest_torchperf.run.children import child_session_records  # noqa: E402
from pytest_torchperf.store.record import Record  # noqa: E402
from pytest_torchperf.store.sessions import Session  # noqa: E402

GPU = Gate(kind="time-and-kernels", limits=(("max_kernel_slowdown", 0.03),))
WALL = (300 * US,) * 8  # launch-bound: 110 us of kernels in 300 us of wall time


def wall(scale: float = 1.0) -> Sample:
    times = tuple(t * scale for t in WALL)
    return Sample(summarize(times), None, times)


def gpu_session(gemm: float, scale: float = 1.0) -> dict:
    """A stored timing session of a CUDA measurement with its kernel time."""
    kernels = summarize_sessions([profile(gemm)] * 3, calls=4, wall=300 * US).to_record()
    return {"statistic": 300 * US * scale, "times": [t * scale for t in WALL], "kernels": kernels}


#: Five save processes: kernel time 0.4 % apart, wall time 40 % apart (launch-bound).
GPU_SESSIONS = [
    Session.from_json(gpu_session(g * US, s))
    for g, s in zip((50, 50.1, 49.9, 50.05, 50), (1, 1.4, 1.1, 1.2, 1.05), strict=True)
]


def candidate(gemm: float, **extra: float) -> Candidate:
    kernels = summarize_sessions([profile(gemm, **extra)] * 3, calls=4, wall=300 * US)
    return Candidate("resnet", wall(), sections={"kernels": kernels.to_record()})


def never() -> Sample:
    raise AssertionError("no pass may be taken")


def test_an_added_kernel_fails_where_the_launch_bound_wall_time_cannot_gate() -> None:
    result = compare(candidate(50 * US, spin=33 * US), GPU_SESSIONS, GPU, remeasure=never)
    # The wall time's limit is widened far beyond 3x by the launch-bound noise: no gate.
    assert result.verdict.guard == NOISY_BASELINE
    assert result.outcome == "fail"
    (failure,) = result.failures
    assert failure.category == "kernel time"  # type: ignore[attr-defined]
    assert "resnet: GPU kernel time +30.0% vs baseline" in failure, failure
    assert "new kernel spin x1: +33 us" in failure
    assert "kernels" in result.gated and "time" not in result.gated
    assert result.label.startswith("FAIL (kernel time)"), result.label
    # The run's coverage counts it as judged on its kernel time.
    record = {"name": "resnet", "outcome": result.outcome, "verdict": result.verdict.to_dict()}
    record["gated"] = result.gated
    cov = coverage([Record.from_json(record)], comparing=True)
    assert cov is not None
    assert "timing judged for 1 of 1 (1 on GPU kernel time)" in coverage_line(cov)


def test_unchanged_kernels_pass_and_the_verdict_says_so_and_that_it_is_launch_bound() -> None:
    result = compare(candidate(50.02 * US), GPU_SESSIONS, GPU, remeasure=never)
    assert result.outcome != "fail" and not result.failures
    assert result.gated[:1] == ["kernels"]
    notes = " | ".join(result.verdict.notes)
    assert "GPU kernel time +0.0% vs baseline" in notes, notes
    assert "launch-bound: the kernels filled only 36.68% of the wall time" in notes, notes


def test_an_undecided_kernel_time_is_said_once_in_full_and_warned_in_a_few_words() -> None:
    """A newcomer's GPU run printed an undecided kernel time in full twice: as a pytest warning
    and as the summary's note. The note keeps it; the warning points there."""
    kernels = summarize_sessions(
        [profile(g * US) for g in (55, 50, 56)], calls=4, wall=300 * US
    ).to_record()
    bare = Candidate("resnet", wall(), sections={"kernels": kernels})
    result = compare(bare, GPU_SESSIONS, GPU, remeasure=never)
    (note,) = [n for n in result.verdict.notes if "sessions disagree" in n]
    assert note.startswith("GPU kernel time +9.1% vs baseline but its profiler sessions disagree")
    warnings = result.pytest_warnings("resnet")
    assert warnings[-1] == (
        "resnet: GPU kernel time +9.1% vs baseline but its profiler sessions disagree, which "
        "on its own does not fail the test: the torchperf summary says why"
    )
    assert not any("did not run the same way" in w for w in warnings), warnings


def test_a_measurement_without_kernel_time_says_why() -> None:
    bare = Candidate("resnet", wall(), sections={"unprofiled": "the profiler saw no GPU activity"})
    result = compare(bare, GPU_SESSIONS, GPU, remeasure=never)
    assert "GPU kernel time not measured: the profiler saw no GPU activity" in result.verdict.notes
    assert "kernels" not in result.gated


def test_a_results_record_replays_to_the_same_kernel_verdict() -> None:
    kernels = summarize_sessions([profile(53 * US)] * 3, calls=4, wall=300 * US).to_record()
    record = {
        "name": "resnet",
        "samples": list(WALL),
        "session": {"times": list(WALL), "gate": GPU.to_record(), "kernels": kernels},
    }
    replayed = replay(Record.from_json(record), GPU_SESSIONS)
    assert [f.category for f in replayed.failures] == ["kernel time"]  # type: ignore[attr-defined]
    assert "Kernels that changed" in replayed.failures[0]


def test_each_save_process_keeps_its_own_kernel_time() -> None:
    from pytest_torchperf.core.child_protocol import SampleLine, decode, encode

    own = {"per_call": 1e-4, "sessions": [1e-4], "launches": 3, "kernels": []}
    beside = {"kernels": {"per_call": 2e-4}, "unprofiled": None}  # this process's
    record = Session.from_json({"statistic": 1e-3, "times": [1e-3], **beside})
    sample = SampleLine("t.py::t", "m", 2, (1e-3,) * 5, beside={"kernels": own, "unprofiled": None})
    line = decode(encode(sample))  # its line in the child's file
    assert isinstance(line, SampleLine) and line.beside == {"kernels": own, "unprofiled": None}
    (child,) = child_session_records(record, [sample], "run", beside)
    assert child.extra("kernels") == own  # never this process's copied N-fold
    bare_sample = SampleLine("t.py::t", "m", 3, (1e-3,) * 5)
    (bare,) = child_session_records(record, [bare_sample], "run", beside)
    assert bare.has("kernels") and bare.extra("kernels") is None


def test_the_label_names_a_kernel_time_failure() -> None:
    record = {
        "outcome": "fail",
        "verdict": {"outcome": "pass"},
        "failures": ["resnet: GPU kernel time +30%"],
        "failure_kinds": ["kernel time"],
    }
    assert outcome_label(Record.from_json(record)) == "FAIL (kernel time)"


def test_a_stored_kernel_time_is_validated_naming_the_key_and_the_fix(tmp_path) -> None:
    from pytest_torchperf.store.schema import BaselineFileError, validate_session

    good = gpu_session(50 * US)
    validate_session(good, tmp_path / "b.json", "s")
    bad = {**good, "kernels": {**good["kernels"], "per_call": -1}}
    with pytest.raises(
        BaselineFileError, match=r"key s\.kernels must hold 'per_call'.*--torchperf-reset"
    ):
        validate_session(bad, tmp_path / "b.json", "s")
