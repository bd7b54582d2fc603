"""Merging the results files of one run split over runners (report/merge.py), on synthetic
records written by the real results-file writer."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from pytest_torchperf.report.benchmark_json import benchmark_json
from pytest_torchperf.report.merge import left_behind, merge_results, missing_measurements
from pytest_torchperf.store.baselines import BaselineStore
from pytest_torchperf.store.record import Record
from pytest_torchperf.store.results import ResultsFileError, read_results
from pytest_torchperf.store.sessions import Session
from tests.unit.test_report_writers import record


@pytest.fixture(autouse=True)
def _in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Shards given by relative paths, as a merge job's glob gives them (`shard-1.json`)."""
    monkeypatch.chdir(tmp_path)


def _read(records: Iterable[Mapping[str, object]]) -> list[Record]:
    """The records as the reports get them: read once from their JSON form."""
    return [Record.from_json(r) for r in records]


COMMIT = {"id": "a" * 40, "dirty": False}


def _write(
    path: Path, records: list[dict[str, Any]], commit: dict[str, Any] = COMMIT, node: str = "n"
) -> Path:
    records = [
        {**r, "environment": {"exact": {"device": "cpu"}, "soft": {"hostname": node}}}
        for r in records
    ]
    doc = benchmark_json(
        _read(records), {"node": node}, commit, {"mode": "compare", "measurements": len(records)}
    )
    path.write_text(json.dumps(doc))
    return path


def _records() -> list[dict[str, Any]]:
    return [
        {**record("fast", "pass", ratio=1.01), "gated": ["time", "counters"]},
        {**record("slow", "fail", ratio=1.5), "gated": ["time", "counters"]},
        {**record("mid", "pass", ratio=0.99), "gated": ["time"]},
        {**record("new", "new"), "gated": []},
    ]


def test_three_shards_merge_into_the_file_one_unsplit_run_writes(tmp_path: Path) -> None:
    everything = _records()
    unsplit, _ = read_results(_write(Path("all.json"), everything))
    parts = [everything[:1], everything[1:3], everything[3:]]
    # Each shard on its own runner of the class: the host names differ, the exact part not.
    files = [
        _write(Path(f"shard-{i}.json"), part, node=f"runner-{i}") for i, part in enumerate(parts, 1)
    ]

    merged = merge_results(files)

    # Every record as its shard wrote it: verdict, figures, label.
    assert merged.records == unsplit
    assert merged.shards == (("shard-1.json", 1), ("shard-2.json", 2), ("shard-3.json", 1))
    assert merged.duplicates == ()
    assert merged.environments == {"cpu-x-t1-0": ["shard-1.json", "shard-2.json", "shard-3.json"]}
    # The merged document reads back as a results file, the same records again.
    (tmp_path / "merged.json").write_text(json.dumps(merged.document))
    again, environments = read_results(tmp_path / "merged.json")
    assert again == unsplit and list(environments) == ["cpu-x-t1-0"]
    labels = [b["torchperf"]["label"] for b in merged.document["benchmarks"]]
    assert labels == [
        b["torchperf"]["label"]
        for b in json.loads((tmp_path / "all.json").read_text())["benchmarks"]
    ]
    # What the merged run gated is counted over all shards' measurements.
    assert merged.coverage is not None and merged.coverage.measurements == 4
    assert merged.coverage.timed == {"time": 3}
    assert [s["file"] for s in merged.document["torchperf"]["shards"]] == [
        "shard-1.json",
        "shard-2.json",
        "shard-3.json",
    ]


def test_the_merged_file_says_what_made_the_shards_run_strict(tmp_path: Path) -> None:
    """A run's strictness as a whole (the flag or the ini key) is the results file's, so that
    a merge fails as the run did; a shard written before it was recorded leaves it unsaid."""
    everything = _records()
    strict = _write(Path("strict.json"), everything[:2])
    doc = json.loads(strict.read_text())
    doc["torchperf"]["strict"] = "--torchperf-strict"
    strict.write_text(json.dumps(doc))
    plain = _write(Path("plain.json"), everything[2:])
    assert json.loads(plain.read_text())["torchperf"]["strict"] is None
    assert merge_results([plain, strict]).document["torchperf"]["strict"] == "--torchperf-strict"
    doc["torchperf"].pop("strict")
    strict.write_text(json.dumps(doc))
    assert "strict" not in merge_results([plain, strict]).document["torchperf"]


