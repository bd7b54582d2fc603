"""``--torchperf-processes N``: fresh child processes measure each target, the run judges the
median, ``--torchperf-save`` stores N sessions; the children write nothing the user sees."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from tests.e2e.helpers import baseline_files, edit_baselines, scale_baselines

MODELS = """
import os, pytest, torch

@pytest.mark.torchperf
def test_mlp(torchperf):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    torchperf(model, torch.randn(8, 32), name="mlp")

def test_plain():
    # Children run only perf tests: the controller is the only process that gets here.
    with open("plain-runs.txt", "a") as handle:
        handle.write(os.environ.get("PYTEST_TORCHPERF_CHILD_PROCESS", "controller") + "\\n")
"""


def sessions(perf: pytest.Pytester) -> list[dict]:
    found = []
    edit_baselines(perf.path / ".torchperf", lambda _n, _m, s: found.append(dict(s)))
    return found


def test_save_with_three_processes_stores_three_sessions_and_compare_pools(
    perf: pytest.Pytester,
) -> None:
    perf.makepyfile(MODELS)
    save = perf.runpytest(
        "--torchperf-save", "--torchperf-processes", "3", "--junitxml", "junit.xml"
    )
    save.assert_outcomes(passed=2)
    save.stdout.fnmatch_lines(
        [
            "torchperf: fresh process 1 of 3: measuring 1 perf test ...",
            "torchperf: fresh process 1 of 3: 1 measurement in *",
            "torchperf: fresh process 2 of 3: 1 measurement in *",
            "torchperf: process 3 of 3: this run",
            "*processes=3 (each stores a session where its timing is trusted)*",
        ]
    )
    stored = sessions(perf)
    run_ids = sorted(s["run_id"] for s in stored)
    assert len(stored) == 3 and run_ids[1].endswith("-p1") and run_ids[2].endswith("-p2")
    assert len({s["statistic"] for s in stored}) == 3  # three separate timings
    assert all(s["counters"] == stored[0]["counters"] for s in stored)
    assert (perf.path / "plain-runs.txt").read_text() == "controller\n"
    # The controller's JUnit XML, not a child's: both tests are in it.
    cases = {c.get("name") for c in ET.parse(perf.path / "junit.xml").getroot().iter("testcase")}
    assert cases == {"test_mlp", "test_plain"}

    scale_baselines(perf.path / ".torchperf", 0.01)  # every stored process 100x faster
    compare = perf.runpytest(
        "--torchperf-compare", "--torchperf-processes", "2", "--torchperf-json", "out.json"
    )
    compare.assert_outcomes(passed=1, failed=1)
    compare.stdout.fnmatch_lines(
        [
            "*mlp: *% slower than baseline (median p25 of 2 processes *",
            "*candidate: median of 2 processes (1 fresh, then this one: p25s *",
        ]
    )
    record = json.loads((perf.path / "out.json").read_text())["benchmarks"][0]["torchperf"]
    assert len(record["processes"]) == 2
    assert len(record["passes"][0]["process_statistics"]) == 1


def test_reset_with_processes_keeps_every_process_and_drops_the_old_history(
    perf: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    perf.makepyfile(MODELS)
    perf.runpytest("--torchperf-save").assert_outcomes(passed=2)
    old = sessions(perf)[0]["run_id"]
    summary = perf.path / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    reset = perf.runpytest(
        "--torchperf-save",
        "--torchperf-reset",
        "--torchperf-processes",
        "3",
        "--torchperf-html",
        "report.html",
    )
    reset.assert_outcomes(passed=2)
    stored = sessions(perf)
    assert len(stored) == 3 and old not in {s["run_id"] for s in stored}
    assert stored[-1]["run_id"].count("-p") == 0  # the latest session is this process's own
    assert sum(1 for s in stored if s.get("top_ops")) == 1  # profiled once, by this process
    # Only the controller writes reports: one job summary, not three.
    assert summary.read_text().count("## torchperf:") == 1
    assert (perf.path / "report.html").is_file()


def test_ini_processes_do_not_block_a_skip_run(perf: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    perf.makepyfile(MODELS)
    ini = (
        (perf.path / "pytest.ini")
        .read_text()
        .replace("torchperf_processes = 1", "torchperf_processes = 3")
    )
    (perf.path / "pytest.ini").write_text(ini)
    result = perf.runpytest_subprocess("-n", "2", "--torchperf-skip")
    result.assert_outcomes(passed=1, skipped=1)
    assert "fresh process" not in result.stdout.str()


def test_a_child_that_crashes_is_reported_and_the_run_goes_on(perf: pytest.Pytester) -> None:
    perf.makepyfile(MODELS)
    perf.makeconftest("""
import os
if os.environ.get("PYTEST_TORCHPERF_CHILD_PROCESS") == "1":
    raise RuntimeError("this child cannot start")
