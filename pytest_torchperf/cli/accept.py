"""``torchperf accept``: a run's measurements become baselines, as a save of that run would
store them, and never where that would corrupt the baseline (a guard's refused timing, a run
already stored, other code's timing appended to the old code's sessions, a folder the run never
read)."""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

from pytest_torchperf.cli.common import PathError, no_match, results, selected
from pytest_torchperf.core.units import counted, format_change, format_percent, format_time
from pytest_torchperf.judge.replay import (
    accept_problem,
    already_stored,
    other_code,
    untimed_session,
)
from pytest_torchperf.judge.tolerance import StoredBaseline
from pytest_torchperf.store.baselines import BaselineStore
from pytest_torchperf.store.sessions import Session, session_of, timed_sessions


def _too_noisy(stored: Sequence[Session], new: float, after: StoredBaseline) -> str:
    """Why a session timed at ``new`` appended to the ``stored`` timed ones leaves no gate."""
    times = sorted(s.statistic for s in stored if s.statistic)
    median = statistics.median(times)
    return (
        f"its {counted(len(times), 'stored session')} (p25 "
        f"{' to '.join(dict.fromkeys([format_time(times[0]), format_time(times[-1])]))}, baseline "
        f"{format_time(median)}) and this run's (p25 {format_time(new)}, "
        f"{format_change(new / median)}) would disagree too much to gate: process noise "
        f"{format_percent(after.noise or 0.0)} widens the {format_percent(after.tolerance)} limit "
        f"to {format_percent(after.limit)}, beyond the {format_percent(after.bound or 0.0)} "
        f"allowed, so a compare would judge no timing. A changed speed is accepted with --reset "
        f"(this run's session replaces the stored ones and becomes the baseline)"
    )


def cmd_accept(args: argparse.Namespace) -> int:
    from pytest_torchperf.run.saving import kept_too, timing_baseline
    from pytest_torchperf.store.results import recorded_storage

    records, environments = results(args.results, args.any_commit)
    target = Path(args.storage or ".torchperf").resolve()
    for path in args.results:
        used, relative = recorded_storage(path)
        here = used if used and Path(used).is_dir() else None
        if here is None and relative is not None:
            here = relative  # another checkout's run (CI): its folder within the project
        if not here or Path(here).resolve() == target:
            continue
        if args.storage is None:
            # Accepting into .torchperf would change baselines that run never read.
            raise PathError(
                f"{path} was judged against the baselines in {here}, not .torchperf: give "
                f"--storage {here} (or --storage .torchperf to accept into that folder anyway)"
            )
        # A misspelt --storage would start a folder no run reads (.torchperf is no typo).
        if not target.exists() and target != Path(".torchperf").resolve():
            raise PathError(
                f"baseline folder {args.storage} does not exist, and {path} was judged against "
                f"the baselines in {here}: give --storage {here}, or create {args.storage} "
                f"first to start a baseline folder there"
            )
    if args.k and not any(selected(r.nodeid, r.name, args.k) for r in records):
        # Said as compare, show and history say it: a misspelt -k, with what the file holds.
        where = " ".join(args.results)
        print(no_match(args.k, [(r.nodeid, r.name) for r in records], where), file=sys.stderr)
        return 1
    store = BaselineStore(Path(args.storage or ".torchperf"))
    accepted, refused, untimed, already = 0, 0, 0, 0
    for record in records:
        if not selected(record.nodeid, record.name, args.k):
            continue
        env_id = record.environment_id
        environment = (environments.get(env_id) if env_id else None) or store.environment(
            env_id or ""
        )
        if not record.session or not env_id or not environment:
            why = (
                record.verdict.message  # only the baseline has it (side A's, removed in B)
                if record.baseline_only and record.verdict is not None
                else "not timed, e.g. --torchperf-disable, or an ungated torchperf_timer"
            )
            print(f"torchperf: {record.nodeid} {record.name}: nothing to accept ({why})")
            continue
        session = session_of(record)
        # A timing a guard refused is left out, as a save on that machine leaves it out.
        left_out = None if args.force else untimed_session(session)
        problem = None if args.force or left_out else accept_problem(session)
        problem = problem and f"{problem}; the plugin would not save it either"
        stored = store.load_sessions(env_id, record.nodeid, record.name)
        if already_stored(stored, left_out or session) and not args.reset:
            print(
                f"torchperf: {record.nodeid} {record.name}: already stored (run "
                f"{session.run_id}, accepted or saved before): nothing appended (--reset makes "
                f"it the only session)"
            )
            already += 1
            continue
        changed = None if problem or args.reset or args.force else other_code(stored, session)
        if changed:
            problem = (
                f"it differs from the stored sessions ({changed}): it timed other code "
                f"than they did, and appended its time would read as noise and widen the limit; "
                f"accept it with --reset (this run's session replaces the stored ones)"
            )
        # --reset would replace the timed sessions with one that cannot gate the timing.
        if left_out and args.reset and (timed := len(timed_sessions(stored))):
            problem = (
                f"a guard refused its timing ({left_out.untimed}), and --reset would replace "
                f"its {counted(timed, 'timed session')} with one without timing, "
                f"which cannot gate its timing until a quiet save; accept it without --reset "
                f"(its timed sessions stay), or save it again on a quiet machine"
            )
        # Appended, a changed speed leaves sessions that disagree: a save that did so fails.
        # (Where the stored sessions could not gate already, this run is not what broke it.)
        new = session.statistic
        if new and not (problem or left_out or args.reset or args.force):
            appended = [*stored, session][-store.max_history :]
            after = timing_baseline(appended, session, 1, 1)
            before = timing_baseline(stored, session, 1, 1)
            if after is not None and after.wide and not (before is not None and before.wide):
                problem = _too_noisy(timed_sessions(appended[:-1]), new, after)
        if problem:
            print(f"torchperf: {record.nodeid} {record.name}: not accepted: {problem}")
            refused += 1
            continue
        what, kept = f"(p25 {format_time(session.statistic)})", ""
        if left_out:
            session, what = left_out, f"without its timing ({left_out.untimed})"
            kept = f": {kept_too(session, done=' stored')}"
        store.record(
            env_id,
            environment,
            record.nodeid,
            record.name,
            session,
            reset=args.reset,
            # --force after a plain accept stored it without its timing: one session a run.
            timing_of_stored=args.force and session.statistic is not None,
        )
        accepted, untimed = accepted + 1, untimed + bool(left_out)
        print(
            f"torchperf: accepted {record.nodeid} {record.name} {what} into "
            f"{store.root / env_id}{kept}"
        )
    print(
        f"torchperf: {counted(accepted, 'measurement')} accepted"
        + (
            ""
            if accepted or refused or already
            else f" (nothing timed matched -k {shlex.quote(args.k)})"
            if args.k
            else " (nothing in the results was timed)"
        )
        + (
            "; accepted sessions carry no op table (explanations of a later slowdown will "
            "list the top ops without a diff)"
            if accepted
            else ""
        )
    )
    if refused:
        print(
            f"torchperf: {counted(refused, 'matching measurement')} NOT accepted "
            f"(see above): the stored baseline still differs from this run there (each line "
            f"says how to accept it; --force accepts {'them' if refused != 1 else 'it'} anyway, "
            f"as {'they are' if refused != 1 else 'it is'})"
        )
    if untimed:
        print(
            f"torchperf: {untimed} of them accepted without their timing, which a guard refused "
            f"(see above): store it with pytest --torchperf-save on a quiet machine, or accept "
            f"this run's anyway with --force"
        )
    return 0 if (accepted or already) and not refused and not untimed else 1
