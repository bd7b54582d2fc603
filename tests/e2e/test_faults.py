"""Faults and bad input: a target that raises or returns NaN fails only its own test, a starved
measurement is inconclusive (or fails under --torchperf-strict), baselines from another environment
are named, and loading the plugin never imports torch."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_torchperf.measure.machine_load import run_queue_seconds
from tests.e2e.helpers import (
    assert_sessions_round_trip,
    baseline_files,
    edit_baselines,
    scale_baselines,
)

RAISES = """
import torch

class Broken(torch.nn.Module):
    def forward(self, x):
        raise ValueError("shape mismatch in user code")

def test_broken(torchperf):
    torchperf(Broken(), torch.randn(2))

def test_fine(torchperf):
    torchperf(torch.nn.Linear(2, 2), torch.randn(1, 2))
"""


def test_target_that_raises_fails_only_its_test_with_its_own_traceback(
    perf: pytest.Pytester,
) -> None:
    perf.makepyfile(RAISES)
    result = perf.runpytest()
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            '*raise ValueError("shape mismatch in user code")',
            "E       ValueError: shape mismatch in user code",
        ]
    )
    assert "pytest_torchperf/measure.py" not in result.stdout.str()


def test_nan_outputs_are_reported_not_timed(perf: pytest.Pytester) -> None:
    perf.makepyfile("""
        import torch
        def test_nan(torchperf):
            torchperf(lambda x: x / 0 * 0, torch.ones(4), name="nan")

        def test_nan_allowed(torchperf):
            torchperf(lambda x: x / 0 * 0, torch.ones(4), name="nan", check_finite=False)
    """)
    result = perf.runpytest()
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*nan: the target's output contains 4 NaN/inf of 4 values; timings of a broken model are "
            "meaningless. Fix the model or inputs, or pass check_finite=False."
        ]
    )


SLEEPY = """
import time
import pytest
import torch

@pytest.mark.torchperf
def test_sleepy(torchperf):
    # Sleeping uses no CPU: the contention guard sees a CPU share near 0, as under a CPU hog
    # (20 ms: well above the run-queue delay of a thread waking on a loaded machine).
    # The CPU tensor input makes it a CPU measurement on a GPU machine too (guards are CPU's).
    torchperf(lambda x: time.sleep(0.02), torch.zeros(1), name="sleepy")
