"""The ``ab`` measurement kind (``--torchperf-ab REV``, ``--torchperf-ab-python PY``): two sides
(A: a revision or interpreter, B: the working tree) measured now in process pairs whose timed
blocks take turns; side B's paired interval against the limit is the verdict. Its modules are
named for their layers (docs/architecture.md)."""

from __future__ import annotations

from pytest_torchperf.kinds.spec import KindSpec

SPEC = KindSpec(
    name="ab",
    package=__name__,
    summary="side B's paired interval over process pairs against side A, both measured now",
    record_keys=("ab",),
    result_keys=("ab",),
    gate_facts=(("ab", ""),),
    figures=(("ab", "A/B pairs"),),
    removed="removed in B",
    against="in B vs side A",
    parts=("options", "judge", "report", "run", "plugin"),
)
