"""A suite's history from results files (report/history.py): runs in commit order, a run's
shards joined, one series per measurement and environment, and the commits of each step."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from pytest_torchperf import cli
from pytest_torchperf.report.benchmark_json import benchmark_json
from pytest_torchperf.report.history import (
    history_html,
    read_runs,
    series_of,
    step_line,
    still_slower,
)
from pytest_torchperf.store.record import Record
from tests.unit.test_report_writers import record


def _read(records: Iterable[Mapping[str, object]]) -> list[Record]:
    """The records as the reports get them: read once from their JSON form."""
    return [Record.from_json(r) for r in records]


def _run_file(
    path: Path,
    commit: str,
    time: str,
    figures: dict[str, float],
    env: str = "cpu-x-t1-0",
    calibration: float | None = None,
) -> Path:
    records: list[dict[str, Any]] = []
    for name, p25 in figures.items():
        samples = tuple(p25 * f for f in (0.99, 1.0, 1.01, 1.02, 1.03))
        records.append(
            {
                **record(name, "pass", samples=samples),
                "environment_id": env,
                "calibration": calibration,
            }
        )
    doc = benchmark_json(_read(records), {"node": "n"}, {"id": commit, "time": time}, None)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def _history(folder: Path, step_at: int = 8, runs: int = 14) -> None:
    """``runs`` commits of main; mlp 20 % slower from commit ``step_at`` on, conv unchanged.
    Written out of order: the history orders them by commit time."""
    for i in reversed(range(runs)):
        wobble = 1 + 0.004 * ((i * 7) % 5 - 2)
        _run_file(
            folder / f"run-{i:02d}.json",
            commit=f"{i:02d}" + "c" * 38,
            time=f"2026-11-{i + 1:02d}T12:00:00+00:00",
            figures={"mlp": 1e-3 * wobble * (1.2 if i >= step_at else 1.0), "conv": 2e-3 * wobble},
        )


def test_a_step_is_found_with_the_commits_it_happened_between(tmp_path: Path) -> None:
    _history(tmp_path / "history")
    runs, left_out = read_runs([tmp_path / "history"])
    assert left_out == []
    assert [r.commit[:2] for r in runs if r.commit] == [f"{i:02d}" for i in range(14)]
    mlp, conv = series_of(runs)
    assert (mlp.name, conv.name, conv.steps) == ("mlp", "conv", ())
    (step,) = mlp.steps
    assert step.index == 8 and abs(step.change - 0.2) < 0.02
    line = step_line(mlp, step, runs)
    assert re.match(
        r"t\.py::test_mlp mlp: \+(19\.\d|20\.\d)% \(1 ms -> 1\.2 ms\) from run 9 of 14", line
    )
    assert "between commits 07cccccccc and 08cccccccc (git log 07cccccccc..08cccccccc)" in line, (
        line
    )
    page = history_html([mlp, conv], runs, "history")
    assert page.count("<svg") == 2 and page.count("<line") == 1 and "08cccccccc" in page
    assert series_of(runs, pattern="conv") == [conv]


def test_a_runs_shards_are_one_run_and_environments_stay_apart(tmp_path: Path) -> None:
    folder = tmp_path / "history"
    for i in range(8):
        commit, time = f"{i:02d}" + "d" * 38, f"2026-11-{i + 1:02d}T12:00:00+00:00"
        # Two shards per run, one of them on another runner class.
        _run_file(folder / f"{i}" / "shard-1.json", commit, time, {"mlp": 1e-3})
        _run_file(folder / f"{i}" / "shard-2.json", commit, time, {"mlp": 3e-3}, env="cpu-y")
    runs, _ = read_runs([folder])
    assert len(runs) == 8 and runs[0].files == ("shard-1.json", "shard-2.json")
    by_env = {s.environment_id: s for s in series_of(runs)}
    assert sorted(by_env) == ["cpu-x-t1-0", "cpu-y"]
    assert all(len(s.values) == 8 and not s.steps for s in by_env.values())
    assert by_env["cpu-y"].values[0] > 2.9e-3


def test_a_commit_measured_twice_counts_once_as_the_median_of_its_figures(tmp_path: Path) -> None:
    """A job retried on main writes a second file of the same commit: one run, not two, whose
    figure is the median of the two (neither the slow first attempt nor the retry alone)."""
    folder = tmp_path / "history"
    for i in range(8):
        commit, time = f"{i:02d}" + "f" * 38, f"2026-11-{i + 1:02d}T12:00:00+00:00"
        _run_file(folder / f"{i}-a.json", commit, time, {"mlp": 1e-3, "conv": 2e-3})
    commit, time = "03" + "f" * 38, "2026-11-04T12:00:00+00:00"
    _run_file(folder / "3-retry.json", commit, time, {"mlp": 3e-3})  # only mlp ran again
    runs, _ = read_runs([folder])
    assert len(runs) == 8
    assert runs[3].files == ("3-a.json", "3-retry.json") and runs[3].repeated == 1
    assert [r.repeated for r in runs[:3] + runs[4:]] == [0] * 7
    by_name = {s.name: s for s in series_of(runs)}
    assert len(by_name["mlp"].values) == 8 and len(by_name["conv"].values) == 8
    mlp = by_name["mlp"].values
    assert abs(mlp[3] / mlp[2] - 2) < 1e-9, mlp  # the median of 1x and 3x
    # A file named twice (a folder and the file in it) is read once: no repeat.
    again, _ = read_runs([folder, folder / "0-a.json"])
    assert again[0].files == ("0-a.json",) and again[0].repeated == 0
    # Shards' files of one name are told apart by their folders (a note listed "results.json,
    # results.json").
    _run_file(folder / "s2" / "3-a.json", "03" + "f" * 38, time, {"conv": 2e-3})
    runs, _ = read_runs([folder])
    assert runs[3].files == (
        str(folder / "3-a.json"),
        "3-retry.json",
        str(folder / "s2" / "3-a.json"),
    )


def test_a_retry_without_the_machines_speed_keeps_the_series_over_the_speed(
    tmp_path: Path,
) -> None:
    """Every run timed the calibration kernel, but a retried job's file has none: the run's speed
    comes from the file that has it, and the series stays over the machine's speed."""
    for i in range(8):
        commit, time = f"{i:02d}" + "a" * 38, f"2026-11-{i + 1:02d}T12:00:00+00:00"
        _run_file(tmp_path / f"{i}.json", commit, time, {"mlp": 1e-3}, calibration=5e-6)
    _run_file(
        tmp_path / "5-retry.json", "05" + "a" * 38, "2026-11-06T12:00:00+00:00", {"mlp": 1e-3}
    )
    runs, _ = read_runs([tmp_path])
    (mlp,) = series_of(runs)
    assert runs[5].repeated == 1 and mlp.normalised and len(mlp.values) == 8