def test_a_measurement_in_two_shards_is_kept_once_with_its_most_severe_verdict(
    tmp_path: Path,
) -> None:
    passed = record("slow", "pass", ratio=1.01)
    failed = record("slow", "fail", ratio=1.5)
    first = _write(Path("a.json"), [passed, record("fast", "pass")])
    second = _write(Path("b.json"), [failed])

    merged = merge_results([first, second])

    assert [(r["name"], r["outcome"]) for r in merged.records] == [
        ("slow", "fail"),
        ("fast", "pass"),
    ]
    (duplicate,) = merged.duplicates
    assert duplicate.seen == (("a.json", "pass"), ("b.json", "fail")) and duplicate.kept == "b.json"
    line = duplicate.line()
    assert "t.py::test_slow slow: measured in 2 shards (a.json: pass, b.json: fail)" in line
    assert "keeps b.json's" in line
    # Where the verdicts agree, the first file's record is kept.
    agreed = merge_results([first, _write(Path("c.json"), [record("slow", "pass")])])
    assert agreed.duplicates[0].kept == "a.json"
    assert agreed.records[0]["verdict"]["ratio"] == 1.01


def test_one_environment_with_two_exact_fingerprints_is_refused(tmp_path: Path) -> None:
    first = _write(Path("a.json"), [record("fast", "pass")])
    doc = json.loads(first.read_text())
    doc["torchperf"]["environments"]["cpu-x-t1-0"]["exact"]["device"] = "cuda"
    (tmp_path / "b.json").write_text(json.dumps(doc))
    with pytest.raises(ResultsFileError, match="two different exact fingerprints"):
        merge_results([first, tmp_path / "b.json"])


def test_shards_of_two_environments_stay_apart(tmp_path: Path) -> None:
    other = {**record("fast", "pass"), "environment_id": "cpu-y-t1-1"}
    merged = merge_results(
        [
            _write(Path("x.json"), [record("fast", "pass")]),
            _write(Path("y.json"), [other]),
        ]
    )
    # The same test measured on two runner classes is two measurements, not a duplicate.
    assert merged.duplicates == ()
    assert merged.environments == {"cpu-x-t1-0": ["x.json"], "cpu-y-t1-1": ["y.json"]}
    assert sorted(merged.document["torchperf"]["environments"]) == ["cpu-x-t1-0", "cpu-y-t1-1"]


def test_files_of_different_commits_or_given_twice_are_refused(tmp_path: Path) -> None:
    one = _write(Path("one.json"), [record("fast", "pass")])
    other = _write(Path("two.json"), [record("slow", "pass")], commit={"id": "b" * 40})
    with pytest.raises(ResultsFileError) as refused:
        merge_results([one, other])
    assert "different commits (one.json at aaaaaaaaaa, two.json at bbbbbbbbbb)" in str(
        refused.value
    )
    assert "--any-commit" in str(refused.value)
    assert len(merge_results([one, other], any_commit=True).records) == 2
    with pytest.raises(ResultsFileError, match="given twice"):
        merge_results([one, tmp_path / "." / "one.json"])
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ResultsFileError, match="bad.json: not written by pytest-torchperf"):
        merge_results([one, tmp_path / "bad.json"])
    with pytest.raises(ResultsFileError, match="no results file"):
        merge_results([])


def test_files_of_one_name_in_several_folders_are_named_by_path(tmp_path: Path) -> None:
    (tmp_path / "1").mkdir()
    (tmp_path / "2").mkdir()
    first = _write(tmp_path / "1" / "results.json", [record("fast", "pass")])
    second = _write(tmp_path / "2" / "results.json", [record("fast", "fail")])
    (duplicate,) = merge_results([first, second]).duplicates
    assert duplicate.kept == str(second)