"""


#: Where the kernel tells how long a thread waited for its CPU (Linux), a target that sleeps is
#: told apart from one crowded off its CPU.
IDLE_SEEN = run_queue_seconds() is not None
SLEEPY_REASON = (
    "the timed code itself left the CPU idle"
    if IDLE_SEEN
    else "another process competed for the CPU while timing"
)
WHY = "idle target" if IDLE_SEEN else "busy machine"


def test_starved_measurement_is_inconclusive_and_strict_fails(perf: pytest.Pytester) -> None:
    perf.makepyfile(SLEEPY)
    perf.runpytest("--torchperf-save").assert_outcomes(passed=1)
    guard_on = ["--torchperf-compare", "--torchperf-min-cpu-share=0.9"]
    result = perf.runpytest(*guard_on, "--torchperf-json=r.json")
    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(
        [
            # The warning points at the summary, which says why once, in full.
            f"*TorchperfWarning: sleepy: timing inconclusive ({WHY}, *% vs baseline), which on "
            f"its own does not fail the test: the torchperf summary says why and what to do",
            "*test_sleepy*sleepy*INCONCLUSIVE*",
            # Not blamed on another process: the timing thread never queued for its CPU.
            f"*test_sleepy: sleepy: inconclusive, *% vs baseline cannot be trusted (measured "
            f"twice, both disturbed): CPU share 0.* < 0.90: {SLEEPY_REASON}*",
            "torchperf: 1 inconclusive",
        ]
    )
    assert result.stdout.str().count("cannot be trusted") == 1
    # The offline judge replays the run's passes, the timed thread's run-queue share with them:
    # the same reason and remedy, not a busy machine's.
    remedy = "A quieter machine will not change that" if IDLE_SEEN else "Re-run on a quieter"
    replayed = subprocess.run(
        [sys.executable, "-m", "pytest_torchperf.cli", "compare", ".torchperf", "r.json"],
        cwd=perf.path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert "CPU share 0." in replayed.stdout, replayed.stdout + replayed.stderr
    assert SLEEPY_REASON in replayed.stdout and remedy in replayed.stdout, replayed.stdout
    reports = ["--torchperf-markdown=r.md", "--torchperf-html=r.html"]
    strict = perf.runpytest(*guard_on, "--torchperf-strict", *reports)
    strict.assert_outcomes(failed=1)
    # The reports say the reason once: the failure is the verdict's message, failing.
    for report in ("r.md", "r.html"):
        text = (perf.path / report).read_text()
        assert text.count("cannot be trusted") == 1 and "(failing: " in text, text
    strict.stdout.fnmatch_lines(
        [
            # Why, in full, is the test's failure text; the summary says what failed.
            "*sleepy: inconclusive*(failing: --torchperf-strict)",
            f"*test_sleepy: sleepy: timing inconclusive ({WHY}, *% vs baseline), failing: "
            f"--torchperf-strict",
        ]
    )
    summary = strict.stdout.str().split("= torchperf =")[1].split("short test summary")[0]
    assert "cannot be trusted" not in summary, summary
    ini_strict = perf.path / "pytest.ini"
    ini_strict.write_text(ini_strict.read_text() + "\ntorchperf_strict = true\n")
    by_ini = perf.runpytest(*guard_on)
    by_ini.assert_outcomes(failed=1)
    # Named as the ini key that set it, not a flag this run was never given.
    by_ini.stdout.fnmatch_lines(
        [
            "*sleepy: inconclusive*(failing: ini torchperf_strict)",
            "torchperf: run failed: timing was judged for only 0 of 1 measurements (1 *), "
            "failing: ini torchperf_strict. *",
        ]
    )
    assert "failing: --torchperf-strict" not in by_ini.stdout.str()


def test_a_busy_neighbour_makes_a_slowdown_inconclusive_not_a_failure(
    perf: pytest.Pytester,
) -> None:
    """One busy process per other CPU: this process keeps its own core (CPU share stays high), but
    shares caches, memory bandwidth and SMT cores with them. The neighbour guard sees it in
    /proc/stat and says so instead of failing."""
    import os

    from pytest_torchperf.measure.machine_load import busy_clock

    cpus = os.cpu_count() or 1
    if busy_clock() is None or cpus < 2:
        pytest.skip("needs /proc/stat and a second CPU for a neighbour to run on")
    perf.makepyfile("""
        import torch
        def test_m(torchperf):
            torchperf(torch.nn.Linear(64, 64), torch.randn(16, 64), name="lin")
    """)
    perf.runpytest("--torchperf-save").assert_outcomes(passed=1)
    scale_baselines(perf.path / ".torchperf", 0.01)  # as a slowdown this would fail
    hogs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range(min(cpus - 1, 32))
    ]
    try:
        result = perf.runpytest(
            "--torchperf-compare", "--torchperf-max-neighbour-load=50%", "--torchperf-min-time=0.3s"
        )
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(
        [
            "*lin: inconclusive, *% vs baseline cannot be trusted (measured twice, both "
            "disturbed): other processes kept *% of the other CPUs busy while timing (limit "
            "50%): a busy neighbour shares caches, memory bandwidth and SMT cores with this one*"
        ]
    )


def test_starved_save_stores_counters_not_timing_and_fails(perf: pytest.Pytester) -> None:
    perf.makepyfile(SLEEPY)
    result = perf.runpytest("--torchperf-save", "--torchperf-min-cpu-share=0.9")
    # Said once, by the summary: no warning repeats it (a busy save warned ~300 characters per
    # measurement, and again per measurement for the other processes' sessions).
    result.assert_outcomes(passed=1, warnings=0)
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # the save gates nothing on time
    result.stdout.fnmatch_lines(
        [
            "*sleepy*measured, saved without timing: CPU share 0.* < 0.90*",
            "torchperf: stored 1 measurement: timing for 0 of 1, counters 1 of 1, numerics 0 of 1;"
            f" timing not stored: 1 {WHY} (sleepy); numerics stored but unable to gate: sleepy"
            " (the target's outputs hold no tensor values (None, or no tensor))",
            "torchperf:   sleepy: timing of 0 of 1 processes stored (not: this process (CPU share "
            "0.* < 0.90*; measured twice)): no timing stored",
            f"torchperf: run failed: the save stored no timing for 1 of 1 measurements (1 {WHY}); "
            # Not numerics: the target returns None (the line above says why).
            "what else it records (counters) was stored and gates from now on, its timing "
            "does not. "
            + (
                "A quieter machine will not change that: time the work without the waiting"
                if IDLE_SEEN
                else "Save again when the machine is quiet, give the save longer to wait for it "
                "(--torchperf-save-wait=SECONDS)"
            )
            + ", or, where this machine is always like that, store the timing anyway with "
            "--torchperf-min-cpu-share=0 (in the ini file: torchperf_min_cpu_share = 0, so that "
            "compares judge under the same guards)",
        ]
    )
    # The last line a user reads says the run failed, and why: pytest's own closing line just
    # above it is green ("1 passed"), as in a red save on a busy VM ("6 passed").
    assert re.fullmatch(r"=+ 1 passed in [0-9.]+s =+", result.outlines[-2])
    # A busy machine is not why: a quieter one will not store this timing.
    assert ("why not stored" in result.stdout.str()) is not IDLE_SEEN
    # Its head only: the figures and remedies are the "run failed" line's, just above.
    assert result.outlines[-1] == (
        "torchperf: the run FAILED (exit status 1) although its tests passed: the save stored no "
        f'timing for 1 of 1 measurements (1 {WHY}). What to do: the "torchperf: run failed" line '
        "above"
    )
    (session,) = _sessions(perf.path / ".torchperf")
    assert session["statistic"] is None and session["times"] == []
    assert session["untimed"].startswith("CPU share 0.")
    assert session["counters"] is not None and session["fingerprint"] is not None
    # An untimed session (its timing keys left out, untimed last) comes back unchanged.
    assert assert_sessions_round_trip(perf.path / ".torchperf") == 1
    # The remedy the message names works: the timing is stored and the run is green.
    again = perf.runpytest("--torchperf-save", "--torchperf-min-cpu-share=0")
    again.assert_outcomes(passed=1)
    assert again.ret == pytest.ExitCode.OK
    assert re.fullmatch(r"=+ 1 passed in [0-9.]+s =+", again.outlines[-1])  # nothing after it
    assert [s["statistic"] is not None for s in _sessions(perf.path / ".torchperf")] == [
        False,
        True,
    ]


def _sessions(storage: Path) -> list[dict]:
    (path,) = baseline_files(storage)
    (measurements,) = json.loads(path.read_text())["tests"].values()
    (entry,) = measurements.values()
    return entry["sessions"]


def test_a_save_while_the_machine_is_slower_than_in_the_stored_sessions_is_not_stored(
    perf: pytest.Pytester,
) -> None:
    perf.makepyfile("""
        import torch
        def test_m(torchperf):
            torchperf(torch.nn.Linear(8, 8), torch.randn(4, 8), name="lin")
    """)
    perf.runpytest("--torchperf-save").assert_outcomes(passed=1)
    storage = perf.path / ".torchperf"

    def fast_machine(_nodeid: str, _name: str, session: dict) -> None:
        session["calibration"] /= 10  # the stored session's machine ran the kernel 10x faster

    edit_baselines(storage, fast_machine)
    before = _sessions(storage)
    result = perf.runpytest("--torchperf-save", "--torchperf-max-machine-slowdown=25%")
    result.assert_outcomes(passed=1, warnings=0)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*lin*measured, saved without timing: machine +* slower than the stored sessions",
            "torchperf:   lin: timing of 0 of 1 processes stored (not: this process (machine +* "
            "slower than the stored sessions; measured twice)), 1 timing sessions in all with "
            "earlier saves'*",
            # Why such a timing is not stored, and what works where that is the norm.
            "torchperf: why not stored: a busy machine's baseline makes unchanged code look "
            "faster wherever it runs quieter; gates that need no quiet machine: A/B pairs "
            "(--torchperf-ab REV), CPU instruction counts (--torchperf-instructions)",
            # 1000%, or a round value above a slowdown this loaded machine made larger.
            "*store the timing anyway with --torchperf-max-machine-slowdown=*000% (in the ini "
            "file: torchperf_max_machine_slowdown = *000%, so that compares judge under the same "
            "guards)",
        ]
    )
    # The timed sessions are unchanged; the one appended holds no timing.
    after = _sessions(storage)
    assert after[:-1] == before and after[-1]["statistic"] is None
    # --torchperf-reset replaces the stored sessions: only this run is the reference then.
    perf.runpytest(
        "--torchperf-save", "--torchperf-reset", "--torchperf-max-machine-slowdown=25%"
    ).assert_outcomes(passed=1)
    assert (
        len(
            json.loads(baseline_files(storage)[0].read_text())["tests"][
                "test_a_save_while_the_"
                "machine_is_slower_than_in_the_stored_sessions_is_not_stored.py::test_m"
            ]["lin"]["sessions"]
        )
        == 1
    )


def test_baseline_from_another_environment_names_the_difference(perf: pytest.Pytester) -> None:
    perf.makepyfile("""
        import torch
        def test_m(torchperf):
            torchperf(torch.nn.Linear(2, 2), torch.randn(1, 2), name="lin")
    """)
    perf.runpytest("--torchperf-save").assert_outcomes(passed=1)
    (path,) = baseline_files(perf.path / ".torchperf")
    env_dir = path.parent
    env = json.loads((env_dir / "environment.json").read_text())
    env["exact"]["torch"] = "2.13.0"
    foreign = env_dir.parent / "cpu-other-torch2.13.0-t1-00000000"
    env_dir.rename(foreign)
    (foreign / "environment.json").write_text(json.dumps(env))
    result = perf.runpytest("--torchperf-compare")
    result.assert_outcomes(passed=1)
    import torch

    here = torch.__version__.split("+")[0]  # whatever torch this suite runs on
    result.stdout.fnmatch_lines(
        [
            f"*lin: no comparable baseline: torch {here}* here vs 2.13.0 stored (stored under "
            "*cpu-other-torch2.13.0-t1-00000000); record one for this environment with pytest "
            "--torchperf-save"
        ]
    )


def test_threads_are_part_of_the_environment(perf: pytest.Pytester) -> None:
    perf.makepyfile("""
        import torch
        def test_m(torchperf):
            torchperf(torch.nn.Linear(2, 2), torch.randn(1, 2), name="lin")
    """)
    perf.runpytest("--torchperf-save").assert_outcomes(passed=1)
    result = perf.runpytest("--torchperf-compare", "--torchperf-threads=2")
    result.stdout.fnmatch_lines(["*no comparable baseline: threads 2 here vs 1 stored*"])


def test_loading_the_plugin_does_not_import_torch(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("""
        import sys
        def pytest_sessionfinish(session):
            with open("torch_loaded.txt", "w") as fh:
                fh.write(str("torch" in sys.modules))
    """)
    pytester.makepyfile("def test_plain(): assert True")
    result = pytester.runpytest_subprocess("-p", "torchperf")
    result.assert_outcomes(passed=1)
    assert (pytester.path / "torch_loaded.txt").read_text() == "False"
    code = "import sys, pytest_torchperf, pytest_torchperf.pytest_plugin.hooks; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.slow
def test_xdist_save_and_compare_report_once(perf: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    perf.makepyfile(
        **{
            f"test_mod{i}": textwrap.dedent(f"""
        import torch
        def test_m{i}(torchperf):
            torchperf(torch.nn.Linear(8, 8), torch.randn(4, 8), name="lin{i}")
    """)
            for i in range(4)
        }
    )
    save = perf.runpytest_subprocess("-n", "2", "--torchperf-save")
    save.assert_outcomes(passed=4)
    assert len(baseline_files(perf.path / ".torchperf")) == 4
    compare = perf.runpytest_subprocess(
        "-n", "2", "--torchperf-compare", "--torchperf-max-slowdown=900%"
    )
    compare.assert_outcomes(passed=4)
    text = compare.stdout.str()
    assert text.count("= torchperf =") == 1
    assert "torchperf: 4 pass" in text


def test_warnings_turned_into_errors_fail_cleanly_and_do_not_save(perf: pytest.Pytester) -> None:
    perf.makepyfile(SLEEPY)
    # The suite's short min_time (its warning filtered in the ini, an error here).
    result = perf.runpytest(
        "--torchperf-save", "-W", "error::pytest_torchperf.run.state.TorchperfWarning"
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*min_time 20 ms (ini torchperf_min_time) is below * (TorchperfWarning turned into an "
            "error by a warnings filter)"
        ]
    )
    assert "_emit_warnings" not in result.stdout.str()
    assert baseline_files(perf.path / ".torchperf") == []


def test_out_of_memory_fails_only_its_test_with_a_clear_message(perf: pytest.Pytester) -> None:
    perf.makepyfile("""
