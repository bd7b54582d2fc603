"""The HTML report: one self-contained file (inline CSS, JS and SVG; no network) a person opens
after a CI run to see what got slower, by how much, how sure we are and how it trended.

Pure module: it renders the run's records (:meth:`Result.to_record`) plus the stored history of
each measurement (:class:`History`), so the plugin and the ``torchperf report`` command share it.
"""

from __future__ import annotations

import html
import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from pytest_torchperf.judge.labels import outcome_label
from pytest_torchperf.report import svg
from pytest_torchperf.report.html_table import (
    RUN_FIGURES,
    Figures,
    History,
    history_from_sessions,
    id_html,
    measurements_table,
)
from pytest_torchperf.report.terminal import (
    attention_messages,
    count_line,
    sort_records,
)
from pytest_torchperf.store.record import Record

_CSS = """
body{font:14px/1.4 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#111827}
h1{font-size:20px;margin:0 0 4px} h2{font-size:16px;margin:24px 0 8px}
.coverage{font-weight:600;margin:8px 0 0} .coverage-warning{background:#fef3c7;color:#92400e;padding:6px 10px;border-radius:6px;margin:6px 0 0}
.env{color:#4b5563;font-family:ui-monospace,monospace;font-size:12px}
.badges span{display:inline-block;padding:2px 10px;border-radius:10px;margin:8px 6px 0 0;font-weight:600}
.fail{background:#fee2e2;color:#991b1b} .inconclusive{background:#fef3c7;color:#92400e}
.improved{background:#dbeafe;color:#1e40af} .new{background:#ede9fe;color:#5b21b6}
.pass{background:#dcfce7;color:#166534} .measured,.disabled,.removed{background:#f3f4f6;color:#374151}
table{border-collapse:collapse;width:100%;font-size:13px} th,td{padding:4px 6px;border-bottom:1px solid #e5e7eb;text-align:left;vertical-align:middle}
th{cursor:pointer;background:#f9fafb;position:sticky;top:0;user-select:none} th:hover{background:#eef2ff}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.wrap{white-space:normal;min-width:9ch} td.id{min-width:16ch;max-width:30ch;font-size:12px}
td.id .long{overflow-wrap:anywhere} .opt{white-space:nowrap}
td .verdict{display:inline-block;white-space:normal}
.colswitch{margin-left:16px;color:#4b5563;font-size:12px}
@media (max-width:1599px){body:not(.allcols) [data-sec]{display:none}}
@media (min-width:1600px){.colswitch{display:none}}
pre{background:#f9fafb;border:1px solid #e5e7eb;padding:8px;white-space:pre-wrap;font-size:12px;margin:4px 0 12px}
.verdict{padding:1px 8px;border-radius:8px;font-weight:600;white-space:nowrap}
#filter{margin:8px 0;padding:4px 8px;width:320px}
.muted{color:#6b7280}
"""

_JS = """
document.body.dataset.ready='1';
document.querySelectorAll('th[data-col]').forEach(function(th){th.addEventListener('click',function(){
 var table=th.closest('table'),body=table.tBodies[0],col=+th.dataset.col,asc=th.dataset.dir!=='asc';
 table.querySelectorAll('th').forEach(function(h){h.removeAttribute('data-dir')});th.dataset.dir=asc?'asc':'desc';
 var rows=Array.prototype.slice.call(body.rows);
 rows.sort(function(a,b){var x=a.cells[col].dataset.v,y=b.cells[col].dataset.v,nx=parseFloat(x),ny=parseFloat(y);
  var c=(!isNaN(nx)&&!isNaN(ny))?nx-ny:String(x).localeCompare(String(y));return asc?c:-c;});
 rows.forEach(function(r){body.appendChild(r)});});});
var a=document.getElementById('allcols');if(a){a.addEventListener('change',function(){
 document.body.classList.toggle('allcols',a.checked);});}
var f=document.getElementById('filter');if(f){f.addEventListener('input',function(){var q=f.value.toLowerCase();
 Array.prototype.forEach.call(document.querySelectorAll('#results tbody tr'),function(r){
 r.style.display=r.textContent.toLowerCase().indexOf(q)>=0?'':'none';});});}
"""


#: An option name in a message (``--torchperf-save-wait=SECONDS``), kept on one line: a browser
#: breaks after a hyphen, which left ``(--`` at a line's end. A value ends before a sentence's
#: ``:`` or ``.`` (``--torchperf-min-cpu-share=0:`` highlighted the colon).
_OPTION = re.compile(r"--[a-z][a-z0-9-]*(?:=[^\s,;)&]*[^\s,;)&:.])?")


def prose_html(text: str) -> str:
    """A message, escaped, its option names kept whole (``<span class="opt">``)."""
    return _OPTION.sub(lambda m: f'<span class="opt">{m.group(0)}</span>', html.escape(text))


def _attention(records: Sequence[Record]) -> str:
    parts = []
    for record in records:
        if record.outcome not in ("fail", "inconclusive"):
            continue
        messages = attention_messages(record, f"{record.name}: counters changed: ")
        body = "\n".join(messages) or record.outcome
        parts.append(
            f'<h3><span class="verdict {record.outcome}">'
            f"{html.escape(outcome_label(record))}</span> "
            f"{id_html(record.nodeid)} — {id_html(record.name)}</h3>"
            f"<pre>{prose_html(body)}</pre>"
        )
    return "".join(parts)


