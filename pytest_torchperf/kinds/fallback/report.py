"""The ``time-or-instructions`` kind's report part: ``torchperf show`` of a timed environment
names the instruction count a ``--torchperf-fallback`` save stored beside the timing (or instead
of it, when it could not time), which a fallback compare judges by where time cannot decide.
Its counts in a run's tables are the ``instructions`` kind's column (the record key is the
same). Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_torchperf.core.units import format_count
from pytest_torchperf.report.kind_report import KindReport


def stored_note(sessions: Sequence[Mapping[str, Any]]) -> str:
    """`` (+ 5.53 M instr/call for --torchperf-fallback)``: the latest stored count, or ""."""
    counted: Mapping[str, Any] = next(
        (s["instructions"] for s in reversed(sessions) if s.get("instructions")), {}
    )
    if not counted.get("per_call"):
        return ""
    return f" (+ {format_count(counted['per_call'])} instr/call for --torchperf-fallback)"


REPORT = KindReport(stored_note=stored_note)
