"""The ``torchperf`` command: the plugin's gate and reports over files it already wrote.

    torchperf list    [--storage DIR]                      environments and what they hold
    torchperf show    [--storage DIR] [-k TEXT]            stored measurements, one line each
    torchperf compare BASELINE CANDIDATE [options]         exit 1 when a measurement regressed
    torchperf report  [--storage DIR] [--results FILE...] [--html PATH] [--markdown PATH]
    torchperf accept  RESULTS... [--storage DIR] [-k TEXT] [--reset]
    torchperf merge   RESULTS... [-o FILE] [--storage DIR] [--html PATH] [--markdown PATH]
    torchperf history RESULTS_OR_DIR... [-k TEXT] [--html PATH] [--fail-on-slowdown]
    torchperf bisect  GOOD BAD -k TEST [--mode instructions|ab|counters] [-- PYTEST_ARGS]

BASELINE is a baseline folder (``.torchperf``); CANDIDATE a results file written by
``pytest --torchperf-json`` or another baseline folder (its latest sessions). ``compare`` uses
the same judge, counter diff and drift checks as ``pytest --torchperf-compare`` (without the
confirming re-measure, which needs the model: the candidate's samples are final). Tables are
printed with pandas.

Where a command takes several results files (the shards of one run split over runners), it
reads them as ``merge`` joins them (``pytest_torchperf.report.merge``): a measurement in two
shards counts once, shards of different commits are refused.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_torchperf.core.errors import OptionError
from pytest_torchperf.core.units import format_change
from pytest_torchperf.judge.change_points import MIN_STEP, THRESHOLD
from pytest_torchperf.judge.coverage import coverage, coverage_line, weak_gate_warning
from pytest_torchperf.judge.replay import accept_problem
from pytest_torchperf.options.values import parse_fraction, parse_share
from pytest_torchperf.report.stored import environment_rows, measurement_rows
from pytest_torchperf.report.terminal import format_instructions
from pytest_torchperf.store.baselines import BaselineFileError, BaselineStore, same_run
from pytest_torchperf.store.files import atomic_write_text


def _table(rows: list[dict[str, Any]], empty: str) -> str:
    import pandas as pd

    if not rows:
        return empty
    with pd.option_context(
        "display.max_rows",
        None,
        "display.max_columns",
        None,
        "display.width",
        200,
        "display.max_colwidth",
        70,
    ):
        return str(pd.DataFrame(rows).to_string(index=False))


def _fmt_time(value: float | None) -> str:
    from pytest_torchperf.core.units import format_time

    return format_time(value)


def _selected(nodeid: str, name: str, pattern: str | None) -> bool:
    return pattern is None or pattern in nodeid or pattern in name


def cmd_list(args: argparse.Namespace) -> int:
    rows = environment_rows(BaselineStore(Path(args.storage)))
    print(_table(rows, f"no baselines under {args.storage}"))
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    rows = measurement_rows(
        BaselineStore(Path(args.storage)),
        lambda nodeid, name: _selected(nodeid, name, args.k),
        args.env,
    )
    print(_table(rows, "no stored measurement matches"))
    return 0


def _results(
    paths: Sequence[str], any_commit: bool = False
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Records and environments of one results file, or of several merged (shards of a run)."""
    from pytest_torchperf.store.results import read_results

    if len(paths) == 1:
        return read_results(paths[0])
    from pytest_torchperf.report.merge import merge_results

    merged = merge_results(paths, any_commit=any_commit)
    for duplicate in merged.duplicates:
        print(f"torchperf: warning: {duplicate.line()}")
    return merged.records, dict(merged.document["torchperf"]["environments"])


