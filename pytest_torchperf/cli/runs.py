"""``torchperf list``, ``show``, ``compare`` and ``report``: a baseline folder and the results
files of one run (or its shards); ``accept`` is :mod:`.accept`, ``forget`` :mod:`.forget`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pytest_torchperf.cli.common import (
    baseline_store,
    candidates,
    no_match,
    results,
    run_strict,
    selected,
    some,
    table,
    write_reports,
)
from pytest_torchperf.core.units import format_change, format_time
from pytest_torchperf.judge.counter_diff import changed_head
from pytest_torchperf.judge.coverage import coverage
from pytest_torchperf.judge.coverage_lines import named, summary_lines
from pytest_torchperf.judge.labels import outcome_label
from pytest_torchperf.judge.run_failure import run_failure
from pytest_torchperf.report.kinds import carried_sessions, columns
from pytest_torchperf.report.stored import environment_rows, measurement_rows
from pytest_torchperf.store.baselines import BaselineStore, same_run
from pytest_torchperf.store.record import Record
from pytest_torchperf.store.sessions import Session, session_of


def cmd_list(args: argparse.Namespace) -> int:
    store = baseline_store(args.storage)
    rows = environment_rows(store)
    print(table(rows, f"no baselines under {args.storage}"))
    for row in rows:
        problem = store.environment_problem(row["environment"])
        if problem:
            print(f"torchperf: warning: {problem}", file=sys.stderr)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    """The stored measurements under their environment as a heading, each test id above its
    measurements, the reason behind a cell as a numbered note under the tables: as wide as a
    terminal however long the ids and reasons."""
    from pytest_torchperf.report.terminal import grouped_lines

    store = baseline_store(args.storage)
    rows = measurement_rows(store, lambda nodeid, name: selected(nodeid, name, args.k), args.env)
    if not rows and (args.k or args.env):  # a misspelt filter: said, never a clean empty table
        stored = [(env_id, nodeid, name) for env_id, nodeid, name, _ in store.measurements()]
        environments = sorted({env_id for env_id, _, _ in stored})
        if args.env and args.env not in environments:
            envs = f"it holds {some(environments)}" if environments else "it holds none"
            print(
                f"torchperf: no environment {args.env} in {args.storage} ({envs}); --env takes "
                f"a whole environment id",
                file=sys.stderr,
            )
        elif args.k:
            held = [(n, m) for env_id, n, m in stored if args.env in (None, env_id)]
            print(no_match(args.k, held, args.storage), file=sys.stderr)
        else:
            print(f"torchperf: environment {args.env} holds no stored measurement", file=sys.stderr)
        return 1
    notes: dict[str, int] = {}  # a cell's reason, by its number
    by_env: dict[tuple[str, str], list[list[str]]] = {}
    for row in rows:
        key, why = (row.pop("environment"), row.pop("mode")), row.pop("notes")
        by_env.setdefault(key, []).append(
            [
                f"{value} [{notes.setdefault(why[column], len(notes) + 1)}]"
                if why.get(column)
                else str(value)
                for column, value in row.items()
            ]
        )
    lines = []
    for (env_id, mode), group in by_env.items():
        lines += ["", f"environment {env_id} (mode {mode})", *grouped_lines(list(rows[0]), group)]
    lines += [f"[{n}] {note}" for note, n in notes.items()]
    print("\n".join(lines[1:]) if rows else f"no stored measurement in {args.storage}")
    if any(row["sessions"].endswith("u") for row in rows):
        print("sessions N+Mu: N timed (their median is the baseline), M saved without a timing")
    if any(row.get("speedup", "-") != "-" for row in rows):
        print(
            "speedup: eager over the variant, timed interleaved in the same rounds; the "
            "figures of the eager and variant rows come from separate sessions, so their ratio "
            "need not match it"
        )
    return 0


#: The options of each measurement's recorded gate that compare's flags of the same name override.
OVERRIDES = (
    "max_slowdown",
    "min_cpu_share",
    "max_spread",
    "max_neighbour_load",
    "max_machine_slowdown",
    "min_gpu_clock",
    "max_widening",
    "max_instruction_increase",
    "max_kernel_slowdown",
)


def cmd_compare(args: argparse.Namespace) -> int:
    from pytest_torchperf.judge.replay import replay
    from pytest_torchperf.report.terminal import count_line, repeats

    records, environments = candidates(args.candidate, args.any_commit)
    # Records that carry their own baseline (an A/B run's side A) need no baseline folder.
    own = any(r.session for r in records) and all(
        carried_sessions(r) is not None for r in records if r.session
    )
    store = BaselineStore(Path(args.baseline)) if own else baseline_store(args.baseline)
    folder = len(args.candidate) == 1 and Path(args.candidate[0]).is_dir()
    if folder:
        # Said once: a folder compared with itself judges each save only against earlier ones.
        print(
            "torchperf: the candidate is a baseline folder: each measurement's latest session is "
            "judged against the sessions stored before the save that wrote it (a save's own "
            "sessions are never its baseline)"
        )
    if args.k and not any(selected(r.nodeid, r.name, args.k) for r in records):
        where = " ".join(args.candidate)
        print(no_match(args.k, [(r.nodeid, r.name) for r in records], where), file=sys.stderr)
        return 1
    rows, details = [], []
    notes: dict[str, list[str]] = {}
    judged: list[Record] = []
    said: list[Record] = []  # as the run said them, judged by no one: removed in B
    kind_headers: list[str] = []  # the kinds' columns any row has, in order
    for record in records:
        env_id = record.environment_id
        if not selected(record.nodeid, record.name, args.k):
            continue
        if record.baseline_only and record.verdict is not None:
            # Only its baseline has it (side A's, removed in B): no pass of the run to judge
            # again (the run judged none either), so it is said as the run said it; counted, but
            # not judged (a compare of nothing else judged nothing).
            said.append(record)
            rows.append(
                {
                    "test": record.nodeid,
                    "name": record.name,
                    "p25": "-",
                    "change": "-",
                    "verdict": record.label or outcome_label(record),
                }
            )
            details.append(record.verdict.message or "")
            continue
        if not env_id or not record.session:
            continue  # no session: not gated (torchperf_timer without gate=True) or not timed
        # A folder's measurement whose latest save stored no timing: an earlier save's samples
        # would be judged against a baseline that holds them (always a pass). A results file's
        # record holds the run's own samples, which its run judged: replayed as they were.
        untimed = session_of(record).untimed if folder else None
        if untimed or not record.samples and not record.passes:
            details.append(
                f"{record.name}: not compared: the latest save stored no timing "
                f"({untimed or 'no reason recorded'}); save it again on a quieter machine"
            )
            continue
        # A record that carries its own baseline (an A/B run's side A) is judged against it;
        # stored baselines play no part.
        stored: list[Session] = []
        sessions = carried_sessions(record)
        if sessions is None:
            stored = store.load_sessions(env_id, record.nodeid, record.name)
            sessions = [s for s in stored if not same_run(s.run_id, record.run_id)]
        result = replay(
            record,
            sessions,
            store=store,
            environment=environments.get(env_id),
            **{name: getattr(args, name) for name in OVERRIDES},
        )
        judged.append(  # what the coverage line reads, as a live run's record has it
            Record.from_json(
                {
                    "name": record.name,
                    "variant": record.variant,
                    "counters": record.counters,
                    "accuracy": record.accuracy,
                    "outcome": result.outcome,
                    "verdict": result.verdict.to_dict(),
                    "gated": result.gated,
                    # Its kind (in the gate): what the coverage's remedies depend on.
                    "session": record.session,
                }
            )
        )
        # The kinds' columns of the record's figures (an instruction count).
        kind_cells = {column.header: column.cell(record) for column in columns([record])}
        kind_headers += [h for h in kind_cells if h not in kind_headers]
        rows.append(
            {
                "test": record.nodeid,
                "name": record.name,
                "p25": format_time(record.stats.p25 if record.stats else None),
                **kind_cells,
                "change": format_change(result.verdict.ratio),
                "verdict": result.label,
            }
        )
        if result.outcome in ("fail", "inconclusive", "new"):
            message = result.verdict.message
            if result.outcome == "new" and stored and not sessions:  # "no baseline" is untrue
                message = (
                    f"{record.name}: new: its {len(stored)} stored session"
                    f"{'s are' if len(stored) != 1 else ' is'} this run's own (saved or accepted "
                    f"from it), and a run is never judged against itself"
                )
            details += [] if repeats(message, result.failures) else [message]
            if result.counter_changes:
                # Against what the verdict's kind says (side A in an A/B run), as the run
                # worded it.
                details.append(
                    f"{changed_head(record.name, result.verdict.basis)}: "
                    f"{'; '.join(result.counter_changes)}"
                )
            details += [f for f in result.failures if f not in details]
            replayed = result.verdict.outcome.value
            if replayed == "fail" and record.verdict and record.verdict.outcome == "fail":
                # The run's profile of the slowdown both failed on (why, trace), as it printed it.
                details += list(record.explanation)
        # A limit widened by noise, one stored session, a looser guard: as the run noted them,
        # a note several measurements share once (after the table).
        for note in result.verdict.notes:
            notes.setdefault(note, []).append(record.name)
        details += [w for w in result.warnings if w not in details]
    # A kind's column some rows have (an instruction-count run's records): "-" in the others.
    rows = [{**row, **{h: "-" for h in kind_headers if h not in row}} for row in rows]
    print(table(rows, "no measurement to compare"))
    for line in details:
        print(line)
    for note, names in notes.items():
        shared = f"note for {len(names)} measurements ({named(names)})" if len(names) > 1 else ""
        print(f"{shared}: {note}" if shared else f"{names[0]}: note: {note}")
    # In severity order, as the run's own count line (an unsorted one differed from it).
    print(f"torchperf: {count_line([*judged, *said]) or 'nothing compared'}")
    # A strict run's weak gate is its failure, as the run said (not a warning to use strict).
    cov = coverage(judged, comparing=True)
    failure = run_failure(cov, run_strict(args.candidate, records)) if cov is not None else None
    for line in summary_lines(cov, failure):
        print(f"torchperf: {line}")
    if not judged:  # every measurement left out (above), or none to compare: not a pass
        why = (
            "the lines above say why each was left out"
            if details
            else "the candidate holds no gated measurement (a --torchperf-disable run, or only "
            "torchperf_timer blocks without gate=True)"
        )
        print(
            f"torchperf: error: the compare judged no measurement, so it cannot pass; {why}",
            file=sys.stderr,
        )
    failed = any(r.outcome == "fail" for r in judged)
    return 1 if failed or failure or not judged else 0


def cmd_report(args: argparse.Namespace) -> int:
    from pytest_torchperf.report.html_table import RUN_FIGURES, STORED_FIGURES
    from pytest_torchperf.store.results import recorded_mode, stored_records

    records = (
        results(args.results, args.any_commit)[0]
        if args.results
        else stored_records(baseline_store(args.storage).root)
    )
    line = f"torchperf report of {' '.join(args.results or [args.storage])}"
    # What the run gated, as its own reports said it (a baseline folder was gated by no run).
    modes = {recorded_mode(path) for path in args.results or []} - {None}
    cov = coverage(records, comparing="compare" in modes) if modes else None
    strict = run_strict(args.results or [], records)
    lines = summary_lines(cov, run_failure(cov, strict) if cov else None, stored=False)
    if not args.html and not args.markdown:  # a look in the terminal: the markdown summary
        from pytest_torchperf.report.markdown import markdown_report

        print(markdown_report(records, line, lines))
        return 0
    figures = RUN_FIGURES if args.results else STORED_FIGURES
    write_reports(args, records, line, lines, figures=figures)
    return 0
