"""The ``instructions`` measurement kind (``--torchperf-instructions``): instructions per call
counted under Valgrind's callgrind in child processes side by side, against the latest count
stored under the instruction environment. Its modules are named for their layers
(docs/architecture.md). The ``time-or-instructions`` kind (:mod:`pytest_torchperf.kinds.fallback`)
counts with the same children."""

from __future__ import annotations

from pytest_torchperf.kinds.spec import KindSpec

SPEC = KindSpec(
    name="instructions",
    package=__name__,
    summary="instructions per call under Valgrind against the latest stored count",
    record_keys=("instructions", "uncounted", "recount"),
    session_keys=("counted_with",),
    result_keys=("instructions", "instructions_vs_eager", "recount"),
    gate_keys=("max_instruction_increase",),
    figures=(("instructions", "instructions"),),
    label="instructions",
    parts=("options", "judge", "report", "run", "plugin"),
)
