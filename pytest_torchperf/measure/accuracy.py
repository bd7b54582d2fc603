"""Numerical accuracy of a variant against the eager fp32 reference, output fingerprints and the
user's metric.

Two questions, two tools:

* *Within a run*: how far are a variant's outputs from eager's on the same inputs?
  :func:`compare_outputs` gives relative L2 error, cosine similarity, max abs error and (for
  classifier-shaped outputs) top-1 agreement; :func:`pytest_torchperf.judge.numerics.check_limits`
  turns them into failure sentences against the variant's tolerances
  (:func:`pytest_torchperf.variants.registry.tolerances`, overridable per test).
* *Across runs*: did the numbers change since the baseline (a torch upgrade, a model edit)?
  :func:`fingerprint` keeps summary statistics and a fixed probe of 16 values per output leaf
  (never whole tensors); :func:`fingerprint_drift` compares two (pure, no torch). The user's
  metric (:func:`user_metric`) is stored beside it: :mod:`pytest_torchperf.judge.drift` tells
  "numerics changed" by the fingerprint, a drop in what the user cares about by the metric.

Outputs may be tensors, tuples/lists, dicts (incl. ``ModelOutput``-style ordered dicts) and
dataclasses, nested. torch is imported lazily.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pytest_torchperf.core.errors import OptionError
from pytest_torchperf.core.types import JSON, JSONObject, UserValue

if TYPE_CHECKING:  # torch is imported lazily, when outputs are compared
    import torch

    from pytest_torchperf.measure.timing import Measurer
    from pytest_torchperf.options.measure_options import MeasureOptions

#: Values kept per output leaf in a fingerprint.
PROBE_SIZE = 16


class OutputMismatchError(ValueError):
    """A variant's outputs do not have the reference's structure (leaves, shapes)."""


def leaves(output: UserValue, path: str = "out") -> list[tuple[str, torch.Tensor]]:
    """``(path, tensor)`` pairs of every tensor (and float) in a nested output, in a stable order."""
    import torch

    if isinstance(output, torch.Tensor):
        return [(path, output)]
    if isinstance(output, bool) or output is None or isinstance(output, (str, bytes)):
        return []
    if isinstance(output, (int, float)):
        return [(path, torch.tensor(float(output)))]
    children: list[tuple[str, UserValue]]
    if dataclasses.is_dataclass(output) and not isinstance(output, type):
        children = [(f".{f.name}", getattr(output, f.name)) for f in dataclasses.fields(output)]
    elif isinstance(output, Mapping):
        children = [(f"[{key!r}]", value) for key, value in output.items()]
    elif isinstance(output, (list, tuple)):
        children = [(f"[{index}]", value) for index, value in enumerate(output)]
    else:
        return []
    return [leaf for suffix, value in children for leaf in leaves(value, path + suffix)]


def leaf_difference(
    first: Sequence[tuple[str, Iterable[int]]],
    second: Sequence[tuple[str, Iterable[int]]],
    first_name: str,
    second_name: str,
) -> str | None:
    """The first difference between two outputs' ``(path, shape)`` leaves, named, or None.

    ``out[0]['boxes']: shape (7, 4) in the variant vs (9, 4) in eager``; a leaf only one side
    has is named with its shape and the leaf counts.
    """
    for (p1, s1), (p2, s2) in zip(first, second, strict=False):
        if p1 != p2:
            return (
                f"output structure differs: {p1} {tuple(s1)} in {first_name} where "
                f"{second_name} has {p2} {tuple(s2)} ({len(first)} vs {len(second)} output "
                f"tensors)"
            )
        if tuple(s1) != tuple(s2):
            return f"{p1}: shape {tuple(s2)} in {second_name} vs {tuple(s1)} in {first_name}"
    if len(first) != len(second):
        longer, name = (first, first_name) if len(first) > len(second) else (second, second_name)
        path, shape = longer[min(len(first), len(second))]
        return (
            f"output structure differs: only {name} has {path} {tuple(shape)} "
            f"({len(first)} vs {len(second)} output tensors)"
        )
    return None


def compare_outputs(reference: UserValue, candidate: UserValue) -> dict[str, float]:
    """Accuracy of ``candidate`` against ``reference`` over all floating leaves (in float64).

    Returns ``rel_l2`` (||c - r|| / ||r||), ``cosine``, ``max_abs``, ``n`` (values compared), the
    reference's scale (``ref_max_abs``, ``ref_range``, ``ref_nonfinite``) and,
    when a leaf is classifier-shaped (at least 2-D, last dim >= 2), ``top1`` (argmax agreement
    over the last dim of the first such leaf). Integer leaves must match exactly
    (``int_mismatch`` counts the values that do not, ``n_int`` those compared).
    """
    import torch

    refs, cands = [], []
    top1: float | None = None
    int_mismatch = int_values = 0
    ref, cand = leaves(reference), leaves(candidate)
    problem = leaf_difference(
        [(p, tuple(t.shape)) for p, t in ref],
        [(p, tuple(t.shape)) for p, t in cand],
        "eager",
        "the variant",
    )
    if problem:
        raise OutputMismatchError(
            f"{problem}, so the values cannot be compared element by element (a detection model "
            f"keeping another number of boxes, say); measure a fixed-size output (e.g. the scores "
            f"before thresholding) to check accuracy"
        )
    for (_, r), (_, c) in zip(ref, cand, strict=True):
        if r.is_floating_point() or r.is_complex():
            refs.append(r.detach().to("cpu", torch.float64).reshape(-1))
            cands.append(c.detach().to("cpu", torch.float64).reshape(-1))
            if top1 is None and r.dim() >= 2 and r.shape[-1] >= 2 and r.numel() > 0:
                agree = r.detach().float().argmax(-1) == c.detach().float().argmax(-1)
                top1 = float(agree.float().mean().item())
        else:
            int_mismatch += int((r.detach().cpu() != c.detach().cpu()).sum().item())
            int_values += r.numel()
    metrics: dict[str, float] = {
        "n": float(sum(t.numel() for t in refs)),
        "int_mismatch": float(int_mismatch),
        # Integer and bool values compared exactly (labels, masks): outputs of neither kind
        # (a target returning None) compare nothing at all.
        "n_int": float(int_values),
    }
    if refs:
        r = torch.cat(refs)
        c = torch.cat(cands)
        d = c - r
        r_norm, c_norm, d_norm = (float(torch.linalg.vector_norm(v)) for v in (r, c, d))
        metrics["rel_l2"] = d_norm / r_norm if r_norm > 0 else d_norm
        metrics["cosine"] = (
            float(torch.dot(r, c)) / (r_norm * c_norm)
            if r_norm > 0 and c_norm > 0
            else (1.0 if r_norm == c_norm else 0.0)
        )
        metrics["max_abs"] = float(d.abs().max()) if d.numel() else 0.0
        # The reference's own scale: a degenerate one (all near zero, constant, non-finite)
        # makes the relative metrics above compare rounding noise (judge.numerics says so).
        finite = r[torch.isfinite(r)]
        metrics["ref_nonfinite"] = float(r.numel() - finite.numel())
        if finite.numel():
            metrics["ref_max_abs"] = float(finite.abs().max())
            metrics["ref_range"] = float(finite.max() - finite.min())
    if top1 is not None:
        metrics["top1"] = top1
    return metrics


def fingerprint(output: UserValue) -> JSONObject:
    """Summary statistics of an output, small enough to store with every baseline session.

    Per floating leaf: path, shape, dtype, mean, std, L2 norm, max abs value and ``PROBE_SIZE``
    values at evenly spaced flat positions (the positions depend on the shape only, so two
    fingerprints of same-shaped outputs probe the same elements).
    """
    import torch

    out: list[JSON] = []
    for path, tensor in leaves(output):
        t = tensor.detach().to("cpu")
        entry: JSONObject = {
            "path": path,
            "shape": list(t.shape),
            "dtype": str(t.dtype).replace("torch.", ""),
        }
        if (t.is_floating_point() or t.is_complex()) and t.numel():
            flat = t.to(torch.float64).reshape(-1)
            finite_mask = torch.isfinite(flat)
            finite = flat[finite_mask]
            step = max(1, flat.numel() // PROBE_SIZE)
            # Statistics over the finite values (masked logits hold -inf legitimately); the count
            # of the others is kept so that a change in it is seen. JSON has no NaN/inf.
            probe = torch.nan_to_num(flat[::step][:PROBE_SIZE], nan=0.0, posinf=0.0, neginf=0.0)
            entry.update(
                {
                    "mean": _sig(finite.mean()) if finite.numel() else 0.0,
                    "std": _sig(finite.std()) if finite.numel() > 1 else 0.0,
                    "l2": _sig(torch.linalg.vector_norm(finite)) if finite.numel() else 0.0,
                    "absmax": _sig(finite.abs().max()) if finite.numel() else 0.0,
                    "nonfinite": int(flat.numel() - int(finite_mask.sum())),
                    "probe": [_sig(v) for v in probe],
                }
            )
        out.append(entry)
    return {"leaves": out}


def _sig(value: float | torch.Tensor) -> float:
    number = float(value)
    return float(f"{number:.9g}") if math.isfinite(number) else 0.0


def fingerprint_drift(
    stored: Mapping[str, Any], current: Mapping[str, Any]
) -> tuple[float, str | None]:
    """How far ``current`` moved from ``stored``: (relative drift, structural change or None).

    The drift of a leaf is the larger of the relative L2 change of its probe values and the
    relative change of its L2 norm; the result is the largest over leaves.
    """
    old, new = stored.get("leaves", []), current.get("leaves", [])
    problem = leaf_difference(
        [(x.get("path"), x.get("shape") or ()) for x in old],
        [(x.get("path"), x.get("shape") or ()) for x in new],
        "the baseline",
        "this run",
    )
    if problem:
        return math.inf, problem
    drift = 0.0
    for a, b in zip(old, new, strict=False):
        if a.get("nonfinite", 0) != b.get("nonfinite", 0):
            return math.inf, (
                f"{a.get('path')}: non-finite values {a.get('nonfinite', 0)} -> "
                f"{b.get('nonfinite', 0)}"
            )
        if "probe" not in a or "probe" not in b:
            continue
        pa, pb = a["probe"], b["probe"]
        norm = math.sqrt(sum(v * v for v in pa))
        delta = math.sqrt(sum((x - y) ** 2 for x, y in zip(pa, pb, strict=False)))
        probe_change = delta / norm if norm > 0 else delta
        l2_change = abs(b["l2"] - a["l2"]) / a["l2"] if a["l2"] > 0 else abs(b["l2"])
        drift = max(drift, probe_change, l2_change)
    return drift, None


#: Two calls whose outputs differ by more than this (relative) are nondeterministic: their
#: fingerprint is not stored, so random outputs never raise "numerics changed".
DETERMINISM_TOLERANCE = 1e-6

#: Marks "no second output captured" (``None`` is a legitimate output).
NO_OUTPUT = object()


def output_fingerprint(
    output: UserValue, again: UserValue, measurer: Measurer
) -> JSONObject | None:
    """Output fingerprint, or None when two calls disagree (random outputs cannot be gated).

    ``again`` is a second call's output, or :data:`NO_OUTPUT` to make one with ``measurer``.
    """
    first = fingerprint(output)
    if again is NO_OUTPUT:
        again = measurer.run_once()
    # A compiled target's second output comes from its eager original: allow rounding noise.
    drift, problem = fingerprint_drift(first, fingerprint(again))
    return first if problem is None and drift <= DETERMINISM_TOLERANCE else None


def user_metric(measurer: Measurer, options: MeasureOptions, label: str) -> float | None:
    """The user metric ``metric(outputs, targets)`` on ``data`` for this target (or None)."""
    __tracebackhide__ = True
    if options.metric is None:
        return None
    if options.data is None:
        raise OptionError(f"{label}: metric= needs data=(inputs, targets) to compute it on")
    data_inputs, targets = options.data
    args = data_inputs if isinstance(data_inputs, (tuple, list)) else (data_inputs,)
    with measurer.prepared():
        outputs = measurer.target(*args)
    value = options.metric(outputs, targets)
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise OptionError(
            f"{label}: metric= returned {value!r}; it must return a number "
            f"(e.g. accuracy as a float)"
        ) from None
    if not math.isfinite(number):
        raise OptionError(f"{label}: metric= returned {number} (not finite)")
    return number
