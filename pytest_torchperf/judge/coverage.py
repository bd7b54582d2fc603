"""How much a run gated, and why it gated no more, counted over its measurement records
(:class:`Coverage`): per gate, how many measurements a compare judged (on time, instruction
counts or A/B pairs; on counters; on numerics) and why the others' timing was not judged (a busy
machine, spread, a slower machine, no baseline, no timing baseline); for a save, what it stored.
What the run then says of it is :mod:`pytest_torchperf.judge.coverage_lines` and
:mod:`pytest_torchperf.judge.run_failure`. Pure: works on measurement records.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_torchperf.judge.inputs import recorded_kind
from pytest_torchperf.judge.kind_protocol import Kind
from pytest_torchperf.judge.kinds import judging
from pytest_torchperf.judge.numerics import NO_VALUES, degenerate_reference, empty_fingerprint
from pytest_torchperf.judge.refusals import refusing_guard
from pytest_torchperf.judge.tolerance import StoredBaseline
from pytest_torchperf.store.record import Record, RecordedVerdict
from pytest_torchperf.store.sessions import session_of

#: The gates every kind shares; any other a comparison gated is a performance figure: its
#: verdict's basis (a kind another plugin adds judges on a basis of its own, named as such).
SHARED_GATES = ("counters", "numerics", "speedup")
# The performance figures' names, by the basis that judged them, are the kinds' own
# (KindSpec.figures: "1 on A/B pairs").

#: Why a measurement's timing was not judged when the verdict says so in no other way.
NO_BASELINE = "no baseline"
NO_TIMING_BASELINE = "no timing baseline"


@dataclass
class Coverage:
    """What one run gated (a compare) or stored (a save), counted over its measurements."""

    #: ``compare`` or ``save`` (a run that does both is a compare: its verdicts gate).
    mode: str
    measurements: int = 0
    #: Measurements whose timing was judged (compare) or stored (save), by basis.
    timed: Counter[str] = field(default_factory=Counter)
    counters: int = 0
    numerics: int = 0
    #: Compare: variants whose speedup vs eager was judged (a same-moment ratio: a speed gate
    #: that a busy machine does not take away). Save: variants whose speedup was stored.
    speedups: int = 0
    #: Compare: the variants' measurements whose kind judges a timed speedup (time).
    variants: int = 0
    #: Compare: those whose speedup was not judged, each with why (a save that stored none
    #: leaves the one speed gate a busy runner keeps off, and the line must say so).
    unjudged_speedups: list[str] = field(default_factory=list)
    #: Save runs: variants whose speedup was not stored (a guard refused the rounds it was
    #: timed in).
    no_speedups: list[str] = field(default_factory=list)
    #: Save runs: measurements whose session this save stored with an instruction count for a
    #: ``--torchperf-fallback`` compare to judge by.
    counted: set[str] = field(default_factory=set)
    #: Why the rest were not judged (or stored) on time: reason -> measurements.
    not_timed: Counter[str] = field(default_factory=Counter)
    #: Save runs: why the timings a guard refused were not stored (those sessions were stored
    #: without timing); each fails the save, and names the option that stores it anyway.
    untimed_reasons: list[str] = field(default_factory=list)
    #: Their measurements' names, in the same order (empty for records without a name).
    untimed_names: list[str] = field(default_factory=list)
    #: Each one's options of every guard its pass tripped (empty: only its reason's is known).
    untimed_options: list[list[str]] = field(default_factory=list)
    #: What else of each was stored and gates (``counters``, ``numerics``): an amp item records
    #: no counters, a target returning None no numerics.
    untimed_kept: list[list[str]] = field(default_factory=list)
    #: Save runs of ``--torchperf-fallback instructions``: sessions stored without timing but
    #: with their instruction count, which a fallback compare judges instead (no failure).
    counted_instead: int = 0
    #: The measurements behind each ``not_timed`` reason, and those whose counters or numerics
    #: were not gated (with why, where it is known), so a line can name them.
    names: dict[str, list[str]] = field(default_factory=dict)
    no_counters: list[str] = field(default_factory=list)
    #: The commands that record the missing baselines (their kinds' :attr:`Kind.save`).
    saves: set[str] = field(default_factory=set)
    #: Compare runs that also saved: the new measurements whose first baseline this run stored
    #: (nothing left to record for them).
    saved_new: int = 0
    #: Some measurement's kind keeps no baseline (an A/B run: both sides measured now), so
    #: neither recording a baseline nor running such a kind is a remedy to offer it.
    baseline_free: bool = False
    no_numerics: list[str] = field(default_factory=list)
    #: Save runs: measurements of which nothing was stored (their test failed or skipped, a
    #: guard refused every process, a test only timed in an instruction-count run).
    unsaved: int = 0
    #: Save runs: what each timed measurement's baseline now is, by measurement name.
    stored: dict[str, StoredBaseline] = field(default_factory=dict)

    @property
    def timed_total(self) -> int:
        return sum(self.timed.values())

    @property
    def no_gate(self) -> dict[str, StoredBaseline]:
        """Save runs: measurements whose stored sessions imply a limit too wide to gate (but
        those a ``--torchperf-fallback`` save stored the instruction count of: a fallback
        compare judges them by it where their timing cannot decide)."""
        return {name: b for name, b in self.stored.items() if b.wide and name not in self.counted}

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (reports' ``torchperf_coverage`` field)."""
        return {
            "mode": self.mode,
            "measurements": self.measurements,
            "timed": dict(self.timed),
            "counters": self.counters,
            "numerics": self.numerics,
            "not_timed": dict(self.not_timed),
        }


