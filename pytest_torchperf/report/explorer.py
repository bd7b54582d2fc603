"""A measurement's graph for Model Explorer: the graph file and the node-data overlays it loads.

Built from a record's ``graph`` (the per-node figures of the ``torch.export``-ed call, recorded
with ``--torchperf-graph``): :func:`graph_view` returns the graph as Model Explorer's JSON graph
format (a ``GraphCollection``: ``{"label", "graphs": [{"id", "nodes"}]}``, which its JSON loader
reads from a ``.json`` model path) and one node-data file per figure (its ``ModelNodeData``
format: ``{graph id: {"results": {node id: {"value"}}, "gradient" | "thresholds"}}``): own time,
share of the call's time, FLOPs, output bytes and, in a compare, the change against the
baseline. Each node's attributes carry the same figures, so the side panel tells them without an
overlay. A graph that could not be exported has no view: :class:`NoGraph` says why and
:func:`op_rows` gives the op-level figures instead. Pure: neither torch nor model_explorer is
imported (the ``torchperf graph`` command opens the files; docs/graph.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from pytest_torchperf.core.graph_types import GraphNode, GraphRecord
from pytest_torchperf.core.types import JSON, JSONObject
from pytest_torchperf.core.units import format_bytes, format_percent, format_time

#: The first module the compare names as where the time grew: its nodes' background in the
#: change overlay (overrides the scale) and its group's colours.
MARKED_BG = "#7f1d1d"
MARKED_TEXT = "#ffffff"
MARKED_GROUP_BG = "#fee2e2"
MARKED_GROUP_BORDER = "#b91c1c"
#: Groups that hold the marked module: their border, so a collapsed graph leads to it.
MARKED_ANCESTOR_BORDER = "#ef4444"

#: Change against the baseline (%), diverging around "unchanged": each threshold colours the
#: values up to it (Model Explorer leaves values above the last one white, hence the last).
CHANGE_THRESHOLDS: tuple[tuple[float, str, str], ...] = (
    (-25.0, "#15803d", "#ffffff"),
    (-10.0, "#4ade80", "#000000"),
    (-3.0, "#bbf7d0", "#000000"),
    (3.0, "#f5f5f4", "#000000"),
    (10.0, "#fecaca", "#000000"),
    (25.0, "#f87171", "#000000"),
    (1e12, "#dc2626", "#ffffff"),
)

#: How Model Explorer names a group (a namespace) among its nodes.
GROUP_SUFFIX = "___group___"

#: Low to high, for the figures that are only ever >= 0.
HEAT: tuple[JSON, ...] = (
    {"stop": 0, "bgColor": "#fffbeb"},
    {"stop": 1, "bgColor": "#ea580c", "textColor": "#ffffff"},
)
COOL: tuple[JSON, ...] = (
    {"stop": 0, "bgColor": "#eff6ff"},
    {"stop": 1, "bgColor": "#1d4ed8", "textColor": "#ffffff"},
)


class NoGraph(ValueError):
    """A record has no graph to draw: not recorded, or ``torch.export`` failed (then the op-level
    figures are what there is: :func:`op_rows`)."""


@dataclass(frozen=True)
class NodeData:
    """One overlay: its file name, what it shows, and the ``ModelNodeData`` document."""

    file: str
    title: str
    document: JSONObject


@dataclass(frozen=True)
class GraphView:
    """What Model Explorer loads for one measurement: the graph and its overlays (the change
    overlay first when there is a baseline)."""

    graph_id: str
    graph: JSONObject
    node_data: tuple[NodeData, ...]
    summary: str
    marked: tuple[str, ...] = field(default=())
    #: The record's nodes, as the contract has them (what :func:`focus` picks from).
    nodes: tuple[GraphNode, ...] = field(default=())


def graph_of(record: Mapping[str, Any]) -> GraphRecord:
    """The record's ``graph`` (``NoGraph`` when it has none or it was not exported)."""
    graph = record.get("graph")
    if not isinstance(graph, Mapping):
        raise NoGraph(
            f"{record.get('nodeid', '?')} {record.get('name', '?')}: no graph recorded "
            f"(run pytest with --torchperf-graph)"
        )
    if not graph.get("exported"):
        raise NoGraph(graph.get("why_not") or "torch.export failed (no reason recorded)")
    # The record as a writer made it (measure.node_figures, store.graphs); what an older
    # version's record may lack is read with .get() below.
    return cast("GraphRecord", graph)