def _candidates(
    paths: Sequence[str], any_commit: bool = False
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    from pytest_torchperf.store.results import stored_records

    if len(paths) == 1 and Path(paths[0]).is_dir():
        records = stored_records(paths[0])
        store = BaselineStore(Path(paths[0]))
        return records, {
            r["environment_id"]: store.environment(r["environment_id"]) for r in records
        }
    folders = [p for p in paths if Path(p).is_dir()]
    if folders:
        raise SystemExit(
            f"torchperf compare: {folders[0]} is a folder; give one baseline folder as the "
            f"candidate, or one or more results files (pytest --torchperf-json)"
        )
    return _results(paths, any_commit)


def cmd_compare(args: argparse.Namespace) -> int:
    from pytest_torchperf.judge.replay import replay

    records, environments = _candidates(args.candidate, args.any_commit)
    # An A/B run's records carry their side A: they need no baseline folder.
    if not Path(args.baseline).is_dir() and not all(
        r.get("ab") for r in records if r.get("session")
    ):
        print(
            f"torchperf: baseline folder {args.baseline} does not exist; point at the folder "
            f"pytest --torchperf-save wrote (default .torchperf)",
            file=sys.stderr,
        )
        return 2
    store = BaselineStore(Path(args.baseline))
    rows, details, failed = [], [], 0
    judged: list[dict[str, Any]] = []
    for record in records:
        if not _selected(record["nodeid"], record["name"], args.k) or not record.get(
            "environment_id"
        ):
            continue
        if not record.get("session"):
            continue  # not gated (torchperf_timer without gate=True) or not timed
        sessions = (
            # An A/B run's record carries its own side A; stored baselines play no part.
            list(record["ab"].get("a_sessions") or [])
            if record.get("ab")
            else [
                s
                for s in store.load_sessions(
                    record["environment_id"], record["nodeid"], record["name"]
                )
                if not same_run(s.get("run_id"), record.get("run_id"))
            ]
        )
        result = replay(
            record,
            sessions,
            store=store,
            environment=environments.get(record["environment_id"]),
            max_slowdown=args.max_slowdown,
            min_cpu_share=args.min_cpu_share,
            max_spread=args.max_spread,
            max_neighbour_load=args.max_neighbour_load,
            max_instruction_increase=args.max_instruction_increase,
        )
        failed += result.outcome == "fail"
        judged.append(
            {"outcome": result.outcome, "verdict": result.verdict.to_dict(), "gated": result.gated}
        )
        rows.append(
            {
                "test": record["nodeid"],
                "name": record["name"],
                "outcome": result.outcome,
                "p25": _fmt_time((record.get("stats") or {}).get("p25")),
                **(
                    {"instr/call": format_instructions(record)}
                    if record.get("instructions")
                    else {}
                ),
                "change": format_change(result.verdict.ratio),
                "verdict": result.label,
            }
        )
        if result.outcome in ("fail", "inconclusive", "new"):
            details.append(result.verdict.message)
            if result.counter_changes:
                details.append(
                    f"{record['name']}: counters changed vs baseline: "
                    f"{'; '.join(result.counter_changes)}"
                )
            details += [f for f in result.failures if f not in details]
        details += [w for w in result.warnings if w not in details]
    if any("instr/call" in row for row in rows):  # an instruction-count run's records
        rows = [{**row, "instr/call": row.get("instr/call", "-")} for row in rows]
    print(_table(rows, "no measurement to compare"))
    for line in details:
        print(line)
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["outcome"]] = counts.get(row["outcome"], 0) + 1
    print(
        "torchperf: "
        + (", ".join(f"{n} {o}" for o, n in sorted(counts.items())) or "nothing compared")
    )
    cov = coverage(judged, comparing=True)
    if cov is not None:
        print(f"torchperf: {coverage_line(cov)}")
        warning = weak_gate_warning(cov)
        if warning:
            print(f"torchperf: warning: {warning}")
    return 1 if failed else 0


def cmd_report(args: argparse.Namespace) -> int:
    from pytest_torchperf.report.html import html_report, stored_histories
    from pytest_torchperf.report.markdown import markdown_report
    from pytest_torchperf.store.results import stored_records

    if not args.html and not args.markdown:
        raise SystemExit("torchperf report: give --html PATH and/or --markdown PATH")
    records = (
        _results(args.results, args.any_commit)[0] if args.results else stored_records(args.storage)
    )
    line = f"torchperf report of {' '.join(args.results or [args.storage])}"
    if args.html:
        path = Path(args.html).resolve()
        atomic_write_text(
            path, html_report(records, line, stored_histories(Path(args.storage), records))
        )
        print(f"torchperf: HTML report written to {path}")
    if args.markdown:
        path = Path(args.markdown).resolve()
        atomic_write_text(path, markdown_report(records, line))
        print(f"torchperf: markdown summary written to {path}")
    return 0


