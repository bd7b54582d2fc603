"""How much a run gated, and why it gated no more: the line every report shows, so that a run
that judged nothing can never pass for a green gate. Pure: works on measurement records.

A compare says, per gate, how many measurements it judged: on time (or instruction counts, or
A/B pairs), on counters, on numerics; and why the others' timing was not judged (a busy machine,
spread, a slower machine, no baseline, no timing baseline). A save says what it stored. When
timing was judged (or stored) for fewer than half of the measurements, a warning names the
remedies that work on such a machine; ``--torchperf-strict`` fails such a run, and a save that
could not store a timing fails whatever the options (:func:`run_failure`), unless a
``--torchperf-fallback instructions`` save stored the instruction count in its place (a
fallback compare judges the measurement by it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_torchperf.core.units import format_percent, format_time
from pytest_torchperf.judge.inputs import recorded_kind
from pytest_torchperf.judge.kinds import judging
from pytest_torchperf.judge.numerics import degenerate_reference
from pytest_torchperf.judge.samples import BUSY, GPU_CLOCK, IDLE, IDLE_REMEDY, refusing_guard
from pytest_torchperf.judge.tolerance import NOISY_BASELINE, StoredBaseline
from pytest_torchperf.kinds import figure_names
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

#: What works on a machine too busy to time on (said when timing gated under half a run).
REMEDIES = (
    "gate on instruction counts (--torchperf-instructions), compare against the base revision "
    "in alternating process pairs (--torchperf-ab REV), or run the perf tests on a quieter runner"
)
#: Why a save stores no timing a guard refused, said once under what it stored.
BUSY_WHY = (
    "why not stored: a busy machine's baseline makes unchanged code look faster wherever it "
    "runs quieter; gates that need no quiet machine: A/B pairs (--torchperf-ab REV), CPU "
    "instruction counts (--torchperf-instructions)"
)


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
    #: Save runs of ``--torchperf-fallback instructions``: sessions stored without timing but
    #: with their instruction count, which a fallback compare judges instead (no failure).
    counted_instead: int = 0
    #: The measurements behind each ``not_timed`` reason, and those whose counters or numerics
    #: were not gated (with why, where it is known), so a line can name them.
    names: dict[str, list[str]] = field(default_factory=dict)
    no_counters: list[str] = field(default_factory=list)
    #: The commands that record the missing baselines (their kinds' :attr:`Kind.save`).
    saves: set[str] = field(default_factory=set)
    no_numerics: list[str] = field(default_factory=list)
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
        if record.disabled or record.source == "timer":
            continue
        verdict = record.verdict
        if comparing:
            if verdict is None or not verdict.order:
                continue  # measured without a gate (a test that failed before its verdict)
            _count_compare(cov, record, verdict)
        else:
            if not (record.saved or record.not_saved):
                continue  # a failing test stores nothing, and says so itself
            _count_save(cov, record)
    return cov if cov.measurements else None


def _count_compare(cov: Coverage, record: Record, verdict: RecordedVerdict) -> None:
    cov.measurements += 1
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
    if "counters" not in gated and name:
        cov.no_counters.append(f"{name} ({unstored or _why_no_counters(record)})")
    if "numerics" not in gated and name:
        degenerate = degenerate_reference(record.accuracy or {})
        why = (
            f"{_DEGENERATE}: {degenerate}"
            if degenerate
            else unstored or "no output fingerprint or metric stored"
        )
        cov.no_numerics.append(f"{name} ({why})")


#: Why a variant's numerics are not gated although its outputs were compared.
_DEGENERATE = "its eager fp32 reference is degenerate"


def _not_timed(cov: Coverage, why: str, record: Record) -> None:
    """Count ``record``'s measurement as not timed for reason ``why``, and name it there
    (records without a name are counted only)."""
    cov.not_timed[why] += 1
    if record.name:
        cov.names.setdefault(why, []).append(record.name)
    if why == NO_BASELINE:  # the command that records its kind's baseline (a count's differs)
        save = judging(recorded_kind(session_of(record).gate or {})).save
        if save:
            cov.saves.add(save)


def _why_no_counters(record: Record) -> str:
    if record.counters is not None:
        return "no counters stored"
    if record.variant not in ("eager", "compiled"):
        return "only eager and compiled variants record counters"
    return "counters off"


def _why_not_judged(verdict: RecordedVerdict) -> str:
    if verdict.outcome == "new":
        return NO_TIMING_BASELINE if verdict.untimed else NO_BASELINE
    return str(verdict.guard or verdict.outcome or "not judged")


def _gate_kind(record: Record) -> str:
    """The kind the gate recorded with the record's session names."""
    return recorded_kind(session_of(record).gate or {})