def summary_line(graph: GraphRecord) -> str:
    """What share of the call's time the nodes explain, and by which clock."""
    call, nodes, explained = graph.get("call_time"), graph.get("node_time"), graph.get("explained")
    if explained is None and call and nodes is not None:
        explained = nodes / call
    clock = graph.get("clock") or "wall"
    device = graph.get("device") or "cpu"
    if explained is None:
        return f"{device}, node times by {clock} clock"
    return (
        f"nodes explain {format_percent(explained)} of the call's time "
        f"({format_time(nodes)} of {format_time(call)}, {device}, {clock} clock)"
    )


def graph_view(record: Mapping[str, Any]) -> GraphView:
    """The graph file and the overlays of a record (``NoGraph`` when it has no exported graph)."""
    graph = graph_of(record)
    nodes: Sequence[GraphNode] = graph.get("nodes") or []
    graph_id = str(record.get("name") or "graph")
    marked = tuple(str(m) for m in graph.get("marked") or [])
    call_time = graph.get("call_time")
    summary = summary_line(graph)
    me_graph: JSONObject = {
        "id": graph_id,
        "nodes": [_node(n, call_time) for n in nodes],
    }
    groups = _group_configs(nodes, marked)
    if groups:
        me_graph["groupNodeConfigs"] = groups
    label = f"{record.get('nodeid', '')} {graph_id}: {summary}".strip()
    collection: JSONObject = {"label": label, "graphs": [me_graph]}
    return GraphView(
        graph_id=graph_id,
        graph=collection,
        node_data=_node_data(graph_id, nodes, call_time, marked),
        summary=summary,
        marked=marked,
        nodes=tuple(nodes),
    )


def _is_op(node: GraphNode) -> bool:
    return (node.get("kind") or "op") == "op"


def _share(node: GraphNode, call_time: float | None) -> float | None:
    time = node.get("time")
    if time is None or not call_time:
        return None
    return float(time) / float(call_time)


def _node(node: GraphNode, call_time: float | None) -> JSONObject:
    """One node in Model Explorer's format, its figures as attributes."""
    attrs: list[JSON] = []

    def attr(key: str, value: object) -> None:
        attrs.append({"key": key, "value": str(value)})

    if _is_op(node):
        attr("own time", format_time(node.get("time")))
        share = _share(node, call_time)
        if share is not None:
            attr("share of call", format_percent(share))
        baseline_time, change = node.get("baseline_time"), node.get("change")
        if baseline_time is not None:
            attr("baseline time", format_time(baseline_time))
        if change is not None:
            attr("change", f"{float(change) * 100:+.1f}%")
        elif "baseline_time" in node and baseline_time is None:
            attr("change", "new: not in the baseline")
        if node.get("flops") is not None:
            attr("FLOPs", f"{int(node['flops']):,}")
        if node.get("bytes") is not None:
            attr("output bytes", format_bytes(node["bytes"]))
        if node.get("calls") is not None:
            attr("calls", node["calls"])
    attr("module", node.get("module") or "(top level)")
    if node.get("key"):
        attr("key", node["key"])
    return {
        "id": str(node["id"]),
        "label": str(node.get("label") or node["id"]),
        "namespace": str(node.get("namespace") or ""),
        "attrs": attrs,
        "incomingEdges": [
            {
                "sourceNodeId": str(source),
                "sourceNodeOutputId": str(output),
                "targetNodeInputId": str(index),
            }
            for index, (source, output) in enumerate(node.get("inputs") or [])
        ],
        "outputsMetadata": [
            {"id": str(index), "attrs": [{"key": "tensor_shape", "value": str(shape)}]}
            for index, shape in enumerate(node.get("outputs") or [])
        ],
    }