def cmd_accept(args: argparse.Namespace) -> int:
    records, environments = _results(args.results, args.any_commit)
    store = BaselineStore(Path(args.storage))
    accepted, refused = 0, 0
    for record in records:
        if not _selected(record["nodeid"], record["name"], args.k):
            continue
        session, env_id = record.get("session"), record.get("environment_id")
        environment = (environments.get(env_id) if env_id else None) or store.environment(
            env_id or ""
        )
        if not session or not env_id or not environment:
            print(
                f"torchperf: {record['nodeid']} {record['name']}: nothing to accept (not timed, "
                f"e.g. --torchperf-disable, or an ungated torchperf_timer)"
            )
            continue
        problem = accept_problem(session)
        if problem and not args.force:
            print(
                f"torchperf: {record['nodeid']} {record['name']}: not accepted: {problem}; the "
                f"plugin would not save it either (--force accepts it anyway)"
            )
            refused += 1
            continue
        store.record(
            env_id, environment, record["nodeid"], record["name"], session, reset=args.reset
        )
        accepted += 1
        print(
            f"torchperf: accepted {record['nodeid']} {record['name']} "
            f"(p25 {_fmt_time(session['statistic'])}) into {store.root / env_id}"
        )
    print(
        f"torchperf: {accepted} measurement{'s' if accepted != 1 else ''} accepted"
        + ("" if accepted or refused else " (nothing timed matched -k)")
        + (
            "; accepted sessions carry no op table (explanations of a later slowdown will "
            "list the top ops without a diff)"
            if accepted
            else ""
        )
    )
    if refused:
        print(
            f"torchperf: {refused} matching measurement{'s' if refused != 1 else ''} NOT accepted "
            f"(see above): the stored baseline still differs from this run there"
        )
    return 0 if accepted and not refused else 1


def cmd_merge(args: argparse.Namespace) -> int:
    """One results file and one report from a run's shards; exit 1 as a compare would, and for
    measurements with a baseline that no shard measured."""
    import json

    from pytest_torchperf.judge.coverage import run_failure, strict_run
    from pytest_torchperf.report import terminal
    from pytest_torchperf.report.merge import merge_results, missing_measurements

    merged = merge_results(args.results, any_commit=args.any_commit)
    records = merged.records
    shards = ", ".join(f"{file}: {n}" for file, n in merged.shards)
    print(
        f"torchperf: merged {len(merged.shards)} results files ({shards} measurements) into "
        f"{len(records)} measurements"
    )
    for env_id, files in merged.environments.items():
        group = [r for r in records if r.get("environment_id") == env_id]
        if len(merged.environments) > 1:
            print(f"environment {env_id} ({len(group)} measurements, from {', '.join(files)}):")
        for line in terminal.render(group):
            print(line)
    for line in terminal.detail_lines(records):
        print(line)
    for duplicate in merged.duplicates:
        print(f"torchperf: warning: {duplicate.line()}")
    storage = Path(args.storage)
    missing = missing_measurements(records, BaselineStore(storage)) if storage.is_dir() else []
    if not storage.is_dir():
        if not args.allow_missing:
            print(
                f"torchperf: no baseline folder at {storage}: without it the merge cannot tell "
                f"whether a shard's results are missing. Give the folder the shards compared "
                f"against with --storage (check out the repository in the merge job), or pass "
                f"--allow-missing",
                file=sys.stderr,
            )
            return 2
        print(
            f"torchperf: warning: no baseline folder at {storage}: measurements that no shard "
            f"ran are not listed (--allow-missing)"
        )
    if missing:
        shown = [f"{nodeid} {name}" for _, nodeid, name in missing]
        print(
            f"torchperf: {len(missing)} measurement{'s' if len(missing) != 1 else ''} with a "
            f"baseline in {storage} {'have' if len(missing) != 1 else 'has'} a result in no "
            f"shard: {', '.join(shown[:10])}{f' and {len(shown) - 10} more' if len(shown) > 10 else ''}. "
            f"A shard's results file is missing (a runner failed, or its file was not collected) "
            f"or these tests did not run"
            + (
                " (--allow-missing: not failing)"
                if args.allow_missing
                else "; if they were left out on purpose, pass --allow-missing"
            )
        )
    print(f"torchperf: {terminal.count_line(records) or 'no measurements'}")
    cov = merged.coverage
    failure = run_failure(cov, strict_run(records)) if cov is not None else None
    coverage_lines = [coverage_line(cov)] if cov is not None else []
    if failure:
        coverage_lines.append(f"run failed: {failure}")
    elif cov is not None and weak_gate_warning(cov):
        coverage_lines.append(f"warning: {weak_gate_warning(cov)}")
    for line in coverage_lines:
        print(f"torchperf: {line}")
    title = (
        f"torchperf: {len(merged.shards)} shards merged ({', '.join(f for f, _ in merged.shards)})"
    )
    if args.output:
        path = Path(args.output).resolve()
        atomic_write_text(path, json.dumps(merged.document, indent=2) + "\n")
        print(f"torchperf: merged results written to {path}")
    if args.html:
        from pytest_torchperf.report.html import html_report, stored_histories

        path = Path(args.html).resolve()
        atomic_write_text(
            path,
            html_report(
                records, title, stored_histories(storage, records), coverage_lines=coverage_lines
            ),
        )
        print(f"torchperf: HTML report written to {path}")
    if args.markdown:
        from pytest_torchperf.report.markdown import markdown_report

        path = Path(args.markdown).resolve()
        atomic_write_text(path, markdown_report(records, title, coverage_lines))
        print(f"torchperf: markdown summary written to {path}")
    failed = any(r["outcome"] == "fail" for r in records)
    return 1 if failed or failure or (missing and not args.allow_missing) else 0