def coverage(records: Iterable[Record], comparing: bool) -> Coverage | None:
    """The run's coverage (None when it neither compared nor saved anything)."""
    cov = Coverage("compare" if comparing else "save")
    for record in records:
        # A torchperf_timer block is counted where gate=True made it judged or stored; an
        # ungated one has no verdict and stores nothing, so the checks below leave it out.
        if record.disabled:
            continue
        verdict = record.verdict
        if record.baseline_only:
            # Only the baseline has it (side A's, removed in B): this run measured nothing of
            # it to gate, and its timing not judged is no sign of a run that gated too little.
            continue
        if comparing:
            if verdict is None or not verdict.order:
                continue  # measured without a gate (a test that failed before its verdict)
            _count_compare(cov, record, verdict)
        else:
            if not (record.saved or record.not_saved):
                continue  # measured without a gate
            _count_save(cov, record)
    return cov if cov.measurements else None


def _count_compare(cov: Coverage, record: Record, verdict: RecordedVerdict) -> None:
    cov.measurements += 1
    kind = _kind(record)
    cov.baseline_free |= not kind.save
    if record.untimed:  # a compare that also saved stored it without timing
        _count_untimed(cov, record)
    gated = record.gated
    basis = next((b for b in gated if b not in SHARED_GATES), None)
    name = record.name
    if basis:
        cov.timed[basis] += 1
    else:
        _not_timed(cov, _why_not_judged(verdict), record)
    cov.counters += "counters" in gated
    cov.numerics += "numerics" in gated
    cov.speedups += "speedup" in gated
    # Nothing stored for this environment: that, not what a baseline lacks, is why.
    unstored = NO_BASELINE if verdict.outcome == "new" and not verdict.untimed else None
    if record.variant != "eager" and kind.judges_timed_speedups:
        cov.variants += 1
        if "speedup" not in gated and name:
            cov.unjudged_speedups.append(f"{name} ({_why_no_speedup(record, unstored)})")
    if "counters" not in gated and name:
        cov.no_counters.append(f"{name} ({unstored or _why_no_counters(record)})")
    if "numerics" not in gated and name:
        cov.no_numerics.append(f"{name} ({unstored or _why_no_numerics(record)})")


#: Why a variant's numerics are not gated although its outputs were compared.
_DEGENERATE = "its eager fp32 reference is degenerate"


def _not_timed(cov: Coverage, why: str, record: Record) -> None:
    """Count ``record``'s measurement as not timed for reason ``why``, and name it there
    (records without a name are counted only)."""
    cov.not_timed[why] += 1
    if record.name:
        cov.names.setdefault(why, []).append(record.name)
    if why == NO_BASELINE and record.saved:  # a compare that also saved stored it
        cov.saved_new += 1
    elif why == NO_BASELINE:  # the command that records its kind's baseline (a count's differs)
        save = _kind(record).save
        if save:
            cov.saves.add(save)


def _numerics_stored(record: Record) -> bool:
    """Whether a saved measurement's numerics gate from now on: a user metric, or outputs
    compared (a variant's accuracy) or fingerprinted that hold values and a fit reference."""
    fingerprint = session_of(record).fingerprint
    compared = bool(record.accuracy) or bool(fingerprint and not empty_fingerprint(fingerprint))
    return record.metric is not None or (compared and not _unjudgeable(record))


def _unjudgeable(record: Record) -> bool:
    """Its outputs cannot be judged: a degenerate eager reference, or outputs of no values."""
    empty = empty_fingerprint(session_of(record).fingerprint) and not record.accuracy
    return empty or degenerate_reference(record.accuracy or {}) is not None