def _in_module(node: GraphNode, module: str) -> bool:
    own = str(node.get("module") or "")
    return own == module or own.startswith(module + ".")


def _marked_namespace(nodes: Sequence[GraphNode], module: str) -> str | None:
    """The group (namespace) that is ``module``: the namespace its own nodes share."""
    for node in nodes:
        if _is_op(node) and str(node.get("module") or "") == module and node.get("namespace"):
            return str(node["namespace"])
    # Only deeper modules' nodes: cut their namespace to the depth of ``module``.
    depth = len(module.split(".")) + 1 if module else 1
    for node in nodes:
        if _is_op(node) and _in_module(node, module) and node.get("namespace"):
            parts = str(node["namespace"]).split("/")
            if len(parts) >= depth:
                return "/".join(parts[:depth])
    return None


def _group_configs(nodes: Sequence[GraphNode], marked: Sequence[str]) -> list[JSON]:
    """The first marked module's group filled and bordered, the groups above it bordered."""
    if not marked or marked[0] == "":
        # The model's own forward is no group of its own: its namespace holds every submodule
        # too, and filling it would mark the whole model (its ops' colours mark them).
        return []
    namespace = _marked_namespace(nodes, marked[0])
    if not namespace:
        return []
    parts = namespace.split("/")
    configs: list[JSON] = [
        {
            "namespaceRegex": f"^{re.escape(namespace)}$",
            "backgroundColor": MARKED_GROUP_BG,
            "borderColor": MARKED_GROUP_BORDER,
        }
    ]
    for depth in range(len(parts) - 1, 0, -1):
        configs.append(
            {
                "namespaceRegex": f"^{re.escape('/'.join(parts[:depth]))}$",
                "borderColor": MARKED_ANCESTOR_BORDER,
            }
        )
    return configs


#: A figure of an op node for an overlay, given the call's time (None: the node has none).
Figure = Callable[[GraphNode, float | None], JSON]

#: The figures' overlays (file, title, figure, colour scale), then the change's file.
FIGURES: tuple[tuple[str, str, Figure, tuple[JSON, ...]], ...] = (
    (
        "share-of-call-pct.json",
        "share of the call's time (%)",
        lambda n, call: None if (share := _share(n, call)) is None else round(share * 100, 3),
        HEAT,
    ),
    ("flops.json", "FLOPs", lambda n, _: n.get("flops"), COOL),
    ("output-bytes.json", "output bytes", lambda n, _: n.get("bytes"), COOL),
    (
        "own-time-ms.json",
        "own time (ms)",
        lambda n, _: None if n.get("time") is None else round(float(n["time"]) * 1e3, 6),
        HEAT,
    ),
)
CHANGE_FILE = "change-vs-baseline-pct.json"
#: Every overlay file a view may write.
OVERLAY_FILES = (*(file for file, _, _, _ in FIGURES), CHANGE_FILE)


def _values(
    nodes: Sequence[GraphNode], value: Figure, call_time: float | None = None
) -> dict[str, JSONObject]:
    return {
        str(node["id"]): {"value": figure}
        for node in nodes
        if _is_op(node) and (figure := value(node, call_time)) is not None
    }


