"""``torchperf merge``, ``history`` and ``bisect``: a suite split over runners, and its runs over
time."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from pytest_torchperf.cli.common import (
    PathError,
    no_match,
    run_strict,
    table,
    write,
    write_reports,
)
from pytest_torchperf.core.units import counted
from pytest_torchperf.judge.change_points import MIN_SEGMENT
from pytest_torchperf.judge.coverage_lines import summary_lines
from pytest_torchperf.store.baselines import BaselineStore


def _listed(keys: list[tuple[str, str, str]]) -> str:
    """Measurements ``(environment, test, name)`` as the merge names them: the first ten."""
    shown = [f"{nodeid} {name}" for _, nodeid, name in keys]
    return ", ".join(shown[:10]) + (f" and {len(shown) - 10} more" if len(shown) > 10 else "")


def cmd_merge(args: argparse.Namespace) -> int:
    import json

    from pytest_torchperf.judge.compare import forget_command
    from pytest_torchperf.judge.run_failure import run_failure
    from pytest_torchperf.report import terminal
    from pytest_torchperf.report.merge import left_behind, merge_results, missing_measurements

    if args.output and any(Path(args.output).resolve() == Path(r).resolve() for r in args.results):
        raise PathError(
            f"merge -o {args.output} names one of the shards it merges: writing it would replace "
            f"that shard's results; write the merged file elsewhere (e.g. -o merged.json)"
        )
    storage = Path(args.storage)
    if not storage.is_dir() and not args.allow_missing:  # said before the tables, not after
        print(
            f"torchperf: no baseline folder at {storage}: without it the merge cannot tell "
            f"whether a shard's results are missing. Give the folder the shards compared "
            f"against with --storage (check out the repository in the merge job), or pass "
            f"--allow-missing",
            file=sys.stderr,
        )
        return 2
    merged = merge_results(args.results, any_commit=args.any_commit)
    records = merged.records
    # The unit goes with the first count: "1 measurement from a.json, 2 from b.json".
    shards = ", ".join(
        f"{counted(n, 'measurement')} from {file}" if i == 0 else f"{n} from {file}"
        for i, (file, n) in enumerate(merged.shards)
    )
    given = counted(len(merged.shards), "results file")
    print(f"torchperf: merged {given} ({shards}) into {counted(len(records), 'measurement')}")
    for env_id, files in merged.environments.items():
        group = [r for r in records if r.environment_id == env_id]
        if len(merged.environments) > 1:
            print(f"environment {env_id} ({len(group)} measurements, from {', '.join(files)}):")
        for line in terminal.render(group):
            print(line)
    # No environment measured them here (only the baseline has them: removed in B).
    loose = [r for r in records if not r.environment_id]
    for line in terminal.render(loose) if loose else ():
        print(line)
    for line in terminal.detail_lines(records):
        print(line)
    for duplicate in merged.duplicates:
        print(f"torchperf: warning: {duplicate.line()}")
    # The baseline folder each shard's run read (files before 0.1.0 do not say).
    read: dict[str, list[str]] = {}
    for note in merged.document["torchperf"]["shards"]:
        if note.get("storage"):
            read.setdefault(note["storage"], []).append(note["file"])
    if len(read) > 1:
        folders = "; ".join(f"{', '.join(files)} read {folder}" for folder, files in read.items())
        print(
            f"torchperf: warning: the shards were judged against different baseline folders "
            f"({folders}): their verdicts are not one run's; compare every shard against the same "
            f"folder"
        )
    missing = missing_measurements(records, BaselineStore(storage)) if storage.is_dir() else []
    if not storage.is_dir():
        print(
            f"torchperf: warning: no baseline folder at {storage}: measurements that no shard "
            f"ran are not listed (--allow-missing)"
        )
    untaken = left_behind(records, missing)
    if untaken:
        by_test: dict[str, set[str]] = {}  # forget drops a name from every environment
        for _, nodeid, name in untaken:
            by_test.setdefault(nodeid, set()).add(name)
        forget = "; ".join(
            forget_command(shlex.quote(test), str(storage), " ".join(map(shlex.quote, sorted(n))))
            for test, n in by_test.items()
        )
        print(
            f"torchperf: warning: {counted(len(untaken), 'measurement')} with a baseline in "
            f"{storage} {'were' if len(untaken) != 1 else 'was'} not taken by the test, which ran: "
            f"{_listed(untaken)} (renamed or removed from the test, or the test stopped before "
            f"it: not a lost shard, not failing). {forget} drops "
            f"{'them' if len(untaken) > 1 else 'it'}"
        )
        missing = sorted(set(missing) - set(untaken))
    if missing:
        print(
            f"torchperf: {counted(len(missing), 'measurement')} with a "
            f"baseline in {storage} {'have' if len(missing) != 1 else 'has'} a result in no "
            f"shard: {_listed(missing)}. "
            f"A shard's results file is missing (a runner failed, or its file was not collected), "
            f"these tests did not run, or they were renamed or deleted (torchperf forget TEST "
            f"drops a test's baselines)"
            + (
                " (--allow-missing: not failing)"
                if args.allow_missing
                else "; if they were left out on purpose, pass --allow-missing"
            )
        )
    tally = terminal.count_line(records) or "no measurements"
    print(f"torchperf: {tally}" + (f", {len(missing)} missing" if missing else ""))
    cov = merged.coverage
    if cov is None and records:
        print(
            "torchperf: warning: the shards neither compared nor saved, so nothing was gated: "
            "run each shard with pytest --torchperf-compare (docs/merge.md)"
        )
    elif merged.ungated:  # some shards gated, these did not: a job that lost its flag
        shards = ", ".join(merged.ungated)
        # Its file says only that nothing of it was gated: a compare whose tests all failed
        # before their verdicts writes the same as a run without --torchperf-compare.
        print(
            f"torchperf: warning: shard{'s' if len(merged.ungated) > 1 else ''} {shards} "
            f"gated none of {'their' if len(merged.ungated) > 1 else 'its'} measurements (run "
            f"without --torchperf-compare, or its tests failed before their verdicts): run "
            f"every shard with pytest --torchperf-compare (docs/merge.md)"
        )
    strict = run_strict(args.results, records, "the shards' runs")
    failure = run_failure(cov, strict) if cov is not None else None
    coverage_lines = summary_lines(cov, failure, stored=False)
    for line in coverage_lines:
        print(f"torchperf: {line}")
    title = (
        f"torchperf: {len(merged.shards)} shards merged ({', '.join(f for f, _ in merged.shards)})"
    )
    if args.output:
        write(args.output, json.dumps(merged.document, indent=2) + "\n", "merged results")
    write_reports(args, records, title, coverage_lines)
    failed = any(r.outcome == "fail" for r in records)
    return 1 if failed or failure or (missing and not args.allow_missing) else 0


def cmd_history(args: argparse.Namespace) -> int:
    from pytest_torchperf.report.history import (
        format_figure,
        history_html,
        read_runs,
        series_of,
        step_line,
        still_slower,
    )

    for path in args.paths:  # else "results file DIR: cannot be read"
        if not Path(path).exists():
            raise PathError(
                f"{path} does not exist: give results files (pytest --torchperf-json PATH wrote "
                f"them) or folders holding them"
            )
    runs, left_out = read_runs(args.paths)
    for why in left_out:
        print(f"torchperf: warning: left out: {why}")
    for run in runs:
        if run.repeated:
            print(
                f"torchperf: note: commit {run.short} was measured more than once "
                f"({counted(run.repeated, 'measurement')} in several of "
                f"{', '.join(run.files)}: a job retried?); each counts as the median of its figures"
            )
    if len(runs) < 2 * MIN_SEGMENT:
        print(
            f"torchperf: warning: {counted(len(runs), 'run')}: a step needs {MIN_SEGMENT} runs "
            f"on each side of it, so no step can be found before {2 * MIN_SEGMENT} runs"
        )
    series = series_of(
        runs,
        pattern=args.k,
        threshold=args.threshold,
        min_step=args.min_step,
        normalise=not args.raw,
    )
    if args.k and not series:  # a misspelt -k: said, never a clean empty history
        held = [(s.nodeid, s.name) for s in series_of(runs, normalise=not args.raw)]
        print(no_match(args.k, held, " ".join(args.paths)), file=sys.stderr)
        return 1
    first, last = runs[0], runs[-1]
    environments = {s.environment_id for s in series}
    normalised = sum(1 for s in series if s.normalised)
    print(
        f"torchperf: history of {counted(len(runs), 'run')} ({first.short} {first.time or ''} .. "
        f"{last.short} {last.time or ''}), {counted(len(series), 'measurement')} in "
        f"{counted(len(environments), 'environment')}"
        + (
            f"; the times of {normalised if normalised < len(series) else 'each'} divided by the "
            f"machine's speed that run (its calibration kernel's time; --raw: as measured)"
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
            "noise": s.noise_text(),
            "steps": ", ".join(
                f"{st.change * 100:+.1f}% at {runs[s.runs[st.index]].short}" for st in s.steps
            )
            or "-",
        }
        for s in series
    ]
    print(table(rows, "no measurement matches"))
    steps = [(s, step) for s in series for step in s.steps]
    slower = sum(1 for _, step in steps if step.change > 0)
    print(
        f"torchperf: {counted(len(steps), 'step')} in {sum(1 for s in series if s.steps)} of "
        f"{len(series)} measurements ({slower} slower, {len(steps) - slower} faster)"
    )
    if args.html:
        title = f"torchperf history: {counted(len(runs), 'run')}"
        write(args.html, history_html(series, runs, title), "trend page")
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
    from pytest_torchperf.run.bisect import bisect
    from pytest_torchperf.run.revision_probe import Target, default_mode, mode_named

    pytest_args = [*(["-k", args.k] if args.k else []), *args.pytest_args]
    if not pytest_args:  # it cannot start: exit 2, as for an unknown revision
        print(
            "torchperf bisect: select the perf tests to run at each revision with -k TEST (or "
            "give pytest arguments after --): bisecting the whole suite takes hours",
            file=sys.stderr,
        )
        return 2
    mode = args.mode or default_mode()
    target = Target(mode, tuple(pytest_args), Path.cwd(), timeout=args.timeout)
    found = bisect(target, args.good, args.bad)
    # GOOD is a run of its own where the mode measures it apart (not as an A/B run's side A).
    runs = len(found.steps) + (2 if mode_named(mode).measures_good else 1)
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
        f"torchperf bisect: {counted(len(found.steps), 'step')} "
        f"(+ GOOD and BAD), {runs} pytest runs in {found.seconds:.0f} s; every worktree removed"
    )
    return 1 if found.skipped_between else 0
