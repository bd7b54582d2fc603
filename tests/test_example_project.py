"""End to end on the shipped example project, as a user runs it: real pytest processes.

save -> one stored baseline made 100x faster (so the real code looks 9900 % slower) -> compare, in
the three shards of the example's workflow merged by ``torchperf merge``, fails exactly that test,
with the confirmed-slowdown message, and passes the others.

Verdicts here must not depend on the machine: this suite runs on shared 2-vCPU runners where two
pytest processes timing the same sub-millisecond MLP were seen to differ by 50 % with a CPU share
of 0.99 (a neighbour on the sibling hyperthread slows us without taking our core). So the guards
are switched off (a busy runner must neither block the save nor turn the regression inconclusive)
and the stored baselines are edited, never the code, never by sleeping: every baseline is made 10x
slower before comparing under a 900 % limit (the untouched tests can only pass or "improve"), and
the resnet18 one is then made 100x faster than measured (ratio about 100, far over the 900 % limit).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from tests import browser
from tests.subprocesses import isolated_env
from tests.torchao_here import skip_without_torchao, torchao_problem

EXAMPLE = Path(__file__).resolve().parents[1] / "example_project"
RESNET_TEST = "tests/test_perf.py::test_resnet18_batch1"


def _run(
    project: Path, storage: Path, *args: str, paths: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """``python -m pytest <project> ...`` (or ``paths`` in it) in a fresh process, isolated from
    the outer pytest run, on the CPU: with a GPU present the example's device test and its
    whole-body test would measure on the GPU, in a second environment, and the figures these
    tests expect (measurements, baseline files, shards' verdicts) are a CPU machine's."""
    command = [
        sys.executable,
        "-m",
        "pytest",
        *(paths or (str(project),)),
        "-p",
        "no:cacheprovider",
        "-p",
        "no:hypothesispytest",  # unused here; 0.8 s of imports per pytest process
        "-rfE",
        "--torchperf-storage",
        str(storage),
        "--torchperf-min-time",
        "0.2",
        "--torchperf-min-cpu-share",
        "0",
        "--torchperf-max-spread",
        "1000%",
        "--torchperf-max-neighbour-load",
        "100%",
        "--torchperf-max-machine-slowdown",
        "1000%",
        *args,
    ]
    return subprocess.run(
        command,
        cwd=project,
        env=isolated_env(CUDA_VISIBLE_DEVICES=""),  # outer xdist/addopts must not leak in
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def _explain(proc: subprocess.CompletedProcess[str]) -> str:
    return (
        f"exit code {proc.returncode}\n--- stdout ---\n{proc.stdout}\n--- stderr ---\n{proc.stderr}"
    )


def _module_file(storage: Path) -> Path:
    files = sorted(p for p in storage.glob("*/*.json") if p.name != "environment.json")
    assert [p.name for p in files] == [
        "tests__test_autoencoder.py.json",
        "tests__test_instruments.py.json",
        "tests__test_perf.py.json",
        "tests__test_variants.py.json",
    ], files
    return files[2]


def _variant_file(storage: Path) -> Path:
    return _module_file(storage).with_name("tests__test_variants.py.json")


def _scale(path: Path, factor: float, nodeid: str | None = None) -> None:
    """Multiply the stored times of every measurement (or only ``nodeid``'s) by ``factor``."""
    doc = json.loads(path.read_text())
    for test, measurements in doc["tests"].items():
        if nodeid not in (None, test):
            continue
        for entry in measurements.values():
            for session in entry["sessions"]:
                session["statistic"] *= factor
                session["times"] = [t * factor for t in session["times"]]
    path.write_text(json.dumps(doc, indent=2))


def _failed_cases(junit: Path) -> list[ET.Element]:
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    return [case for case in suite.iter("testcase") if case.find("failure") is not None]


def _check_report_renders(report: Path, shot: Path) -> None:
    """The example's HTML report opens in headless Chromium, scripts run, table and charts render."""
    page = report.read_text()
    assert page.count("<tr class=") == 20 and "Variant speedups vs eager" in page
    if browser.chromium() is None:
        return  # the structure above is checked anyway; tests/e2e/test_html_and_cli.py says why skipped
    dom, console = browser.render(report, shot)
    assert console == [], console
    assert 'data-ready="1"' in dom and dom.count("<svg") >= 14
    assert browser.colour_pixels(shot, (0xDC, 0xFC, 0xE7), 4) > 500  # pass badges
    assert browser.bluish_pixels(shot) > 500  # box plots and trend dots


@pytest.mark.slow
def test_example_project_save_compare_and_catch_a_slowdown(tmp_path: Path) -> None:
    skip_without_torchao()  # 3 of its 20 measurements are int8
    project = tmp_path / "example_project"
    shutil.copytree(
        EXAMPLE,
        project,
        ignore=shutil.ignore_patterns(
            ".torchperf", ".torchperf-report", "__pycache__", "*.egg-info", ".pytest_cache"
        ),
    )
    storage = tmp_path / "baselines"

    # 1. Record baselines (in one process: saving in three, the default, is tested on a small
    # project in tests/e2e/test_processes.py and would triple this test's longest step).
    saved = _run(project, storage, "--torchperf-save", "--torchperf-processes", "1")
    assert saved.returncode == 0, _explain(saved)
    assert "= torchperf =" in saved.stdout and "baseline p25" in saved.stdout, _explain(saved)
    assert "torchperf: 20 measured" in saved.stdout, _explain(saved)
    baseline_file = _module_file(storage)
    doc = json.loads(baseline_file.read_text())
    assert sorted(doc["tests"]) == [  # node ids relative to the project's rootdir, not to the copy
        "tests/test_perf.py::test_mlp_batch_sizes",
        "tests/test_perf.py::test_mobilenet_v3_small_batch8",
        "tests/test_perf.py::test_preprocess_speed",
        RESNET_TEST,
    ], _explain(saved)
    variants = json.loads(_variant_file(storage).read_text())["tests"]
    assert len(variants) == 10, sorted(variants)  # 2 models x 5 variants, one test item each
    int8 = variants["tests/test_variants.py::test_resnet18_variants[int8]"]["resnet18[int8]"]
    session = int8["sessions"][-1]
    assert session["speedup"]["median"] > 0 and 0 < session["accuracy"]["rel_l2"] < 0.06
    assert session["metric"] is not None and session["fingerprint"]["leaves"]
    assert sorted(doc["tests"]["tests/test_perf.py::test_mlp_batch_sizes"]) == [
        "mlp-bs1",
        "mlp-bs64",
    ]

    # 2. Compare: unchanged code passes, one regression fails exactly its test. Every stored time
    # is made 10x slower under a 900 % limit, then the resnet18 baseline 100x faster than
    # measured: the same code looks +9900 %. Each verdict is 10x from its limit, so it holds
    # whatever the machine does between save and compare (under pytest -n 2 the other worker's
    # CPU hogs slowed a run 2-4x; tests whose marker sets a 15-20 % limit read -90 %: improved).
    # A variant's speedup limit is a tenth of the stored one.
    _scale(baseline_file, 10.0)
    _scale(_variant_file(storage), 10.0)
    _scale(baseline_file.with_name("tests__test_instruments.py.json"), 10.0)
    _scale(baseline_file.with_name("tests__test_autoencoder.py.json"), 10.0)
    _scale(baseline_file, 1 / 10 / 100, RESNET_TEST)
    # Compared as the example's workflow does on pull requests: in three shards side by side
    # (its compare job's matrix), merged into one results file, report and verdict by
    # `torchperf merge`. The shards' verdicts must be those of one unsplit run: 1 failed test of
    # 28, the resnet18 one (benchmarks/shard_merge.py compares the two on this project).
    workflow = yaml.safe_load((EXAMPLE / ".github" / "workflows" / "perf.yml").read_text())
    shards = workflow["jobs"]["compare"]["strategy"]["matrix"]["tests"]
    runs = []
    for i, paths in enumerate(shards, 1):
        runs.append(
            _run(
                project,
                storage,
                "--torchperf-compare",
                "--torchperf-max-slowdown=900%",
                f"--torchperf-json={tmp_path / f'shard-{i}.json'}",
                f"--junitxml={tmp_path / f'junit-{i}.xml'}",
                paths=tuple(paths.split()),
            )
        )
    outcomes = [_pytest_counts(run.stdout) for run in runs]
    assert [run.returncode for run in runs] == [1, 0, 0], [_explain(r) for r in runs]
    assert sum(c.get("failed", 0) for c in outcomes) == 1, outcomes
    assert sum(c.get("passed", 0) for c in outcomes) == 27, outcomes
    regressed = runs[0]  # tests/test_perf.py
    assert "= torchperf =" in regressed.stdout and "baseline p25" in regressed.stdout, _explain(
        regressed
    )
    failed = [c for i in (1, 2, 3) for c in _failed_cases(tmp_path / f"junit-{i}.xml")]
    assert [(c.get("classname"), c.get("name")) for c in failed] == [
        ("tests.test_perf", "test_resnet18_batch1")
    ], _explain(regressed)
    message = failed[0].find("failure").get("message", "") + (failed[0].find("failure").text or "")
    assert "resnet18:" in message and "slower than baseline" in message, message
    assert "in fresh processes" in message, message  # the default --torchperf-confirm
    assert f"FAILED {RESNET_TEST}" in regressed.stdout, _explain(regressed)
    # The summary table and its detail lines name the regression too.
    assert f"{RESNET_TEST}: resnet18: " in regressed.stdout, _explain(regressed)

    report = tmp_path / "report" / "index.html"
    merged = subprocess.run(
        [sys.executable, "-m", "pytest_torchperf.cli", "merge"]
        + [str(tmp_path / f"shard-{i}.json") for i in (1, 2, 3)]
        + ["--storage", str(storage), "-o", str(tmp_path / "results.json"), "--html", str(report)],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert merged.returncode == 1, _explain(merged)  # as one compare: resnet18 failed
    assert "into 20 measurements" in merged.stdout, _explain(merged)
    # The tally line (e.g. "torchperf: 1 fail, 4 improved, 14 pass, 1 measured").
    counts = [
        line
        for line in merged.stdout.splitlines()
        if line.startswith("torchperf: ") and " pass" in line
    ][-1]
    assert counts.startswith("torchperf: 1 fail, ") and "inconclusive" not in counts, counts
    assert "no shard" not in merged.stdout and "measured in 2 shards" not in merged.stdout
    _check_report_renders(report, tmp_path / "report.png")


def _pytest_counts(stdout: str) -> dict[str, int]:
    """pytest's closing line (``1 failed, 9 passed in 12.3s``) as counts."""
    last = [line for line in stdout.splitlines() if line.startswith("=")][-1]
    return {word: int(n) for n, word in re.findall(r"(\d+) (failed|passed|skipped|error)", last)}


def _run_as_user(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m pytest`` inside the project with its own settings and committed baselines."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rfE", *args],
        cwd=project,
        env=isolated_env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def _committed_tests() -> dict[str, set[str]]:
    """Measurement names per node id in the example's committed baselines (all environments)."""
    found: dict[str, set[str]] = {}
    for path in (EXAMPLE / ".torchperf").glob("*/*.json"):
        if path.name == "environment.json":
            continue
        for nodeid, measurements in json.loads(path.read_text())["tests"].items():
            found.setdefault(nodeid, set()).update(measurements)
    return found


def test_committed_example_baselines_cover_every_perf_test() -> None:
    """A perf test added to the example without re-saving its baselines is caught here."""
    committed = _committed_tests()
    # The plugin's own classification (marker or perf fixture), read at collection.
    script = (
        "import sys, pytest\n"
        "from pytest_torchperf.pytest_plugin.stash import IS_PERF_KEY\n"
        "class Perf:\n"
        "    def pytest_collection_finish(self, session):\n"
        "        for item in session.items:\n"
        "            if item.stash.get(IS_PERF_KEY, False):\n"
        "                print('PERF', item.nodeid)\n"
        "sys.exit(pytest.main(['--collect-only', '-q', '-p', 'no:cacheprovider'], "
        "plugins=[Perf()]))\n"
    )
    listed = subprocess.run(
        [sys.executable, "-c", script],
        cwd=EXAMPLE,
        env=isolated_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert listed.returncode == 0, _explain(listed)
    perf_ids = {
        line.split(" ", 1)[1] for line in listed.stdout.splitlines() if line.startswith("PERF ")
    }
    gated = {i for i in perf_ids if not i.endswith("test_preprocess_timer")}  # ungated by design
    assert gated and gated <= set(committed), sorted(gated - set(committed))


@pytest.mark.slow
def test_example_project_compares_clean_against_its_committed_baselines(tmp_path: Path) -> None:
    """What a clone gets: ``pytest --torchperf-compare`` in example_project/ against the baselines
    committed for this project's CI machine classes: counters and output fingerprints are exact,
    time is advisory here.

    Why time cannot gate this check: it runs on whatever runner CI lands on, under pytest -n beside
    other work. Seen on this project's own VM, unchanged code, same machine class: the
    autoencoder's Adam step ran +28.8 % and +54.8 % in two fresh confirming processes while the
    calibration kernel ran within 25 % of save time (memory contention the kernel does not feel),
    so the 15 % marker limit (widened to 21 %) failed it. A marker's ``max_slowdown`` outranks the
    command line, so no CLI limit can widen it. The check therefore passes when the only failures
    are timing verdicts and fails on anything else: a counter change, drifted numerics, a crash.
    On another machine class the environment does not match, and --torchperf-cross-machine still
    gates the counters of the same torch build.
    """
    project = tmp_path / "example_project"
    shutil.copytree(
        EXAMPLE,
        project,
        ignore=shutil.ignore_patterns(
            ".torchperf-report", "__pycache__", "*.egg-info", ".pytest_cache"
        ),
    )
    compared = _run_as_user(
        project,
        "--torchperf-compare",
        "--torchperf-cross-machine",
        "--torchperf-json=results.json",
        "-k",
        "not variants",
    )
    assert compared.returncode in (0, 1), _explain(compared)  # 1: tests failed; else a crash
    measured = [
        b["torchperf"] for b in json.loads((project / "results.json").read_text())["benchmarks"]
    ]
    expected = 10 if torchao_problem() is None else 9  # without torchao: no mlp-int8-bs64
    assert len(measured) >= expected, _explain(compared)
    not_timing = [
        f"{m['measurement']}: {m['label']}"
        for m in measured
        if m["outcome"] == "fail" and m["label"] not in ("FAIL", "FAIL (re-measured)")
    ]
    assert not_timing == [], _explain(compared)
    # Advisory, not blind: a timing failure of unchanged code beyond 10x is a bug, not the runner
    # (CPU hogs of another pytest-xdist worker slowed runs 2-4x on the 2-vCPU VM).
    too_slow = [
        f"{m['measurement']}: x{m['verdict']['ratio']:.2f}"
        for m in measured
        if m["outcome"] == "fail" and (m["verdict"] or {}).get("ratio", 0) >= 10
    ]
    assert too_slow == [], _explain(compared)
    assert not any(line.startswith("ERROR ") for line in compared.stdout.splitlines()), _explain(
        compared
    )
    # Every pytest failure is one of those timing verdicts (no test failed for another reason).
    failed_tests = {
        line.split()[1] for line in compared.stdout.splitlines() if line.startswith("FAILED ")
    }
    timing_failures = {m["nodeid"] for m in measured if m["outcome"] == "fail"}
    assert failed_tests <= timing_failures, _explain(compared)
    assert compared.returncode == (1 if failed_tests else 0), _explain(compared)
    committed_envs = {p.name for p in (EXAMPLE / ".torchperf").iterdir() if p.is_dir()}
    same_machine_class = any(f"env={env}" in compared.stdout for env in committed_envs)
    outcomes = {m["outcome"] for m in measured}
    if same_machine_class:  # judged against this class's own baselines
        assert "new" not in outcomes, _explain(compared)
    else:  # judged against the most similar stored environment instead
        assert "new" in outcomes, _explain(compared)
