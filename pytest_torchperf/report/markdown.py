"""The markdown summary of a run's measurement records (for a GitHub job summary or a PR
comment). Pure: it works on the records of :meth:`pytest_torchperf.run.result.Result.to_record`,
so it can render any stored run.
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_torchperf.judge.labels import outcome_label
from pytest_torchperf.report.terminal import attention_messages, count_line, sort_records, table
from pytest_torchperf.store.record import Record


def _md(text: str) -> str:
    """Escape table-breaking characters in markdown cells."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def _verdict_label(record: Record) -> str:
    """The terminal table's label behind an icon."""
    icon = {
        "fail": "❌",
        "inconclusive": "⚠️",
        "improved": "🚀",
        "new": "🆕",
        "removed": "🗑️",
        "pass": "✅",
    }.get(record.outcome, "")
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
            lines.append(f"- **`{record.nodeid}`** `{record.name}` ({record.outcome})")
            for message in attention_messages(record):
                lines += ["  ```", *[f"  {m}" for m in message.splitlines()], "  ```"]
        lines.append("")
    # The terminal table's figures and headers, behind the verdict, test and name.
    headers, rows = table(records)
    figures = headers[2:-1]
    lines += [
        "| verdict | test | name | " + " | ".join(figures) + " |",
        "|---|---|---|" + "---:|" * len(figures),
    ]
    for record, row in zip(sort_records(records), rows, strict=True):
        cells = [_verdict_label(record), f"`{_md(record.nodeid)}`", _md(record.name), *row[2:-1]]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
