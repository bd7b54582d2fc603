"""A suite's history: the results files of many runs of main, in commit order, as one series per
measurement with its steps (:mod:`pytest_torchperf.judge.change_points`) and the commits each
step happened between; and the trend page (``torchperf history --html``).

A run is one commit: the records of every results file of the same commit (a run's shards, or
a job retried) are one run's; a measurement found in two of them (a job retried, main run twice)
counts as the median of their figures, and the run says how many there were. Runs are ordered
by their commit's time (then by when the file was written). A measurement's figure per run is
its p25 time per call (the median of its processes' where the run measured in several: a save
measures in five), or its instructions per call in an instruction-count run; environments are
never mixed (a measurement on two runner classes is two series). Pure but for reading the
files.
"""

from __future__ import annotations

import datetime
import html
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_torchperf.core.units import counted, format_time
from pytest_torchperf.judge.change_points import (
    MIN_SEGMENT,
    MIN_STEP,
    THRESHOLD,
    Step,
    change_points,
    noise,
)
from pytest_torchperf.report import svg
from pytest_torchperf.report.kinds import report_parts
from pytest_torchperf.report.merge import short_names
from pytest_torchperf.store.record import Record
from pytest_torchperf.store.results import ResultsFileError, read_results_document, records_of


@dataclass(frozen=True)
class Run:
    """One run of the history: a commit's results."""

    commit: str | None
    #: The commit's time (ISO 8601), else when the results file was written.
    time: str | None
    files: tuple[str, ...]
    #: Every file's records (a measurement twice where two files of the commit measured it).
    records: list[Record]

    @property
    def repeated(self) -> int:
        """How many measurements more than one of the run's files measured."""
        keys = [(r.environment_id, r.nodeid, r.name) for r in self.records]
        return len(keys) - len(set(keys))

    @property
    def short(self) -> str:
        """The commit's short id (or the file, outside git)."""
        return self.commit[:10] if self.commit else self.files[0]


@dataclass(frozen=True)
class Series:
    """One measurement's figure over the runs that measured it."""

    environment_id: str
    nodeid: str
    name: str
    #: ``s`` (p25 seconds per call) or ``instr`` (instructions per call).
    unit: str
    #: Indexes into the history's runs, and the figure in each.
    runs: tuple[int, ...]
    values: tuple[float, ...]
    steps: tuple[Step, ...]
    noise: float
    #: Times over the machine's speed (the calibration kernel), in seconds at its median speed.
    normalised: bool = False

    def label(self) -> str:
        return f"{self.nodeid} {self.name}"

    def noise_text(self) -> str:
        """The noise between runs as the tables show it; ``-`` for a series of one run (its
        :attr:`noise` is then only the floor, no measured figure)."""
        return f"{self.noise * 100:.2g}%" if len(self.values) > 1 else "-"


def result_files(paths: Sequence[Path | str]) -> list[Path]:
    """The results files under ``paths`` (folders are searched recursively for ``*.json``)."""
    found: list[Path] = []
    for path in map(Path, paths):
        if path.is_dir():
            found += sorted(p for p in path.rglob("*.json") if p.is_file())
        else:
            found.append(path)
    if not found:
        raise ResultsFileError(
            f"no results files under {', '.join(map(str, paths))}: keep each run's "
            f"pytest --torchperf-json file there (docs/history.md)"
        )
    return sorted({path.resolve() for path in found})  # a file named twice is read once


def read_runs(paths: Sequence[Path | str]) -> tuple[list[Run], list[str]]:
    """The runs of the history, oldest first, and what was left out (files under the folders
    that are not results files, each with the reason)."""
    by_commit: dict[str, list[tuple[Path, dict[str, Any]]]] = {}
    left_out: list[str] = []
    explicit = {Path(p).resolve() for p in paths if not Path(p).is_dir()}
    for path in result_files(paths):
        try:
            doc = read_results_document(path)
        except ResultsFileError as exc:
            if path in explicit:
                raise
            left_out.append(str(exc))  # another JSON file in the folder
            continue
        commit = (doc.get("commit_info") or {}).get("id") or f"file:{path}"
        by_commit.setdefault(commit, []).append((path, doc))
    if not by_commit:
        raise ResultsFileError(
            f"no results files under {', '.join(map(str, paths))} ({len(left_out)} other JSON "
            f"files): keep each run's pytest --torchperf-json file there (docs/history.md)"
        )
    runs: list[tuple[tuple[datetime.datetime, datetime.datetime], Run]] = []
    for commit, parts in by_commit.items():
        docs = [doc for _, doc in parts]
        info = docs[0].get("commit_info") or {}
        written = max(str(doc.get("datetime") or "") for doc in docs)
        records = [record for doc in docs for record in records_of(doc)]
        names = short_names([p for p, _ in parts])  # shards' results.json: by their folders
        run = Run(
            None if commit.startswith("file:") else commit,
            str(info.get("time") or written) or None,
            tuple(names),
            records,
        )
        # By the commit's time, then by when the file was written, both in UTC (times of
        # commits made in different time zones compare as instants, not as text).
        runs.append(((_instant(info.get("time") or written), _instant(written)), run))
    runs.sort(key=lambda pair: pair[0])
    return [run for _, run in runs], left_out


