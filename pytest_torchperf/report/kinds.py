"""The measurement kinds' report parts (:class:`~pytest_torchperf.report.kind_report.KindReport`),
found through the registry (:mod:`pytest_torchperf.kinds`): the reports ask these what a kind's
figures add to a table, never the kind's name. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from pytest_torchperf.kinds import part, parts, specs
from pytest_torchperf.report.kind_report import Column, KindReport
from pytest_torchperf.store.record import Record
from pytest_torchperf.store.sessions import Session


def report_parts() -> tuple[KindReport, ...]:
    """Every kind's report part, in the registry's order (kinds without one are left out)."""
    return tuple(module.REPORT for module in parts("report"))


def report_part(name: str) -> KindReport | None:
    """The report part of the kind called ``name`` (a verdict's basis, an environment's mode);
    None when it has none, or no kind is called so (a file written with another plugin's kind:
    its figures read as times rather than stop the report)."""
    module = next((part(spec, "report") for spec in specs() if spec.name == name), None)
    report: KindReport | None = module.REPORT if module is not None else None
    return report


def columns(records: Iterable[Record]) -> list[Column]:
    """The kinds' columns some record has a value in, in the registry's order."""
    records = list(records)
    return [
        column
        for report in report_parts()
        for column in report.columns
        if any(column.shown(record) for record in records)
    ]


def renamed_headers(records: Iterable[Record], html: bool = False) -> dict[str, str]:
    """The headers the kinds whose figures ``records`` carry give the tables' columns, by the
    column they rename (``baseline``, ``change``): the terminal and markdown tables', or with
    ``html`` the HTML table's."""
    records = list(records)
    renamed: dict[str, str] = {}
    for report in report_parts():
        if any(report.carried(record) for record in records):
            for column, text in (report.html_headers if html else report.headers).items():
                renamed.setdefault(column, text)
    return renamed


def header(records: Iterable[Record], column: str, default: str) -> str:
    """The terminal and markdown header of ``column`` (``baseline``, ``change``) for a table of
    ``records``: a kind whose figures they carry may name it (A/B: ``side A p25``)."""
    return renamed_headers(records).get(column, default)


def baseline_wording(basis: str | None) -> Callable[[float | None], str] | None:
    """How the baseline figure of a verdict judged on ``basis`` (the name of the kind whose
    figure judged it) reads, or None where it is a time (a verdict from a file without a
    basis, too)."""
    report = report_part(basis) if basis is not None else None
    return report.baseline if report is not None else None


def change_suffix(record: Record) -> str:
    """What the kinds add after a record's change (an A/B run's interval), or ""."""
    return "".join(report.change(record) for report in report_parts())


def carried_sessions(record: Record) -> list[Session] | None:
    """The sessions a record carries as its own baseline (an A/B run's side A), or None."""
    for report in report_parts():
        sessions = report.carried_sessions(record)
        if sessions is not None:
            return sessions
    return None
