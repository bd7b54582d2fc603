"""Across-run checks of a measurement beyond its time: a variant's speedup vs eager, the output
fingerprint ("numerics changed") and the user metric, against the stored sessions.

Pure module shared by the plugin (``--torchperf-compare``) and ``torchperf compare``.
"""

from __future__ import annotations

import statistics
from typing import Any, Mapping, Sequence

from .accuracy import fingerprint_drift

REMEDY = ("If intended (a model edit, a torch upgrade), record new baselines with "
          "pytest --torchperf-save --torchperf-reset")


def drift_checks(label: str, sessions: Sequence[Mapping[str, Any]], *,
                 speedup: Mapping[str, float] | None, fingerprint: Mapping[str, Any] | None,
                 metric: float | None, limits: Mapping[str, float],
                 max_slowdown: float) -> tuple[list[str], list[str]]:
    """(failures, warnings) of one measurement against its stored ``sessions``.

    * speedup: fails when the variant, relative to eager in the same rounds, got slower by more
      than ``max_slowdown`` (current speedup's p75 below ``stored median / (1 + max_slowdown)``);
      only the median below it is inconclusive (a warning).
    * fingerprint: fails when outputs moved by more than ``limits["rel_l2"]`` or changed shape.
    * metric: fails when it moved by more than ``limits["metric"]`` (absolute).
    """
    failures: list[str] = []
    warnings: list[str] = []
    stored_speedups = [s["speedup"]["median"] for s in sessions if s.get("speedup")]
    if speedup and stored_speedups:
        base = statistics.median(stored_speedups)
        limit = base / (1.0 + max_slowdown)
        text = (f"{label}: speedup vs eager fell from x{base:.2f} to x{speedup['median']:.2f} "
                f"(relative to eager this variant is {base / speedup['median'] - 1.0:+.0%} slower; "
                f"IQR of {int(speedup['n'])} interleaved rounds x{speedup['p25']:.2f}-"
                f"x{speedup['p75']:.2f}; limit {max_slowdown:.0%} = x{limit:.2f})")
        if speedup["p75"] < limit:
            failures.append(text + ". Eager ran in the same rounds, so a slower machine does "
                            "not explain it: this variant lost ground against eager")
        elif speedup["median"] < limit:
            warnings.append(text + " - inconclusive: the rounds' spread overlaps the limit")
    stored_fp = next((s["fingerprint"] for s in reversed(sessions) if s.get("fingerprint")), None)
    if fingerprint is not None and stored_fp is not None and "rel_l2" in limits:
        drift, problem = fingerprint_drift(stored_fp, fingerprint)
        if problem:
            failures.append(f"{label}: numerics changed since the baseline: {problem}. {REMEDY}")
        elif drift > limits["rel_l2"]:
            failures.append(
                f"{label}: numerics changed since the baseline: outputs moved by {drift:.2e} "
                f"(relative; limit {limits['rel_l2']:.2e}, from accuracy rel_l2). {REMEDY}. "
                f"Random models/inputs must be created inside the test or its function-scoped "
                f"fixtures (torchperf seeds them with seed=0) or seeded by you")
    stored_metric = next((s["metric"] for s in reversed(sessions) if s.get("metric") is not None), None)
    if metric is not None and stored_metric is not None and "metric" in limits:
        if abs(metric - stored_metric) > limits["metric"]:
            failures.append(
                f"{label}: metric changed since the baseline: {stored_metric:.4g} -> {metric:.4g} "
                f"({metric - stored_metric:+.4g}; limit ±{limits['metric']:.4g}). {REMEDY}")
    return failures, warnings
