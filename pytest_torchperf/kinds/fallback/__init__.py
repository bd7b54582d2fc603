"""The ``time-or-instructions`` measurement kind (``--torchperf-fallback instructions``): time, and
where the timing verdict is inconclusive (busy machine, spread) or no timing is stored, the
instruction count stored beside the timing. It counts with the ``instructions`` kind's children
and times as ``time`` does: :mod:`.judge` (the fallback verdict), :mod:`.report` (the count
``torchperf show`` names beside the timing), :mod:`.run` (the count kept beside the timing,
when it is chosen)."""

from __future__ import annotations

from pytest_torchperf.kinds.spec import KindSpec

SPEC = KindSpec(
    name="time-or-instructions",
    package=__name__,
    summary="time; the instruction count stored beside it where time cannot decide",
    record_keys=("instructions", "uncounted", "recount"),
    session_keys=("counted_with",),
    result_keys=("instructions", "instructions_vs_eager", "recount"),
    gate_keys=("max_instruction_increase",),
    parts=("judge", "report", "run"),
)