def _count_save(cov: Coverage, record: Record) -> None:
    cov.measurements += 1
    baseline = StoredBaseline.from_dict(record.stored) if record.stored else None
    name = record.name or f"measurement {cov.measurements}"
    if baseline is not None:
        cov.stored[name] = baseline
    session = session_of(record)
    if record.saved and judging(_gate_kind(record)).gates_untimed(session):
        cov.counted.add(name)
    if record.saved and not record.untimed:
        # What the save stored as the figure: counts in an instruction run; time otherwise (a
        # fallback run stores its count beside the timing).
        basis = judging(_gate_kind(record)).stored_figure
        if baseline is None or not baseline.wide:  # else stored, but no gate (no_gate)
            cov.timed[basis] += 1
    elif record.untimed:  # refused by a guard: stored without its timing
        _not_timed(cov, refusing_guard(record.untimed), record)
        _count_untimed(cov, record)
    else:  # not stored by design (a test timed in an instruction-count run) or for its count
        _not_timed(cov, record.not_saved or "not stored", record)
    stored = record.saved
    cov.counters += stored and record.counters is not None
    if stored and record.counters is None and record.name:
        cov.no_counters.append(f"{record.name} ({_why_no_counters(record)})")
    degenerate = degenerate_reference(record.accuracy or {})
    cov.numerics += stored and bool(
        (not degenerate and (session.fingerprint or record.accuracy)) or record.metric is not None
    )
    if stored and degenerate and record.metric is None and record.name:
        cov.no_numerics.append(f"{record.name} ({_DEGENERATE}: {degenerate})")
    if stored and record.speedup:  # a variant, timed against eager: in any session stored?
        if (baseline and baseline.speedups) or (session.speedup and not record.not_saved):
            cov.speedups += 1
        else:
            cov.no_speedups.append(name)


def _count_untimed(cov: Coverage, record: Record) -> None:
    """A session stored without its timing: a failure of the save, unless a fallback save stored
    its instruction count there (a ``--torchperf-fallback`` compare judges it by that count, so
    the measurement is still gated: docs/instructions.md)."""
    if judging(_gate_kind(record)).gates_untimed(session_of(record)):
        cov.counted_instead += 1
    else:
        cov.untimed_reasons.append(str(record.untimed))
        cov.untimed_names.append(record.name)
        cov.untimed_options.append(list(record.untimed_options))


def reasons(counter: Counter[str], names: Mapping[str, list[str]] | None = None) -> str:
    """``2 busy machine, 1 spread``; with ``names``, each reason's measurements after it."""
    return ", ".join(
        f"{n} {why}" + (f" ({named(names[why])})" if names and names.get(why) else "")
        for why, n in counter.most_common()
    )


def named(names: Sequence[str], most: int = 4) -> str:
    """Up to ``most`` names, then how many more (a last one is named, not counted)."""
    if len(names) <= most + 1:
        return ", ".join(names)
    return ", ".join(names[:most]) + f" and {len(names) - most} more"


def coverage_line(cov: Coverage) -> str:
    """One line: how many measurements each gate judged (or a save stored), and why not more."""
    n = cov.measurements
    timed = " + ".join(f"{count} on {figure_names().get(b, b)}" for b, count in cov.timed.items())
    # Which figures, where any is not a time (an instruction-count run gates and stores counts).
    figures = f" ({timed})" if len(cov.timed) > 1 or "time" not in cov.timed and timed else ""
    if cov.mode == "compare":
        line = (
            f"gated {n} measurement{'s' if n != 1 else ''}: timing judged for "
            f"{cov.timed_total} of {n}{figures}"
            + f", counters {cov.counters} of {n}, numerics {cov.numerics} of {n}"
            + (f", speedup vs eager for {cov.speedups}" if cov.speedups else "")
        )
        words = ("timing not judged", "counters not gated", "numerics not gated")
    else:
        line = (
            f"stored {n} measurement{'s' if n != 1 else ''}: timing for {cov.timed_total} of "
            f"{n}{figures}, counters {cov.counters} of {n}, numerics {cov.numerics} of {n}"
        )
        variants = cov.speedups + len(cov.no_speedups)
        line += f", speedup vs eager {cov.speedups} of {variants}" if variants else ""
        words = ("timing not stored", "counters not stored", "numerics stored but unable to gate")
    if cov.not_timed:
        line += f"; {words[0]}: {reasons(cov.not_timed, cov.names)}"
    if cov.no_counters:
        line += f"; {words[1]}: {named(cov.no_counters)}"
    if cov.no_numerics:
        line += f"; {words[2]}: {named(cov.no_numerics)}"
    if cov.no_speedups:  # a save's only
        line += (
            f"; speedup vs eager not stored: {named(cov.no_speedups)} (a guard refused the "
            f"rounds eager and the variant were timed in)"
        )
    if cov.no_gate:  # a save's only
        line += (
            f"; the timing sessions stored disagree too much to gate: {len(cov.no_gate)} "
            f"({named(list(cov.no_gate))})"
        )
    return line + _counted_instead(cov)


