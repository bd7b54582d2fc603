"""What a run says of what it gated (:class:`~pytest_torchperf.judge.coverage.Coverage`): the
line every report shows, so that a run that judged nothing can never pass for a green gate, what
a save stored per measurement, and when timing was judged (or stored) for fewer than half of the
measurements a warning naming the remedies that work on such a machine. ``--torchperf-strict``
fails such a run, and a save that could not store a timing fails whatever the options
(:func:`~pytest_torchperf.judge.run_failure.run_failure`), unless a ``--torchperf-fallback
instructions`` save stored the instruction count in its place. Pure.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from pytest_torchperf.core.units import counted, format_percent, format_time
from pytest_torchperf.judge.coverage import NO_BASELINE, NO_TIMING_BASELINE, Coverage
from pytest_torchperf.judge.refusals import (
    BUSY,
    GPU_CLOCK,
    IDLE,
    IDLE_REMEDY,
    SPREAD,
    refusing_guard,
)
from pytest_torchperf.judge.tolerance import NOISY_BASELINE, StoredBaseline
from pytest_torchperf.kinds import figure_names

#: What works on a machine too busy to time on (said when timing gated under half a run).
REMEDIES = (
    "gate on instruction counts (--torchperf-instructions), compare against the base revision "
    "in alternating process pairs (--torchperf-ab REV), or run the perf tests on a quieter runner"
)
#: The same in a run whose kind keeps no baseline (alternating process pairs already).
BASELINE_FREE_REMEDIES = (
    "gate on instruction counts (--torchperf-instructions) or run the perf tests on a quieter "
    "runner"
)
#: Why a save stores no timing a guard refused, said once under what it stored.
BUSY_WHY = (
    "why not stored: a busy machine's baseline makes unchanged code look faster wherever it "
    "runs quieter; gates that need no quiet machine: A/B pairs (--torchperf-ab REV), CPU "
    "instruction counts (--torchperf-instructions)"
)

#: The same, where only the spread guard refused: the machine may be quiet and the call itself
#: uneven, so the machine is not blamed.
SPREAD_WHY = (
    "why not stored: a pass whose blocks spread that much gives a baseline that moves from one "
    "save to the next; where the call's own time varies that much, a wider --torchperf-max-spread "
    "stores it; gates that need no steady timing: A/B pairs (--torchperf-ab REV), CPU "
    "instruction counts (--torchperf-instructions)"
)


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
            f"compared {counted(n, 'measurement')}: timing judged for "
            f"{cov.timed_total} of {n}{figures}"
            + f", counters {cov.counters} of {n}, numerics {cov.numerics} of {n}"
            + (f", speedup vs eager {cov.speedups} of {cov.variants}" if cov.variants else "")
        )
        words = ("timing not judged", "counters not gated", "numerics not gated")
    else:
        # Of how many, where some stored nothing (the line then says why).
        stored = f"{n - cov.unsaved} of {n}" if cov.unsaved else str(n)
        # Timing stored too noisy to gate is stored all the same: "timing for 0 of 1" alone
        # read as nothing stored beside "timing of 4 of 4 processes stored" (a newcomer).
        noisy = f" (+{len(cov.no_gate)} stored, unable to gate)" if cov.no_gate else ""
        line = (
            f"stored {stored} measurement{'s' if n != 1 else ''}: timing for {cov.timed_total} of "
            f"{n}{figures}{noisy}, counters {cov.counters} of {n}, numerics {cov.numerics} of {n}"
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
    if cov.unjudged_speedups:  # a compare's only
        line += f"; speedup vs eager not judged: {named(cov.unjudged_speedups)}"
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
    # Which sentence says why: the machine's guards blame it, spread alone may be the call's own.
    machine = guards - {IDLE, GPU_CLOCK}
    return [
        "what the save stored, per measurement (some thinner than asked or too noisy to gate):",
        *(f"  {name}: {stored_summary(b)}" for name, b in cov.stored.items()),
        *([BUSY_WHY] if machine - {SPREAD} else [SPREAD_WHY] if machine else []),
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
        f"; {counted(n, 'session')} stored without timing but with the instruction "
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
            f" (it did gate the speedup vs eager of {counted(cov.speedups, 'variant')})"
            if cov.speedups
            else ""
        )
        + "".join(f". {said}" for said in [remedies(cov)] if said)  # none: an A/B run's new
        + ". --torchperf-strict fails such a run"
    )


def remedies(cov: Coverage) -> str:
    reasons = set(cov.not_timed)
    said = []
    if reasons - {NO_BASELINE, NO_TIMING_BASELINE, NOISY_BASELINE, IDLE}:
        # A run of alternating process pairs already is the remedy it would offer.
        said.append(
            f"On a machine this busy, {BASELINE_FREE_REMEDIES if cov.baseline_free else REMEDIES}"
        )
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
    unrecorded = cov.not_timed[NO_BASELINE] > cov.saved_new  # a compare that saved stored some
    if unrecorded and (cov.saves or not cov.baseline_free):
        # A kind that keeps no baseline (a measurement new in B) has nothing to record.
        commands = " or ".join(sorted(cov.saves)) or "pytest --torchperf-save"
        said.append(f"Record baselines with {commands} and commit the storage folder")
    return ". ".join(said)  # sentences: each starts with a capital
