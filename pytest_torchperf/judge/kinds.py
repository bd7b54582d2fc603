"""The measurement kind a gate judges: its ``judge`` part, found through the registry
(:mod:`pytest_torchperf.kinds`) by the name the gate records. The engine
(:func:`pytest_torchperf.judge.compare.compare`) asks it, never the run mode; what a kind is
given and returns is :mod:`pytest_torchperf.judge.kind_protocol`. Pure.
"""

from __future__ import annotations

from pytest_torchperf.judge.inputs import Gate
from pytest_torchperf.judge.kind_protocol import Kind
from pytest_torchperf.kinds import part, spec_named


def judging(name: str) -> Kind:
    """The ``judge`` part of the kind called ``name``."""
    module = part(spec_named(name), "judge")
    if module is None:
        raise ValueError(f"measurement kind {name!r} has no judge part: it cannot be compared")
    kind: Kind = module.KIND
    return kind


def kind_of(gate: Gate) -> Kind:
    """The kind a gate judges (chosen once per run, recorded in the gate)."""
    return judging(gate.kind)