def cmd_history(args: argparse.Namespace) -> int:
    """Each measurement's series over main's runs, its steps and their commits."""
    from pytest_torchperf.report.history import (
        format_figure,
        history_html,
        read_runs,
        series_of,
        step_line,
        still_slower,
    )

    runs, left_out = read_runs(args.paths)
    for why in left_out:
        print(f"torchperf: warning: left out: {why}")
    series = series_of(
        runs,
        pattern=args.k,
        threshold=args.threshold,
        min_step=args.min_step,
        normalise=not args.raw,
    )
    first, last = runs[0], runs[-1]
    environments = {s.environment_id for s in series}
    normalised = sum(1 for s in series if s.normalised)
    print(
        f"torchperf: history of {len(runs)} runs ({first.short} {first.time or ''} .. "
        f"{last.short} {last.time or ''}), {len(series)} measurements in "
        f"{len(environments)} environment{'s' if len(environments) != 1 else ''}"
        + (
            f"; times of {normalised} over the machine's speed (calibration kernel; --raw: as "
            f"measured)"
            if normalised
            else ""
        )
    )
    for s in series:
        for step in s.steps:
            print(step_line(s, step, runs))
    rows = [
        {
            "test": s.nodeid,
            "name": s.name,
            "runs": len(s.values),
            "latest": format_figure(s.values[-1], s.unit),
            "noise": f"{s.noise * 100:.2g}%",
            "steps": ", ".join(
                f"{st.change * 100:+.1f}% at {runs[s.runs[st.index]].short}" for st in s.steps
            )
            or "-",
        }
        for s in series
    ]
    print(_table(rows, "no measurement matches"))
    steps = [(s, step) for s in series for step in s.steps]
    slower = sum(1 for _, step in steps if step.change > 0)
    print(
        f"torchperf: {len(steps)} step{'s' if len(steps) != 1 else ''} in "
        f"{sum(1 for s in series if s.steps)} of {len(series)} measurements ({slower} slower, "
        f"{len(steps) - slower} faster)"
    )
    if args.html:
        path = Path(args.html).resolve()
        atomic_write_text(path, history_html(series, runs, f"torchperf history: {len(runs)} runs"))
        print(f"torchperf: trend page written to {path}")
    unrecovered = [(s, still_slower(s, args.min_step)) for s in series]
    slow = [(s, step) for s, step in unrecovered if step is not None]
    if args.fail_on_slowdown and slow:
        names = ", ".join(f"{s.label()} (since {runs[s.runs[st.index]].short})" for s, st in slow)
        print(
            f"torchperf: {len(slow)} measurement{'s are' if len(slow) != 1 else ' is'} still "
            f"slower than before a step: {names} (--fail-on-slowdown)"
        )
        return 1
    return 0