def test_a_slower_machine_is_no_step_once_its_speed_is_taken_out(tmp_path: Path) -> None:
    """From the ninth run on the runners are 30 % slower: the code and the calibration kernel
    timed beside it both read 30 % more. Over the machine's speed that is no step."""
    for i in range(14):
        slower = 1.3 if i >= 8 else 1.0
        _run_file(
            tmp_path / f"{i}.json",
            commit=f"{i:02d}" + "e" * 38,
            time=f"2026-11-{i + 1:02d}T12:00:00+00:00",
            figures={"mlp": 1e-3 * slower * (1 + 0.003 * (i % 3))},
            calibration=5e-6 * slower,
        )
    runs, _ = read_runs([tmp_path])
    (normalised,) = series_of(runs)
    assert normalised.normalised and normalised.steps == ()
    (raw,) = series_of(runs, normalise=False)
    assert not raw.normalised and [s.index for s in raw.steps] == [8]


def test_runs_are_ordered_by_instant_then_by_when_written_and_other_json_is_left_out(
    tmp_path: Path,
) -> None:
    # 13:00+02:00 is 11:00 UTC: before 12:00+00:00, though it sorts after it as text.
    _run_file(tmp_path / "a.json", "a" * 40, "2026-11-01T12:00:00+00:00", {"mlp": 1e-3})
    _run_file(tmp_path / "b.json", "b" * 40, "2026-11-01T13:00:00+02:00", {"mlp": 1e-3})
    # Two commits made in the same second: the file written first is the older run.
    for name, commit, written in [
        ("c.json", "c" * 40, "2026-11-02T10:00:05+00:00"),
        ("d.json", "d" * 40, "2026-11-02T10:00:01+00:00"),
    ]:
        path = _run_file(tmp_path / name, commit, "2026-11-02T09:00:00+00:00", {"mlp": 1e-3})
        doc = json.loads(path.read_text())
        doc["datetime"] = written
        path.write_text(json.dumps(doc))
    (tmp_path / "notes.json").write_text('{"not": "a results file"}')
    runs, left_out = read_runs([tmp_path])
    assert [r.commit[0] for r in runs if r.commit] == ["b", "a", "d", "c"]
    assert len(left_out) == 1 and "notes.json: not written by pytest-torchperf" in left_out[0]


