"""Why a run must exit non-zero although its tests passed (:func:`run_failure`): a save that
stored no timing for some measurement, or whose stored sessions disagree too much to gate, and a
strict compare that judged timing for under half of its measurements. Each says which
measurements, why, and every option or step that would mend it. Pure: works on a
:class:`~pytest_torchperf.judge.coverage.Coverage`.
"""

from __future__ import annotations

from collections import Counter

from pytest_torchperf.core.units import format_percent
from pytest_torchperf.judge.coverage import Coverage
from pytest_torchperf.judge.coverage_lines import named, reasons, remedies, weak_gate_warning
from pytest_torchperf.judge.refusals import (
    IDLE,
    IDLE_REMEDY,
    SPREAD,
    loosening_option,
    refusing_guard,
)
from pytest_torchperf.judge.tolerance import no_gate_remedy


def run_failure(cov: Coverage, strict: str | None, listed: bool = False) -> str | None:
    """Why the run must exit non-zero although its tests passed, or None.

    A save that could not store a timing for every measurement (it stored their counters and
    numerics) and no instruction count in its place, or whose stored sessions disagree so much
    that a compare's limit would be no gate: a CI job built on it would gate nothing. A strict
    compare (``strict``: what made it strict, as the message names it; None: not strict) that
    judged timing for fewer than half of its measurements. ``listed``: the summary lists what the
    save stored per measurement (:func:`~pytest_torchperf.judge.coverage_lines.stored_lines`), which
    this then names only."""
    failures = [f for f in (_untimed_failure(cov), _no_gate_failure(cov, listed)) if f]
    if failures:
        return "; and ".join(failures)
    if strict and weak_gate_warning(cov):
        return (
            f"timing was judged for only {cov.timed_total} of {cov.measurements} measurements "
            f"({reasons(cov.not_timed)}), failing: {strict}. {remedies(cov)}"
        )
    return None


def _no_gate_failure(cov: Coverage, listed: bool) -> str | None:
    wide = cov.no_gate
    if not wide:
        return None
    # The widest decides: a factor that accepts it accepts them all, and over 100 % none helps.
    worst = max(wide.values(), key=lambda b: b.limit / b.tolerance)
    each = (
        f'{named(list(wide))} (see "what the save stored" above)'
        if listed
        else "; ".join(
            f"{name} ({b.sessions} sessions, process noise {format_percent(b.noise or 0.0)}: "
            f"{format_percent(b.tolerance)} widened to {format_percent(b.limit)}, over "
            f"{format_percent(b.bound or 0.0)})"
            for name, b in wide.items()
        )
    )
    return (
        f"the timing sessions now stored disagree too much to gate for {len(wide)} of "
        f"{cov.measurements} measurements: {each}. {no_gate_remedy(worst.limit, worst.tolerance)}"
    )


def _untimed_failure(cov: Coverage) -> str | None:
    if not cov.untimed_reasons:
        return None
    missing = len(cov.untimed_reasons)
    names = cov.untimed_names or [""] * missing
    kinds = Counter(refusing_guard(why) for why in cov.untimed_reasons)
    # Each option that stores the timing anyway, with the measurements it is for: all of them
    # are needed where several guards refused.
    by_option: dict[str, list[str]] = {}
    tripped = cov.untimed_options or [[] for _ in names]
    for name, why, each in zip(names, cov.untimed_reasons, tripped, strict=True):
        for option in each or [loosening_option(why)]:
            by_option.setdefault(option, []).append(name)
    # Where the options are for different measurements, each names those it is for (a
    # parenthesis after the last one only read as if it held for both: a newcomer).
    some = len(by_option) > 1 and any(len(n) < missing for n in by_option.values())
    options = " and ".join(
        option + (f" for {named(names_for)}" if some and all(names_for) else "")
        for option, names_for in sorted(by_option.items())
    )
    steps = []
    if IDLE in kinds:
        steps.append(IDLE_REMEDY)
    spread_only = set(kinds) == {SPREAD}  # the call's own spread, or a machine's: not told which
    always = "the machine or the call is" if spread_only else "this machine is"
    if spread_only:
        steps.append("Save again when the machine is quiet, if the spread was the machine's")
    elif set(kinds) - {IDLE}:
        steps.append(
            "Save again when the machine is quiet, give the save longer to wait for it "
            "(--torchperf-save-wait=SECONDS)"
        )
    if len(steps) > 1:
        steps[0] = steps[0].replace("change that", "change an idle target's")
    # Timing sessions of earlier saves (no --torchperf-reset) still gate; say which.
    earlier = [n for n in names if n and cov.stored.get(n) and cov.stored[n].sessions > 0]
    rest = missing - len(earlier)
    timing = (
        "timing sessions of earlier saves still gate "
        + (
            f"{len(earlier)} of them ({named(earlier)}), the timing of the other {rest} is not gated"
            if rest
            else ("them" if missing > 1 else "it")
        )
        if earlier
        else ("their timing does not" if missing > 1 else "its timing does not")
    )
    # What else of them was stored (an amp item records no counters, a target returning None
    # no numerics).
    kept = [g for g in ("counters", "numerics") if any(g in each for each in cov.untimed_kept)]
    they = "they record" if missing > 1 else "it records"
    stored = (
        f"what else {they} ({', '.join(kept)}) was stored and gates from now on"
        if kept
        else f"nothing else of {'them' if missing > 1 else 'it'} gates (no counters or numerics)"
    )
    # In the ini file, or every compare must repeat them by hand to judge as the save stored
    # (a newcomer's compares judged the baseline under the default guards).
    ini = ", ".join(
        option.removeprefix("--").replace("-", "_").replace("=", " = ", 1)
        for option in sorted(by_option)
    )
    return (
        f"the save stored no timing for {missing} of {cov.measurements} measurements "
        f"({reasons(kinds)}); {stored}, {timing}. "
        f"{'; '.join(steps)}, or, where {always} always like that, store the timing "
        f"anyway with {options} (in the ini file: {ini}, so that compares judge under the "
        f"same guards)"
    )


def thin_save_line(cov: Coverage) -> str | None:
    """The last line of a save that passed but stored fewer timing sessions than processes
    measured some measurement (a busy machine refused the others): its baselines gate, but at
    the limit as asked where one session cannot tell the machine's noise. None otherwise."""
    if cov.mode != "save":
        return None
    thin = [name for name, b in cov.stored.items() if b.thin and b.baseline is not None]
    if not thin:
        return None
    asked = max(cov.stored[name].asked for name in thin)
    return (
        f"torchperf: the save passed, but stored timing from fewer processes than the {asked} "
        f"asked for {len(thin)} of {cov.measurements} measurements ({named(thin)}): see "
        f'"what the save stored" above; a save on a quieter machine stores them all'
    )
