"""Unit tests of the report writers on synthetic records: markdown and pytest-benchmark JSON."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from pytest_torchperf.report.benchmark_json import PYTEST_BENCHMARK_FORMAT, benchmark_json
from pytest_torchperf.report.markdown import markdown_report
from pytest_torchperf.store.record import Record


def _read(records: Iterable[Mapping[str, object]]) -> list[Record]:
    """The records as the reports get them: read once from their JSON form."""
    return [Record.from_json(r) for r in records]


def record(
    name: str,
    outcome: str,
    *,
    ratio: float | None = None,
    failures: tuple[str, ...] = (),
    changes: tuple[str, ...] = (),
    message: str = "",
    samples: tuple[float, ...] = (1e-3, 1.1e-3, 1.2e-3, 1.3e-3, 1.4e-3),
) -> dict:
    stats = {
        "n": len(samples),
        "min": min(samples),
        "p25": samples[1],
        "median": samples[2],
        "p75": samples[3],
        "max": max(samples),
        "mean": sum(samples) / len(samples),
        "iqr": samples[3] - samples[1],
    }
    verdict = {
        "outcome": "fail" if outcome == "fail" and not failures and not changes else "pass",
        "message": message or f"{name}: message",
        "ratio": ratio,
        "baseline_statistic": 1e-3,
    }
    return {
        "nodeid": f"t.py::test_{name}",
        "name": name,
        "group": None,
        "outcome": outcome,
        "stats": stats,
        "samples": list(samples),
        "verdict": verdict,
        "failures": list(failures),
        "counter_changes": list(changes),
        "number_per_block": 10,
        "device": "cpu",
        "threads": 1,
        "environment_id": "cpu-x-t1-0",
        "environment": {"exact": {"device": "cpu"}},
    }


RECORDS = [
    record("fast", "pass", ratio=1.01),
    record("slow", "fail", ratio=1.5, message="slow: 50.0% slower than baseline (...)"),
    record("ops", "fail", ratio=1.0, changes=("FLOPs +1.0% (1 -> 2)",)),
]


def test_markdown_lists_failures_first_with_the_terminal_labels() -> None:
    text = markdown_report(_read(RECORDS), "env line")
    assert text.startswith("## torchperf: 2 fail, 1 pass\n\n`env line`\n")
    assert "### Needs attention" in text
    assert "slow: 50.0% slower than baseline (...)" in text and "FLOPs +1.0% (1 -> 2)" in text
    rows = [line for line in text.splitlines() if line.startswith("| ") and "`t.py" in line]
    assert rows[0].startswith("| ❌ FAIL (counters) | `t.py::test_ops`")
    assert rows[1].startswith("| ❌ FAIL | `t.py::test_slow`") and "| +50.0% |" in rows[1]
    assert rows[2].startswith("| ✅ pass | `t.py::test_fast`")
    assert markdown_report([], "env").startswith("## torchperf: no measurements")


def test_benchmark_json_follows_pytest_benchmarks_layout_with_our_section() -> None:
    data = benchmark_json(_read(RECORDS), {"node": "vm"}, {"id": "abc"})
    json.dumps(data)
    assert data["version"] == PYTEST_BENCHMARK_FORMAT and data["machine_info"] == {"node": "vm"}
    assert data["torchperf"]["environments"] == {"cpu-x-t1-0": {"exact": {"device": "cpu"}}}
    slow = next(b for b in data["benchmarks"] if b["name"] == "test_slow[slow]")
    stats = slow["stats"]
    assert stats["rounds"] == 5 and stats["iterations"] == 10 and stats["median"] == 1.2e-3
    assert stats["min"] <= stats["q1"] <= stats["median"] <= stats["q3"] <= stats["max"]
    assert slow["torchperf"]["outcome"] == "fail" and slow["torchperf"]["label"] == "FAIL"
    untimed = {**record("off", "disabled"), "samples": [], "stats": None}
    assert all(
        b["name"] != "test_off[off]" for b in benchmark_json(_read([untimed]), {}, {})["benchmarks"]
    )


def test_a_record_round_trips_through_the_results_file(tmp_path) -> None:
    """Every key of a measurement record (and one another plugin added) comes back from a
    results file as it was written: one conversion each way (store/records.py)."""
    from pytest_torchperf.store.records import MeasurementRecord
    from pytest_torchperf.store.results import read_results

    samples = [0.001, 0.00105, 0.0011]  # sorted: the layout keeps them sorted
    values: dict[str, object] = {
        "nodeid": "test_m.py::test_a",
        "name": "a",
        "group": "g",
        "device": "cpu",
        "threads": 2,
        "environment_id": "cpu-1234",
        "disabled": False,
        "number_per_block": 40,
        "samples": samples,
        "options": {"min_time": 0.2},
        "label": "FAIL (time)",
    }
    for key, kind in MeasurementRecord.__annotations__.items():
        if key in values or key in ("stats", "environment"):
            continue
        # A distinct value per key, of a JSON type the key may hold.
        text = str(kind)
        values[key] = (
            [f"{key}-1"]
            if text.startswith("list")
            else {"of": key}
            if "dict" in text or "Record" in text
            else f"{key}-value"
        )
    # The two a results file's reader checks (what accept stores, what compare replays) hold
    # values of their real shape.
    values["session"] = {"statistic": 1e-3, "times": samples, "session": "session-value"}
    values["passes"] = [{"times": samples, "pass": "passes-1"}]
    values["extension_field"] = {"from": "another plugin"}
    doc = benchmark_json(_read([values]), {}, {})
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc))
    (record,), _ = read_results(path)
    data = record.to_json()
    for key, value in values.items():
        if key == "options":
            assert record.options is not None and record.options["min_time"] == 0.2
        else:
            assert data[key] == value, key
    assert record.stats is not None and record.stats.n == 3
    assert record.extra("extension_field") == {"from": "another plugin"}


def test_markdown_and_html_keep_a_verdicts_notes() -> None:
    """A fallback compare's inconclusive MLP said in the terminal why the count could not judge
    it (its Valgrind process crashed); the markdown and HTML reports dropped that note."""
    from pytest_torchperf.report.html import html_report

    noted = record("mlp", "inconclusive")
    noted["verdict"] = {
        **noted["verdict"],
        "outcome": "inconclusive",
        "notes": ["no instruction count to fall back on: the pytest process under Valgrind exited"],
    }
    noted["outcome"] = "inconclusive"
    note = "note: no instruction count to fall back on: the pytest process under Valgrind exited"
    assert note in markdown_report(_read([noted]), "env")
    assert note in html_report(_read([noted]), "env")
