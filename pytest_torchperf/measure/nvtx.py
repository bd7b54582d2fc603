"""NVTX ranges that also show in torch.profiler traces, and never raise without CUDA.

``torch.cuda.nvtx`` raises on CPU-only and MPS wheels (a stub that says "NVTX functions not
installed"), so the NVTX half only runs when ``torch.cuda.is_available()``; the
``record_function`` half always runs, so the range is visible in ``torch.profiler`` traces
everywhere. Put ranges around compiled calls, never inside them (dynamo ignores or breaks on them).
"""

from __future__ import annotations

import contextlib
from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch is imported lazily, when a range is entered
    from torch.profiler import record_function


class nvtx_range(contextlib.ContextDecorator):  # lower case: reads like contextlib helpers
    """``with nvtx_range("forward"): ...`` or ``@nvtx_range("step")``: an NVTX range + profiler range."""

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