def cmd_bisect(args: argparse.Namespace) -> int:
    """The first commit between GOOD and BAD where the selected perf tests got slower."""
    from pytest_torchperf.run.bisect import Target, bisect, default_mode

    pytest_args = [*(["-k", args.k] if args.k else []), *args.pytest_args]
    if not pytest_args:
        raise SystemExit(
            "torchperf bisect: select the perf tests to run at each revision with -k TEST (or "
            "give pytest arguments after --): bisecting the whole suite takes hours"
        )
    mode = args.mode or default_mode()
    target = Target(mode, tuple(pytest_args), Path.cwd(), timeout=args.timeout)
    found = bisect(target, args.good, args.bad)
    runs = len(found.steps) + (1 if mode == "ab" else 2)
    first = found.first_bad
    if not found.skipped_between:
        print(f"first bad commit: {first.commit} {first.subject}")
    else:
        hidden = ", ".join(c[:10] for c in found.skipped_between)
        print(
            f"the first bad commit is one of {len(found.skipped_between) + 1}: {hidden} (their "
            f"tests did not run) or {first.commit[:10]} {first.subject}"
        )
    print(f"  {first.detail}")
    last = found.last_good
    print(
        f"  last good: {last.commit[:10]} {last.subject}"
        + (f" ({last.detail})" if last.detail else "")
    )
    print(
        f"torchperf bisect: {len(found.steps)} step{'s' if len(found.steps) != 1 else ''} "
        f"(+ GOOD and BAD), {runs} pytest runs in {found.seconds:.0f} s; every worktree removed"
    )
    return 1 if found.skipped_between else 0


