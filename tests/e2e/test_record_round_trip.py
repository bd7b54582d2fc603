"""A real run's records through their one conversion each way (store/record.py): the results
file written again from the records read back from it, and the JUnit property read and written,
give the same JSON, keys in the same order, another plugin's key included."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from pytest_torchperf.report.benchmark_json import benchmark_json
from pytest_torchperf.store.record import Record
from pytest_torchperf.store.results import read_results

CONFTEST = """
def pytest_torchperf_record(config, item, record):
    record["ci"] = {"job": "perf-" + item.name, "shard": 1}
"""

TEST = """
import torch

def test_lin(torchperf):
    torchperf(torch.nn.Linear(8, 8), torch.randn(2, 8), name="lin")

def test_timer(torchperf_timer):
    torchperf_timer(lambda: torch.randn(8, 8) @ torch.randn(8, 8), name="mm")
"""


@pytest.mark.any_device  # a round trip holds on any device
def test_a_runs_records_are_written_back_as_they_were_read(perf: pytest.Pytester) -> None:
    perf.makeconftest(CONFTEST)
    perf.makepyfile(TEST)
    perf.runpytest("--torchperf-save").assert_outcomes(passed=2)
    # A limit no machine's noise reaches: the verdict (and so the outcome) is not what is tested.
    run = perf.runpytest(
        "--torchperf-compare",
        "--torchperf-max-slowdown=900%",
        "--torchperf-json=r.json",
        "--junitxml=j.xml",
    )
    run.assert_outcomes(passed=2)

    doc = json.loads((perf.path / "r.json").read_text())
    records, _ = read_results(perf.path / "r.json")
    assert [r.name for r in records] == ["lin", "mm"]
    assert records[0].verdict is not None and records[0].passes
    assert records[0].extra("ci") == {"job": "perf-test_lin", "shard": 1}
    again = benchmark_json(
        records, doc["machine_info"], doc["commit_info"], doc["torchperf"]["coverage"]
    )
    # Everything but the stats block, which a results file's reader summarises again from the
    # samples as they were written (six significant digits), not the run's full precision.
    for written, read in zip(doc["benchmarks"], again["benchmarks"], strict=True):
        assert json.dumps({**read, "stats": None}) == json.dumps({**written, "stats": None})
        assert read["stats"]["data"] == written["stats"]["data"]
    # (A record read from a file has no environment: the file keeps them in one table.)
    assert again["torchperf"]["coverage"] == doc["torchperf"]["coverage"]

    (properties,) = [
        json.loads(str(p.get("value")))
        for p in ET.parse(perf.path / "j.xml").iter("property")
        if p.get("name") == "torchperf"
        and "test_lin" in json.dumps(json.loads(str(p.get("value"))))
    ]
    for data in properties:
        assert json.dumps(Record.from_json(data).to_json()) == json.dumps(data)
        assert list(data)[-1] == "ci"  # the hook's key, after the plugin's own
