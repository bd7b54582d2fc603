"""The ``ab`` kind's report part: an A/B run's baseline is side A, measured in the same run, so
the tables call it ``side A p25`` and give the change with its 95 % interval over the process
pairs; ``torchperf compare`` replays a record against the side A sessions it carries. Read from
a record's ``ab`` key. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_torchperf.report.kind_report import KindReport
from pytest_torchperf.store.sessions import Session


def _carried(record: Mapping[str, Any]) -> bool:
    return bool(record.get("ab"))


def _interval(record: Mapping[str, Any]) -> str:
    """`` [+9.8..+15.1%]``: the paired interval of the change, where the pairs gave one."""
    interval = (record.get("ab") or {}).get("interval")
    if not interval:
        return ""
    return f" [{interval['low'] * 100:+.1f}..{interval['high'] * 100:+.1f}%]"


def _side_a(record: Mapping[str, Any]) -> list[Session] | None:
    """Side A's sessions: what the engine judged side B against, stored with the record."""
    ab = record.get("ab")
    if not ab:
        return None
    return [Session.from_json(s) for s in ab.get("a_sessions") or []]


_HEADERS = {"baseline": "side A p25", "change": "change [95% CI]"}

REPORT = KindReport(
    carried=_carried,
    headers=_HEADERS,
    html_headers=_HEADERS,
    change=_interval,
    carried_sessions=_side_a,
)