def _node_data(
    graph_id: str,
    nodes: Sequence[GraphNode],
    call_time: float | None,
    marked: Sequence[str],
) -> tuple[NodeData, ...]:
    """The overlays, the one that colours the graph at first last (Model Explorer selects the
    last one it is given): the change when there is a baseline, else the own time."""

    def overlay(file: str, title: str, results: Mapping[str, JSON], **scale: JSON) -> NodeData:
        return NodeData(file, title, {graph_id: {"name": title, "results": dict(results), **scale}})

    overlays: list[NodeData] = []
    for file, title, value, gradient in FIGURES:
        results = _values(nodes, value, call_time)
        if results:
            overlays.append(overlay(file, title, results, gradient=list(gradient)))
    change = _values(nodes, _change_pct)
    if change:
        first = marked[0] if marked else None
        for node in nodes:
            if first is not None and str(node["id"]) in change and _in_module(node, first):
                change[str(node["id"])].update(bgColor=MARKED_BG, textColor=MARKED_TEXT)
        thresholds: list[JSON] = [
            {"value": value, "bgColor": bg, "textColor": text}
            for value, bg, text in CHANGE_THRESHOLDS
        ]
        overlays.append(
            overlay(CHANGE_FILE, "change vs baseline (%)", change, thresholds=thresholds)
        )
    return tuple(overlays)


#: The change overlay's scale ends here: a node absent from the baseline (new: it grew from
#: nothing) reads this, so it is coloured with the nodes that grew most, not left blank.
NEW_NODE_PCT = 1000.0


def _change_pct(node: GraphNode, _: float | None) -> float | None:
    """A node's change vs the baseline in percent, capped at :data:`NEW_NODE_PCT`; a new node
    (in a compare, the baseline lacks it) reads the cap; None where there is no baseline."""
    change = node.get("change")
    if change is not None:
        return min(round(float(change) * 100, 2), NEW_NODE_PCT)
    if "baseline_time" in node and node.get("baseline_time") is None and node.get("time"):
        return NEW_NODE_PCT
    return None


def focus(view: GraphView) -> tuple[str | None, str | None]:
    """The node the view opens on, and the group to expand down to: the slowest-growing node
    of the first marked module, else the node with the most time (None: no op node)."""
    ops = [n for n in view.nodes if _is_op(n)]
    if view.marked:
        inside = [n for n in ops if _in_module(n, view.marked[0])]
        ops = inside or ops

    def weight(node: GraphNode) -> float:
        time = float(node.get("time") or 0.0)
        base = node.get("baseline_time")
        return time - float(base) if view.marked and base is not None else time

    if not ops:
        return None, None
    node = max(ops, key=weight)
    namespace = str(node.get("namespace") or "")
    return str(node["id"]), (f"{namespace}{GROUP_SUFFIX}" if namespace else None)


def url_data(
    view: GraphView,
    graph_path: str,
    node_data_paths: Sequence[str],
) -> JSONObject:
    """The ``data`` parameter of Model Explorer's URL: the graph file, its overlays, and the
    view opened on :func:`focus` (its ``uiState``; ``model-explorer``'s own URL has none)."""
    data: JSONObject = {
        "models": [{"url": graph_path}],
        "nodeData": list(node_data_paths),
        "nodeDataTargets": ["" for _ in node_data_paths],
    }
    node_id, group = focus(view)
    if node_id is not None:
        data["uiState"] = {
            "paneStates": [
                {
                    "deepestExpandedGroupNodeIds": [group] if group else [],
                    "selectedNodeId": node_id,
                    "selectedGraphId": view.graph_id,
                    "selectedCollectionLabel": "",
                    "widthFraction": 1,
                }
            ]
        }
    return data


def op_rows(graph: GraphRecord) -> list[dict[str, object]]:
    """The op-level figures (``ops``), most time first: what a graph that could not be exported
    still tells."""
    call = graph.get("call_time")
    rows: list[dict[str, object]] = []
    for op in sorted(graph.get("ops") or [], key=lambda o: -(o.get("time") or 0.0)):
        time = op.get("time")
        rows.append(
            {
                "op": op.get("op", "?"),
                "time": format_time(time),
                "share": format_percent(time / call) if time is not None and call else "-",
                "calls": op.get("calls", "-"),
                "FLOPs": f"{int(op['flops']):,}" if op.get("flops") is not None else "-",
            }
        )
    return rows