""")
    result = perf.runpytest("--torchperf-save", "--torchperf-processes", "3")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "torchperf: fresh process 1 exited with code *: its measurements are missing*",
            "*RuntimeError: this child cannot start*",
        ]
    )
    assert len(sessions(perf)) == 2  # process 2 and this run
    assert len(baseline_files(perf.path / ".torchperf")) == 1


def test_a_deprecation_of_our_code_in_a_fresh_process_fails_it(perf: pytest.Pytester) -> None:
    """The suite's guard (our DeprecationWarnings are errors) reaches the plugin's children too:
    code that runs only there warned into a log nobody read."""
    perf.makepyfile(MODELS)
    perf.makeconftest("""
import os, warnings
if os.environ.get("PYTEST_TORCHPERF_CHILD_PROCESS") == "1":
    warnings.warn_explicit("old", DeprecationWarning, "c.py", 1, module="pytest_torchperf.run.children")
""")
    result = perf.runpytest("--torchperf-save", "--torchperf-processes", "2")
    result.stdout.fnmatch_lines(
        ["torchperf: fresh process 1 exited with code *", "*DeprecationWarning: old*"]
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--torchperf-processes", "0"],
            "*--torchperf-processes must be a whole number from 1 to 10, got '0'*",
        ),
        (["--torchperf-processes", "three"], "*must be a whole number*got 'three'*"),
        (
            ["--torchperf-processes", "2", "--torchperf-disable"],
            "*cannot be combined with --torchperf-disable*",
        ),
    ],
)
def test_bad_process_options_are_usage_errors(
    perf: pytest.Pytester, args: list[str], message: str
) -> None:
    perf.makepyfile(MODELS)
    result = perf.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


@pytest.mark.parametrize(
    "key, message",
    [
        ("torchperf_processes = lots", "*ini key torchperf_processes must be a whole number*"),
        ("torchperf_confirm = later", "*ini key torchperf_confirm must be one of fresh, same*"),
    ],
)
def test_a_bad_ini_value_names_its_ini_key(perf: pytest.Pytester, key: str, message: str) -> None:
    """An ini value was reported as the command-line option (`--torchperf-processes must be
    ...`), naming neither the key nor the file."""
    perf.makepyfile(MODELS)
    ini = perf.path / "pytest.ini"
    name = key.split(" = ")[0]
    lines = [line for line in ini.read_text().splitlines() if not line.startswith(f"{name} ")]
    ini.write_text("\n".join([*lines, key, ""]))
    result = perf.runpytest("--torchperf-compare")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_processes_under_xdist_run_first_and_each_worker_pools_them(
    perf: pytest.Pytester,
) -> None:
    """The fresh processes run on the controller before any worker runs a test; each worker
    stores its own pass and theirs."""
    pytest.importorskip("xdist")
    perf.makepyfile(MODELS)
    result = perf.runpytest_subprocess("-n", "2", "--torchperf-save", "--torchperf-processes=3")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "torchperf: fresh process 1 of 3: measuring the perf tests ...",
            "torchperf: fresh process 2 of 3: 1 measurement in *",
            "*processes=3 (each stores a session where its timing is trusted)*",
        ]
    )
    assert len(sessions(perf)) == 3


def test_ini_sets_the_process_count(perf: pytest.Pytester) -> None:
    perf.makepyfile(MODELS)
    ini = (
        (perf.path / "pytest.ini")
        .read_text()
        .replace("torchperf_processes = 1", "torchperf_processes = 2")
    )
    (perf.path / "pytest.ini").write_text(ini)
    result = perf.runpytest("--torchperf-save")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["torchperf: fresh process 1 of 2: 1 measurement in *"])
    assert len(sessions(perf)) == 2


def test_a_save_measures_in_five_fresh_processes_by_default(perf: pytest.Pytester) -> None:
    """One saved session cannot show how much the machine varies between processes."""
    perf.makepyfile(MODELS)
    ini = perf.path / "pytest.ini"
    ini.write_text(ini.read_text().replace("torchperf_processes = 1\n", ""))
    result = perf.runpytest("--torchperf-save")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "torchperf: fresh process 4 of 5: 1 measurement in *",
            "*processes=5 (each stores a session where its timing is trusted)*",
        ]
    )
    assert len(sessions(perf)) == 5
    # A compare alone measures in one process (suspected slowdowns are confirmed in a fresh one).
    compare = perf.runpytest("--torchperf-compare")
    assert "fresh process 1 of" not in compare.stdout.str()


FRESH = """
import os, pytest, torch

@pytest.mark.torchperf(counters=False)
def test_mlp(torchperf):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 64))
    x = torch.randn(32, 64)
    # Stands in for a process that happens to run slow (memory layout, allocator state): this
    # process does the work 256 times unless FAST is set or it is a fresh confirming process.
    fast = os.environ.get("FAST") or os.environ.get("PYTEST_TORCHPERF_CHILD_PROCESS")
    repeat = 1 if fast else 256
    def target(x):
        for _ in range(repeat):
            out = model(x)
        return out
    torchperf(target, x, name="mlp")
