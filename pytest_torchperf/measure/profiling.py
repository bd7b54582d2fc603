"""torch.profiler around user code: the profiler fixture's class, compact top-ops tables, and the
operator diff that explains a confirmed slowdown.

Profiling always runs in its own pass, never while timing (its overhead was 3-25 % on small models).
:func:`diff_top_ops` is pure so the wording of explanations is unit-tested without torch.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_torchperf.core.units import format_time

#: Rows kept in a stored top-ops table.
TOP_OPS_LIMIT = 15
#: Our own range names in traces; excluded from op tables (they contain the whole call).
RANGE_PREFIX = "torchperf::"
#: Name of the range around each profiled call; its *self* time is what ran outside torch ops.
CALL_RANGE = f"{RANGE_PREFIX}call"
#: How that self time appears in op tables: Python code, framework glue, anything not an op.
OUTSIDE_OPS = "(outside torch ops: Python, glue, profiler overhead)"


def quiet_kineto() -> None:
    """Silence Kineto's log lines on CUDA wheels without a GPU (must run before the first profile)."""
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")


def activities_for(device: str) -> list[Any]:
    """Profiler activities for a device: CPU always, plus CUDA when a GPU is really present."""
    import torch
    from torch.profiler import ProfilerActivity

    activities = [ProfilerActivity.CPU]
    if str(device).startswith("cuda") and torch.cuda.is_available():
        activities.append(ProfilerActivity.CUDA)
    return activities


def top_ops(
    events: Iterable[Any], iterations: int = 1, limit: int = TOP_OPS_LIMIT
) -> list[dict[str, Any]]:
    """Compact table of the most expensive ops: per-iteration calls and self times in seconds."""
    rows = []
    for event in events:
        if event.key != CALL_RANGE and (
            event.key.startswith(RANGE_PREFIX) or event.key.startswith("ProfilerStep")
        ):
            continue
        if event.key == CALL_RANGE and "CPU" not in str(getattr(event, "device_type", "CPU")):
            continue  # the GPU-side annotation of our range spans the whole call: not "outside ops"
        device_us = float(getattr(event, "self_device_time_total", 0) or 0)
        rows.append(
            {
                "op": OUTSIDE_OPS if event.key == CALL_RANGE else event.key,
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


def median_top_ops(tables: Sequence[Sequence[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """One op table from several sessions' tables: per op, the median of its self times.

    A single session's profile can be distorted (a busy machine, one slow pass); the median over
    the stored sessions is the robust reference for naming the ops that grew. Ops missing from a
    session's table (below its cut-off) count as absent there, not as zero.
    """
    if not tables:
        return []
    if len(tables) == 1:
        return [dict(row) for row in tables[0]]
    import statistics

    merged: dict[str, dict[str, list[float]]] = {}
    for table in tables:
        for row in table:
            entry = merged.setdefault(row["op"], {"calls": [], "self_cpu": [], "self_device": []})
            for key in entry:
                entry[key].append(float(row.get(key, 0.0) or 0.0))
    rows: list[dict[str, Any]] = [
        {"op": op, **{key: statistics.median(values) for key, values in entry.items()}}
        for op, entry in merged.items()
    ]
    rows.sort(key=lambda r: -(r["self_cpu"] + r["self_device"]))
    return rows


def diff_top_ops(
    baseline: Sequence[Mapping[str, Any]], current: Sequence[Mapping[str, Any]], limit: int = 3
) -> list[str]:
    """The ops whose self time grew most: ``aten::mkldnn_convolution self time +31% (+3.1 ms)``."""
    old = {r["op"]: r["self_cpu"] + r["self_device"] for r in baseline}
    # Tables stored before the outside-ops row existed cannot be compared on it.
    new = {
        r["op"]: r["self_cpu"] + r["self_device"]
        for r in current
        if r["op"] != OUTSIDE_OPS or OUTSIDE_OPS in old
    }
    floor = min(old.values()) if old else 0.0  # ops below the stored table's cut-off
    deltas = []
    for op, value in new.items():
        before = old.get(op)
        delta = value - (before if before is not None else 0.0)
        if delta <= 0:
            continue
        if before is None:
            text = (
                f"{op} new in the top ops (+{format_time(delta)}"
                f"{'' if floor == 0 else ', below the stored table cut-off of ' + format_time(floor) + ' before'})"
            )
        else:
            text = f"{op} self time {(value - before) / before * 100:+.0f}% (+{format_time(delta)})"
        deltas.append((delta, text))
    deltas.sort(key=lambda d: -d[0])
    return [text for _, text in deltas[:limit]]


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
        self._prof: Any = None

    def __enter__(self) -> "Profiler":
        from torch.profiler import profile

        quiet_kineto()
        if self._on_enter:
            self._on_enter()
        self._prof = profile(activities=activities_for(self.device), **self._profile_kwargs)
        self._prof.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self._prof.__exit__(*exc)
            if self.trace is not None and exc[0] is None:
                self.trace.parent.mkdir(parents=True, exist_ok=True)
                self._prof.export_chrome_trace(str(self.trace))
        finally:
            if self._on_exit:
                self._on_exit(self)

    @property
    def profile(self) -> Any:
        """The underlying ``torch.profiler.profile`` object."""
        if self._prof is None:
            raise RuntimeError("the profiler has not run yet; use it as a context manager first")
        return self._prof

    def key_averages(self, **kwargs: Any) -> Any:
        """``torch.profiler`` key averages of everything that ran inside the block."""
        return self.profile.key_averages(**kwargs)

    def top_ops(self, limit: int = TOP_OPS_LIMIT) -> list[dict[str, Any]]:
        """Most expensive ops, self times per iteration in seconds."""
        return top_ops(self.key_averages(), self.iterations, limit)

    def table(self, limit: int = TOP_OPS_LIMIT) -> str:
        """Plain-text top-ops table."""
        return format_top_ops(self.top_ops(limit))


def profile_call(
    call: Callable[[], Any], device: str, iterations: int, trace: Path | None = None
) -> tuple[list[dict[str, Any]], Path | None]:
    """Profile ``iterations`` calls (after one untimed call) and return the top-ops table and trace."""
    from torch.profiler import record_function

    call()  # keep one-off costs out of the table
    with Profiler(device=device, trace=trace, iterations=iterations) as prof:
        for _ in range(iterations):
            with record_function(CALL_RANGE):
                call()
    return prof.top_ops(), trace
