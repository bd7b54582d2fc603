"""What a baseline folder holds, as table rows for ``torchperf list`` and ``torchperf show``:
each environment with its mode, and each stored measurement with its baseline and latest figure
in that mode's unit: a p25 time, or the figure of the kind the environment is filed under, in
the words of its report part (instructions per call for ``--torchperf-instructions`` baselines:
their sessions' time is only the counting run's, never judged). Pure.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import Any

from pytest_torchperf.core.units import format_percent, format_time
from pytest_torchperf.judge.tolerance import MAX_WIDENING, no_gate_hint, stored_baseline
from pytest_torchperf.report.kinds import report_part, report_parts
from pytest_torchperf.store.baselines import BaselineStore
from pytest_torchperf.store.environment import environment_mode
from pytest_torchperf.store.sessions import Session, timed_sessions


def environment_rows(store: BaselineStore) -> list[dict[str, Any]]:
    """One row per environment: its mode, device, torch, threads, and what it holds."""
    summary: dict[str, dict[str, Any]] = {}
    for env_id, nodeid, _name, sessions in store.measurements():
        exact = store.environment(env_id).get("exact") or {}
        row = summary.setdefault(
            env_id,
            {
                "environment": env_id,
                "mode": environment_mode(env_id),
                "device": exact.get("device", "?"),
                "torch": exact.get("torch", "?"),
                "threads": exact.get("threads", "?"),
                "tests": set(),
                "measurements": 0,
                "sessions": 0,
                "last saved (UTC)": "",
            },
        )
        row["tests"].add(nodeid)
        row["measurements"] += 1
        row["sessions"] += len(sessions)
        row["last saved (UTC)"] = max(
            [row["last saved (UTC)"], *(s.timestamp or "" for s in sessions)]
        )
    return [
        {**r, "tests": len(r["tests"]), "last saved (UTC)": saved_time(r["last saved (UTC)"])}
        for r in summary.values()
    ]


def saved_time(timestamp: str | None) -> str:
    """A stored session's time as ``torchperf list`` and ``show`` print it, in UTC (their header
    says so): ``2026-11-29 06:21:36`` (a save writes ``2026-11-29T06:21:36+00:00``); ``?`` where
    none is stored."""
    try:
        moment = datetime.fromisoformat(str(timestamp))
    except ValueError:
        return str(timestamp or "?")
    if moment.tzinfo is None:  # UTC, as torchperf history reads it (not the viewer's zone)
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def measurement_rows(
    store: BaselineStore, selected: Callable[[str, str], bool], env: str | None = None
) -> list[dict[str, Any]]:
    """One row per stored measurement that ``selected(nodeid, name)`` keeps (and of ``env``
    only, when given); its ``notes``: the reason behind a cell, by column (a terminal shows it
    under the table)."""
    rows = []
    for env_id, nodeid, name, sessions in store.measurements():
        if not sessions or not selected(nodeid, name) or (env and env != env_id):
            continue
        latest = sessions[-1]
        speedup = latest.speedup or {}
        mode = environment_mode(env_id)
        shown = figures(sessions, mode)
        # A kind judged on its own figure says its own limit (an instruction count's 1 %).
        limit, why = (
            (shown.pop("judged at"), None)
            if "judged at" in shown
            else compare_limit(sessions, mode)
        )
        untimed = _own_figures(mode) is None and not latest.statistic
        rows.append(
            {
                "environment": env_id,
                "mode": mode,
                "test": nodeid,
                "name": name,  # a variant's is mlp[int8]
                "sessions": session_count(sessions, mode),
                **shown,
                "judged at": limit,
                "speedup": f"x{speedup['median']:.2f}" if speedup else "-",
                "rel-L2": f"{latest.accuracy['rel_l2']:.1e}"
                if latest.accuracy and latest.accuracy.get("rel_l2") is not None
                else "-",
                "saved (UTC)": saved_time(latest.timestamp),
                "commit": str(latest.git_sha or "-")[:8],
                "notes": {
                    "latest": (latest.untimed or "?") if untimed else None,
                    "judged at": why,
                },
            }
        )
    return rows


def _own_figures(mode: str) -> Callable[[Sequence[Session]], dict[str, str]] | None:
    """:attr:`~pytest_torchperf.report.kind_report.KindReport.stored_figures` of the kind an
    environment's ``mode`` names; None for a timed environment."""
    report = report_part(mode)
    return report.stored_figures if report is not None else None


def compare_limit(sessions: Sequence[Session], mode: str) -> tuple[str, str | None]:
    """The timing limit a compare holds this measurement to (its ``max_slowdown`` widened to
    the stored sessions' process noise) or ``no gate`` where that is widened beyond the bound,
    and a note: why it gates so (what ``torchperf show`` tells of a baseline that cannot gate)."""
    timed = timed_sessions(sessions)
    if _own_figures(mode) is not None or not timed:
        return "-", None
    gate = timed[-1].gate or {}
    tolerance = float(gate.get("max_slowdown") or 0.10)
    stored = stored_baseline(
        [float(s.statistic) for s in timed if s.statistic],
        len(timed),
        len(timed),
        tolerance,
        float(gate.get("max_widening", MAX_WIDENING)),
    )
    if stored.wide:
        return "no gate", (
            f"{format_percent(stored.limit)} > {format_percent(stored.bound or 0)}: "
            f"{no_gate_hint(stored.limit, tolerance)}"
        )
    note = "1 session: noise unknown" if stored.noise is None else None
    return format_percent(stored.limit), note


def session_count(sessions: Sequence[Session], mode: str) -> str:
    """``5``, or ``3+2u`` where 2 sessions hold no timing (``torchperf show``'s legend says so):
    what a compare counts ('the 3 stored sessions') is the timed ones."""
    untimed = len(sessions) - len(timed_sessions(sessions))
    if _own_figures(mode) is not None or not untimed:
        return str(len(sessions))
    return f"{len(sessions) - untimed}+{untimed}u"


def figures(sessions: Sequence[Session], mode: str) -> dict[str, str]:
    """The baseline (median over the sessions) and the latest session's figure, in the unit of
    the environment's mode."""
    latest = sessions[-1]
    own = _own_figures(mode)
    if own is not None:
        return own(sessions)
    timed = timed_sessions(sessions)
    # What the kinds stored beside the timing (or instead of it, when it could not time) and a
    # compare may judge by: a --torchperf-fallback save's instruction count.
    beside = "".join(report.stored_note(sessions) for report in report_parts())
    return {
        "baseline": (
            f"{format_time(statistics.median(s.statistic for s in timed if s.statistic))} p25"
            if timed
            else "no timing"
        )
        + beside,
        "latest": f"{format_time(latest.statistic)} p25" if latest.statistic else "no timing",
    }