def test_a_shard_is_named_by_its_path_as_given_alone_or_with_others(tmp_path: Path) -> None:
    """`merge shard-1/results.json` said `1 measurement from results.json`, while two shards
    were named `shard-1/results.json` and `shard-2/results.json`."""
    (tmp_path / "shard-1").mkdir()
    (tmp_path / "shard-2").mkdir()
    one = _write(Path("shard-1/results.json"), [record("fast", "pass")])
    two = _write(Path("shard-2/results.json"), [record("slow", "pass")])
    assert merge_results([one]).shards == (("shard-1/results.json", 1),)
    both = merge_results([one, two])
    assert both.shards == (("shard-1/results.json", 1), ("shard-2/results.json", 1))
    assert [s["file"] for s in both.document["torchperf"]["shards"]] == [str(one), str(two)]
    assert merge_results([tmp_path / one]).shards == ((str(tmp_path / one), 1),)


def test_measurements_with_a_baseline_that_no_shard_ran_are_missing(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path / ".torchperf")
    session = Session.from_json({"statistic": 1e-3, "times": [1e-3] * 5})
    for env_id, name in [("cpu-x-t1-0", "fast"), ("cpu-x-t1-0", "lost"), ("cpu-z-t1-2", "other")]:
        store.record(env_id, {"exact": {"device": "cpu"}}, f"t.py::test_{name}", name, session)
    merged = merge_results([_write(Path("a.json"), [record("fast", "pass")])])
    # Only the shards' environments count: cpu-z's baselines were never this run's to measure.
    assert missing_measurements(merged.records, store) == [
        ("cpu-x-t1-0", "t.py::test_lost", "lost")
    ]


