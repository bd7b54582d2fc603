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


#: A measurement kind another plugin adds (pytest_torchperf_kinds): an absolute time budget,
#: judged without a baseline. Its package holds its declaration, judge part and run part.
BUDGET_KIND = {
    "budget_kind/__init__.py": """
from pytest_torchperf.kinds import KindSpec

SPEC = KindSpec(
    name="budget",
    package=__name__,
    summary="p25 within a fixed budget",
    parts=("judge", "run", "plugin"),
    label="budget",
)
""",
    "budget_kind/judge.py": """
import os
from collections.abc import Sequence

from pytest_torchperf.judge.outcome import Outcome
from pytest_torchperf.judge.inputs import Candidate, Gate
from pytest_torchperf.judge.kind_protocol import Confirm, KindDefaults, Remeasure
from pytest_torchperf.judge.verdict import Judgement, Verdict
from pytest_torchperf.store.sessions import Session


class BudgetKind(KindDefaults):
    name = "budget"
    save = ""
    judges_timed_speedups = False
    needs_baseline = False

    def judge(
        self,
        candidate: Candidate,
        sessions: Sequence[Session],  # the stored sessions, typed (none: judged without them)
        gate: Gate,
        remeasure: Remeasure,
        confirm: Confirm | None,
    ) -> Judgement:
        assert all(isinstance(s, Session) for s in sessions)
        budget = float(os.environ["BUDGET_S"])
        p25 = candidate.first.summary.p25
        outcome = Outcome.PASS if p25 <= budget else Outcome.FAIL
        verdict = Verdict(
            outcome, f"{candidate.label}: p25 {p25:.3g} s against a budget of {budget:g} s",
            basis="budget",
        )
        return Judgement(verdict, candidate.first, [candidate.first])


KIND = BudgetKind()
""",
    "budget_kind/run.py": """
from pytest_torchperf.run.kind_run import Keeping, KindRun

RUN = KindRun(Keeping(), lambda ctx, options, device, gate: gate)
""",
    # Its plugin part is a pytest plugin of the run: its hooks are called without a word in
    # pytest-torchperf's own hooks.
    "budget_kind/plugin.py": """
SCHEDULES = ()


def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_line("budget kind: its plugin part's hook ran")
""",
}


def test_a_plugin_adds_a_measurement_kind_of_its_own(
    perf: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Adding a kind takes its package and a hook: no file of this plugin changes. It is chosen
    (before the built-in kinds), judges the measurement, and the run, the results file and the
    exit status follow its verdict."""
    for path, text in BUDGET_KIND.items():
        (perf.path / path).parent.mkdir(exist_ok=True)
        (perf.path / path).write_text(text)
    perf.syspathinsert()
    perf.makeconftest(
        "from budget_kind import SPEC\n\ndef pytest_torchperf_kinds(config):\n    return [SPEC]\n"
    )
    perf.makepyfile(TEST)
    monkeypatch.setenv("BUDGET_S", "10")
    ok = perf.runpytest("--torchperf-compare", "--torchperf-json=r.json")
    ok.assert_outcomes(passed=1)
    ok.stdout.fnmatch_lines(["*timing judged for 1 of 1 (1 on budget)*"])
    ok.stdout.fnmatch_lines(["budget kind: its plugin part's hook ran"])
    (record,) = json.loads((perf.path / "r.json").read_text())["benchmarks"]
    torchperf = record["torchperf"]
    assert torchperf["session"]["gate"]["kind"] == "budget"
    assert "against a budget of 10 s" in torchperf["verdict"]["message"]
    monkeypatch.setenv("BUDGET_S", "1e-12")
    over = perf.runpytest("--torchperf-compare")
    over.assert_outcomes(failed=1)
    over.stdout.fnmatch_lines(["*lin: p25 * s against a budget of 1e-12 s*"])
    # The label names the kind's figure as its spec says (KindSpec.label).
    over.stdout.fnmatch_lines(["*FAIL (budget)*"])


def test_a_kind_hook_that_returns_no_spec_names_the_problem(perf: pytest.Pytester) -> None:
    perf.makeconftest("def pytest_torchperf_kinds(config):\n    return ['budget']\n")
    perf.makepyfile(TEST)
    result = perf.runpytest()
    assert result.ret != 0
    result.stderr.fnmatch_lines(["*pytest_torchperf_kinds hook returned 'budget'*KindSpec*"])
