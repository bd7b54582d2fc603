"""torch.profiler around user code: the profiler fixture's class, NVTX ranges, and a profiled
call's top-ops table (what such tables say is :mod:`pytest_torchperf.measure.op_tables`).

Profiling always runs in its own pass, never while timing (its overhead was 3-25 % on small models).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, cast

from pytest_torchperf.core.types import UserValue
from pytest_torchperf.measure.op_tables import (
    OUTSIDE_OPS,
    TOP_OPS_LIMIT,
    OpRow,
    format_top_ops,
    quickest_per_op,
)

if TYPE_CHECKING:  # torch is imported lazily, when something is profiled
    from torch.autograd.profiler_util import EventList, FunctionEventAvg
    from torch.profiler import profile, record_function

#: Our own range names in traces; excluded from op tables (they contain the whole call).
RANGE_PREFIX = "torchperf::"
#: Name of the range around each profiled call; its *self* time is what ran outside torch ops.
CALL_RANGE = f"{RANGE_PREFIX}call"


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
            # Also where the block raised: the trace of what ran up to the error is the one a
            # failing test's report points at (it named a path never written).
            if self.trace is not None:
                try:
                    self.trace.parent.mkdir(parents=True, exist_ok=True)
                    self.profile.export_chrome_trace(str(self.trace))
                except Exception:
                    if kind is None:
                        raise
                    # The block's own error is the one to report; the section says no trace.
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
