"""The measurement kinds' report parts (``kinds/<kind>/report.py``) and the lookup the reports
ask (``report/kinds.py``): what each kind adds to a run's tables, ``torchperf show`` and
``torchperf history``, read from the records themselves. Pure."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pytest_torchperf import kinds as registry
from pytest_torchperf.kinds.ab.report import REPORT as AB
from pytest_torchperf.kinds.fallback.report import REPORT as FALLBACK
from pytest_torchperf.kinds.instructions.report import REPORT as INSTRUCTIONS
from pytest_torchperf.report import kinds
from pytest_torchperf.report.kind_report import KindReport
from pytest_torchperf.report.terminal import format_baseline, format_change_of, render_table
from pytest_torchperf.store.record import Record, RecordedVerdict
from pytest_torchperf.store.sessions import Session

COUNT = {"per_call": 197_000.0, "windows": [197_000.0, 197_000.0], "functions": {}}


def _record(**extra: object) -> Record:
    return Record.from_json(
        {
            "nodeid": "tests/test_a.py::test_x",
            "name": "bs1",
            "outcome": "pass",
            "stats": {"median": 1.2e-4, "p25": 1.1e-4},
            "verdict": {"outcome": "pass", "ratio": 1.05, "baseline_statistic": 1e-4},
            **extra,
        }
    )


def test_the_kinds_with_report_behaviour_have_a_part_in_the_registrys_order() -> None:
    assert kinds.report_parts() == (AB, INSTRUCTIONS, FALLBACK)
    assert kinds.report_part(registry.spec_named("instructions").name) is INSTRUCTIONS
    # time and time-and-kernels show nothing of their own; an unknown kind (another plugin's,
    # not installed here) reads as time rather than stop the report.
    assert kinds.report_part("time") is None
    assert kinds.report_part("time-and-kernels") is None
    assert kinds.report_part("someone-elses") is None


def test_a_record_with_an_instruction_count_gets_the_instructions_column() -> None:
    counted = _record(instructions=COUNT, instructions_vs_eager=0.45)
    (column,) = kinds.columns([_record(), counted])
    assert (column.header, column.html_header) == ("instr/call", "instructions / call")
    assert column.cell(counted) == "197 k (x0.45 eager)"
    assert column.cell(_record()) == "-"
    assert column.sort_value(counted) == 197_000.0 and column.sort_value(_record()) == -1


def test_records_without_a_count_get_no_kind_column() -> None:
    assert kinds.columns([_record(), _record(ab={"against": "rev:main"})]) == []
    assert render_table([_record()])[0].split()[4:6] == ["baseline", "p25"]


def test_a_verdict_judged_on_the_count_words_its_baseline_as_a_count() -> None:
    verdict = {"basis": "instructions", "baseline_statistic": 195_000.0}
    assert format_baseline(RecordedVerdict.from_json(verdict)) == "195 k"
    assert format_baseline(RecordedVerdict(basis="instructions")) == "-"
    # Another basis (time, A/B's side A, none in an older file) is a time.
    assert format_baseline(RecordedVerdict(basis="ab", baseline_statistic=1e-4)) == "100 us"
    assert kinds.baseline_wording(None) is None


def test_an_ab_record_names_side_a_and_gives_the_changes_interval() -> None:
    paired = _record(ab={"interval": {"low": 0.098, "high": 0.151}, "a_sessions": [{"x": 1}]})
    assert kinds.header([paired], "baseline", "baseline p25") == "side A p25"
    assert kinds.header([paired], "change", "change") == "change [95% CI]"
    assert format_change_of(paired) == "+5.0% [+9.8..+15.1%]"
    assert format_change_of(_record()) == "+5.0%"
    assert kinds.carried_sessions(paired) == [Session.from_json({"x": 1})]
    assert kinds.carried_sessions(_record()) is None


def test_the_first_kind_in_the_registrys_order_names_a_shared_column() -> None:
    """Records of an A/B and a counted run in one table (``torchperf report`` of merged files):
    ab, chosen first, names the baseline; the count keeps its column."""
    records = [_record(instructions=COUNT), _record(ab={"against": "rev:main"})]
    assert kinds.header(records, "baseline", "baseline p25") == "side A p25"
    assert kinds.header(records[:1], "baseline", "baseline p25") == "baseline"
    assert kinds.renamed_headers(records[:1], html=True) == {
        "baseline": "baseline (p25, or instr/call where judged on the count)"
    }
    assert render_table(records)[0].split()[4:7] == ["instr/call", "side", "A"]


def test_an_instruction_environment_shows_counts_in_torchperf_show() -> None:
    assert INSTRUCTIONS.stored_figures is not None
    sessions = [Session(instructions={"per_call": 2e5}), Session(instructions=COUNT)]
    assert INSTRUCTIONS.stored_figures(sessions) == {
        "baseline": "198 k instr/call",
        "latest": "197 k instr/call",
        "judged at": "1%",  # the default max_instruction_increase (show printed "-")
    }
    assert INSTRUCTIONS.stored_figures([Session(statistic=1e-3)]) == {
        "baseline": "no count",
        "latest": "no count",
        "judged at": "1%",
    }
    loose = Session(instructions=COUNT, gate={"max_instruction_increase": 0.025})
    assert INSTRUCTIONS.stored_figures([loose])["judged at"] == "2.5%"


def test_a_fallback_save_names_the_count_stored_beside_the_timing() -> None:
    counted, timed = Session(instructions={"per_call": 5.53e6}), Session(statistic=1e-3)
    assert FALLBACK.stored_note([counted, timed]) == (
        " (+ 5.53 M instr/call for --torchperf-fallback)"
    )
    assert FALLBACK.stored_note([timed]) == ""
    assert FALLBACK.stored_figures is None  # its environments are timed


def test_a_count_is_a_series_figure_only_under_the_instruction_environment() -> None:
    counted = _record(instructions=COUNT, environment_id="instructions-abc")
    assert INSTRUCTIONS.series_figure(counted) == ("instr", 197_000.0)
    # A fallback run's count beside its timing leaves the record a time.
    assert (
        INSTRUCTIONS.series_figure(Record.from_json({**counted.to_json(), "environment_id": "abc"}))
        is None
    )
    assert INSTRUCTIONS.series_figure(_record(environment_id="instructions-abc")) is None


def test_a_kind_another_plugin_adds_brings_its_own_column(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "other_kind"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "report.py").write_text(
        "from pytest_torchperf.report.kind_report import Column, KindReport\n"
        "REPORT = KindReport(columns=(Column('joules', 'J/call', 'joules / call',\n"
        "    shown=lambda r: 'joules' in r, cell=lambda r: str(r.get('joules', '-')),\n"
        "    sort_value=lambda r: r.get('joules', -1)),))\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    registry.register(registry.KindSpec("energy", "other_kind", "joules", ("report",)))
    try:
        assert isinstance(kinds.report_part("energy"), KindReport)
        header, row = render_table([_record(joules=3)])
        assert "J/call" in header.split() and " 3  " in row
    finally:
        registry.forget_added()
        sys.modules.pop("other_kind.report", None)
        sys.modules.pop("other_kind", None)
