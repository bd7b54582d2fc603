"""The ``ab`` kind's report part: an A/B run's baseline is side A, measured in the same run, so
the tables call it ``side A p25`` and give the change with its 95 % interval over the process
pairs; ``torchperf compare`` replays a record against the side A sessions it carries. Read from
a record's ``ab`` key. Pure."""

from __future__ import annotations

from pytest_torchperf.core.json_fields import json_number, json_object
from pytest_torchperf.report.kind_report import KindReport
from pytest_torchperf.store.record import Record
from pytest_torchperf.store.sessions import Session


def _carried(record: Record) -> bool:
    return bool(record.extra("ab"))


def _interval(record: Record) -> str:
    """`` [+9.8..+15.1%]``: the paired interval of the change, where the pairs gave one."""
    interval = json_object(json_object(record.extra("ab")).get("interval"))
    low, high = json_number(interval.get("low")), json_number(interval.get("high"))
    if not interval or low is None or high is None:
        return ""
    return f" [{low * 100:+.1f}..{high * 100:+.1f}%]"


def _side_a(record: Record) -> list[Session] | None:
    """Side A's sessions: what the engine judged side B against, stored with the record."""
    ab = record.extra("ab")
    if not ab:
        return None
    sessions = json_object(ab).get("a_sessions")
    return [Session.from_json(s) for s in sessions] if isinstance(sessions, list) else []


_HEADERS = {"baseline": "side A p25", "change": "change [95% CI]"}

REPORT = KindReport(
    carried=_carried,
    headers=_HEADERS,
    html_headers=_HEADERS,
    change=_interval,
    carried_sessions=_side_a,
)
