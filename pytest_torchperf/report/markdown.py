"""The markdown summary of a run's measurement records (for a GitHub job summary or a PR
comment). Pure: it works on the records of :meth:`pytest_torchperf.run.result.Result.to_record`,
so it can render any stored run.
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_torchperf.core.units import format_time
from pytest_torchperf.judge.labels import outcome_label
from pytest_torchperf.report import kinds
from pytest_torchperf.report.terminal import (
    count_line,
    explained,
    format_accuracy,
    format_baseline,
    format_change_of,
    format_speedup,
    sort_records,
)
from pytest_torchperf.store.record import Record, RecordedVerdict, Stats


def _md(text: str) -> str:
    """Escape table-breaking characters in markdown cells."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def _verdict_label(record: Record) -> str:
    """The terminal summary's label (:func:`~.summary.outcome_label`) behind an icon."""
    icon = {"fail": "❌", "inconclusive": "⚠️", "improved": "🚀", "new": "🆕", "pass": "✅"}.get(
        record.outcome, ""
    )
    return f"{icon} {outcome_label(record)}".strip()


def markdown_report(
    records: Sequence[Record],
    environment_line: str,
    coverage_lines: Sequence[str] = (),
) -> str:
    """A compact markdown summary: headline counts, what the run gated (``coverage_lines``: the
    line, a warning, why the run failed), failures and inconclusives first, then a table."""
    lines = [
        f"## torchperf: {count_line(records) or 'no measurements'}",
        "",
        f"`{environment_line}`",
        "",
    ]
    if coverage_lines:
        lines += [f"**{_md(coverage_lines[0])}**", ""]
        lines += [f"> ⚠️ {_md(line)}" for line in coverage_lines[1:]]
        lines += [""] if coverage_lines[1:] else []
    attention = [r for r in sort_records(records) if r.outcome in ("fail", "inconclusive")]
    if attention:
        lines += ["### Needs attention", ""]
        for record in attention:
            verdict = record.verdict or RecordedVerdict()
            messages = [*record.counter_changes, *record.failures]
            if verdict.message and (verdict.outcome in ("fail", "inconclusive")):
                messages.insert(0, "\n".join([verdict.message, *explained(record)]))
            lines.append(f"- **`{record.nodeid}`** `{record.name}` ({record.outcome})")
            for message in messages:
                lines += ["  ```", *[f"  {m}" for m in message.splitlines()], "  ```"]
        lines.append("")
    variants = any(r.speedup or r.accuracy for r in records)
    # The kinds' columns and headers, as in the terminal table (a count's column; side A as
    # the baseline of an A/B run).
    columns = kinds.columns(records)
    numeric = [
        "median",
        "p25",
        *(column.header for column in columns),
        kinds.header(records, "baseline", "baseline p25"),
        kinds.header(records, "change", "change"),
    ]
    header = "| verdict | test | name | " + " | ".join(numeric) + " |"
    rule = "|---|---|---|" + "---:|" * len(numeric)
    if variants:
        header += " speedup vs eager | rel-L2 vs eager |"
        rule += "---:|---:|"
    lines += [header, rule]
    for record in sort_records(records):
        stats = record.stats or Stats()
        cells = [
            _verdict_label(record),
            f"`{_md(record.nodeid)}`",
            _md(record.name),
            format_time(stats.median),
            format_time(stats.p25),
            *(column.cell(record) for column in columns),
            format_baseline(record.verdict, record),
            format_change_of(record),
        ]
        if variants:
            cells += [format_speedup(record.speedup), format_accuracy(record.accuracy)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
