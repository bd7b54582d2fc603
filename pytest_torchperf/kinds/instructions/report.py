"""The ``instructions`` kind's report part: the instruction-count column of a run's tables
(``instr/call``, and a variant's count as a multiple of eager's), a verdict's baseline as a
count, ``torchperf show``'s figures of an instruction environment and ``torchperf history``'s
series of counts. Read from a record's ``instructions`` key, so a ``--torchperf-fallback`` run's
counts show there too. Pure."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from pytest_torchperf.core.json_fields import json_number, json_object
from pytest_torchperf.core.units import format_count
from pytest_torchperf.kinds.instructions.options import DEFAULT_MAX_INCREASE
from pytest_torchperf.report.kind_report import Column, KindReport
from pytest_torchperf.store.environment import INSTRUCTION_ENV_PREFIX
from pytest_torchperf.store.record import Record
from pytest_torchperf.store.sessions import Session


def _counted(record: Record) -> bool:
    return bool(record.extra("instructions"))


def judged_count(record: Record) -> float | None:
    """The instructions per call a verdict judged (where a count above its limit was counted
    again in a fresh process, the lower of the two), else the count taken; None without one."""
    verdict = record.verdict
    if verdict is not None and verdict.basis == "instructions" and verdict.candidate_statistic:
        return verdict.candidate_statistic
    return json_number(json_object(record.extra("instructions")).get("per_call"))


def format_instructions(record: Record) -> str:
    """``197 k`` instructions per call (``x0.45 eager`` appended for a variant): the count the
    verdict judged, so the change beside it is that count's."""
    per_call = judged_count(record) if record.extra("instructions") else None
    if per_call is None:
        return "-"
    text = format_count(per_call)
    vs_eager = json_number(record.extra("instructions_vs_eager"))
    if vs_eager:
        text += f" (x{vs_eager:.2f} eager)"
    return text


def _per_call(record: Record) -> object:
    judged = judged_count(record)
    return -1 if judged is None else judged


def _baseline(value: float | None) -> str:
    """A verdict judged on the count compared it with a stored count."""
    return "-" if value is None else format_count(value)


def stored_figures(sessions: Sequence[Session]) -> dict[str, str]:
    """The median stored count and the latest one (an instruction environment's sessions were
    timed only as the counting run was, under Valgrind, never judged on time), and the limit a
    compare holds the count to: the latest session's ``max_instruction_increase``."""
    counts = [s.instructions["per_call"] for s in sessions if s.instructions]
    last = sessions[-1].per_call_instructions
    limit = json_number((sessions[-1].gate or {}).get("max_instruction_increase"))
    return {
        "baseline": f"{format_count(statistics.median(counts))} instr/call"
        if counts
        else "no count",
        "latest": f"{format_count(last)} instr/call" if last else "no count",
        "judged at": f"{(limit if limit is not None else DEFAULT_MAX_INCREASE) * 100:g}%",
    }


def series_figure(record: Record) -> tuple[str, float] | None:
    """A record filed under the instruction environment is a point of a series of counts; a
    count beside a timing (``--torchperf-fallback``) leaves the record a time."""
    counted = judged_count(record) if record.extra("instructions") else None
    if counted and counted > 0 and str(record.environment_id).startswith(INSTRUCTION_ENV_PREFIX):
        return "instr", float(counted)
    return None


REPORT = KindReport(
    carried=_counted,
    columns=(
        Column(
            key="instructions",
            header="instr/call",
            html_header="instructions / call",
            shown=_counted,
            cell=format_instructions,
            sort_value=_per_call,
        ),
    ),
    # A verdict judged on the count shows a count in the baseline column: not a p25 there.
    headers={"baseline": "baseline"},
    html_headers={"baseline": "baseline (p25, or instr/call where judged on the count)"},
    baseline=_baseline,
    stored_figures=stored_figures,
    series_figure=series_figure,
)