def _instant(text: Any) -> datetime.datetime:
    try:
        moment = datetime.datetime.fromisoformat(str(text))
    except ValueError:
        return datetime.datetime.min.replace(tzinfo=datetime.timezone.utc)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return moment.astimezone(datetime.timezone.utc)


def _figure(record: Record) -> tuple[str, float, float | None] | None:
    """A record's figure for its series: the unit, the figure, and the figure over the machine's
    speed when the record has it (None: it has not).

    A kind whose figure is not a time gives its own (an instruction count: ``instr``).

    Time is the run's p25 per call, or the median of its processes' where it measured in
    several (a save: five). The machine's speed is the calibration kernel each CPU process timed
    beside its blocks: each process's p25 is divided by its own kernel time before the median
    (benchmarks/history_steps.py: on a 2-vCPU VM this finds +10 % steps in 81 % of series
    instead of 63 %, with a sixth of the false steps).
    """
    for report in report_parts():
        # A kind's own figure (a count filed under the instruction environment) is not a time.
        kind_figure = report.series_figure(record)
        if kind_figure is not None:
            return kind_figure[0], kind_figure[1], None
    p25 = record.stats.p25 if record.stats else None
    if not p25 or p25 <= 0:
        return None
    own: list[tuple[float, float | None]] = [(float(p25), record.calibration)]
    others: list[tuple[float, float | None]] = []
    for sampled in record.passes:
        statistics_, calibrations = sampled.process_statistics, sampled.process_calibrations
        if not sampled.fresh and statistics_:
            others = list(zip(statistics_, calibrations, strict=False))
            if len(calibrations) != len(statistics_):
                others = [(s, None) for s in statistics_]
            break
    processes = [(s, c) for s, c in [*others, *own] if s > 0]
    if not processes:
        return None
    figure = statistics.median(s for s, _ in processes)
    per_speed = [s / float(c) for s, c in processes if c and s > 0]
    return "s", figure, statistics.median(per_speed) if len(per_speed) == len(processes) else None


def series_of(
    runs: Sequence[Run],
    *,
    pattern: str | None = None,
    threshold: float = THRESHOLD,
    min_step: float = MIN_STEP,
    min_segment: int = MIN_SEGMENT,
    normalise: bool = True,
) -> list[Series]:
    """Every measurement's series (those whose test id or name contain ``pattern``), with its
    steps; measurements with steps first.

    With ``normalise``, a timed series whose every run has the machine's speed is judged on
    time over that speed, shown in seconds at the series' median speed."""
    points: dict[tuple[str, str, str, str], list[tuple[int, float, float | None]]] = {}
    for index, run in enumerate(runs):
        figures: dict[tuple[str, str, str, str], list[tuple[float, float | None]]] = {}
        for record in run.records:
            if pattern and pattern not in record.nodeid and pattern not in record.name:
                continue
            figure = _figure(record)
            if figure is None:
                continue
            unit, value, per_speed = figure
            key = (record.environment_id or "-", record.nodeid, record.name, unit)
            figures.setdefault(key, []).append((value, per_speed))
        for key, measured in figures.items():
            # Measured twice in one commit's run (a job retried): the median of the two, so
            # that neither a retried slow run nor its retry alone makes the run's figure.
            speeds = [r for _, r in measured if r is not None]
            points.setdefault(key, []).append(
                (
                    index,
                    statistics.median(v for v, _ in measured),
                    statistics.median(speeds) if speeds else None,
                )
            )
    found = []
    for (env_id, nodeid, name, unit), triples in points.items():
        normalised = normalise and all(r is not None for _, _, r in triples)
        if normalised:
            speed = statistics.median(v / r for _, v, r in triples if r)
            values = [float(r) * speed for _, _, r in triples if r is not None]
        else:
            values = [v for _, v, _ in triples]
        steps = change_points(
            values,
            threshold=threshold,
            min_step=min_step,
            min_segment=min_segment,
            one_sided=unit == "s" and not normalised,  # raw times: noise only adds
        )
        found.append(
            Series(
                env_id,
                nodeid,
                name,
                unit,
                tuple(i for i, _, _ in triples),
                tuple(values),
                tuple(steps),
                noise(values),
                normalised,
            )
        )
    found.sort(key=lambda s: (not s.steps, s.environment_id, s.nodeid, s.name))
    return found


