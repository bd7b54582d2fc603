"""torch.profiler around user code: the profiler fixture's class, NVTX ranges, compact top-ops
tables, and the operator diff that explains a confirmed slowdown.

Profiling always runs in its own pass, never while timing (its overhead was 3-25 % on small models).
:func:`diff_top_ops` is pure so the wording of explanations is unit-tested without torch.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypedDict, cast

from pytest_torchperf.core.types import UserValue
from pytest_torchperf.core.units import format_time

if TYPE_CHECKING:  # torch is imported lazily, when something is profiled
    from torch.autograd.profiler_util import EventList, FunctionEventAvg
    from torch.profiler import profile, record_function

#: Rows kept in a stored top-ops table.
TOP_OPS_LIMIT = 15
#: Our own range names in traces; excluded from op tables (they contain the whole call).
RANGE_PREFIX = "torchperf::"
#: Name of the range around each profiled call; its *self* time is what ran outside torch ops.
CALL_RANGE = f"{RANGE_PREFIX}call"
#: How that self time appears in op tables: Python code, framework glue, anything not an op.
OUTSIDE_OPS = "(outside torch ops: Python, glue, profiler overhead)"


class OpRow(TypedDict):
    """One row of a top-ops table (a session stores it as ``top_ops``): the op, its calls and
    its self CPU and device time per call, in seconds."""

    op: str
    calls: float
    self_cpu: float
    self_device: float


def quiet_kineto() -> None:
    """Silence Kineto's log lines on CUDA wheels without a GPU (must run before the first profile)."""
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")


def top_ops(
    events: Iterable[FunctionEventAvg], iterations: int = 1, limit: int = TOP_OPS_LIMIT
) -> list[OpRow]:
    """Compact table of the most expensive ops: per-iteration calls and self times in seconds."""
    rows: list[OpRow] = []
    for event in events:
        key = event.key
        if key is None:  # torch types it optional; an average by key always has one
            continue
        if key != CALL_RANGE and (key.startswith(RANGE_PREFIX) or key.startswith("ProfilerStep")):
            continue
        if key == CALL_RANGE and "CPU" not in str(getattr(event, "device_type", "CPU")):
            continue  # the GPU-side annotation of our range spans the whole call: not "outside ops"
        device_us = float(getattr(event, "self_device_time_total", 0) or 0)
        rows.append(
            {
                "op": OUTSIDE_OPS if key == CALL_RANGE else key,
                "calls": round(event.count / iterations, 3),
                "self_cpu": float(event.self_cpu_time_total) / iterations * 1e-6,
                "self_device": device_us / iterations * 1e-6,
            }
        )
    rows.sort(key=lambda r: -(r["self_cpu"] + r["self_device"]))
    return rows[:limit]


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
    import statistics

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
    import statistics

    if len(tables) <= 1:
        return [dict(row) for table in tables for row in table]
    return [dict(row) for row in _per_op(tables, statistics.median)]


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
    for op, gain in sorted(gains.items(), key=lambda item: -item[1]):
        before = old.get(op)
        calls_now = float(now[op].get("calls", 0.0))
        if before is not None:
            calls_then = float(before.get("calls", 0.0))
        elif ops_then and op in ops_now and op not in ops_then:
            calls_then = 0.0  # under the stored cut-off before because it did not run then
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
    """How much the call's FLOPs grew (``+300.0%``), when by more than profile noise, else None."""
    then, now = (c.get("flops") if c else None for c in counters)
    if not isinstance(then, (int, float)) or not isinstance(now, (int, float)) or then <= 0:
        return None
    return f"{(now / then - 1) * 100:+.1f}%" if now >= (1 + NOISE) * then else None


def _self(row: Mapping[str, Any]) -> float:
    return float(row["self_cpu"]) + float(row["self_device"])


def _percent(gain: float, before: float) -> str:
    return f"{gain / before * 100:+.0f}%" if before > 0 else "new"