def summary_lines(cov: Coverage | None, failure: str | None, stored: bool = True) -> list[str]:
    """What a run's summary says under its table (the terminal, ``torchperf merge`` and
    ``compare``, the markdown and HTML reports): the coverage line, a save's baselines when any
    is thin or noisy (with ``stored``), then the run failure, else the weak-gate warning."""
    if cov is None:
        return []
    warning = weak_gate_warning(cov)
    lines = [coverage_line(cov), *(stored_lines(cov) if stored else [])]
    if failure:
        lines.append(f"run failed: {failure}")
    elif warning:
        lines.append(f"warning: {warning}")
    return lines


def stored_lines(cov: Coverage) -> list[str]:
    """A save's baselines, one line per measurement, when any is thinner than asked (fewer
    sessions stored than processes measured it) or too noisy to gate; nothing otherwise. Where a
    guard refused a timing for the machine (not an idle target, nor a GPU's clock), why once."""
    if cov.mode != "save" or not any(b.thin or b.wide for b in cov.stored.values()):
        return []
    refused = [b for name, b in cov.stored.items() if name not in cov.counted and b.left_out]
    guards = {guard for b in refused for guard in b.refused_by}
    if any(not b.refused_by for b in refused):  # a record from before refused_by was kept
        guards |= {refusing_guard(why) for why in cov.untimed_reasons} or {BUSY}
    return [
        "what the save stored, per measurement (some thinner than asked or too noisy to gate):",
        *(f"  {name}: {stored_summary(b)}" for name, b in cov.stored.items()),
        *([BUSY_WHY] if guards - {IDLE, GPU_CLOCK} else []),
    ]


def stored_summary(b: StoredBaseline) -> str:
    """What one measurement's timing baseline now is, and what a compare will make of it."""
    sessions = f"timing of {b.this_save} of {b.asked} processes stored" + (
        f" (not: {', '.join(b.left_out)})" if b.left_out else ""
    )
    if b.sessions != b.this_save:
        sessions += f", {b.sessions} timing sessions in all with earlier saves'"
    if b.baseline is None:
        return f"{sessions}: no timing stored"
    parts = [sessions, f"baseline p25 {format_time(b.baseline)}"]
    if b.noise is None:
        parts.append("one session: its noise is unknown, judged at the limit as asked")
    else:
        parts.append(f"process noise {format_percent(b.noise)}")
    judged = f"a compare judges at {format_percent(b.limit)}"
    if b.wide and b.bound is not None:
        judged += f": no gate (over {format_percent(b.bound)})"
    elif b.limit > b.tolerance:
        judged += f" (widened from {format_percent(b.tolerance)})"
    return ", ".join(parts) + f"; {judged}"


def _counted_instead(cov: Coverage) -> str:
    if not cov.counted_instead:
        return ""
    n = cov.counted_instead
    return (
        f"; {n} session{'s' if n != 1 else ''} stored without timing but with the instruction "
        f"count, which a --torchperf-fallback compare judges instead"
    )


def weak_gate_warning(cov: Coverage) -> str | None:
    """A warning when timing was judged (compare) for fewer than half of the measurements."""
    if cov.mode != "compare" or 2 * cov.timed_total >= cov.measurements:
        return None
    return (
        f"timing was judged for only {cov.timed_total} of {cov.measurements} measurements "
        f"({reasons(cov.not_timed)}): this run "
        f"{'did not gate' if not cov.timed_total else 'hardly gated'} their time"
        + (
            f" (it did gate the speedup vs eager of {cov.speedups} variant"
            f"{'s' if cov.speedups != 1 else ''})"
            if cov.speedups
            else ""
        )
        + f". {remedies(cov)}. "
        f"--torchperf-strict fails such a run"
    )


def remedies(cov: Coverage) -> str:
    reasons = set(cov.not_timed)
    said = []
    if reasons - {NO_BASELINE, NO_TIMING_BASELINE, NOISY_BASELINE, IDLE}:
        said.append(f"On a machine this busy, {REMEDIES}")
    if IDLE in reasons:  # the timed code waited: no machine is the cause
        said.append(IDLE_REMEDY)
    if NOISY_BASELINE in reasons:
        said.append(
            "Where the stored sessions disagree too much to gate, save them again on a quieter "
            "machine (pytest --torchperf-save --torchperf-reset) or gate on instruction counts "
            "(--torchperf-instructions)"
        )
    if NO_TIMING_BASELINE in reasons:
        said.append(
            "Store the missing timings with pytest --torchperf-save on a quiet machine (their "
            "counters and numerics are stored already)"
        )
    if NO_BASELINE in reasons:
        commands = " or ".join(sorted(cov.saves)) or "pytest --torchperf-save"
        said.append(f"Record baselines with {commands} and commit the storage folder")
    return ". ".join(said)  # sentences: each starts with a capital


def strict_run(records: Sequence[Record]) -> bool:
    """Whether the run's measurements were judged under ``--torchperf-strict``."""
    return any((session_of(r).gate or {}).get("strict") for r in records)
