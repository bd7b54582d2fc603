"""The ``time-or-instructions`` kind's report part: ``torchperf show`` of a timed environment
names the instruction count a ``--torchperf-fallback`` save stored beside the timing (or instead
of it, when it could not time), which a fallback compare judges by where time cannot decide.
Its counts in a run's tables are the ``instructions`` kind's column (the record key is the
same). Pure."""

from __future__ import annotations

from collections.abc import Sequence

from pytest_torchperf.core.units import format_count
from pytest_torchperf.report.kind_report import KindReport
from pytest_torchperf.store.sessions import Session


def stored_note(sessions: Sequence[Session]) -> str:
    """`` (+ 5.53 M instr/call for --torchperf-fallback)``: the latest stored count, or ""."""
    counted = next((s for s in reversed(sessions) if s.instructions), Session())
    per_call = counted.per_call_instructions
    if not per_call:
        return ""
    return f" (+ {format_count(per_call)} instr/call for --torchperf-fallback)"


REPORT = KindReport(stored_note=stored_note)
