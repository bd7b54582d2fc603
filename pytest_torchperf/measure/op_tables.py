"""Top-ops tables (what a profiled call's ops cost, as a session stores them) and what two of
them say about a slowdown: the operator diff of a failed verdict's "why" line. Pure, so the
wording of explanations is unit-tested without torch; the profiling that makes the tables is
:mod:`pytest_torchperf.measure.profiling`.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypedDict

from pytest_torchperf.core.units import format_time

#: Rows kept in a stored top-ops table.
TOP_OPS_LIMIT = 15
#: How that self time appears in op tables: Python code, framework glue, anything not an op.
OUTSIDE_OPS = "(outside torch ops: Python, glue, profiler overhead)"


class OpRow(TypedDict):
    """One row of a top-ops table (a session stores it as ``top_ops``): the op, its calls and
    its self CPU and device time per call, in seconds."""

    op: str
    calls: float
    self_cpu: float
    self_device: float


def format_top_ops(rows: Sequence[Mapping[str, Any]]) -> str:
    """Plain-text table of :func:`top_ops` rows."""
    width = max([len("op"), *(len(r["op"]) for r in rows)])
    lines = [f"{'op'.ljust(width)}  {'calls':>7}  {'self CPU':>10}  {'self device':>11}"]
    for r in rows:
        lines.append(
            f"{r['op'].ljust(width)}  {r['calls']:>7g}  {format_time(r['self_cpu']):>10}  "
            f"{format_time(r['self_device']) if r['self_device'] else '-':>11}"
        )
    return "\n".join(lines)


def _per_op(
    tables: Sequence[Sequence[Mapping[str, Any]]], self_time: Callable[[list[float]], float]
) -> list[OpRow]:
    """One op table from several: per op, the median of its calls and ``self_time`` of its self
    times in the tables that have it, most time first."""

    merged: dict[str, dict[str, list[float]]] = {}
    for table in tables:
        for row in table:
            entry = merged.setdefault(row["op"], {"calls": [], "self_cpu": [], "self_device": []})
            for key in entry:
                entry[key].append(float(row.get(key, 0.0) or 0.0))
    rows: list[OpRow] = [
        {
            "op": op,
            "calls": statistics.median(entry["calls"]),
            "self_cpu": self_time(entry["self_cpu"]),
            "self_device": self_time(entry["self_device"]),
        }
        for op, entry in merged.items()
    ]
    rows.sort(key=lambda r: -(r["self_cpu"] + r["self_device"]))
    return rows


def median_top_ops(tables: Sequence[Sequence[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """One op table from several sessions' tables: per op, the median of its self times.

    A single session's profile can be distorted (a busy machine, one slow pass); the median over
    the stored sessions is the robust reference for naming the ops that grew. Ops missing from a
    session's table (below its cut-off) count as absent there, not as zero.
    """

    if len(tables) <= 1:
        return [dict(row) for table in tables for row in table]
    return [dict(row) for row in _per_op(tables, statistics.median)]


def quickest_per_op(tables: Sequence[Sequence[Mapping[str, Any]]]) -> list[OpRow]:
    """One op table from the tables of consecutive profiled chunks: per op, its smallest self
    times per call (and its median calls).

    On a busy machine the profiler charges a preemption to whichever op was running: at a CPU
    share of 0.5, a 5 us wrapper op (``aten::linear``) once read +2,847 % in a single profile
    and was named as the cause of a slowdown that its callee carried. Preemption only ever adds
    time, so an op's quickest chunk is its cost without it (the same reason timing keeps the
    quickest blocks); an op would have to be preempted in every chunk to look slower. Pure.
    """
    return _per_op(tables, min)


#: Share of all self time gained that one op must carry, with its call count unchanged, to be
#: named as the op that changed (else the growth is "spread over the ops").
OP_SHARE = 0.5
#: Share of the gain that the time outside ops (or an op that runs more often) must carry to be
#: named at all; and the relative growth below which an op's self time is profile noise.
NAMED_SHARE = 0.25
NOISE = 0.25


def diff_top_ops(
    baseline: Sequence[Mapping[str, Any]],
    current: Sequence[Mapping[str, Any]],
    slowdown: float | None = None,
    counters: tuple[Mapping[str, Any] | None, Mapping[str, Any] | None] = (None, None),
) -> list[str]:
    """What two op tables say about a slowdown, naming an op only where the evidence supports it.

    A profile charges an op with whatever slows it, including what it does not own: after more
    Python work between ops, intra-op threads must wake up and caches are cold, so ops' self
    times grow although no op changed (a 6,000-step Python loop in a transformer's ``forward``
    read ``aten::mm +533 %`` with two threads). So:

    * time outside ops (Python, glue) that grew by a quarter or more is named first;
    * an op that runs more often per call than before is named (op counts also gate exactly);
    * ops that grew with the same calls are named as the cause only when the time outside ops
      did not grow and one op carries at least half of all self time gained (and a quarter or
      more of its own); otherwise their growth is said to be shared (spread over the ops, or
      following the Python work).

    ``slowdown`` (seconds per call, from the timing) adds how much of it the profile accounts
    for. ``counters`` (the baseline's and this run's, as counted per call) tell what the op
    tables cannot: that an op under the stored table's cut-off did not run at all before (a new
    op is not "the same calls"), and that the call's FLOPs grew (an op with the same calls but
    more work per call, larger shapes, is not a slower op). Pure.
    """
    old = {r["op"]: r for r in baseline}
    compared_outside = OUTSIDE_OPS in old  # tables stored before that row cannot compare it
    floor = min((_self(r) for r in baseline), default=0.0)  # ops below the stored cut-off
    gains: dict[str, float] = {}
    for row in current:
        if row["op"] == OUTSIDE_OPS and not compared_outside:
            continue
        before = old.get(row["op"])
        # An op missing from the stored table took up to its cut-off then: only what it takes
        # beyond that is known to be new.
        gain = _self(row) - (_self(before) if before is not None else floor)
        if gain > 0:
            gains[row["op"]] = gain
    gained = sum(gains.values())
    if gained <= 0:
        return []
    phrases: list[str] = []
    outside = gains.pop(OUTSIDE_OPS, 0.0)
    outside_before = _self(old[OUTSIDE_OPS]) if compared_outside else 0.0
    python_grew = outside > 0 and outside >= NOISE * outside_before
    if python_grew:
        phrases.append(
            f"{OUTSIDE_OPS} self time {_percent(outside, outside_before)} "
            f"(+{format_time(outside)} per call): "
            + (
                "the time went to Python code between the ops"
                if outside >= OP_SHARE * gained
                else "more Python code runs between the ops"
            )
        )
    now = {r["op"]: r for r in current}
    ops_then, ops_now = (_op_counts(c) for c in counters)
    same_calls: list[tuple[float, str]] = []
    # The counters count each op once per dispatch, as their own line says; the profiler may
    # count one twice (aten::eye and its nested eye.m_out are both "aten::eye").
    counted = bool(ops_then and ops_now)
    for op, gain in sorted(gains.items(), key=lambda item: -item[1]):
        before = old.get(op)
        calls_now = float(now[op].get("calls", 0.0))
        if counted and (op in ops_then or op in ops_now):
            calls_then, calls_now = ops_then.get(op, 0.0), ops_now.get(op, 0.0)
        elif before is not None:
            calls_then = float(before.get("calls", 0.0))
            if counted and abs(calls_now - calls_then) >= 0.5:
                # Not counted: it runs inside a counted op (aten::resolve_conj in aten::matmul)
                # and follows its calls, which the counted op's phrase names.
                continue
        else:  # under the stored cut-off before: its calls then are unknown
            same_calls.append((gain, op))
            continue
        if abs(calls_now - calls_then) >= 0.5:
            phrases.append(
                f"{op} runs {calls_then:g} -> {calls_now:g} times per call (+{format_time(gain)})"
            )
        elif before is None or gain >= NOISE * _self(before):
            same_calls.append((gain, op))
    grown = sum(gain for gain, _ in same_calls)
    largest = ", ".join(f"{op} +{format_time(gain)}" for gain, op in same_calls[:2])
    if python_grew and grown >= NAMED_SHARE * gained:
        phrases.append(
            f"ops' self time grew too, with the same calls (largest: {largest}): ops slow down "
            f"after more Python work between them (threads waking up, cold caches), so look at "
            f"the Python change first"
        )
    elif not python_grew and same_calls and same_calls[0][0] >= OP_SHARE * gained:
        gain, op = same_calls[0]
        flops = _flops_growth(counters)
        if op in old and flops is not None:
            phrases.append(
                f"{op} self time {_percent(gain, _self(old[op]))} (+{format_time(gain)}), the "
                f"same calls, while the call's FLOPs grew {flops}: each call does more work "
                f"(larger shapes), not a slower op"
            )
        elif op in old:
            phrases.append(
                f"{op} self time {_percent(gain, _self(old[op]))} (+{format_time(gain)}), the "
                f"same calls: this op got slower"
            )
        else:
            cut = f" (under the stored table's cut-off of {format_time(floor)} before)"
            phrases.append(
                f"{op} new in the top ops, +{format_time(gain)} at least{cut}: this op got "
                f"slower or runs more often"
            )
    elif not python_grew and len(same_calls) > 1 and grown >= NAMED_SHARE * gained:
        phrases.append(
            f"self time grew across {len(same_calls)} ops with the same calls (largest: "
            f"{largest}): no one op stands out; what they share got slower (threads, caches, or "
            f"the machine)"
        )
    if slowdown is not None and slowdown > 0 and gained < 0.5 * slowdown:
        phrases.append(
            f"the profile accounts for +{format_time(gained)} of the +{format_time(slowdown)} per "
            f"call measured: the rest is outside what the profiler sees (data, allocator, the "
            f"machine)"
        )
    return phrases


def _op_counts(counters: Mapping[str, Any] | None) -> dict[str, float]:
    """A counters record's op counts per call (``ops``), or none."""
    ops = counters.get("ops") if counters else None
    return {str(k): float(v) for k, v in ops.items()} if isinstance(ops, Mapping) else {}


def _flops_growth(
    counters: tuple[Mapping[str, Any] | None, Mapping[str, Any] | None],
) -> str | None:
    """How much the call's FLOPs grew (``+300.0%``), when by more than profile noise with the
    very same ops and calls (so the shapes grew, not another op's work), else None."""
    then, now = (c.get("flops") if c else None for c in counters)
    if not isinstance(then, (int, float)) or not isinstance(now, (int, float)) or then <= 0:
        return None
    ops_then, ops_now = (_op_counts(c) for c in counters)
    if not ops_then or ops_then != ops_now:  # an op added or dropped may carry the FLOPs
        return None
    return f"{(now / then - 1) * 100:+.1f}%" if now >= (1 + NOISE) * then else None


def _self(row: Mapping[str, Any]) -> float:
    return float(row["self_cpu"]) + float(row["self_device"])


def _percent(gain: float, before: float) -> str:
    return f"{gain / before * 100:+.0f}%" if before > 0 else "new"
