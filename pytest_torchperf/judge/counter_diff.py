"""Comparing two measurements' noise-free counters, exactly, and which of them depend on the CPU.

Pure: the counters are collected by :mod:`pytest_torchperf.measure.counters`; here they are
diffed (``ops changed: aten::addmm 2 -> 3, new aten::copy_ x4; FLOPs +33.1%``) and classified.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pytest_torchperf.core.units import format_bytes
from pytest_torchperf.measure.flop_formulas import FORMULA_OPS

#: Dtypes of low-precision and quantized tensors. A call producing any of them runs code whose
#: kernels *and* dispatch-level decompositions torch and torchao choose from the CPU's
#: instruction sets: torchao's dynamic int8 MLP ran 15 ``aten::_to_copy`` on an AVX-512 Xeon and 9
#: on one with AVX-512 BF16/AMX (same torch build), while fp32 code counted the same ops, FLOPs
#: and memory on both and under ISA caps down to no vector ISA
#: (``benchmarks/counter_portability.py``).
LOW_PRECISION_DTYPES = frozenset(
    {
        "bfloat16",
        "float16",
        "int8",
        "uint8",
        "qint8",
        "quint8",
        "qint32",
        "quint4x2",
        "float8_e4m3fn",
        "float8_e5m2",
        "float8_e4m3fnuz",
        "float8_e5m2fnuz",
        "int4",
        "uint4",
    }
)
#: Op names that mean quantized code even where the tensors look fp32 (dequantize on the fly).
_QUANTIZED_OP_WORDS = ("quantize", "_int_mm", "int8", "int4", "_scaled_mm", "weight_int")
#: Counters that depend on the CPU class for low-precision/quantized code (``ignore`` names).
CPU_DEPENDENT_COUNTERS = ("ops", "flops", "memory")


def low_precision(counters: Mapping[str, Any]) -> bool:
    """Whether the counted call ran low-precision or quantized code (bf16/fp16/int8 tensors or
    quantized ops): then its ops, FLOPs and memory depend on the CPU class."""
    if LOW_PRECISION_DTYPES & set(counters.get("dtypes") or ()):
        return True
    return any(word in op for op in counters.get("ops") or {} for word in _QUANTIZED_OP_WORDS)


#: Relative tolerance on peak memory: allocator rounding and workspace choices may move it a little.
MEMORY_TOLERANCE = 0.01


def _relative(old: float, new: float) -> str:
    if old == 0:
        return "new" if new else "0"
    return f"{(new - old) / old * 100:+.1f}%"


def _recounted(baseline: Mapping[str, Any], current: Mapping[str, Any]) -> bool:
    """Whether the two FLOP figures were counted differently: a baseline saved before the fused
    ops' formulas (``flop_formulas``) counted those ops as 0, so its figure is not compared
    (until saved again) where the model runs one of them. Everything else still is."""
    old, new = baseline.get("flop_formulas", 1), current.get("flop_formulas", 1)
    return old != new and bool(FORMULA_OPS & set(baseline.get("ops") or {}))


#: The op-count counters and how their changes are headed: a measurement's own, and the ops of
#: the model a variant (compiled, amp, ...) was built from (eager's, kept with the variant:
#: its own counters cannot see an edit of the model).
_OP_COUNTS = (("ops", "ops changed"), ("model_ops", "the model's eager ops changed"))
#: The counters that count ops: where a measurement has one, its counters tell other code.
OP_KEYS = tuple(key for key, _ in _OP_COUNTS)


def _op_changes(old_ops: Mapping[str, int], new_ops: Mapping[str, int]) -> list[str]:
    """``aten::addmm 2 -> 3``, ``new aten::tanh x1``, ``removed aten::relu x1``, by op name."""
    parts = []
    for op in sorted(set(old_ops) | set(new_ops)):
        old, new = old_ops.get(op, 0), new_ops.get(op, 0)
        if old == new:
            continue
        if old == 0:
            parts.append(f"new {op} x{new}")
        elif new == 0:
            parts.append(f"removed {op} x{old}")
        else:
            parts.append(f"{op} {old} -> {new}")
    return parts


def diff_counters(
    baseline: Mapping[str, Any],
    current: Mapping[str, Any],
    ignore: Iterable[str] = (),
) -> list[str]:
    """Human-readable changes between two counter dicts (empty when nothing gated changed).

    FLOPs, op counts and parameters must match exactly; peak memory within :data:`MEMORY_TOLERANCE`.
    Counters missing on either side (older baselines) are not compared.
    """
    skip = set(ignore)
    changes: list[str] = []
    for key, head in _OP_COUNTS:
        if "ops" not in skip and key in baseline and key in current:
            parts = _op_changes(baseline[key], current[key])
            if parts:
                changes.append(f"{head}: {', '.join(parts)}")
    if (
        "flops" not in skip
        and "flops" in baseline
        and "flops" in current
        and not _recounted(baseline, current)
    ):
        if baseline["flops"] != current["flops"]:
            partial = current.get("flops_partial") or baseline.get("flops_partial")
            changes.append(
                f"FLOPs {_relative(baseline['flops'], current['flops'])} "
                f"({baseline['flops']:,} -> {current['flops']:,}"
                + (f"; partial: no FLOP formula for {', '.join(partial)}" if partial else "")
                + ")"
            )
    if "params" not in skip and "params" in baseline and "params" in current:
        if baseline["params"] != current["params"] or baseline.get("param_bytes") != current.get(
            "param_bytes"
        ):
            changes.append(
                f"parameters {baseline['params']:,} -> {current['params']:,} "
                f"({format_bytes(baseline.get('param_bytes'))} -> "
                f"{format_bytes(current.get('param_bytes'))})"
            )
    if "graphs" not in skip:
        for key, label in (
            ("graphs", "graphs"),
            ("graph_breaks", "graph breaks"),
            ("recompiles", "recompiles while timing"),
        ):
            if key in baseline and key in current and baseline[key] != current[key]:
                text = f"{label} {baseline[key]} -> {current[key]}"
                reasons = current.get("break_reasons") if key == "graph_breaks" else None
                if reasons:
                    text += f" (first reason: {reasons[0]})"
                changes.append(text)
    if "memory" not in skip and "peak_memory" in baseline and "peak_memory" in current:
        old, new = baseline["peak_memory"], current["peak_memory"]
        if abs(new - old) > MEMORY_TOLERANCE * max(old, 1):
            changes.append(
                f"peak memory {_relative(old, new)} ({format_bytes(old)} -> {format_bytes(new)})"
            )
    return changes


#: Each counter :func:`diff_counters` compares, with the ``ignore_counters`` name that leaves it
#: out (``graph_breaks`` and ``recompiles`` go with ``graphs``, a variant's ``model_ops`` with
#: ``ops``).
_COMPARED = (
    ("ops", "ops"),
    ("model_ops", "ops"),
    ("flops", "flops"),
    ("params", "params"),
    ("graphs", "graphs"),
    ("graph_breaks", "graphs"),
    ("recompiles", "graphs"),
    ("peak_memory", "memory"),
)


def compared_counters(
    baseline: Mapping[str, Any], current: Mapping[str, Any], ignore: Iterable[str] = ()
) -> list[str]:
    """The counters :func:`diff_counters` compares between ``baseline`` and ``current``: those
    both hold and ``ignore`` does not name (FLOPs not where the two were counted differently).
    Empty where none is: both have counters, yet none of them is gated (a compiled variant with
    ``ignore_counters=["graphs"]`` against a session saved before ``model_ops`` was kept)."""
    skip = set(ignore)
    return [
        key
        for key, name in _COMPARED
        if name not in skip
        and key in baseline
        and key in current
        and not (key == "flops" and _recounted(baseline, current))
    ]


#: A change line's opening words (:func:`diff_counters`) -> the name ``ignore_counters`` takes.
_IGNORE_NAMES = (
    ("ops changed", "ops"),
    ("the model's eager ops changed", "ops"),
    ("FLOPs", "flops"),
    ("parameters", "params"),
    ("graph", "graphs"),
    ("recompiles", "graphs"),
    ("peak memory", "memory"),
)


def changes_since_stored(
    stored: Sequence[Mapping[str, Any] | None],
    current: Mapping[str, Any] | None,
    ignore: Iterable[str] = (),
) -> list[str]:
    """The changes of ``current`` against the newest of the ``stored`` sessions' counters
    (oldest first; sessions without counters are skipped): what a compare gates, and what tells
    a save or ``torchperf accept`` that the stored sessions measured other code. Empty where
    either side has no counters."""
    latest = newest_counters(stored)
    if latest is None or not current:
        return []
    return diff_counters(latest, current, ignore)


def compared_since_stored(
    stored: Sequence[Mapping[str, Any] | None],
    current: Mapping[str, Any] | None,
    ignore: Iterable[str] = (),
) -> list[str]:
    """The counters :func:`changes_since_stored` compares (:func:`compared_counters` against the
    newest stored counters); empty where either side has none."""
    latest = newest_counters(stored)
    if latest is None or not current:
        return []
    return compared_counters(latest, current, ignore)


def newest_counters(stored: Sequence[Mapping[str, Any] | None]) -> Mapping[str, Any] | None:
    """The newest of the stored sessions' counters (oldest first; those without are skipped)."""
    return next((c for c in reversed(stored) if c), None)


def changed_head(name: str, basis: object) -> str:
    """``mlp: counters changed vs baseline``, or what else the kind of the verdict's ``basis``
    says its changes are against (``in B vs side A``): the head of a counter change's message,
    worded once for the live run and ``torchperf compare``'s replay of it."""
    from pytest_torchperf.kinds import against_of

    return f"{name}: counters changed {against_of(basis)}"


def ignore_hint(changes: Iterable[str]) -> str:
    """How to stop gating the counters ``changes`` name: ``ignore_counters=["memory"]``."""
    names = dict.fromkeys(
        name for line in changes for start, name in _IGNORE_NAMES if line.startswith(start)
    )
    listed = ", ".join(f'"{name}"' for name in names) or "..."
    return f"to stop gating {'it' if len(names) == 1 else 'them'} pass ignore_counters=[{listed}]"