import torch

def oom(x):
    raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")

def test_oom(torchperf):
    torchperf(oom, torch.ones(2), name="big-batch")

def test_next(torchperf):
    torchperf(torch.nn.Linear(4, 4), torch.ones(1, 4), name="after")
""")
    result = perf.runpytest()
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*torchperf: big-batch: the device ran out of memory while measuring "
            "(CUDA out of memory. Tried to allocate 20.00 GiB).*Reduce the batch size*"
        ]
    )
    assert "Traceback" not in result.stdout.str()


def _move_to_other_machine(storage: Path) -> str:
    """Pretend the stored baselines came from another CPU (same torch build)."""
    [env_dir] = [p for p in storage.iterdir() if p.is_dir()]
    other = env_dir.with_name("cpu-othercpu-torch-t1-0000beef")
    env_dir.rename(other)
    env_file = other / "environment.json"
    env = json.loads(env_file.read_text())
    env["exact"]["cpu_model"] = "Some Other CPU @ 3.0GHz"
    env_file.write_text(json.dumps(env))
    return other.name


def test_cross_machine_compare_warns_on_normalised_time_and_gates_counters(
    perf: pytest.Pytester,
) -> None:
    perf.makepyfile("""
import torch
def test_mlp(torchperf):
    torchperf(torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU()), torch.randn(4, 32), name="mlp")