def format_figure(value: float, unit: str) -> str:
    return f"{value:,.0f} instr" if unit == "instr" else format_time(value)


def _between(series: Series, runs: Sequence[Run], index: int) -> str:
    """The commits between run ``index - 1`` and run ``index`` of the series."""
    before, after = runs[series.runs[index - 1]], runs[series.runs[index]]
    if before.commit and after.commit:
        return (
            f"between commits {before.short} and {after.short} "
            f"(git log {before.short}..{after.short})"
        )
    return f"between {before.short} and {after.short}"


def step_line(series: Series, step: Step, runs: Sequence[Run]) -> str:
    """What a step says: how much, between which runs and commits, how sure; and the range one
    run further, with that run's figures, when a run next to the step fits the other side's
    level nearly as well or lies far off its own (:attr:`Step.candidates`)."""
    line = (
        f"{series.label()}: {step.change * 100:+.1f}% "
        f"({format_figure(step.before, series.unit)} -> {format_figure(step.after, series.unit)}) "
        f"from run {step.index + 1} of {len(series.values)} on, "
        f"{_between(series, runs, step.index)}"
    )
    for other, run in ((step.index + 1, step.index), (step.index - 1, step.index - 1)):
        if other in step.candidates and other != step.index:
            value = series.values[run]
            line += (
                f"; or one run {'later' if other > step.index else 'earlier'}, "
                f"{_between(series, runs, other)}: run {run + 1} "
                f"({runs[series.runs[run]].short}) measured {format_figure(value, series.unit)}, "
                f"{(value / step.before - 1) * 100:+.0f}% from the level before the step and "
                f"{(value / step.after - 1) * 100:+.0f}% from the level after it"
            )
    return f"{line}; {step.score:.1f} standard errors, noise {series.noise * 100:.2g}% between runs"


def history_html(series: Sequence[Series], runs: Sequence[Run], title: str) -> str:
    """The trend page: each measurement's series with its steps marked (steps first)."""
    rows = []
    for s in series:
        labels = [f"{runs[i].short} {runs[i].time or ''}".strip() for i in s.runs]
        chart = svg.trend(s.values, None, labels=labels, marks=[step.index for step in s.steps])
        steps = "<br>".join(html.escape(step_line(s, step, runs)) for step in s.steps)
        rows.append(
            f"<tr><td>{html.escape(s.nodeid)}</td><td>{html.escape(s.name)}</td>"
            f"<td>{html.escape(s.environment_id)}</td><td>{len(s.values)}</td>"
            f"<td>{html.escape(format_figure(s.values[-1], s.unit))}</td>"
            f"<td>{s.noise_text()}</td><td>{chart}</td><td>{steps or '-'}</td></tr>"
        )
    with_steps = sum(1 for s in series if s.steps)
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>"
        "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#111827}"
        "table{border-collapse:collapse;width:100%;font-size:13px}"
        "th,td{padding:4px 6px;border-bottom:1px solid #e5e7eb;text-align:left;vertical-align:middle}"
        "th{background:#f9fafb}.muted{color:#6b7280}</style></head><body>"
        f"<h1>{html.escape(title)}</h1>"
        f"<p>{counted(len(runs), 'run')}, {counted(len(series), 'measurement')}, "
        f"{with_steps} with steps. "
        '<span class="muted">Dots: each run\'s figure (hover for the commit); red lines: '
        "steps, at the first run after them.</span></p>"
        "<table><thead><tr><th>test</th><th>name</th><th>environment</th><th>runs</th>"
        "<th>latest</th><th>noise</th><th>trend</th><th>steps</th></tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table></body></html>\n"
    )


def still_slower(series: Series, min_step: float = MIN_STEP) -> Step | None:
    """The slowdown step the series has not recovered from: its last level is still ``min_step``
    or more above the level before that step (None: every slowdown was undone). A step that
    lost part of an earlier improvement counts too: it is a slowdown of the code as it was."""
    if not series.steps:
        return None
    final = series.steps[-1].after
    for step in series.steps:
        if step.change > 0 and final >= step.before * (1 + min_step):
            return step
    return None