def _why_no_numerics(record: Record) -> str:
    """One reason, the same in a save and a compare: a target whose outputs hold no tensor
    values (eager's empty fingerprint, a variant's reference of none), a degenerate eager
    reference, or nothing stored."""
    degenerate = degenerate_reference(record.accuracy or {})
    empty = empty_fingerprint(session_of(record).fingerprint) and not record.accuracy
    if degenerate == NO_VALUES or empty:
        return f"the target's {NO_VALUES}"
    if degenerate:
        return f"{_DEGENERATE}: {degenerate}"
    return "no output fingerprint or metric stored"


def _why_no_speedup(record: Record, unstored: str | None) -> str:
    if unstored:
        return unstored
    if not record.speedup:
        return "this run timed none: a guard refused its rounds"
    return "the baseline holds none, or ones too noisy to gate; save again"


def _why_no_counters(record: Record) -> str:
    from pytest_torchperf.variants.registry import COMPILED_VARIANTS

    if record.counters is not None:  # none compared (Candidate.gates_besides_time)
        # Saving again helps where the stored session predates a counter, not where every
        # counter is ignored on purpose (ignore_counters): say both.
        return (
            "the stored counters hold none it counts and does not ignore: save again to store "
            "its own, unless ignore_counters names every counter on purpose"
        )
    if record.variant != "eager":  # its model's eager ops (run.steps.model_ops), its graphs
        graphs = ", graphs ignored" if record.variant in COMPILED_VARIANTS else ""
        return (
            f"counters off, ops ignored{graphs}, or a low-precision model, whose ops depend on "
            f"the CPU class"
        )
    return "counters off"


def _why_not_judged(verdict: RecordedVerdict) -> str:
    if verdict.outcome == "new":
        return NO_TIMING_BASELINE if verdict.untimed else NO_BASELINE
    return str(verdict.guard or verdict.outcome or "not judged")


def _kind(record: Record) -> Kind:
    """The kind (its judge part) the gate recorded with the record's session names."""
    return judging(recorded_kind(session_of(record).gate or {}))


def _count_save(cov: Coverage, record: Record) -> None:
    cov.measurements += 1
    baseline = StoredBaseline.from_dict(record.stored) if record.stored else None
    name = record.name or f"measurement {cov.measurements}"
    if baseline is not None:
        cov.stored[name] = baseline
    session = session_of(record)
    if record.saved and _kind(record).gates_untimed(session):
        cov.counted.add(name)
    if record.saved and not record.untimed:
        # What the save stored as the figure: counts in an instruction run; time otherwise (a
        # fallback run stores its count beside the timing).
        basis = _kind(record).stored_figure
        if baseline is None or not baseline.wide:  # else stored, but no gate (no_gate)
            cov.timed[basis] += 1
    elif record.untimed:  # refused by a guard: stored without its timing
        _not_timed(cov, refusing_guard(record.untimed), record)
        _count_untimed(cov, record)
    else:  # not stored by design (a test timed in an instruction-count run) or for its count
        _not_timed(cov, record.not_saved or "not stored", record)
    stored = record.saved
    cov.unsaved += not stored
    cov.counters += stored and record.counters is not None
    if stored and record.counters is None and record.name:
        cov.no_counters.append(f"{record.name} ({_why_no_counters(record)})")
    numerics = _numerics_stored(record)
    cov.numerics += stored and numerics
    if stored and not numerics and _unjudgeable(record) and record.name:
        cov.no_numerics.append(f"{record.name} ({_why_no_numerics(record)})")
    if stored and record.speedup:  # a variant, timed against eager: in any session stored?
        if (baseline and baseline.speedups) or (session.speedup and not record.not_saved):
            cov.speedups += 1
        else:
            cov.no_speedups.append(name)


def _count_untimed(cov: Coverage, record: Record) -> None:
    """A session stored without its timing: a failure of the save, unless a fallback save stored
    its instruction count there (a ``--torchperf-fallback`` compare judges it by that count, so
    the measurement is still gated: docs/instructions.md)."""
    if _kind(record).gates_untimed(session_of(record)):
        cov.counted_instead += 1
    else:
        cov.untimed_reasons.append(str(record.untimed))
        cov.untimed_names.append(record.name)
        cov.untimed_options.append(list(record.untimed_options))
        kept = {"counters": record.counters is not None, "numerics": _numerics_stored(record)}
        cov.untimed_kept.append([gate for gate, stored in kept.items() if stored])


def strict_run(records: Sequence[Record]) -> bool:
    """Whether the run's measurements were judged under ``--torchperf-strict``, where the run
    did not record it (a baseline folder, files written before it was recorded): every
    measurement's gate is strict. A marker's ``strict=True`` makes its own measurements' gates
    strict, not the others', and is no strict run."""
    return bool(records) and all((session_of(r).gate or {}).get("strict") for r in records)
