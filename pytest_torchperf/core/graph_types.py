"""The ``--torchperf-graph`` record's shape (docs/graph.md): what
:mod:`pytest_torchperf.measure.node_figures` builds, a compare adds
(:func:`pytest_torchperf.judge.node_changes.with_baseline`), a baseline rebuilds
(:mod:`pytest_torchperf.store.graphs`) and ``torchperf graph`` draws
(:mod:`pytest_torchperf.report.explorer`). Pure types; in a file the record is plain JSON.

The required keys are those every writer sets; the others (``total=False`` bases) only some
writers or versions do, so readers ``.get()`` them.
"""

from __future__ import annotations

from typing import TypedDict


class _NodeExtras(TypedDict, total=False):
    #: How many nodes use its output (a graph rebuilt from a baseline has none).
    users: int
    #: A compare's: the baseline's time of this node (None: the baseline lacks it), scaled by
    #: the machine factor, and the change against it (``0.25``: +25 %).
    baseline_time: float | None
    change: float | None


class GraphNode(_NodeExtras):
    """One node of the exported graph, with its figures (zero but for ``op`` nodes)."""

    id: str
    label: str
    #: The node type: ``input``, ``op`` or ``output``.
    kind: str
    #: Its module path (``layer3.1.conv2``) and Model Explorer's namespace for it.
    module: str
    namespace: str
    #: ``[source node id, its output index]`` per input.
    inputs: list[list[str | int]]
    #: Its outputs' dtypes and shapes (``float32[1, 64]``).
    outputs: list[str]
    #: Finds the node again in a baseline: ``module:op:n`` (``input:x`` for an input).
    key: str
    #: Seconds of its own work (quickest run), FLOPs and output bytes; calls per call.
    time: float
    flops: int
    bytes: int
    calls: int


class _OpExtras(TypedDict, total=False):
    #: Its FLOPs, where a writer counted them (``torchperf graph`` shows them then).
    flops: int


class OpFigure(_OpExtras):
    """An op's figures from a profiled call: what a graph that could not be exported shows."""

    op: str
    #: Its self time on the measurement's device, and on the CPU (seconds per call).
    time: float
    cpu_time: float
    calls: float


class _RecordExtras(TypedDict, total=False):
    #: Runs of the graph the node figures are the quickest of (exported graphs only).
    runs: int
    #: A compare's: the baseline's op nodes this run lacks (key -> seconds), the machine factor
    #: the baseline was scaled by, and why there are no stored figures to compare with.
    removed: dict[str, float]
    machine_factor: float
    no_baseline: str


class GraphRecord(_RecordExtras):
    """A measurement's ``graph`` record."""

    exported: bool
    #: Why ``torch.export`` failed (None when exported).
    why_not: str | None
    #: The device and the clock of the node times (``cuda events`` or ``wall``); None in a
    #: graph rebuilt from a baseline whose stored structure lacks them.
    device: str | None
    clock: str | None
    #: Seconds of the plain call, of all nodes, and their ratio (None where unknown).
    call_time: float | None
    node_time: float | None
    explained: float | None
    nodes: list[GraphNode]
    ops: list[OpFigure]
    #: The modules a compare names as where the time grew, the first holding most of it.
    marked: list[str]
