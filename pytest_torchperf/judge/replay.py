"""A measurement recorded in a results file, judged again: the comparison ``pytest
--torchperf-compare`` made, replayed by ``torchperf compare`` through the same engine
(:func:`pytest_torchperf.judge.compare.compare`) from the passes the run recorded. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from pytest_torchperf.core.json_fields import json_object
from pytest_torchperf.core.stats import summarize
from pytest_torchperf.core.types import JSON
from pytest_torchperf.judge.compare import Candidate, Comparison, Gate, Where, compare
from pytest_torchperf.judge.inputs import recorded_kind, recorded_sample
from pytest_torchperf.judge.kinds import judging
from pytest_torchperf.judge.refusals import untimed_reason
from pytest_torchperf.judge.samples import Sample
from pytest_torchperf.measure.gpu_clocks import ClockSummary
from pytest_torchperf.store.baselines import same_run, shown
from pytest_torchperf.store.record import Record, RecordedPass
from pytest_torchperf.store.sessions import Session, session_of

if TYPE_CHECKING:
    from pytest_torchperf.store.baselines import BaselineStore


def replay(
    record: Record,
    sessions: Sequence[Session],
    *,
    store: BaselineStore | None = None,
    environment: Mapping[str, Any] | None = None,
    **overrides: float | None,
) -> Comparison:
    """The plugin's comparison of one measured record against stored ``sessions``, replayed.

    The same engine as ``pytest --torchperf-compare`` (:func:`pytest_torchperf.judge.compare`),
    fed the record's own gate (``overrides`` such as ``max_slowdown`` replace its values) and the
    sampling passes the plugin took, in order: its re-measures and its fresh-process
    confirmations, whose speedups are kept too. On the same data and options the outcome, figure,
    label and message are the plugin's. ``store`` words a missing baseline as the plugin does.
    """
    session = session_of(record)
    gate = Gate.from_record(session.gate or {}, **overrides)
    passes = record.passes or (
        RecordedPass(
            times=session.times or record.samples,
            cpu_share=session.cpu_share,
            calibration=session.calibration,
        ),
    )
    samples = [
        Sample(
            summarize(p.times),
            p.cpu_share,
            p.times,
            p.calibration,
            # A fresh confirming pass is one process; files written before 0.1.0 recorded the
            # pooled children beside it too, which would pool it again on replay.
            () if p.fresh else p.process_statistics,
            () if p.fresh else p.process_calibrations,
            p.neighbour_load,
            p.fresh,
            queued_share=p.queued_share,
            gpu_clock=ClockSummary.from_record(json_object(p.extra("gpu_clock")))
            if p.extra("gpu_clock")
            else None,
        )
        for p in passes
        if p.times
    ]
    later = samples[1:]

    def remeasure() -> Sample:
        # The plugin's own later passes; past them (other options than the run's) the last one.
        return later.pop(0) if later else samples[-1]

    def confirm() -> Sample | None:
        # A pass the plugin took in a fresh process confirms here too (same wording, same figure).
        return later.pop(0) if later and later[0].fresh else None

    # The candidate reads the record's session and its kinds' keys from the record's JSON form.
    candidate = Candidate.from_record(samples[0], record)
    where = Where()
    env_id = record.environment_id
    if store is not None and env_id:
        # The environment's exact fingerprint, as its file (or the record) holds it: JSON.
        exact = cast(
            "Mapping[str, JSON]",
            json_object((environment or record.environment or {}).get("exact")),
        )
        where = Where(
            env_id,
            exact,
            shown(store.module_file(env_id, record.nodeid)),
            shown(store.root),
            storage_missing=not store.root.exists(),
            others=lambda: store.environments_with(record.nodeid, record.name),
            nodeid=record.nodeid,
        )
    return compare(
        candidate,
        sessions,
        gate,
        remeasure=remeasure,
        confirm=confirm,
        confirm_speedups=(lambda: [None if s is None else dict(s) for s in record.confirm_speedups])
        if gate.confirm == "fresh"
        else None,
        where=where,
    )


def accept_problem(session: Session) -> str | None:
    """Why a recorded session must not become a baseline (``torchperf accept``): its kind's
    answer (:meth:`pytest_torchperf.judge.kind_protocol.Kind.accept_problem`: what the save
    guard would refuse, a counted run's missing count, an A/B run's side B)."""
    return judging(recorded_kind(session.gate or {})).accept_problem(session)


def untimed_session(session: Session) -> Session | None:
    """What ``torchperf accept`` stores of a recorded session whose timing alone must not become
    a baseline (a guard refused its pass; its counters and numerics were measured fine): the
    session without its timing, as a save on that machine stores it. None where there is no such
    problem, or where its figure itself is what is missing or not a baseline (a counted run's
    count, an A/B run's side B)."""
    problem = accept_problem(session)
    kind = judging(recorded_kind(session.gate or {}))
    if not (problem and session.times and kind.stored_figure == "time" and kind.needs_baseline):
        return None
    guards = Gate.from_record(session.gate or {}).guards
    why, options = untimed_reason(problem, recorded_sample(session), guards)
    # Nor a variant's speedup: a results file does not say whether the rounds it was timed in
    # passed the guards (one written before a save left a refused speedup out carries it).
    return session.without_timing(why, options).without("speedup")


def already_stored(stored: Sequence[Session], session: Session) -> bool:
    """Whether ``session``'s run is among the ``stored`` ones already (accepted before, or
    saved by that run or one of its fresh processes, ``<run id>-p<k>``): appended again, one
    run would count twice in the baseline and its noise."""
    # Its timing where only its counters and numerics are stored (a guard refused the timing,
    # --force accepts it) is not stored yet.
    return any(
        same_run(s.run_id, session.run_id)
        and (s.statistic is not None or session.statistic is None)
        for s in stored
    )


def other_code(stored: Sequence[Session], session: Session) -> str | None:
    """Why ``session`` timed other code than the ``stored`` sessions did (its counters, or where
    they cannot tell its outputs: :func:`pytest_torchperf.judge.drift.other_code`). Its time
    appended to theirs would read as process noise and widen the limit. None: the same."""
    from pytest_torchperf.judge.drift import other_code as differs

    limits = session.accuracy_limits or {}
    ignore = (session.gate or {}).get("ignore_counters") or ()
    found = differs(stored, session.counters, session.fingerprint, limits.get("rel_l2"), ignore)
    return str(found) if found else None