def _parser() -> argparse.ArgumentParser:
    def fraction(text: str) -> float:
        try:
            return parse_fraction(text)
        except OptionError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    def share(text: str) -> float:
        try:
            return parse_share(text)
        except OptionError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parser = argparse.ArgumentParser(prog="torchperf", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    storage: dict[str, Any] = {
        "default": ".torchperf",
        "help": "baseline folder (default .torchperf)",
    }
    p = sub.add_parser("list", help="environments in a baseline folder and what they hold")
    p.add_argument("--storage", **storage)
    p.set_defaults(run=cmd_list)
    p = sub.add_parser("show", help="stored measurements, one line each")
    p.add_argument("--storage", **storage)
    p.add_argument("-k", help="only tests/measurements containing this text")
    p.add_argument("--env", help="only this environment id")
    p.set_defaults(run=cmd_show)
    p = sub.add_parser("compare", help="judge a candidate against baselines; exit 1 on regression")
    p.add_argument("baseline", help="baseline folder (.torchperf)")
    p.add_argument(
        "candidate",
        nargs="+",
        help="results file (pytest --torchperf-json), several (a run's shards), or a baseline "
        "folder",
    )
    p.add_argument(
        "--max-slowdown",
        type=fraction,
        default=None,
        help="override the limit each measurement ran with (e.g. 10%%)",
    )
    p.add_argument(
        "--min-cpu-share", type=share, default=None, help="override the contention guard"
    )
    p.add_argument("--max-spread", type=fraction, default=None, help="override the spread guard")
    p.add_argument(
        "--max-neighbour-load",
        type=share,
        default=None,
        help="override the neighbour guard (e.g. 50%%; 100%% disables)",
    )
    p.add_argument(
        "--max-instruction-increase",
        type=fraction,
        default=None,
        help="override the instruction-count limit of --torchperf-instructions runs (e.g. 1%%)",
    )
    p.add_argument("-k", help="only tests/measurements containing this text")
    p.add_argument(
        "--any-commit",
        action="store_true",
        help="with several results files: read files written at different commits",
    )
    p.set_defaults(run=cmd_compare)
    p = sub.add_parser("report", help="render HTML/markdown from baselines or a results file")
    p.add_argument("--storage", **storage)
    p.add_argument(
        "--results",
        nargs="+",
        help="results file (pytest --torchperf-json), or several (a run's shards); default: "
        "latest stored sessions",
    )
    p.add_argument("--html", help="write the HTML report here")
    p.add_argument("--markdown", help="write the markdown summary here")
    p.add_argument(
        "--any-commit",
        action="store_true",
        help="with several results files: read files written at different commits",
    )
    p.set_defaults(run=cmd_report)
    p = sub.add_parser("accept", help="promote a run's results to baselines (intended slowdowns)")
    p.add_argument("results", nargs="+", help="results file(s) written by pytest --torchperf-json")
    p.add_argument("--storage", **storage)
    p.add_argument("-k", help="only tests/measurements containing this text")
    p.add_argument("--reset", action="store_true", help="replace the history instead of appending")
    p.add_argument(
        "--force",
        action="store_true",
        help="accept measurements the save guard would refuse (contention, spread)",
    )
    p.add_argument(
        "--any-commit",
        action="store_true",
        help="with several results files: read files written at different commits",
    )
    p.set_defaults(run=cmd_accept)
    p = sub.add_parser(
        "merge",
        help="one results file and report from a run's shards; exit 1 on a failure or a "
        "measurement no shard ran",
    )
    p.add_argument("results", nargs="+", help="the shards' results files (pytest --torchperf-json)")
    p.add_argument("-o", "--output", help="write the merged results file here")
    p.add_argument(
        "--storage",
        **{
            **storage,
            "help": "baseline folder the shards compared against (default .torchperf): "
            "its measurements that no shard ran are listed",
        },
    )
    p.add_argument("--html", help="write the HTML report here")
    p.add_argument("--markdown", help="write the markdown summary here")
    p.add_argument(
        "--allow-missing",
        action="store_true",
        help="list measurements with a baseline that no shard ran without failing",
    )
    p.add_argument(
        "--any-commit", action="store_true", help="merge files written at different commits"
    )
    p.set_defaults(run=cmd_merge)
    p = sub.add_parser(
        "history",
        help="each measurement over main's runs (results files): steps and their commits",
    )
    p.add_argument("paths", nargs="+", help="results files of main's runs, or folders holding them")
    p.add_argument("-k", help="only tests/measurements containing this text")
    p.add_argument(
        "--threshold",
        type=float,
        default=THRESHOLD,
        help=f"standard errors a step needs (default {THRESHOLD:g}; lower finds smaller steps "
        f"and more false ones)",
    )
    p.add_argument(
        "--min-step",
        type=fraction,
        default=MIN_STEP,
        help=f"smallest step reported (default {MIN_STEP * 100:g}%%)",
    )
    p.add_argument(
        "--raw",
        action="store_true",
        help="judge times as measured (default: over the machine's speed, from the calibration "
        "kernel timed beside them on CPU)",
    )
    p.add_argument("--html", help="write the trend page here")
    p.add_argument(
        "--fail-on-slowdown",
        action="store_true",
        help="exit 1 when a measurement's latest level is still above its level before a "
        "slowdown step",
    )
    p.set_defaults(run=cmd_history)
    p = sub.add_parser(
        "bisect",
        help="the first commit between GOOD and BAD where the selected perf tests got slower",
    )
    p.add_argument("good", help="a revision where the tests were fast (older)")
    p.add_argument("bad", help="a revision where they are slow (newer)")
    p.add_argument("-k", help="the perf tests to run at each revision (pytest -k)")
    p.add_argument(
        "--mode",
        choices=("instructions", "ab", "counters"),
        help="how a revision is judged: instruction counts under Valgrind (the default where "
        "Valgrind is installed), A/B process pairs against GOOD (the default elsewhere), or the "
        "exact counters",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=3600.0,
        help="seconds one revision's pytest run may take (default 3600)",
    )
    p.add_argument(
        "pytest_args",
        nargs="*",
        help="more pytest arguments for each revision's run, after -- (e.g. -- tests/test_perf.py)",
    )
    p.set_defaults(run=cmd_bisect)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``torchperf`` console script."""
    from pytest_torchperf.run.bisect import BisectError
    from pytest_torchperf.store.results import ResultsFileError

    args = _parser().parse_args(argv)
    try:
        return int(args.run(args))
    except (BaselineFileError, ResultsFileError, BisectError) as exc:
        print(f"torchperf: {exc}", file=sys.stderr)
        return 2
    except ImportError as exc:
        print(f"torchperf: {exc}; install pandas (pip install pandas)", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
