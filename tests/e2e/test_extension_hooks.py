"""The ``pytest_torchperf_*`` hooks other plugins implement (docs/fixtures-and-api.md): extra
environment fingerprint fields, the record before it is written, extra report output."""

from __future__ import annotations

import json

import pytest

from tests.e2e.helpers import baseline_files

CONFTEST = """
import os

def pytest_torchperf_environment(config, device, threads):
    return {"runner_pool": os.environ.get("POOL", "small")}

def pytest_torchperf_record(config, item, record):
    record["ci"] = {"job": "perf-" + item.name}

def pytest_torchperf_report(config, records):
    return [f"team dashboard: {len(records)} measurement(s), first {records[0]['name']}"]
"""

TEST = """
import torch

def test_lin(torchperf):
    torchperf(torch.nn.Linear(4, 4), torch.randn(2, 4), name="lin")
"""


def test_hooks_add_fingerprint_fields_record_keys_and_report_lines(
    perf: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    perf.makeconftest(CONFTEST)
    perf.makepyfile(TEST)
    save = perf.runpytest("--torchperf-save", "--torchperf-processes=1", "--torchperf-json=r.json")
    save.assert_outcomes(passed=1)
    save.stdout.fnmatch_lines(["team dashboard: 1 measurement(s), first lin"])
    (path,) = baseline_files(perf.path / ".torchperf")
    environment = json.loads((path.parent / "environment.json").read_text())
    assert environment["exact"]["runner_pool"] == "small"
    (bench,) = json.loads((perf.path / "r.json").read_text())["benchmarks"]
    assert bench["torchperf"]["ci"] == {"job": "perf-test_lin"}
    # Another pool is another environment: never compared, and the compare names the field.
    monkeypatch.setenv("POOL", "large")
    compare = perf.runpytest("--torchperf-compare")
    compare.assert_outcomes(passed=1)
    compare.stdout.fnmatch_lines(
        ["*lin: no comparable baseline: runner_pool large here vs small stored*"]
    )


def test_a_hook_that_returns_a_plugin_field_names_the_problem(perf: pytest.Pytester) -> None:
    perf.makeconftest(
        "def pytest_torchperf_environment(config, device, threads):\n    return {'torch': 'mine'}\n"
    )
    perf.makepyfile(TEST)
    result = perf.runpytest("--torchperf-save", "--torchperf-processes=1")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*a pytest_torchperf_environment hook returned the field 'torch': fields must be*"]
    )
