"""Storing a measurement as a baseline session: whether its pass is fit to store (guards, the
machine's speed against the stored sessions and the rest of the run), the session record itself,
and writing the queued sessions once the test passed. Pytest-free.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pytest_torchperf import __version__
from pytest_torchperf.core.child_protocol import SampleLine
from pytest_torchperf.core.types import JSONObject
from pytest_torchperf.core.units import format_change
from pytest_torchperf.judge.drift import OtherCode, other_code
from pytest_torchperf.judge.inputs import Gate
from pytest_torchperf.judge.refusals import (
    IDLE,
    SLOWER,
    loosening_option,
    refusing_guard,
    untimed_reason,
)
from pytest_torchperf.judge.samples import GuardLimits, Sample, machine_disturbance
from pytest_torchperf.judge.tolerance import StoredBaseline, stored_baseline
from pytest_torchperf.options.measure_options import MeasureOptions
from pytest_torchperf.run import explain
from pytest_torchperf.run.children import child_session_records
from pytest_torchperf.run.context import RunContext
from pytest_torchperf.run.kinds import gate_of, run_part
from pytest_torchperf.run.result import Result
from pytest_torchperf.run.state import Measured, PendingSave, TestState
from pytest_torchperf.store.sessions import Session, timed_sessions

#: The reference a save's processes are held against one another by.
SAVE_PROCESSES = "the fastest of this save's processes"

#: Why a pass (this process's, or another's of a save) is unfit to store: a guard's problem,
#: ``(ratio, reference, what)`` of a machine clearly slower than usual, or None.
Unfit = Callable[["Sample | SampleLine"], "str | tuple[float, float, str] | None"]


def save_guard(
    options: MeasureOptions,
    references: list[tuple[str, list[float]]],
) -> Unfit:
    """Why a pass is unfit to store: a guard problem, or the machine clearly slower than usual
    (``(ratio, reference, what)``: :func:`calibration_references`)."""
    guard = GuardLimits.of(options).problem

    def unfit(sample: Sample | SampleLine) -> str | tuple[float, float, str] | None:
        problem = guard(sample) if isinstance(sample, Sample) else None
        return problem or machine_disturbance(
            sample.calibration, references, options.max_machine_slowdown
        )

    return unfit


def calibration_references(
    ctx: RunContext,
    env_id: str,
    nodeid: str,
    name: str,
    processes: Sequence[float | None] = (),
) -> list[tuple[str, list[float]]]:
    """What a saved pass's machine speed is held against: the stored sessions' calibration
    kernel (unless --torchperf-reset replaces them), this run's other measurements' and, for a
    save in several processes, the fastest of those processes' (``processes``: their calibration
    kernel times for this target). The last one catches a machine that switched speed between the
    processes of one save: on the CI VM the kernel ran 4.5 us in three processes and 7.5 us in two,
    and the model followed (45 vs 70 us); stored together, they widened the limit to 70 %. The
    fastest, not the median: interference only slows the kernel, and on a busy machine most
    processes may run slow (a newcomer's save kept three sessions at 7.8-8.1 us beside two at
    4.7-4.9 us; the first measurement of each process has no other reference)."""
    from pytest_torchperf.measure.timing import CALIBRATION_KERNEL
    from pytest_torchperf.store.baselines import BaselineFileError

    references = []
    if not ctx.settings.reset:
        try:
            stored = [
                s.calibration
                for s in ctx.store.load_sessions(env_id, nodeid, name)
                if s.calibration and s.calibration_kernel == CALIBRATION_KERNEL
            ]
        except BaselineFileError:
            stored = []  # the save itself reports the bad file
        references.append(("the stored sessions", stored))
    references.append(("this run's other measurements", list(ctx.calibrations)))
    calibrated = [c for c in processes if c]
    if len(calibrated) > 1:
        references.append((SAVE_PROCESSES, [min(calibrated)]))
    return references


def other_code_since_stored(ctx: RunContext, m: Measured, env_id: str) -> OtherCode | None:
    """Whether a plain save's measurement measured other code than its stored sessions
    (:func:`pytest_torchperf.judge.drift.other_code`): the save refuses it and the test fails, as
    a compare does (a save's fresh process asks too: it then times no retry). None where it did
    not, or where nothing is appended to (--torchperf-reset, a compare, a first save)."""
    from pytest_torchperf.store.baselines import BaselineFileError

    if not ctx.settings.appends:
        return None
    try:
        stored = ctx.store.load_sessions(env_id, m.nodeid, m.name)
    except BaselineFileError:
        return None  # the save itself reports the bad file
    extra = m.extra
    return other_code(
        stored,
        m.counters,
        extra.fingerprint if extra else None,
        (extra.limits or {}).get("rel_l2") if extra else None,
        m.options.ignore_counters,
    )


def queue_save(
    ctx: RunContext,
    state: TestState,
    m: Measured,
    result: Result,
    final: Sample,
    others: list[SampleLine],
    unfit: Unfit,
    passes: int,
    env_id: str,
    environment: JSONObject,
) -> None:
    """Queue the sessions to store once the test passes: this process's pass and the other
    processes' (``--torchperf-processes``), each only if it is fit to store."""
    problem = unfit(final)
    record = result.session or Session()
    if not problem:
        record = record.updated(
            {"top_ops": explain.baseline_top_ops(m.measurer, final, state, m.name)}
        )
    # Why each other process's session is refused (its own guard, or the machine's speed).
    refusals = {o.process: o.problem or unfit(o) for o in others}
    kept = [o for o in others if not refusals[o.process]]
    records = child_session_records(record, kept, ctx.run_id, m.beside)
    # What is not stored, and why, is said once, by the summary: the table's label, "what the
    # save stored" (each process left out) and the run's failure line (the remedies); no
    # warning repeats it.
    if problem:
        # Only the CPU-share guard of a pass that did not queue for its CPU blames the timed
        # code; every other guard (a busy neighbour included) blames the machine.
        if isinstance(problem, str):
            why, anyway = untimed_reason(problem, final, GuardLimits.of(m.options))
            if refusing_guard(problem) != IDLE:
                result.untimed_options = anyway
        else:
            ratio, _, what = problem
            why = machine_why(ratio, what)
            anyway = [loosening_option(why)]
        if records:  # the other processes' sessions are still worth keeping
            result.not_saved = f"this process's session ({why})"
        else:
            # Counters, output fingerprint and accuracy do not depend on a busy neighbour: they
            # are stored and gated; the timing is what is missing, and the run fails for it
            # unless a --torchperf-fallback save stored the instruction count, which then gates
            # instead (judge/run_failure.py).
            records.append(record.without_timing(why, anyway))
            result.untimed = why
    else:
        records.append(record)
    # Every process whose session is not stored, and why (the save's summary lists them).
    # Processes refused for the same reason share one entry (a busy save refuses most of them).
    why_refused: dict[str, list[str]] = {}
    guards = [refusing_guard(r) if isinstance(r, str) else SLOWER for r in refusals.values() if r]
    guards += [refusing_guard(problem) if isinstance(problem, str) else SLOWER] * bool(problem)
    result.refused_by = sorted(set(guards))
    for process, refused in refusals.items():
        if isinstance(refused, str):
            why_refused.setdefault(_short(refused), []).append(str(process))
        elif refused:
            ratio, _, what = refused
            key = f"machine slower than {what}"
            why_refused.setdefault(key, []).append(f"{process} ({format_change(ratio)})")
    children = [
        f"process{'es' if len(ps) > 1 else ''} {', '.join(ps)} ({reason})"
        for reason, ps in why_refused.items()
    ]
    if problem:  # its figures in full are the table's label
        short = _short(problem) if isinstance(problem, str) else why
        children.append(f"this process ({short}; {_tries(ctx, passes)})")
    result.left_out = children

    state.pending += [
        PendingSave(env_id, environment, m.nodeid, m.name, r, result) for r in records
    ]


def machine_why(ratio: float, what: str) -> str:
    """``machine +61.0% slower than the fastest of this save's processes``: a session kept out
    for the machine's speed, in a few words."""
    return f"machine {format_change(ratio)} slower than {what}"


def session_record(ctx: RunContext, result: Result, options: MeasureOptions) -> Session:
    """The session one save stores of a timed measurement."""
    from pytest_torchperf.measure.timing import CALIBRATION_KERNEL

    assert result.summary is not None
    stats = {k: v if k == "n" else float(f"{v:.6g}") for k, v in result.summary.to_dict().items()}
    # Its keys in the file's order, null ones too (the measurement kinds, a variant and
    # --torchperf-graph add theirs after them).
    values: dict[str, Any] = {
        "timestamp": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "run_id": ctx.run_id,
        "git_sha": ctx.git_sha(),
        "pytest_torchperf": __version__,
        "statistic": result.summary.p25,
        "stats": stats,
        "times": tuple(float(f"{t:.6g}") for t in result.samples),
        "number_per_block": result.number_per_block,
        "cpu_share": None if result.cpu_share is None else round(result.cpu_share, 4),
        "neighbour_load": result.neighbour_load,
        "queued_share": result.queued_share,
        "threads": result.threads,
        "device": result.device,
        "min_time": options.min_time,
        "group": result.group,
        "clock": result.clock,
        "calibration": None if result.calibration is None else float(f"{result.calibration:.6g}"),
        "calibration_kernel": CALIBRATION_KERNEL if result.calibration else None,
        "counters": result.counters,
        # The gate this measurement ran under, so `torchperf compare` judges it the same way.
        "gate": gate_of(ctx, options, result.device).to_record(),
    }
    return Session(**values, order=tuple(values))


def flush(ctx: RunContext, state: TestState) -> list[Path]:
    """Write the pending baseline sessions of a test that passed; return the files written.
    Each measurement's Result then says what is stored for it (:func:`note_stored`)."""
    written, reset_done = [], set()
    by_key: dict[tuple[str, str, str], list[PendingSave]] = {}
    for pending in state.pending:
        # --torchperf-reset replaces a history once; the other processes' sessions of the same
        # measurement (--torchperf-processes) are then appended to the fresh one.
        key = (pending.env_id, pending.nodeid, pending.name)
        reset = ctx.settings.reset and key not in reset_done
        reset_done.add(key)
        by_key.setdefault(key, []).append(pending)
        written.append(
            ctx.store.record(
                pending.env_id,
                pending.environment,
                pending.nodeid,
                pending.name,
                pending.record,
                reset=reset,
            )
        )
        pending.result.saved = True
    for key, pendings in by_key.items():
        note_stored(ctx, key, pendings)
    state.pending.clear()
    return written


def note_stored(
    ctx: RunContext, key: tuple[str, str, str], pendings: Sequence[PendingSave]
) -> None:
    """Put on the measurement's Result what its timing baseline now is: sessions stored (this
    save's of the processes that measured it), their median, their noise and the limit a
    compare will apply (:class:`pytest_torchperf.judge.tolerance.StoredBaseline`). Timing kinds
    only: an instruction count is one exact figure."""
    result = pendings[0].result
    this_save = sum(1 for p in pendings if p.record.statistic)
    asked = max(ctx.settings.processes, len(result.processes), 1)
    speedups = sum(1 for p in pendings if p.record.speedup)
    stored = timing_baseline(
        ctx.store.load_sessions(*key),
        pendings[-1].record,
        this_save,
        asked,
        result.left_out,
        speedups,
    )
    if stored:
        result.stored = replace(stored, refused_by=tuple(result.refused_by)).to_dict()


def timing_baseline(
    sessions: Sequence[Session],
    latest: Session,
    this_save: int,
    asked: int,
    left_out: Sequence[str] = (),
    speedups: int = 0,
) -> StoredBaseline | None:
    """What a measurement's stored ``sessions`` (``latest`` the newest) make its timing
    baseline: a save fails, ``torchperf accept`` refuses, where it is no gate. None for a kind
    whose figure is no stored timing (an instruction count is one exact figure)."""
    gate = Gate.from_record(latest.gate or {})
    if not run_part(gate.kind).keeping.guards_time:
        return None
    stored = [s.statistic for s in timed_sessions(sessions) if s.statistic]
    return stored_baseline(
        stored, this_save, asked, gate.max_slowdown, gate.max_widening, tuple(left_out), speedups
    )


def kept_too(session: Session, done: str = "") -> str:
    """What an untimed session still stores, as a clause ending in ``was``/``were`` and
    ``done`` (`` stored``): only what this measurement has (an amp variant records no
    counters, a test without outputs no numerics)."""
    counted = bool(session.per_call_instructions)
    numerics = bool(session.fingerprint or session.accuracy) or session.metric is not None
    kept = [
        what
        for what, has in (
            ("counters", session.counters is not None),
            ("numerics", numerics),
            # Where the rounds eager and the variant were timed in passed the guards.
            ("speedup vs eager", session.speedup is not None),
            ("instruction count", counted),
        )
        if has
    ]
    if not kept:
        return f"nothing else of it was{done}"
    said = kept[0] if len(kept) == 1 else ", ".join(kept[:-1]) + " and " + kept[-1]
    verb = "was" if kept == ["instruction count"] else "were"
    if counted:
        return f"its {said} {verb}{done}: a --torchperf-fallback compare judges it by the count"
    return f"its {said} {verb}{done}"


def _short(problem: str) -> str:
    """A guard's problem in a list: its head with the figure (``CPU share 0.50 < 0.90``), else
    the guard in a word (the neighbour guard's sentence, repeated per process, buried it)."""
    head = problem.split(":")[0]
    return head if ":" in problem and len(head) <= 40 else refusing_guard(problem)


def _tries(ctx: RunContext, passes: int) -> str:
    """``measured twice, after waiting 30 s``: what this process tried before it gave up on a
    pass (``--torchperf-save-wait spent``: an earlier measurement spent the budget, this one did
    not skip waiting)."""
    tries = {1: "measured once", 2: "measured twice"}.get(passes, f"measured {passes} times")
    if ctx.quiet.last_spent:
        return f"{tries}, after waiting {ctx.quiet.last_spent:.0f} s"
    if ctx.quiet.budget and not ctx.quiet.left:
        # The budget is the save's, shared out over its processes: say this one's share.
        return f"{tries}, this process's {ctx.quiet.budget:.0f} s of --torchperf-save-wait spent"
    return tries
