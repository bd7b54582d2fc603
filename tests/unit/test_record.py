"""The typed record (store/record.py): one conversion each way, and the JSON form written back
with the same keys, values and key order as it came, whatever the type knows of it."""

from __future__ import annotations

import json
from pathlib import Path

from pytest_torchperf.store.record import Record, RecordedPass, RecordedVerdict, Stats

#: The records a real compare run handed the ``pytest_torchperf_report`` hook (a failing
#: measurement with its passes and explanation, a variant with speedup and accuracy, a
#: ``torchperf_timer`` block, and a key another plugin added through ``pytest_torchperf_record``).
RUN_RECORDS = Path(__file__).resolve().parents[1] / "data" / "run_records.json"


def _run_records() -> list[dict[str, object]]:
    records: list[dict[str, object]] = json.loads(RUN_RECORDS.read_text())
    return records


def test_a_runs_records_round_trip_with_their_key_order() -> None:
    for data in _run_records():
        record = Record.from_json(data)
        assert json.dumps(record.to_json()) == json.dumps(data)
        assert list(record.to_json()) == list(data)


def test_the_attributes_read_the_runs_values() -> None:
    lin, v, amp, mm = (Record.from_json(d) for d in _run_records())
    assert (lin.name, lin.outcome, lin.source) == ("lin", "fail", "torchperf")
    assert isinstance(lin.verdict, RecordedVerdict) and lin.verdict.outcome == "fail"
    assert lin.verdict.basis == "time" and lin.verdict.ratio is not None and lin.verdict.ratio > 1
    assert isinstance(lin.stats, Stats) and lin.stats.n == len(lin.samples)
    assert lin.passes and all(isinstance(p, RecordedPass) and p.times for p in lin.passes)
    assert lin.label == "FAIL" and lin.explanation and lin.gated[0] == "time"
    assert amp.variant == "amp" and amp.speedup is not None and "median" in amp.speedup
    assert amp.accuracy is not None and amp.accuracy["rel_l2"] < 0.1
    assert mm.source == "timer"
    # The measurement kinds' data and another plugin's key stay raw JSON.
    assert lin.extra("ab") is None and lin.has("ab") and lin.extra("ci") == {"job": "perf-test_lin"}


def test_unknown_keys_are_kept_where_they_were() -> None:
    data: dict[str, object] = {
        "nodeid": "t.py::t",
        "plugin_first": [1, 2],
        "name": "m",
        "verdict": {"outcome": "pass", "their_figure": 3, "ratio": 1.01},
        "outcome": "pass",
        "instructions": {"per_call": 12.5},
        "ci": {"job": "j"},
    }
    record = Record.from_json(data)
    assert record.to_json() == data and list(record.to_json()) == list(data)
    assert json.dumps(record.to_json()) == json.dumps(data)  # the verdict's order too
    assert record.extra("plugin_first") == [1, 2] and record.extra("instructions") == {
        "per_call": 12.5
    }
    assert record.verdict is not None and record.verdict.extra("their_figure") == 3


def test_a_value_of_another_type_is_written_back_as_it_came() -> None:
    """A hand-edited file or a plugin's edit: the attribute reads as absent, the file keeps it."""
    data: dict[str, object] = {
        "nodeid": "t.py::t",
        "name": "m",
        "threads": "two",
        "cpu_share": "high",
        "failures": "one",
        "speedup": {"median": "fast"},
        "passes": [{"times": [1e-3, "x"], "fresh": 1}],
        "outcome": "pass",
    }
    record = Record.from_json(data)
    assert record.threads is None and record.cpu_share is None and record.failures == ()
    assert record.speedup is None and record.passes[0].times == () and not record.passes[0].fresh
    assert json.dumps(record.to_json()) == json.dumps(data)


def test_an_older_files_record_reads_absent_keys_as_empty_and_adds_none() -> None:
    data: dict[str, object] = {"nodeid": "t.py::t", "name": "m", "outcome": "pass"}
    record = Record.from_json(data)
    assert record.variant == "eager" and record.verdict is None and record.failure_kinds == ()
    assert record.source is None and record.label is None and not record.saved
    assert not record.has("variant") and record.has("name")
    assert record.to_json() == data


def test_null_values_round_trip_and_ints_stay_ints() -> None:
    data: dict[str, object] = {
        "nodeid": "t.py::t",
        "name": "m",
        "stats": None,
        "verdict": {"outcome": "new", "ratio": None, "baseline_sessions": 0, "remeasures": 2},
        "metric": 3,
        "confirm_speedups": [None, {"median": 2}],
        "outcome": "new",
    }
    record = Record.from_json(data)
    assert json.dumps(record.to_json()) == json.dumps(data)
    assert record.metric == 3 and record.confirm_speedups == (None, {"median": 2})


def test_to_json_is_a_fresh_dict_each_time() -> None:
    record = Record.from_json(_run_records()[0])
    first = record.to_json()
    first["name"] = "edited"
    assert record.to_json()["name"] == record.name != "edited"
