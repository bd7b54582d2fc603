"""The HTML report's table of all measurements: its columns (which show, which collapse on a
narrow screen), each row's cells and its two inline plots (:mod:`pytest_torchperf.report.svg`),
and the stored history those plots draw on. Pure; the page around it is
:mod:`pytest_torchperf.report.html`.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_torchperf.core.json_fields import json_number
from pytest_torchperf.core.units import format_bytes, format_time
from pytest_torchperf.judge.labels import outcome_label
from pytest_torchperf.report import kinds, svg
from pytest_torchperf.report.kind_report import Column
from pytest_torchperf.report.terminal import (
    format_accuracy,
    format_baseline,
    format_change_of,
    format_flops,
    format_speedup,
)
from pytest_torchperf.store.record import Record, RecordedVerdict, Stats
from pytest_torchperf.store.sessions import Session, timed_sessions
from pytest_torchperf.variants.registry import COMPILED_VARIANTS


@dataclass
class History:
    """Stored sessions of one measurement: statistic per session (oldest first) and labels."""

    statistics: list[float] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    #: Per-call times of the latest stored session (the baseline's distribution).
    latest_times: list[float] = field(default_factory=list)


def history_from_sessions(sessions: Sequence[Session]) -> History:
    """A :class:`History` from stored baseline sessions (as in the baseline files); sessions
    saved without timing have no point on a time trend."""
    timed = [(s, s.statistic) for s in timed_sessions(sessions) if s.statistic]
    return History(
        statistics=[float(statistic) for _, statistic in timed],
        labels=[
            f"{s.timestamp if s.has('timestamp') else '?'} {str(s.git_sha or '')[:8]} p25 "
            f"{format_time(statistic)}".strip()
            for s, statistic in timed
        ],
        latest_times=list(timed[-1][0].times) if timed else [],
    )


@dataclass(frozen=True)
class Figures:
    """What the figures a row draws are: a run's report shows this run against the stored
    baseline; a report of a baseline folder shows the latest stored session against the ones
    before it (no run happened, so nothing may be called "this run")."""

    current: str
    earlier: str


RUN_FIGURES = Figures("this run", "baseline")
STORED_FIGURES = Figures("latest session", "earlier sessions")


@dataclass(frozen=True)
class _Column:
    """A column of the measurements table: its header, whether it is secondary (collapsed on
    narrow screens, see _CSS) and which records have a value there (a column no record has is
    left out: a kind's column where no record carries its figures, variant columns without
    variants)."""

    key: str
    header: str
    secondary: bool = False
    shown: Callable[[Record], bool] = lambda record: True
    #: A measurement kind's column (its cells come from the kind's report part).
    kind: Column | None = None


#: Attribute of a secondary column's cells (hidden on narrow screens unless asked for).
SECONDARY = ' data-sec="1"'


def _counter(name: str) -> Callable[[Record], bool]:
    return lambda record: name in (record.counters or {})


#: The columns in order: what identifies and judges a measurement, the two plots (kept on screen
#: at 1280 px), then the variant columns; the kinds' columns follow them (:func:`_columns`),
#: then the secondary figures.
_MAIN_COLUMNS = [
    _Column("verdict", "verdict"),
    _Column("test", "test"),
    _Column("name", "measurement"),
    _Column("median", "median ± IQR"),
    _Column("baseline", "baseline p25"),
    _Column("change", "change"),
    _Column("distribution", "this run vs baseline"),
    _Column("trend", "trend (p25 per session)"),
    _Column("speedup", "speedup vs eager", shown=lambda r: bool(r.speedup)),
    _Column("accuracy", "rel-L2 vs eager", shown=lambda r: bool(r.accuracy)),
]
_SECONDARY_COLUMNS = [
    _Column("flops", "FLOPs", secondary=True, shown=_counter("flops")),
    _Column("params", "params", secondary=True, shown=_counter("params")),
    _Column("memory", "peak memory", secondary=True, shown=_counter("peak_memory")),
    _Column("build", "build", secondary=True, shown=lambda r: r.build_time is not None),
]


def _columns(records: Sequence[Record]) -> list[_Column]:
    """The columns some record has a value in, in order."""
    kind_columns = [
        _Column(c.key, c.html_header, shown=c.shown, kind=c) for c in kinds.columns(records)
    ]
    every = [*_MAIN_COLUMNS, *kind_columns, *_SECONDARY_COLUMNS]
    return [c for c in every if any(c.shown(r) for r in records)]


#: Where a node id or measurement name may wrap: after a folder's ``/``, before ``::`` and
#: before a parameter's ``[`` (never inside a word: "tes t_gru" read as two words).
_ID_BREAKS = re.compile(r"(?<=/)|(?=::)|(?=\[)")
#: A piece longer than the id column's widest (30ch) may also wrap after an underscore, and a
#: word still longer anywhere, rather than widen the table past the screen.
_ID_PIECE = 30
_WORD_BREAKS = re.compile(r"(?<=_)")


def id_html(text: str) -> str:
    """A node id or measurement name, escaped, with ``<wbr>`` where it may wrap."""
    words = []
    for piece in _ID_BREAKS.split(text):
        words += _WORD_BREAKS.split(piece) if len(piece) > _ID_PIECE else [piece]
    return "<wbr>".join(
        f'<span class="long">{html.escape(word)}</span>'
        if len(word) > _ID_PIECE
        else html.escape(word)
        for word in words
        if word
    )


def _cell(text: str, value: object = None, numeric: bool = False, css: str = "") -> str:
    sort_value = html.escape(str(text if value is None else value), quote=True)
    classes = " ".join(c for c in ("num" if numeric else "", css) if c)
    attribute = f' class="{classes}"' if classes else ""
    return f'<td{attribute} data-v="{sort_value}">{text}</td>'


def _figure(value: Any, text: Callable[[Any], str]) -> str:
    """A figure's cell: ``text(value)``, or ``-`` (sorting first) where the record has none."""
    return _cell("-" if value is None else text(value), -1 if value is None else value, True)


