"""A hand-edited results file whose times or counters a baseline could not hold: every command
that reads it refuses it up front, naming the results file, the key and the value (exit 2, the
bad-input status), and ``torchperf accept`` leaves the baseline files as they were. It used to
crash with a traceback (exit 1, which reads as a regression in CI), pass, or blame the baseline
file for the results file's value."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_torchperf import cli
from tests.unit.test_cli_accept import ENV, GATE, NODE, TIMES, accept, results_file

Edit = Callable[[dict[str, Any]], None]


def _section(doc: dict[str, Any]) -> dict[str, Any]:
    section: dict[str, Any] = doc["benchmarks"][0]["torchperf"]
    return section


def _session_times(doc: dict[str, Any]) -> None:
    _section(doc)["session"]["times"][0] = -1.0


def _pass_times(doc: dict[str, Any]) -> None:
    _section(doc)["passes"][0]["times"][0] = -1.0


def _ops(doc: dict[str, Any]) -> None:
    _section(doc)["session"]["counters"]["ops"] = {"aten::addmm": "x"}


def _block(doc: dict[str, Any]) -> None:
    doc["benchmarks"][0]["stats"]["data"][1] = 0.0


def _statistic(doc: dict[str, Any]) -> None:
    _section(doc)["session"]["statistic"] = -1e-3


#: An edit, and what the refusal names: the key, then the value.
EDITS: list[tuple[Edit, str, str]] = [
    (_session_times, "benchmarks[0].torchperf.session.times", "times[0] is -1.0"),
    (_pass_times, "benchmarks[0].torchperf.passes[0].times[0]", "is -1.0"),
    (_ops, "benchmarks[0].torchperf.session.counters.ops", "ops['aten::addmm'] is 'x'"),
    (_block, "benchmarks[0].stats.data[1]", "is 0.0"),
    (_statistic, "benchmarks[0].torchperf.session.statistic", "is -0.001"),
]
IDS = ["session-times", "pass-times", "counters-ops", "stats-data", "statistic"]


def _edited(tmp_path: Path, edit: Edit) -> str:
    """A results file of one measurement with its passes, edited by ``edit``."""
    path = Path(results_file(tmp_path, gate=GATE, counters={"flops": 10, "ops": {"aten::mm": 1}}))
    doc = json.loads(path.read_text())
    _section(doc)["passes"] = [{"times": list(TIMES), "cpu_share": 1.0}]
    edit(doc)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    return str(bad)


def _stored(tmp_path: Path) -> dict[str, bytes]:
    """Every file of the baseline folder, byte for byte."""
    root = tmp_path / "tp"
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _refused(capsys: pytest.CaptureFixture[str], bad: str, key: str, value: str) -> None:
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    err = " ".join(captured.err.split())  # whatever the wrapping
    assert f"results file {bad}: key {key}" in err or f"results file {bad}: {key}" in err, err
    assert value in err, err
    assert "write it again with pytest --torchperf-json PATH" in err, err
    assert "baseline file" not in err, err


@pytest.mark.parametrize(("edit", "key", "value"), EDITS, ids=IDS)
@pytest.mark.parametrize("flags", [(), ("--reset",)], ids=["append", "reset"])
def test_accept_refuses_a_bad_results_file_and_leaves_the_baselines_untouched(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    edit: Edit,
    key: str,
    value: str,
    flags: tuple[str, ...],
) -> None:
    """A negative time crashed accept in core/stats.py with a traceback (exit 1); a counter
    that is no count was refused only when appended, in the baseline file's name ("Fix it,
    restore it (git checkout -- ...)") although that file was fine."""
    assert accept(tmp_path, results_file(tmp_path, gate=GATE)) == 0
    before = _stored(tmp_path)
    assert before
    bad = _edited(tmp_path, edit)
    capsys.readouterr()
    assert accept(tmp_path, bad, *flags) == 2
    _refused(capsys, bad, key, value)
    assert _stored(tmp_path) == before


@pytest.mark.parametrize(("edit", "key", "value"), EDITS, ids=IDS)
@pytest.mark.parametrize("command", ["compare", "report", "merge", "history", "graph"])
def test_every_reader_refuses_a_bad_results_file_as_bad_input(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    edit: Edit,
    key: str,
    value: str,
    command: str,
) -> None:
    """compare crashed on a negative pass time (exit 1: "regression found" to CI), and judged
    a bad counter; report printed `pass` over either."""
    assert accept(tmp_path, results_file(tmp_path, gate=GATE)) == 0
    before = _stored(tmp_path)
    bad = _edited(tmp_path, edit)
    storage = str(tmp_path / "tp")
    argv = {
        "compare": ["compare", storage, bad],
        "report": ["report", bad, "--storage", storage],
        "merge": ["merge", bad, "--storage", storage, "-o", str(tmp_path / "merged.json")],
        "history": ["history", bad],
        "graph": ["graph", bad, "--no-browser", "--out", str(tmp_path / "graph")],
    }[command]
    capsys.readouterr()
    assert cli.main(argv) == 2
    _refused(capsys, bad, key, value)
    assert _stored(tmp_path) == before
    assert not (tmp_path / "merged.json").exists()


@pytest.mark.parametrize("command", ["compare", "report", "accept", "merge", "history", "graph"])
def test_a_results_file_that_is_not_json_is_named_with_the_remedy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """A results file cut short said only `not valid JSON (Expecting ...)`, where every other
    kind of damage says what to do."""
    assert accept(tmp_path, results_file(tmp_path, gate=GATE)) == 0
    bad = tmp_path / "cut.json"
    bad.write_text(Path(results_file(tmp_path, gate=GATE)).read_text()[:60])
    storage = str(tmp_path / "tp")
    argv = {
        "compare": ["compare", storage, str(bad)],
        "report": ["report", str(bad), "--storage", storage],
        "accept": ["accept", str(bad), "--storage", storage],
        "merge": ["merge", str(bad), "--storage", storage, "-o", str(tmp_path / "merged.json")],
        "history": ["history", str(bad)],
        "graph": ["graph", str(bad), "--no-browser", "--out", str(tmp_path / "graph")],
    }[command]
    capsys.readouterr()
    assert cli.main(argv) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert err.startswith(f"torchperf: results file {bad}: not valid JSON ("), err
    assert err.endswith(
        "; if pytest --torchperf-json wrote it, it is damaged (cut short, or edited): re-run the "
        "run that wrote it, or restore it from where it came from (a CI job's artifacts); "
        "nothing was read from it"
    ), err


def test_a_good_results_file_with_passes_still_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The checks refuse only what is wrong: the same file unedited is accepted and compared."""
    good = _edited(tmp_path, lambda doc: None)
    assert accept(tmp_path, good) == 0
    assert cli.main(["compare", str(tmp_path / "tp"), good]) == 0
    out = capsys.readouterr().out
    assert f"accepted {NODE} fwd (p25 1 ms) into {tmp_path / 'tp' / ENV}" in out