def test_still_slower_means_the_latest_level_is_above_the_level_before_a_slowdown(
    tmp_path: Path,
) -> None:
    def steps_of(levels: list[float]) -> object:
        folder = tmp_path / str(levels)
        for i, level in enumerate(x for x in levels for _ in range(6)):
            _run_file(
                folder / f"{i:02d}.json",
                f"{i:02d}" + "f" * 38,
                f"2026-10-{i + 1:02d}T12:00:00+00:00",
                {"mlp": level * (1 + 0.002 * (i % 3))},
            )
        (series,) = series_of(read_runs([folder])[0])
        return still_slower(series)

    assert steps_of([1.0, 1.1, 1.07]) is not None  # +10 %, then -3 %: still 7 % slower
    # -10 %, then +5.5 %: faster than at the start, but the +5.5 % step lost half of the
    # improvement, and nothing undid it: a slowdown all the same.
    assert steps_of([1.0, 0.9, 0.95]) is not None
    assert steps_of([1.0, 0.9, 0.95, 0.9]) is None
    assert steps_of([1.0, 1.2, 1.0]) is None  # undone


def test_a_step_next_to_an_outlier_names_the_other_commit_range_too(tmp_path: Path) -> None:
    """The first run after the step measured far off both levels (the old code on a slow
    runner?): the line names the range one run later as well, with that run's figures."""
    figures = [38.0, 38.4, 37.8, 38.2, 58.0, 50.0, 50.3, 49.8, 50.1]
    for i, us in enumerate(figures):
        commit, time = f"{i:02d}" + "b" * 38, f"2026-11-{i + 1:02d}T12:00:00+00:00"
        _run_file(tmp_path / f"{i}.json", commit, time, {"mlp": us * 1e-6})
    runs, _ = read_runs([tmp_path])
    (mlp,) = series_of(runs, normalise=False)
    (step,) = mlp.steps
    line = step_line(mlp, step, runs)
    assert "from run 5 of 9 on, between commits 03bbbbbbbb and 04bbbbbbbb" in line, line
    assert "; or one run later, between commits 04bbbbbbbb and 05bbbbbbbb (git log" in line, line
    assert "run 5 (04bbbbbbbb) measured 58" in line and "+52% from the level before" in line, line


def test_a_history_of_one_run_says_run_and_shows_no_noise_figure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One run: "1 run", "1 measurement", and the noise column "-" (it read "1 runs" and a noise
    of 0.01 %, the floor of a figure that needs two runs)."""
    path = _run_file(tmp_path / "r.json", "ab" * 20, "2026-11-01T12:00:00+00:00", {"mlp": 1e-3})
    page = tmp_path / "trend.html"
    assert cli.main(["history", str(path), "--html", str(page)]) == 0
    out = capsys.readouterr().out
    assert "torchperf: warning: 1 run: a step needs 3 runs on each side" in out, out
    assert "torchperf: history of 1 run (ababababab " in out and "), 1 measurement in 1 " in out
    assert re.search(r"t\.py::test_mlp +mlp +1 +1 ms +- +-$", out, re.MULTILINE), out
    assert "%" not in out, out
    html = page.read_text()
    assert "<title>torchperf history: 1 run</title>" in html and "<p>1 run, 1 measurement, " in html
    assert "<td>-</td><td><svg" in html