def _environments(records: Sequence[Record]) -> str:
    """Collapsible fingerprint of each environment measured (the fields baselines are keyed on)."""
    seen: dict[str, Mapping[str, object]] = {}
    for record in records:
        env = record.environment
        if record.environment_id and env is not None:
            seen.setdefault(record.environment_id, env)
    parts = []
    for env_id, env in sorted(seen.items()):
        exact = env.get("exact")
        if not isinstance(exact, Mapping):
            exact = env
        rows = "".join(
            f"<tr><td>{html.escape(str(k))}</td><td>{html.escape(str(v))}</td></tr>"
            for k, v in sorted(exact.items())
        )
        parts.append(
            f"<details><summary>environment {html.escape(env_id)}</summary>"
            f'<table class="fingerprint">{rows}</table></details>'
        )
    return "".join(parts)


def _speedups(records: Sequence[Record]) -> str:
    by_test: dict[str, list[tuple[str, float, float, float]]] = {}
    for record in records:
        speedup = record.speedup
        if speedup:
            # Group by test function and measurement; label bars by variant ("m[int8]" -> "int8").
            name = record.name
            base, _, variant = name.rpartition("[")
            group = f"{record.nodeid.split('[', 1)[0]} — {base or name}"
            by_test.setdefault(group, []).append(
                (
                    variant.rstrip("]") if base else name,
                    speedup["median"],
                    speedup["p25"],
                    speedup["p75"],
                )
            )
    if not by_test:
        return ""
    parts = ["<h2>Variant speedups vs eager (median and IQR of interleaved rounds)</h2>"]
    for test, rows in sorted(by_test.items()):
        parts.append(f"<h3>{html.escape(test)}</h3>{svg.speedup_bars(sorted(rows))}")
    return "".join(parts)


def html_report(
    records: Sequence[Record],
    environment_line: str,
    histories: Mapping[tuple[str, str], History] | None = None,
    traces: Sequence[tuple[str, str]] = (),
    coverage_lines: Sequence[str] = (),
    figures: Figures = RUN_FIGURES,
) -> str:
    """The whole report as one HTML document (failures first; see module docstring).

    ``figures`` names what the rows show: this run against its baseline, or (a report of a
    baseline folder, :data:`STORED_FIGURES`) the latest stored session against earlier ones.

    ``coverage_lines``: what the run gated, then any warning or run failure about it.

    ``histories`` maps ``(nodeid, measurement name)`` to its stored sessions; ``traces`` lists
    ``(label, href)`` of profiler traces written by the run (hrefs relative to the report).
    """
    histories = histories or {}
    ordered = sort_records(records)
    counts = count_line(records) or "no measurements"
    badges = "".join(
        # The class is the outcome's first word: "removed in B" styles as removed (a class
        # attribute of "removed in B" named three classes).
        f'<span class="{html.escape(part.split(" ")[1])}">{html.escape(part)}</span>'
        for part in counts.split(", ")
        if " " in part
    )
    table, toggle = measurements_table(ordered, histories, figures)
    trace_items = "".join(
        f'<li><a href="{html.escape(href, quote=True)}">{html.escape(label)}</a></li>'
        for label, href in traces
    )
    attention = _attention(ordered)
    environments = _environments(records)
    # JSON for scripts: readable with JSON.parse(textContent); "<" escaped so no "</script>" ends it.
    data = json.dumps({"counts": counts, "measurements": len(records)}).replace("<", "\\u003c")
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>torchperf report</title><style>{_CSS}</style></head><body>"
        f"<h1>torchperf report: {html.escape(counts)}</h1>"
        f'<div class="env">{html.escape(environment_line)}</div><div class="badges">{badges}</div>'
        + "".join(
            f'<p class="{"coverage" if i == 0 else "coverage-warning"}">{prose_html(line)}</p>'
            for i, line in enumerate(coverage_lines)
        )
        + environments
        + (f"<h2>Needs attention</h2>{attention}" if attention else "")
        + '<h2>All measurements</h2><input id="filter" placeholder="filter rows (test, name, verdict)">'
        + toggle
        + table
        + '<p class="muted">Click a column to sort. Distribution: box plots of per-call times '
        + (
            "(blue: this run, grey: latest stored baseline session). Trend: stored sessions' p25, "
            "last dot this run (red when it failed).</p>"
            if figures == RUN_FIGURES
            else f"(blue: the {figures.current}, grey: the one before it). Trend: stored "
            "sessions' p25, last dot the latest session. No run happened: nothing here was "
            "judged.</p>"
        )
        + _speedups(ordered)
        + (
            f'<h2>Profiler traces of this run</h2><p class="muted">Open in '
            f"https://ui.perfetto.dev or chrome://tracing.</p><ul>{trace_items}</ul>"
            if trace_items
            else ""
        )
        + f'<script type="application/json" id="torchperf-data">{data}</script>'
        f"<script>{_JS}</script></body></html>\n"
    )


def stored_histories(storage: Path, records: Sequence[Record]) -> dict[tuple[str, str], History]:
    """Stored sessions of each measured record, without the sessions this run itself saved."""
    from pytest_torchperf.store.baselines import BaselineFileError, BaselineStore, same_run

    store = BaselineStore(storage)
    histories = {}
    for record in records:
        env_id = record.environment_id
        if not env_id:
            continue
        try:
            sessions = store.load_sessions(env_id, record.nodeid, record.name)
        except (BaselineFileError, OSError):
            continue  # the test itself already reported the bad file
        sessions = [s for s in sessions if not same_run(s.run_id, record.run_id)]
        histories[(record.nodeid, record.name)] = history_from_sessions(sessions)
    return histories


def run_traces(report_dir: Path, since: float, relative_to: Path) -> list[tuple[str, str]]:
    """``(label, href)`` of the profiler traces written since ``since`` (epoch seconds)."""
    folder = report_dir / "traces"
    if not folder.is_dir():
        return []
    found = []
    for path in sorted(folder.glob("*.json")):
        try:
            if path.stat().st_mtime >= since:
                found.append((path.name, os.path.relpath(path, relative_to)))
        except OSError:
            continue
    return found
