"""``torchperf merge`` (and ``report``/``accept``/``compare`` over several files): a suite split
over runners, each writing its results file, merged into the file and report of one run.

One save, one unsplit compare and the same compare split in three shards by test file. The
stored baselines are edited to extreme values (slow's 100x faster, the others' 10x slower)
so that every verdict is the same in every run, whatever the machine does in between.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pytest_torchperf import cli
from tests.e2e.helpers import scale_baselines

FILES = {
    "test_one": """
import torch

def test_slow(torchperf):
    torchperf(torch.nn.Linear(32, 32), torch.randn(4, 32), name="slow")
""",
    "test_two": """
import torch

def test_conv(torchperf):
    torchperf(torch.nn.Conv2d(3, 4, 3), torch.randn(1, 3, 16, 16), name="conv")

def test_mlp(torchperf):
    torchperf(torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU()), torch.randn(2, 16),
              name="mlp")
""",
    "test_three": """
import torch

def test_tanh(torchperf):
    torchperf(torch.nn.Tanh(), torch.randn(64), name="tanh")
""",
}
SHARDS = ["test_one.py", "test_two.py", "test_three.py"]
COMPARE = ("--torchperf-compare", "--torchperf-max-slowdown=500%")


def _benchmarks(path: Path) -> dict[tuple[str, str], dict]:
    return {
        (b["torchperf"]["nodeid"], b["torchperf"]["measurement"]): b
        for b in json.loads(path.read_text())["benchmarks"]
    }


#: The project built once per process (see :func:`sharded`).
_BUILT: dict[str, Path] = {}


def _build(perf: pytest.Pytester) -> None:
    perf.makepyfile(**FILES)
    perf.runpytest("--torchperf-save").assert_outcomes(passed=4)
    storage = perf.path / ".torchperf"
    scale_baselines(storage, 10.0)
    scale_baselines(storage, 0.01 / 10, name="slow")
    perf.runpytest(*COMPARE, "--torchperf-json=all.json").assert_outcomes(passed=3, failed=1)
    for i, shard in enumerate(SHARDS, 1):
        result = perf.runpytest(shard, *COMPARE, f"--torchperf-json=shard-{i}.json")
        assert result.ret == (1 if shard == "test_one.py" else 0), result.stdout.str()


@pytest.fixture
def sharded(perf: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project after a save, an unsplit compare (all.json) and three shards' compares: built
    in the first test that asks (in-process runs: a fifth of the time of fresh processes), then
    copied for each test."""
    if "project" not in _BUILT:
        _build(perf)
        _BUILT["project"] = tmp_path_factory.mktemp("sharded") / "project"
        shutil.copytree(perf.path, _BUILT["project"])
    else:
        shutil.copytree(_BUILT["project"], perf.path, dirs_exist_ok=True)
    return perf.path


