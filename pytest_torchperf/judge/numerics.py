"""Accuracy gate, pure: a variant's accuracy metrics against its limits (the metrics themselves
are computed by :mod:`pytest_torchperf.measure.accuracy`)."""

from __future__ import annotations

import math
from collections.abc import Mapping

from pytest_torchperf.variants.registry import LOWER_LIMITS


def check_limits(
    label: str,
    metrics: Mapping[str, float],
    limits: Mapping[str, float],
    caveat: str | None = None,
) -> list[str]:
    """Failure sentences for metrics beyond their limits (NaN counts as beyond).

    ``caveat`` is what the machine contributes to the drift (int8 on a CPU whose int8 products
    saturate); it is told with the failure, which still fails: the outputs are what they are.
    """
    problems = []
    for key in ("rel_l2", "cosine", "max_abs", "top1"):
        if key not in limits or key not in metrics:
            continue
        value, limit = metrics[key], limits[key]
        lower = key in LOWER_LIMITS
        bad = math.isnan(value) or (value < limit if lower else value > limit)
        if bad:
            relation = "below the minimum" if lower else "above the limit"
            problems.append(f"{key} {_fmt(value)} {relation} {_fmt(limit)}")
    if metrics.get("int_mismatch"):
        problems.append(f"{int(metrics['int_mismatch'])} integer output values differ from eager")
    if not problems:
        return []
    why = f" ({caveat})" if caveat else ""
    return [
        f"{label}: outputs drifted from eager fp32: {'; '.join(problems)}{why}. If the drift is "
        f"expected for this model, widen it per test, e.g. accuracy={{'{_variant(label)}': "
        f"{{...}}}}"
    ]


def _variant(label: str) -> str:
    return label.rsplit("[", 1)[-1].rstrip("]") if label.endswith("]") else "eager"


def _fmt(value: float) -> str:
    if value == 0 or math.isnan(value):
        return str(value)
    return f"{value:.4f}" if 1e-3 <= abs(value) < 10 else f"{value:.2e}"
