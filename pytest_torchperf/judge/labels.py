"""The one label of a measurement's outcome (``FAIL (counters)``, ``pass (re-measured)``,
``measured, not saved: machine +61.0% slower``), shared by every report and the CLI. Pure."""

from __future__ import annotations

from pytest_torchperf.core.units import format_change, format_percent
from pytest_torchperf.judge.failures import label_categories
from pytest_torchperf.judge.tolerance import NOISY_BASELINE, StoredBaseline
from pytest_torchperf.kinds import label_of, removed_label_of
from pytest_torchperf.store.record import Record, RecordedVerdict


def inconclusive_head(name: str, guard: str | None, ratio: float | None) -> str:
    """``mlp: timing inconclusive (busy machine, +27.9% vs baseline)``: an inconclusive
    verdict in a few words, where its full reason is said once elsewhere."""
    change = f"{format_change(ratio)} vs baseline" if ratio else None
    why = ", ".join(w for w in (guard, change) if w)
    return f"{name}: timing inconclusive" + (f" ({why})" if why else "")


def outcome_label(record: Record) -> str:
    """The one label of a measurement's outcome, the same in every report and in the CLI.

    ``FAIL`` (time), ``FAIL (counters)``, ``FAIL (time, counters)``, ``FAIL (accuracy)``,
    ``FAIL (counters, numerics), time inconclusive``, ``FAIL (strict)``, ``INCONCLUSIVE``,
    ``INCONCLUSIVE (noisy baseline)`` (a limit widened beyond ``max_widening``),
    ``improved``, ``new``, ``removed in B`` (:func:`outcome_word`), ``pass``, ``pass
    (re-measured)``, ``measured``, ``disabled``
    (``new (no timing baseline)``: stored sessions without timing): a failure names every kind
    that failed, the timed figure (``time`` or ``instructions``) first, then the counters, then
    the kinds of :data:`pytest_torchperf.judge.failures.CATEGORIES` in that order; then ``, saved``,
    ``, saved without timing: <why>`` (counters and numerics stored), ``, saved but not this
    process's session (<why>)`` (``--torchperf-processes``: the others were stored) or ``, not
    saved: <why>`` in saving runs, with ``; no gate: ...`` where the timing sessions now stored
    disagree too much to gate (the save's failure line names them too).
    """
    verdict = record.verdict or RecordedVerdict()
    outcome = record.outcome
    label = outcome.upper() if outcome in ("fail", "inconclusive") else outcome_word(record)
    timing = verdict.outcome
    # The kind the verdict was judged on names its figure: an instruction-count verdict
    # compares instructions, not time.
    basis = label_of(verdict.basis)
    failed = [basis] if timing == "fail" else []
    if record.counter_changes:
        # A counter change can fail a test whose timing passed or was inconclusive.
        failed.append("counters")
    # The kinds were decided where each failure was found (judge/failures.py), never from its
    # words; a record written before kinds were recorded adds none (the bare label).
    failed += [k for k in label_categories(record.failure_kinds) if k not in failed]
    if failed and failed != ["time"]:  # a timing failure alone is the bare FAIL
        label = f"FAIL ({', '.join(failed)})"
    # A limit too wide to gate is no passing weather: the label says why nothing was judged.
    noisy = f" ({NOISY_BASELINE})" if verdict.guard == NOISY_BASELINE else ""
    if label.startswith("FAIL") and timing == "inconclusive":
        label += f", {basis} inconclusive{noisy}"
    elif label == "INCONCLUSIVE":
        label += noisy
    if verdict.untimed:
        label += " (no timing baseline)"
    if verdict.suspicious:
        label += " (re-measured)"
    if record.saved and record.untimed:
        label += f", saved without timing: {record.untimed}"
    elif record.saved:
        label += ", saved"
        if record.not_saved:  # some processes' sessions were kept, not this one
            label += f" but not {record.not_saved}"
        label += _no_gate(record)
    elif record.not_saved:
        label += f", not saved: {record.not_saved}"
    return label


def outcome_word(record: Record) -> str:
    """What a run's count of outcomes (``1 fail, 1 new, 1 removed in B``) calls ``record``'s:
    its outcome, and for a measurement only its baseline has, the words of the kind its verdict
    was judged on (``removed in B``: side A's of an A/B run)."""
    if not record.baseline_only:
        return record.outcome
    return removed_label_of((record.verdict or RecordedVerdict()).basis)


def _no_gate(record: Record) -> str:
    """``; no gate: ...`` where the timing sessions a save left stored imply a limit too wide to
    gate (a row read ``measured, saved`` while the run failed for it)."""
    stored = StoredBaseline.from_dict(record.stored) if record.stored else None
    if stored is None or not stored.wide:
        return ""
    return (
        f"; no gate: the timing sessions stored disagree too much (limit "
        f"{format_percent(stored.limit)} > {format_percent(stored.bound or 0.0)})"
    )