""")
    perf.runpytest("--torchperf-save").assert_outcomes(passed=1)
    storage = perf.path / ".torchperf"
    other = _move_to_other_machine(storage)
    plain = perf.runpytest("--torchperf-compare")
    plain.assert_outcomes(passed=1)
    assert "cross-machine" not in plain.stdout.str()  # opt-in only

    scale_baselines(storage, 0.01)  # the other machine was 100x faster, per call and normalised
    # Guards off: a pass they find disturbed (a busy machine) warns nothing.
    quiet = ("--torchperf-min-cpu-share=0", "--torchperf-max-neighbour-load=100%")
    quiet += ("--torchperf-max-spread=1000%",)
    result = perf.runpytest("--torchperf-compare", "--torchperf-cross-machine", *quiet)
    result.assert_outcomes(passed=1)  # a normalised time difference only warns
    warning = (
        f"cross-machine warning: *% slower than the baseline of {other} after normalising by the "
        f"calibration kernel*never a verdict*"
    )
    # A warning, and the figure in the torchperf summary too (it showed only a `new` line).
    result.stdout.fnmatch_lines([f"*mlp: {warning}", "*= torchperf =*", f"*note: {warning}"])

    def more_flops(_nodeid: str, _name: str, session: dict) -> None:
        session["counters"]["flops"] += 1

    edit_baselines(storage, more_flops)
    failed = perf.runpytest("--torchperf-compare", "--torchperf-cross-machine")
    failed.assert_outcomes(failed=1)
    failed.stdout.fnmatch_lines(
        [f"*mlp: counters changed vs baseline: FLOPs *(vs {other}, same torch build)*"]
    )
    usage = perf.runpytest("--torchperf-cross-machine")
    assert usage.ret == pytest.ExitCode.USAGE_ERROR
    # Every counter ignored: none is compared across machines either, and coverage says so (it
    # read "counters gated (same torch build)" and "counters 1 of 1").
    every = "--torchperf-ignore-counters=ops,flops,params,memory,graphs"
    ignored = perf.runpytest("--torchperf-compare", "--torchperf-cross-machine", every)
    ignored.assert_outcomes(passed=1)
    assert "counters 0 of 1" in ignored.stdout.str(), ignored.stdout.str()
    assert "counters not compared (every counter both hold is ignored)" in ignored.stdout.str()


def test_a_storage_folder_that_cannot_be_created_is_reported_with_its_path(
    perf: pytest.Pytester,
) -> None:
    """A real permission error, not a simulated one: sysfs refuses mkdir even to root (which
    ignores chmod), so this also runs in containers where the suite runs as root."""
    import os
    import uuid

    if not os.path.isdir("/sys/kernel"):
        pytest.skip("needs a Linux sysfs mount to get a folder that cannot be created")
    storage = f"/sys/torchperf-{uuid.uuid4().hex[:8]}/baselines"
    perf.makepyfile("""
import pytest, torch

@pytest.mark.torchperf
def test_mlp(torchperf):
    torchperf(torch.nn.Linear(8, 8), torch.randn(4, 8), name="mlp")

def test_other():
    pass
""")
    result = perf.runpytest("--torchperf-save", "--torchperf-storage", storage)
    result.assert_outcomes(passed=1, failed=1)  # only the test that had to write fails
    result.stdout.fnmatch_lines([f"*torchperf: *{storage.rsplit('/', 1)[0]}*"])
    text = result.stdout.str()
    assert "ermission" in text or "not permitted" in text, text
    assert "Traceback" not in text
