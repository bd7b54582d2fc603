"""What the ``torchperf`` commands share: tables, the selection by ``-k``, and reading one results
file or a run's shards."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_torchperf.report.html_table import RUN_FIGURES, Figures
from pytest_torchperf.store.baselines import BaselineStore
from pytest_torchperf.store.files import atomic_write_text, why_unwritable
from pytest_torchperf.store.record import Record


def table(rows: list[dict[str, Any]], empty: str) -> str:
    """The rows as a table, every row, column and cell whole (``to_string`` ignores pandas'
    display options), or ``empty``."""
    import pandas as pd

    return str(pd.DataFrame(rows).to_string(index=False)) if rows else empty


def write(path: str, text: str, what: str) -> None:
    """Write ``text`` to ``path`` atomically and say so (``torchperf: WHAT written to PATH``)."""
    resolved = Path(path).resolve()
    try:
        atomic_write_text(resolved, text)
    except OSError as exc:
        raise PathError(
            f"cannot write the {what} to {resolved}: {why_unwritable(resolved, exc)}; give a path in a "
            f"folder you can write"
        ) from None
    print(f"torchperf: {what} written to {resolved}")


def write_reports(
    args: argparse.Namespace,
    records: Sequence[Record],
    line: str,
    coverage_lines: Sequence[str] = (),
    figures: Figures = RUN_FIGURES,
) -> None:
    """Write the HTML report and the markdown summary asked for (``--html``, ``--markdown``),
    headed by ``line``."""
    from pytest_torchperf.report.html import html_report, stored_histories
    from pytest_torchperf.report.markdown import markdown_report

    if args.html:
        histories = stored_histories(Path(args.storage), records)
        page = html_report(records, line, histories, coverage_lines=coverage_lines, figures=figures)
        write(args.html, page, "HTML report")
    if args.markdown:
        write(args.markdown, markdown_report(records, line, coverage_lines), "markdown summary")


class PathError(Exception):
    """A path on the command line is not what the command reads (the message: the remedy)."""


def baseline_store(path: str) -> BaselineStore:
    """The baseline folder at ``path``; a :class:`PathError` naming it and the remedy where there
    is none."""
    if not Path(path).is_dir():
        what = "is a file, not a folder" if Path(path).exists() else "does not exist"
        raise PathError(
            f"baseline folder {path} {what}; point at the folder pytest --torchperf-save wrote "
            f"(default .torchperf)"
        )
    return BaselineStore(Path(path))


def selected(nodeid: str, name: str, pattern: str | None) -> bool:
    return pattern is None or pattern in nodeid or pattern in name


def no_match(pattern: str, measured: Sequence[tuple[str, str]], where: str) -> str:
    """What a command says (on stderr, exit 1) where ``-k pattern`` selected nothing of the
    ``measured`` (test id, name) pairs in ``where``: a misspelt ``-k`` must not read as a
    clean run in CI. A few of them are named, to check the spelling against."""
    import shlex

    pairs = sorted(set(measured))
    listed = ", ".join(f"{nodeid} {name}" for nodeid, name in pairs[:4])
    more = f" and {len(pairs) - 4} more" if len(pairs) > 4 else ""
    held = f"it holds {listed}{more}" if pairs else "it holds none"
    return (
        f"torchperf: -k {shlex.quote(pattern)} matches no measurement in {where} ({held}); "
        f"-k matches a part of a test id or a measurement's name"
    )


def results(paths: Sequence[str], any_commit: bool = False) -> tuple[list[Record], dict[str, Any]]:
    """Records and environments of one results file, or of several merged (shards of a run)."""
    from pytest_torchperf.store.results import read_results

    if len(paths) == 1:
        return read_results(paths[0])
    from pytest_torchperf.report.merge import merge_results

    merged = merge_results(paths, any_commit=any_commit)
    for duplicate in merged.duplicates:
        print(f"torchperf: warning: {duplicate.line()}")
    return list(merged.records), dict(merged.document["torchperf"]["environments"])


def candidates(
    paths: Sequence[str], any_commit: bool = False
) -> tuple[list[Record], dict[str, Any]]:
    from pytest_torchperf.store.results import stored_records

    if len(paths) == 1 and Path(paths[0]).is_dir():
        records = stored_records(paths[0])
        store = BaselineStore(Path(paths[0]))
        return records, {
            r.environment_id: store.environment(r.environment_id)
            for r in records
            if r.environment_id is not None
        }
    folders = [p for p in paths if Path(p).is_dir()]
    if folders:
        raise PathError(
            f"compare: {folders[0]} is a folder; give one baseline folder as the "
            f"candidate, or one or more results files (pytest --torchperf-json)"
        )
    return results(paths, any_commit)


def run_strict(
    paths: Sequence[str], records: Sequence[Record], runs: str = "the run"
) -> str | None:
    """What made the run of these results files (one, or its shards) strict as a whole, as they
    recorded it for its run failure to name (``--torchperf-strict``); None: it was not. Files
    written before runs recorded it, and a baseline folder, are read from their measurements'
    gates."""
    from pytest_torchperf.judge.coverage import strict_run
    from pytest_torchperf.store.results import read_results_document, recorded_strict

    files = bool(paths) and all(Path(p).is_file() for p in paths)
    known, by = (
        recorded_strict([read_results_document(p) for p in paths]) if files else (False, None)
    )
    if known:
        return by
    return f"strict, as {runs} recorded it" if strict_run(records) else None


def some(words: list[str]) -> str:
    """The first four ``words``, and how many more."""
    more = f" and {len(words) - 4} more" if len(words) > 4 else ""
    return ", ".join(words[:4]) + more