def _not_counted(record: Record) -> str:
    """A FLOPs, parameters or peak-memory cell the record has no figure for: said, with why in
    its tooltip, not a bare dash."""
    once = "FLOPs, parameters and peak memory are counted once per model, on its eager variant"
    if record.variant in COMPILED_VARIANTS:
        why = (
            f"Not counted for the {record.variant} variant: its counters are its graphs, graph "
            f"breaks and recompiles, and the eager ops of its model; {once}."
        )
    elif record.variant != "eager":
        why = (
            f"Not counted for the {record.variant} variant: its counters are the eager ops of "
            f"its model; {once}."
        )
    else:
        why = "Not recorded for this measurement (counters=False or ignore_counters)."
    return f'<span class="muted" title="{html.escape(why, quote=True)}">not counted</span>'


def _counter_cell(record: Record, key: str, text: Callable[[Any], str]) -> str:
    """A counter's cell: ``text(value)``, or :func:`_not_counted` (sorting first)."""
    value = (record.counters or {}).get(key)
    if value is None:
        return _cell(_not_counted(record), -1, True)
    return _cell(text(value), value, True)


def _flops_cell(counters: Mapping[str, object]) -> str:
    """The FLOP figure; a partial one (heavy ops without a formula) is marked, the ops in its
    tooltip (the whole list would widen the table)."""
    if not counters.get("flops_partial"):
        return html.escape(format_flops(counters))
    return (
        f'<span title="{html.escape(format_flops(counters), quote=True)}">'
        f"&ge; {counters['flops']:,} (partial)</span>"
    )


def _row(
    record: Record,
    history: History | None,
    rank: int,
    columns: Sequence[_Column],
    figures: Figures,
) -> str:
    stats = record.stats or Stats()
    verdict = record.verdict or RecordedVerdict()
    counters = record.counters or {}
    speedup = record.speedup or None
    accuracy = record.accuracy or None
    outcome = record.outcome
    failed = outcome == "fail"
    median, iqr = stats.median, stats.iqr
    history = history or History()
    cells = {
        "verdict": _cell(
            f'<span class="verdict {html.escape(outcome)}">{html.escape(outcome_label(record))}'
            f"</span>",
            rank,
        ),
        "test": _cell(id_html(record.nodeid), record.nodeid, css="id"),
        "name": _cell(
            id_html(record.name)
            + (
                f' <span class="muted">[{html.escape(record.group)}]</span>' if record.group else ""
            ),
            record.name,
            css="id",
        ),
        "median": _figure(median, lambda median: f"{format_time(median)} ± {format_time(iqr)}"),
        "baseline": _cell(
            format_baseline(record.verdict, record),
            verdict.baseline_statistic or (record.stored or {}).get("baseline") or -1,
            True,
        ),
        "change": _cell(
            format_change_of(record),
            verdict.ratio if verdict.ratio is not None else -99,
            True,
        ),
        "speedup": _cell(
            format_speedup(speedup), speedup["median"] if speedup else -1, True, css="wrap"
        ),
        "accuracy": _cell(
            format_accuracy(accuracy),
            accuracy.get("rel_l2", -1) if accuracy else -1,
            True,
            css="wrap",
        ),
        "flops": _counter_cell(record, "flops", lambda _: _flops_cell(counters)),
        "params": _counter_cell(record, "params", "{:,}".format),
        "memory": _counter_cell(record, "peak_memory", lambda v: format_bytes(json_number(v))),
        "build": _figure(record.build_time, "{:.1f} s".format),
        "distribution": _cell(
            svg.distribution(
                record.samples, history.latest_times, figures.current, figures.earlier
            ),
            median or -1,
        ),
        "trend": _cell(
            svg.trend(history.statistics, stats.p25, failed, [*history.labels, figures.current]),
            len(history.statistics),
        ),
    }
    for column in columns:
        if column.kind is not None:
            cells[column.key] = _cell(
                html.escape(column.kind.cell(record)), column.kind.sort_value(record), True
            )
    row = "".join(
        cells[c.key].replace("<td", f"<td{SECONDARY}", 1) if c.secondary else cells[c.key]
        for c in columns
    )
    return f'<tr class="{html.escape(outcome)}-row">{row}</tr>'


def measurements_table(
    ordered: Sequence[Record],
    histories: Mapping[tuple[str, str], History],
    figures: Figures = RUN_FIGURES,
) -> tuple[str, str]:
    """The table of all measurements (``ordered``: its rows in order) and the switch that shows
    its secondary columns on a narrow screen (empty when it has none)."""
    columns = _columns(ordered)
    rows = "".join(
        _row(r, histories.get((r.nodeid, r.name)), i, columns, figures)
        for i, r in enumerate(ordered)
    )
    renamed = {
        "distribution": f"{figures.current} vs {figures.earlier}",
        **kinds.renamed_headers(ordered, html=True),
    }
    headers = "".join(
        f'<th data-col="{i}"{SECONDARY if c.secondary else ""}>{renamed.get(c.key, c.header)}</th>'
        for i, c in enumerate(columns)
    )
    secondary = [c.header for c in columns if c.secondary]
    toggle = (
        f'<label class="colswitch"><input type="checkbox" id="allcols"> show '
        f"{', '.join(secondary)} (hidden below 1600 px wide)</label>"
        if secondary
        else ""
    )
    table = f'<table id="results"><thead><tr>{headers}</tr></thead><tbody>{rows}</tbody></table>'
    return table, toggle