def trace_path(folder: Path, nodeid: str, suffix: str) -> Path:
    """A file name for a trace of ``nodeid`` (safe characters only)."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", nodeid).strip("_")[-150:]
    return folder / f"{slug}{'-' + suffix if suffix else ''}.json"


class Profiler:
    """Context manager running ``torch.profiler.profile`` with the right activities for a device.

    Usable without pytest::

        with Profiler(device="cpu", trace=Path("trace.json")) as prof:
            model(x)
        print(prof.table())

    On exit it exports a Chrome/Perfetto trace (if ``trace`` is set); :meth:`key_averages`,
    :meth:`top_ops` and :meth:`table` summarise what ran. Extra keyword arguments go to
    ``torch.profiler.profile`` (e.g. ``record_shapes=True``).
    """

    def __init__(
        self,
        device: str = "cpu",
        trace: Path | None = None,
        iterations: int = 1,
        on_enter: Callable[[], None] | None = None,
        on_exit: Callable[["Profiler"], None] | None = None,
        **profile_kwargs: Any,
    ) -> None:
        self.device = str(device)
        self.trace = trace
        self.iterations = iterations
        self._profile_kwargs = profile_kwargs
        self._on_enter = on_enter
        self._on_exit = on_exit
        self._prof: profile | None = None

    def __enter__(self) -> "Profiler":
        import torch
        from torch.profiler import ProfilerActivity, profile

        quiet_kineto()
        if self._on_enter:
            self._on_enter()
        activities = [ProfilerActivity.CPU]
        if self.device.startswith("cuda") and torch.cuda.is_available():  # a GPU really present
            activities.append(ProfilerActivity.CUDA)
        self._prof = profile(activities=activities, **self._profile_kwargs)
        self._prof.__enter__()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            self.profile.__exit__(kind, error, traceback)
            if self.trace is not None and kind is None:
                self.trace.parent.mkdir(parents=True, exist_ok=True)
                self.profile.export_chrome_trace(str(self.trace))
        finally:
            if self._on_exit:
                self._on_exit(self)

    @property
    def profile(self) -> profile:
        """The underlying ``torch.profiler.profile`` object."""
        if self._prof is None:
            raise RuntimeError("the profiler has not run yet; use it as a context manager first")
        return self._prof

    def key_averages(self, **kwargs: Any) -> EventList:
        """``torch.profiler`` key averages of everything that ran inside the block."""
        # torch's profile.key_averages declares no return type: it is an EventList.
        return cast("EventList", self.profile.key_averages(**kwargs))

    def top_ops(self, limit: int = TOP_OPS_LIMIT) -> list[OpRow]:
        """Most expensive ops, self times per iteration in seconds."""
        return top_ops(self.key_averages(), self.iterations, limit)

    def table(self, limit: int = TOP_OPS_LIMIT) -> str:
        """Plain-text top-ops table."""
        return format_top_ops(self.top_ops(limit))


class nvtx_range(contextlib.ContextDecorator):  # lower case: reads like contextlib helpers
    """``with nvtx_range("forward"): ...`` or ``@nvtx_range("step")``: an NVTX range + profiler range.

    ``torch.cuda.nvtx`` raises on CPU-only and MPS wheels (a stub that says "NVTX functions not
    installed"), so the NVTX half only runs when ``torch.cuda.is_available()``; the
    ``record_function`` half always runs, so the range is visible in ``torch.profiler`` traces
    everywhere. Put ranges around compiled calls, never inside them (dynamo ignores or breaks on
    them).
    """

    def __init__(self, name: str, *, nvtx: bool | None = None) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"nvtx_range needs a non-empty name, got {name!r}")
        self.name = name
        self._want_nvtx = nvtx
        self._stack: list[tuple[record_function, bool]] = []

    def __enter__(self) -> "nvtx_range":
        import torch

        record = torch.profiler.record_function(self.name)
        record.__enter__()
        use_nvtx = self._want_nvtx is not False and torch.cuda.is_available()
        if use_nvtx:
            torch.cuda.nvtx.range_push(self.name)
        self._stack.append((record, use_nvtx))
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        import torch

        record, use_nvtx = self._stack.pop()
        try:
            if use_nvtx:
                torch.cuda.nvtx.range_pop()
        finally:
            record.__exit__(kind, error, traceback)


#: Profiler sessions a profiled run is split into; each op's table row is its quickest session.
PROFILE_CHUNKS = 3


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


def profile_call(
    call: Callable[[], UserValue], device: str, iterations: int, trace: Path | None = None
) -> tuple[list[OpRow], Path | None]:
    """Profile ``iterations`` calls (after one untimed call) and return the top-ops table and trace.

    The calls run in :data:`PROFILE_CHUNKS` profiler sessions whose tables are combined by
    :func:`quickest_per_op` (robust to a busy machine); the trace is the first session's.
    """
    from torch.profiler import record_function

    call()  # keep one-off costs out of the table
    chunks = max(1, min(PROFILE_CHUNKS, iterations))
    tables = []
    for chunk in range(chunks):
        size = iterations // chunks + (1 if chunk < iterations % chunks else 0)
        with Profiler(device=device, trace=trace if chunk == 0 else None, iterations=size) as prof:
            for _ in range(size):
                with record_function(CALL_RANGE):
                    call()
        # Every op of each chunk: an op under one chunk's cut-off is still in the others'.
        tables.append(prof.top_ops(limit=10_000))
    return quickest_per_op(tables)[:TOP_OPS_LIMIT], trace
