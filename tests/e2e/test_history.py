"""``torchperf history`` over the results files of real runs at real git commits.

Eight commits of a small project, each run writing its results file as main's CI would keep it.
The runs' per-call samples and calibration kernel times are then set to fixed values (the
extreme-baseline rule of these tests: verdicts must not depend on the machine): 1 ms, and
1.5 ms from the sixth commit on.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from pytest_torchperf import cli

MODEL = """
import torch

def test_mlp(torchperf):
    torchperf(torch.nn.Linear(16, 16), torch.randn(2, 16), name="mlp")

def test_conv(torchperf):
    torchperf(torch.nn.Conv2d(1, 2, 3), torch.randn(1, 1, 8, 8), name="conv")
"""
COMMITS, STEP_AT = 8, 5


def _git(root: Path, *args: str, date: str | None = None) -> str:
    dates = {"GIT_COMMITTER_DATE": date, "GIT_AUTHOR_DATE": date} if date else {}
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
        cwd=root,
        env={**os.environ, **dates},
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


@pytest.fixture
def history(perf: pytest.Pytester) -> tuple[Path, list[str]]:
    """The project's history folder (one results file per commit) and the commits, oldest first."""
    root = perf.path
    perf.makepyfile(test_models=MODEL)
    _git(root, "init", "-q")
    folder = root / "perf-history"
    commits = []
    for i in range(COMMITS):
        (root / "CHANGES.txt").write_text(f"change {i}\n")
        _git(root, "add", "-A", ".")
        # One commit a day: history orders runs by commit time.
        _git(root, "commit", "-qm", f"c{i}", date=f"2026-11-{i + 1:02d}T12:00:00+00:00")
        commits.append(_git(root, "rev-parse", "HEAD"))
        out = folder / f"run-{i}.json"
        perf.runpytest(f"--torchperf-json={out}").assert_outcomes(passed=2)
        doc = json.loads(out.read_text())
        assert doc["commit_info"]["id"] == commits[-1]
        for bench in doc["benchmarks"]:
            level = 1.5e-3 if i >= STEP_AT and bench["torchperf"]["measurement"] == "mlp" else 1e-3
            wobble = 1 + 0.003 * (i % 3)
            bench["stats"]["data"] = [level * wobble * f for f in (0.99, 1.0, 1.01, 1.02)]
            # The machine's speed (the calibration kernel's time), by which history divides.
            bench["torchperf"]["calibration"] = 5e-6
        out.write_text(json.dumps(doc))
    return folder, commits


def test_history_finds_the_step_and_the_commits_it_happened_between(
    history: tuple[Path, list[str]], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    folder, commits = history
    page = tmp_path / "trend.html"
    assert cli.main(["history", str(folder), "--html", str(page)]) == 0
    out = capsys.readouterr().out
    before, after = commits[STEP_AT - 1][:10], commits[STEP_AT][:10]
    assert f"torchperf: history of {COMMITS} runs ({commits[0][:10]} 2026-11-01" in out, out
    assert (
        f"test_models.py::test_mlp mlp: +50.0% (1 ms -> 1.5 ms) from run 6 of 8 on, between "
        f"commits {before} and {after} (git log {before}..{after})" in out
    ), out
    assert "torchperf: 1 step in 1 of 2 measurements (1 slower, 0 faster)" in out
    assert "conv" in out and page.read_text().count("<line") == 1
    # Still slower at the last run: a CI job that asks for it fails.
    assert cli.main(["history", str(folder), "--fail-on-slowdown"]) == 1
    assert (
        "1 measurement is still slower than before a step: test_models.py::test_mlp mlp (since "
        in capsys.readouterr().out
    )
    assert cli.main(["history", str(folder), "-k", "conv", "--fail-on-slowdown"]) == 0
    capsys.readouterr()
    # Times are judged over the machine's speed unless --raw: here both say the same.
    assert cli.main(["history", str(folder), "-k", "mlp"]) == 0
    assert (
        "the times of each divided by the machine's speed that run (its calibration kernel's "
        "time; --raw: as measured)"
    ) in capsys.readouterr().out
    assert cli.main(["history", str(folder), "-k", "mlp", "--raw"]) == 0
    raw = capsys.readouterr().out
    assert "the machine's speed that run" not in raw and "+50.0% (1 ms -> 1.5 ms)" in raw


def test_history_of_no_results_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["history", str(tmp_path)]) == 2
    assert "no results files under" in capsys.readouterr().err