def test_a_measurement_its_test_no_longer_takes_is_told_from_a_lost_shard(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A measurement renamed in its test (the test ran in a shard, taking the new name) was
    called a lost shard and failed the merge, which the unsplit run does not fail."""
    from pytest_torchperf import cli

    store = BaselineStore(tmp_path / ".torchperf")
    session = Session.from_json({"statistic": 1e-3, "times": [1e-3] * 5})
    for nodeid, name in [("t.py::test_fast", "fast"), ("t.py::test_fast", "old"), ("t.py::x", "x")]:
        store.record("cpu-x-t1-0", {"exact": {"device": "cpu"}}, nodeid, name, session)
    shard = _write(Path("a.json"), [{**record("fast", "pass"), "environment_id": "cpu-x-t1-0"}])
    merged = merge_results([shard])
    missing = missing_measurements(merged.records, store)
    assert left_behind(merged.records, missing) == [("cpu-x-t1-0", "t.py::test_fast", "old")]
    assert cli.main(["merge", str(shard)]) == 1  # t.py::x ran in no shard: that one fails it
    out = capsys.readouterr().out
    assert (
        "torchperf: warning: 1 measurement with a baseline in .torchperf was not taken by the "
        "test, which ran: t.py::test_fast old (renamed or removed from the test, or the test "
        "stopped before it: not a lost shard, not failing). torchperf forget t.py::test_fast old "
        "drops it" in out
    ), out
    assert "has a result in no shard: t.py::x x." in out and "1 pass, 1 missing" in out, out
    store.forget(lambda nodeid, name: nodeid == "t.py::x")
    assert cli.main(["merge", str(shard)]) == 0
    # Shards split by --torchperf-variants share test ids: the compiled one's shard lost is
    # still lost (review: it read as left behind, and the merge passed).
    store.record(
        "cpu-x-t1-0", {"exact": {"device": "cpu"}}, "t.py::test_fast", "fast[compiled]", session
    )
    missing = missing_measurements(merged.records, store)
    assert left_behind(merged.records, missing) == [("cpu-x-t1-0", "t.py::test_fast", "old")]
    assert cli.main(["merge", str(shard)]) == 1
    assert "has a result in no shard: t.py::test_fast fast[compiled]." in capsys.readouterr().out


def test_benchmarks_of_other_tools_are_kept_as_they_are(tmp_path: Path) -> None:
    path = _write(Path("a.json"), [record("fast", "pass")])
    doc = json.loads(path.read_text())
    foreign = {"name": "test_other", "fullname": "x.py::test_other", "stats": {"data": [1.0]}}
    doc["benchmarks"].append(foreign)
    path.write_text(json.dumps(doc))
    merged = merge_results([path, _write(Path("b.json"), [record("slow", "pass")])])
    assert foreign in merged.document["benchmarks"] and len(merged.records) == 2


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (lambda d: d["benchmarks"].__setitem__(0, 5), "benchmarks[0] is a JSON number"),
        (lambda d: d["benchmarks"][0].__setitem__("stats", 5), "benchmarks[0].stats is a JSON"),
        (
            lambda d: d["benchmarks"][0]["stats"].__setitem__("data", "x"),
            "benchmarks[0].stats.data is not a list of numbers",
        ),
        (
            lambda d: d["benchmarks"][0].__setitem__("torchperf", []),
            "benchmarks[0].torchperf is a JSON array",
        ),
        (
            lambda d: d["torchperf"].__setitem__("environments", [1]),
            "torchperf.environments is a JSON array, not an object",
        ),
    ],
)
def test_a_damaged_results_file_is_named_not_a_traceback(tmp_path: Path, damage, said) -> None:
    """A benchmark that is not an object (5) made every command that reads results files fail
    with AttributeError's traceback: the file's damage is named where it is."""
    from pytest_torchperf.store.results import read_results

    path = _write(Path("r.json"), [record("fast", "pass")])
    doc = json.loads(path.read_text())
    damage(doc)
    path.write_text(json.dumps(doc))
    with pytest.raises(ResultsFileError) as refused:
        read_results(path)
    assert f"r.json: {said}" in str(refused.value)
    assert "the file is damaged; write it again with pytest --torchperf-json PATH" in str(
        refused.value
    )


def test_a_measurement_removed_in_b_survives_a_merge_once(tmp_path: Path, capsys) -> None:
    """A/B shards' records of a measurement only side A had (no environment: B never measured
    it) were filed under environment "" and printed in no table (review)."""
    from pytest_torchperf import cli

    gone = {
        "name": "gone",
        "nodeid": "t.py::test_gone",
        "outcome": "removed",
        "verdict": {"outcome": "removed", "basis": "ab", "message": "gone: removed in B"},
        "ab": {"one_sided": "A"},
    }
    files = [
        _write(Path("a.json"), [_records()[0], gone]),
        _write(Path("b.json"), [_records()[1], gone]),
    ]
    merged = merge_results(files)
    assert [r.name for r in merged.records if r.outcome == "removed"] == ["gone"]
    assert [r["name"] for r in merged.document["torchperf"]["removed"]] == ["gone"]
    assert all("" not in note["environments"] for note in merged.document["torchperf"]["shards"])
    out_file = tmp_path / "m.json"
    merge = ["merge", *map(str, files), "-o", str(out_file), "--allow-missing"]
    assert cli.main(merge) in (0, 1)
    out = capsys.readouterr().out
    assert "removed in B" in out and "gone" in out, out
    assert "environment  (" not in out


def test_the_merge_command_runs_with_neither_torch_pytest_nor_pandas(tmp_path: Path) -> None:
    """The example workflow's merge job installs the package without its dependencies
    (`pip install --no-deps`): merging, with its HTML and markdown, must import none of them."""
    import subprocess
    import sys

    blocked = tmp_path / "blocked"
    for name in ("torch", "pytest", "pandas"):
        (blocked / name).mkdir(parents=True)
        (blocked / name / "__init__.py").write_text(f"raise ImportError('no {name} here')")
    shards = [
        _write(tmp_path / f"shard-{i}.json", [record], node=f"n{i}")
        for i, record in enumerate(_records())
    ]
    # The recipe's command reads the baseline folder for shards whose results are missing.
    store = BaselineStore(tmp_path / ".torchperf")
    session = Session.from_json({"statistic": 1e-3, "times": [1e-3] * 5})
    store.record("cpu-x-t1-0", {"exact": {"device": "cpu"}}, "t.py::test_fast", "fast", session)
    code = "import sys; from pytest_torchperf.cli import main; sys.exit(main(sys.argv[1:]))"
    argv = ["merge", *map(str, shards), "-o", "all.json", "--html", "r.html", "--markdown", "r.md"]
    proc = subprocess.run(
        [sys.executable, "-c", code, *argv],
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(blocked), *sys.path])},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and "no baseline folder" not in proc.stderr, proc.stderr
    assert (tmp_path / "all.json").exists() and (tmp_path / "r.html").exists()
    assert (tmp_path / "r.md").exists()