"""


def _save_fast_and_slow_it_down(perf: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Save FRESH's fast process, then store it 11x slower than measured.

    Against that baseline a fast (fresh) process reads about -91 % and the slow one (256x the
    work) about +2200 %, or +1070 % pooled with a fast child (the mean of the two p25s). Another
    pytest-xdist worker's CPU load slows one measurement 2-4x on 2 CPUs (a save read 3x slow under
    CI once, which made a 16x slow process look +33 % against a 4x baseline): a fresh pass would
    have to read 12x slow to fail, the save 10x slow to turn the pooled first pass into a pass.
    """
    monkeypatch.setenv("FAST", "1")
    perf.runpytest("--torchperf-save").assert_outcomes(passed=1)
    monkeypatch.delenv("FAST")
    scale_baselines(perf.path / ".torchperf", 11.0)


def _default_confirm(perf: pytest.Pytester) -> None:
    """The suite's pytest.ini confirms in the same process; these tests need the default."""
    ini = (perf.path / "pytest.ini").read_text().replace("torchperf_confirm = same\n", "")
    (perf.path / "pytest.ini").write_text(ini)


def test_a_slow_process_alone_does_not_fail_a_test(
    perf: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _default_confirm(perf)
    perf.makepyfile(FRESH)
    _save_fast_and_slow_it_down(perf, monkeypatch)
    result = perf.runpytest("--torchperf-compare")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["*mlp: *% vs baseline after a re-measure in a fresh process (first pass +*%; limit 10%)*"]
    )
    same = perf.runpytest("--torchperf-compare", "--torchperf-confirm", "same")
    same.assert_outcomes(failed=1)  # the same process stays slow: confirmed there
    same.stdout.fnmatch_lines(["*mlp: *% slower than baseline (*in re-measures in this process*"])


def test_pooled_compare_confirms_in_fresh_processes(
    perf: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The controller runs slow, its child fast: the pooled first pass (median of the two) is far
    # over the limit. Re-measuring in the controller and pooling again with the same child would
    # repeat that verdict; a fresh confirming process contradicts it.
    _default_confirm(perf)
    perf.makepyfile(FRESH)
    _save_fast_and_slow_it_down(perf, monkeypatch)
    result = perf.runpytest("--torchperf-compare", "--torchperf-processes", "2")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["*mlp: *% vs baseline after a re-measure in a fresh process (first pass +*%; limit *)*"]
    )


def test_pooled_slowdown_confirmed_in_fresh_processes_replays_the_same(
    perf: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    # A pooled first pass (this process and one child) and two single fresh confirming processes;
    # torchperf compare must not pool the fresh passes with the child: same headline offline.
    _default_confirm(perf)
    perf.makepyfile(MODELS)
    perf.runpytest("--torchperf-save").assert_outcomes(passed=2)
    scale_baselines(perf.path / ".torchperf", 0.01)
    result = perf.runpytest(
        "--torchperf-compare", "--torchperf-processes", "2", "--torchperf-json", "r.json"
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            # "(p25 ..." or, when the pooled first pass is the median one,
            # "(median p25 of 2 processes ..."
            "*mlp: *% slower than baseline (*p25 * vs *, the median of 3 passes: first +*%, then "
            "+*%, +*% in fresh processes; limit *)*"
        ]
    )
    from pytest_torchperf import cli

    headline = next(line for line in result.stdout.lines if line.startswith("mlp: "))
    passes = json.loads((perf.path / "r.json").read_text())["benchmarks"][0]["torchperf"]["passes"]
    assert [bool(p["process_statistics"]) for p in passes] == [True, False, False]
    capsys.readouterr()
    assert cli.main(["compare", str(perf.path / ".torchperf"), str(perf.path / "r.json")]) == 1
    assert headline in capsys.readouterr().out


def test_a_real_slowdown_is_confirmed_in_a_fresh_process(
    perf: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _default_confirm(perf)
    perf.makepyfile(MODELS)
    perf.runpytest("--torchperf-save").assert_outcomes(passed=2)
    scale_baselines(perf.path / ".torchperf", 0.01)
    result = perf.runpytest(
        "--torchperf-compare", "--junitxml", "junit.xml", "--torchperf-json", "r.json"
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*mlp: *% slower than baseline (p25 * vs *, the median of 3 "
            "passes: first +*%, then +*%, +*% in fresh processes; limit 10%)*"
        ]
    )
    # torchperf compare replays the fresh-process passes: the same wording and figure offline.
    from pytest_torchperf import cli

    headline = next(line for line in result.stdout.lines if line.startswith("mlp: "))
    capsys.readouterr()
    assert cli.main(["compare", str(perf.path / ".torchperf"), str(perf.path / "r.json")]) == 1
    assert headline in capsys.readouterr().out
    # One line per run (save, compare): the confirming child ran test_mlp only.
    assert (perf.path / "plain-runs.txt").read_text() == "controller\ncontroller\n"
    cases = {c.get("name") for c in ET.parse(perf.path / "junit.xml").getroot().iter("testcase")}
    assert cases == {"test_mlp", "test_plain"}


def test_bad_confirm_setting_is_a_usage_error(perf: pytest.Pytester) -> None:
    perf.makepyfile(MODELS)
    result = perf.runpytest("--torchperf-confirm", "elsewhere")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--torchperf-confirm*invalid choice*elsewhere*"])
