"""The one label of a measurement's outcome (``FAIL (counters)``, ``pass (re-measured)``,
``measured, not saved: machine +61.0% slower``), shared by every report and the CLI. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_torchperf.judge.failures import label_kind


def outcome_label(record: Mapping[str, Any]) -> str:
    """The one label of a measurement's outcome, the same in every report and in the CLI.

    ``FAIL`` (time), ``FAIL (counters)``, ``FAIL (time+counters)``, ``FAIL (accuracy)``,
    ``FAIL (strict)``, ``INCONCLUSIVE``, ``improved``, ``new``, ``pass``, ``pass (re-measured)``,
    ``measured``, ``disabled`` (``new (no timing baseline)``: stored sessions without timing);
    then ``, saved``, ``, saved without timing: <why>`` (counters and numerics stored), ``, saved but not this process's session
    (<why>)`` (``--torchperf-processes``: the others were stored) or ``, not saved: <why>`` in
    saving runs.
    """
    verdict = record.get("verdict") or {}
    outcome = str(record["outcome"])
    label = outcome.upper() if outcome in ("fail", "inconclusive") else outcome
    timing = verdict.get("outcome")
    # An instruction-count run's verdict compares instructions, not time.
    basis = "instructions" if verdict.get("basis") == "instructions" else "time"
    if basis == "instructions" and timing == "fail":
        label = "FAIL (instructions)"
    if record.get("counter_changes"):
        # Say what failed: a counter change can fail a test whose timing passed or was inconclusive.
        label = f"FAIL ({basis}+counters)" if timing == "fail" else "FAIL (counters)"
        if timing == "inconclusive":
            label += f", {basis} inconclusive"
    elif record.get("failures"):
        # The kinds decided where each failure was found (judge/failures.py), never its words;
        # a record written before kinds were recorded gets the bare label.
        kind = label_kind(record.get("failure_kinds") or ())
        if kind is None:
            label = "FAIL"
        else:
            label = f"FAIL ({basis}+{kind})" if timing == "fail" else f"FAIL ({kind})"
    if verdict.get("untimed"):
        label += " (no timing baseline)"
    if verdict.get("suspicious"):
        label += " (re-measured)"
    if record.get("saved") and record.get("untimed"):
        label += f", saved without timing: {record['untimed']}"
    elif record.get("saved"):
        label += ", saved"
        if record.get("not_saved"):  # some processes' sessions were kept, not this one
            label += f" but not {record['not_saved']}"
    elif record.get("not_saved"):
        label += f", not saved: {record['not_saved']}"
    return label