def test_merged_shards_give_one_unsplit_runs_verdicts_and_labels_and_keep_every_figure(
    sharded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shards = [f"shard-{i}.json" for i in (1, 2, 3)]
    code = cli.main(
        [
            "merge",
            *shards,
            "-o",
            str(sharded / "merged.json"),
            "--storage",
            str(sharded / ".torchperf"),
        ]
        + ["--html", str(sharded / "merged.html"), "--markdown", str(sharded / "merged.md")]
    )
    out = capsys.readouterr().out
    assert code == 1, out  # as the compare: slow failed
    assert (
        "torchperf: merged 3 results files (1 measurement from shard-1.json, 2 from "
        "shard-2.json, 1 from shard-3.json) into 4 measurements" in out
    )
    assert "test_one.py::test_slow: slow: " in out and "slower than baseline" in out
    assert "torchperf: 1 fail, 3 pass" in out
    assert "compared 4 measurements: timing judged for 4 of 4" in out
    assert "no shard" not in out and "measured in 2 shards" not in out
    assert "different baseline folders" not in out
    # Each shard's run says which baseline folder it read, and so does the merge of them.
    read = [json.loads(Path(s).read_text())["torchperf"]["storage"] for s in shards]
    assert read[0]["path"].endswith(".torchperf") and read[0]["relative"] == ".torchperf"
    assert json.loads((sharded / "merged.json").read_text())["torchperf"]["storage"] == read[0]

    merged, unsplit = _benchmarks(sharded / "merged.json"), _benchmarks(sharded / "all.json")
    assert merged.keys() == unsplit.keys()
    for key, bench in merged.items():
        ours, theirs = bench["torchperf"], unsplit[key]["torchperf"]
        assert ours["outcome"] == theirs["outcome"] and ours["label"] == theirs["label"], key
        assert ours["verdict"]["outcome"] == theirs["verdict"]["outcome"], key
        assert ours["failure_kinds"] == theirs["failure_kinds"], key
        assert ours["verdict"]["basis"] == theirs["verdict"]["basis"] == "time", key
        assert ours["counters"] == theirs["counters"], key  # the figures that do not vary
    # The merge changes no figure: each benchmark is its shard's, as the shard wrote it.
    by_shard = {k: b for s in shards for k, b in _benchmarks(Path(s)).items()}
    assert merged == by_shard
    assert "1 fail, 3 pass" in (sharded / "merged.html").read_text()
    assert "## torchperf: 1 fail, 3 pass" in (sharded / "merged.md").read_text()
    # The offline judge replays the merged file, and reads the shards as merge does.
    assert cli.main(["compare", str(sharded / ".torchperf"), str(sharded / "merged.json")]) == 1
    assert cli.main(["compare", str(sharded / ".torchperf"), *shards]) == 1
    replayed = capsys.readouterr().out
    assert "torchperf: 1 fail, 3 pass" in replayed


def test_a_lost_shard_is_named_and_fails_the_merge(
    sharded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    storage = ["--storage", str(sharded / ".torchperf")]
    passing = ["shard-2.json", "shard-3.json"]
    assert cli.main(["merge", *passing, *storage]) == 1
    out = capsys.readouterr().out
    assert (
        f"torchperf: 1 measurement with a baseline in {sharded / '.torchperf'} has a result in "
        f"no shard: test_one.py::test_slow slow. A shard's results file is missing" in out
    ), out
    assert "pass --allow-missing" in out
    assert "torchperf: 3 pass, 1 missing" in out, out
    assert cli.main(["merge", *passing, *storage, "--allow-missing"]) == 0
    assert "(--allow-missing: not failing)" in capsys.readouterr().out


def test_a_measurement_in_two_files_is_counted_once_and_named(
    sharded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = ["all.json", "shard-2.json"]
    assert cli.main(["merge", *files, "--storage", str(sharded / ".torchperf")]) == 1
    out = capsys.readouterr().out
    assert "into 4 measurements" in out
    assert (
        "torchperf: warning: test_two.py::test_conv conv: measured in 2 shards (all.json: "
        "pass, shard-2.json: pass); the merge keeps all.json's" in out
    )


def test_shards_judged_against_different_baseline_folders_are_said_to_be(
    sharded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = sharded / "shard-3.json"
    doc = json.loads(other.read_text())
    # Another runner's checkout path, the same folder in the project: one folder.
    doc["torchperf"]["storage"] = {"path": "/runner2/p/.torchperf", "relative": ".torchperf"}
    other.write_text(json.dumps(doc))
    shards = [f"shard-{i}.json" for i in (1, 2, 3)]
    cli.main(["merge", *shards, "--storage", str(sharded / ".torchperf")])
    assert "different baseline folders" not in capsys.readouterr().out
    doc["torchperf"]["storage"] = {"path": "/elsewhere/.torchperf", "relative": None}
    other.write_text(json.dumps(doc))
    shards = [f"shard-{i}.json" for i in (1, 2, 3)]
    cli.main(["merge", *shards, "--storage", str(sharded / ".torchperf"), "-o", "m.json"])
    out = capsys.readouterr().out
    assert (
        "torchperf: warning: the shards were judged against different baseline folders (shard-1"
        ".json, shard-2.json read .torchperf; shard-3.json read /elsewhere/.torchperf)" in out
    ), out
    assert json.loads(Path("m.json").read_text())["torchperf"]["storage"] is None


def test_accept_and_report_take_a_runs_shards(
    sharded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shards = [f"shard-{i}.json" for i in (1, 2, 3)]
    storage = str(sharded / ".torchperf")
    assert (
        cli.main(
            [
                "report",
                "--storage",
                storage,
                "--results",
                *shards,
                "--markdown",
                str(sharded / "r.md"),
            ]
        )
        == 0
    )
    report = (sharded / "r.md").read_text()
    assert "1 fail, 3 pass" in report
    # What the runs gated, as the run's own reports say it (the command's left it out).
    assert "compared 4 measurements: timing judged for 4 of 4, " in report, report
    # Accepting the shards makes the slowdown the baseline: a compare passes again.
    assert cli.main(["accept", *shards, "--storage", storage, "--reset"]) == 0
    assert "torchperf: 4 measurements accepted" in capsys.readouterr().out
    assert cli.main(["compare", storage, *shards]) == 0


def test_without_the_baseline_folder_the_merge_cannot_tell_a_lost_shard(
    sharded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shards = [f"shard-{i}.json" for i in (1, 2, 3)]
    nowhere = str(sharded / "no-such-folder")
    assert cli.main(["merge", *shards, "--storage", nowhere]) == 2
    said = capsys.readouterr()
    assert "no baseline folder at" in said.err and said.out == ""  # before any table
    # -o naming one of its own shards would replace that shard's results.
    assert cli.main(["merge", *shards, "-o", shards[0], "--storage", nowhere]) == 2
    assert f"merge -o {shards[0]} names one of the shards it merges" in capsys.readouterr().err
    assert cli.main(["merge", *shards, "--storage", nowhere, "--allow-missing"]) == 1  # slow
    assert "are not listed (--allow-missing)" in capsys.readouterr().out


def test_bad_shard_files_are_clear_errors(
    sharded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (sharded / "empty.json").write_text("")
    assert cli.main(["merge", str(sharded / "shard-1.json"), str(sharded / "empty.json")]) == 2
    assert "results file " in capsys.readouterr().err
    for name, sha in [("shard-1", "1" * 40), ("shard-2", "2" * 40)]:
        doc = json.loads((sharded / f"{name}.json").read_text())
        doc["commit_info"]["id"] = sha
        (sharded / f"{name}-at-{sha[0]}.json").write_text(json.dumps(doc))
    assert (
        cli.main(["merge", str(sharded / "shard-1-at-1.json"), str(sharded / "shard-2-at-2.json")])
        == 2
    )
    assert "different commits" in capsys.readouterr().err


def test_one_file_merged_is_said_in_the_singular(
    sharded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cli.main(["merge", "shard-1.json", "--storage", str(sharded / ".torchperf"), "--allow-missing"])
    out = capsys.readouterr().out
    assert (
        "torchperf: merged 1 results file (1 measurement from shard-1.json) into 1 measurement\n"
        in out
    )
    # Each file by its path as given, alone or not: one said `from results.json` of
    # shard-1/results.json, where two said `shard-1/results.json, shard-2/results.json`.
    for i in (1, 2):
        (sharded / f"shard-{i}").mkdir()
        shutil.copy(sharded / f"shard-{i}.json", sharded / f"shard-{i}" / "results.json")
    cli.main(["merge", "shard-1/results.json", "--storage", ".torchperf", "--allow-missing"])
    assert "(1 measurement from shard-1/results.json) into" in capsys.readouterr().out
    one = str(sharded / "shard-1" / "results.json")
    cli.main(["merge", one, "shard-2/results.json", "--storage", ".torchperf"])
    assert f"(1 measurement from {one}, 2 from shard-2/results.json) into" in (
        capsys.readouterr().out
    )


def test_a_shard_that_only_measured_is_named_beside_shards_that_compared(
    sharded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Newcomer: a shard job run without --torchperf-compare merged silently beside shards that
    compared (only a merge of shards that all only measured said so)."""
    shards = [f"shard-{i}.json" for i in (1, 2, 3)]
    measured_only = json.loads(Path(shards[2]).read_text())
    measured_only["torchperf"]["coverage"] = (
        None  # what a run that neither compared nor saved writes
    )
    Path(shards[2]).write_text(json.dumps(measured_only))
    cli.main(["merge", *shards, "--storage", str(sharded / ".torchperf")])
    out = capsys.readouterr().out
    assert (
        "torchperf: warning: shard shard-3.json gated none of its measurements (run without "
        "--torchperf-compare, or its tests failed before their verdicts): run every shard with "
        "pytest --torchperf-compare (docs/merge.md)" in out
    ), out
