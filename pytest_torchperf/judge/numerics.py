"""Accuracy gate, pure: a variant's accuracy metrics against its limits (the metrics themselves
are computed by :mod:`pytest_torchperf.measure.accuracy`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

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
    degenerate = degenerate_reference(metrics)
    if degenerate is not None:
        return [
            f"{label}: outputs drifted from eager fp32: {'; '.join(problems)}{why}. The eager "
            f"fp32 reference is degenerate: {degenerate}, so these metrics compare rounding "
            f"noise, not the variant, and widening the limits would make the check "
            f"meaningless. {_REALISTIC}"
        ]
    return [
        f"{label}: outputs drifted from eager fp32: {'; '.join(problems)}{why}. If the drift is "
        f"expected for this model, widen it per test, e.g. accuracy={{'{_variant(label)}': "
        f"{{...}}}}"
    ]


_REALISTIC = (
    "Measure with realistic weights (trained, or initialised as in training) and inputs like "
    "the data the model serves"
)


def unjudged_numerics(label: str, metrics: Mapping[str, float]) -> str | None:
    """The warning for a variant whose outputs are within its limits of a degenerate eager
    reference (all zero, constant, non-finite): a pass there proves nothing, so it is said to be
    no judgement rather than left to read as one. None when the reference can judge."""
    degenerate = degenerate_reference(metrics)
    if degenerate is None:
        return None
    if degenerate == NO_VALUES:
        return (
            f"{label}: numerics not judged: the target's {degenerate}: return the model's "
            f"outputs from it to have them checked"
        )
    return (
        f"{label}: numerics not judged: the eager fp32 reference is degenerate ({degenerate}), "
        f"so its outputs matching the variant's compares rounding noise, not the variant. "
        f"{_REALISTIC}"
    )


#: Outputs whose largest magnitude is below this are "all near zero": no trained network's
#: outputs live there, and float rounding (let alone int8's 256 levels) swamps them.
NEAR_ZERO = 1e-6


#: A reference with nothing to compare: the target returned None, or no tensor.
NO_VALUES = "outputs hold no tensor values (None, or no tensor)"


def empty_fingerprint(fingerprint: Mapping[str, Any] | None) -> bool:
    """Whether an output fingerprint was taken of outputs holding no tensor (the target
    returned None): it checks nothing. A missing one is not empty, it is absent."""
    return fingerprint is not None and fingerprint.get("leaves") == []


def degenerate_reference(metrics: Mapping[str, float]) -> str | None:
    """What makes the eager reference unfit to judge a variant by relative metrics (its
    non-finite values, all of it near zero, or one constant value), or None."""
    n = int(metrics.get("n", 0))
    if n == 0 and metrics.get("n_int") == 0:  # nothing compared (a target returning None)
        return NO_VALUES
    if n == 0:  # integer or bool outputs only: compared exactly, no reference scale to judge
        return None
    nonfinite = int(metrics.get("ref_nonfinite", 0))
    if nonfinite:
        return f"{nonfinite} of its {n} output values are not finite (inf or NaN)"
    largest = metrics.get("ref_max_abs")
    if largest is None:
        return None
    if largest < NEAR_ZERO:
        return (
            f"every one of its {n} output values is within {_fmt(largest)} of zero "
            f"(max |output| {_fmt(largest)})"
        )
    if n > 1 and metrics.get("ref_range", 1.0) <= 1e-6 * largest:
        return f"all {n} of its output values are the same ({_fmt(largest)} in magnitude)"
    return None


def _variant(label: str) -> str:
    return label.rsplit("[", 1)[-1].rstrip("]") if label.endswith("]") else "eager"


def _fmt(value: float) -> str:
    if value == 0 or math.isnan(value):
        return str(value)
    return f"{value:.4f}" if 1e-3 <= abs(value) < 10 else f"{value:.2e}"
