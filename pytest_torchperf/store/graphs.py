"""What a baseline keeps of a ``--torchperf-graph`` record, and the record rebuilt from it. Pure.

Every session keeps the per-node figures, ``nodes``: ``[seconds, FLOPs, bytes]`` per op node
key (a compare sets them beside its own). The graph's structure (nodes, edges, modules, shapes)
is the model's, the same in every session: only the latest session that has one keeps it, as
``graph`` (:meth:`pytest_torchperf.store.baselines.BaselineStore.record` drops it from the
older ones), so ``torchperf graph`` can draw a baseline without a results file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from pytest_torchperf.core.graph_types import GraphNode, GraphRecord
from pytest_torchperf.core.types import JSON, JSONObject
from pytest_torchperf.store.sessions import Session


def stored_nodes(graph: Mapping[str, Any]) -> dict[str, list[float]]:
    """Per op node key, ``[time s, FLOPs, bytes]`` of a ``graph`` record."""
    return {
        # Four significant digits: per-node times vary more than that between runs.
        n["key"]: [float(f"{n['time']:.4g}"), int(n.get("flops") or 0), int(n.get("bytes") or 0)]
        for n in graph.get("nodes", ())
        if n.get("kind") == "op"
    }


def latest_stored(sessions: Sequence[Session]) -> dict[str, list[float]] | None:
    """The per-node figures of the latest stored session that has them, or None (``nodes``:
    kept as read; the schema checked their shape)."""
    for session in reversed(sessions):
        nodes = session.extra("nodes")
        if isinstance(nodes, Mapping) and nodes:
            return dict(cast("Mapping[str, list[float]]", nodes))
    return None


def stored_structure(graph: Mapping[str, Any]) -> JSONObject:
    """The graph's structure, compactly: each node as ``[id, label, kind, module, key, inputs,
    outputs]`` (inputs: source node ids) and each module's Model Explorer namespace once."""
    namespaces: dict[str, JSON] = {}
    nodes: list[JSON] = []
    for n in graph.get("nodes", ()):
        if n.get("kind") == "op":
            namespaces.setdefault(n.get("module", ""), n.get("namespace", ""))
        nodes.append(
            [
                n["id"],
                n.get("label", ""),
                n.get("kind", "op"),
                n.get("module", ""),
                n.get("key", ""),
                [src for src, _ in n.get("inputs", ())],
                list(n.get("outputs", ())),
            ]
        )
    return {
        "nodes": nodes,
        "namespaces": namespaces,
        **{k: graph.get(k) for k in ("device", "clock", "call_time", "node_time", "explained")},
    }


def graph_from_stored(
    structure: Mapping[str, Any], figures: Mapping[str, Sequence[float]]
) -> GraphRecord:
    """A ``graph`` record (as ``--torchperf-graph`` writes it in a results file) from a stored
    structure and a session's per-node figures: what ``torchperf graph`` draws of a baseline."""
    namespaces = structure.get("namespaces") or {}
    nodes: list[GraphNode] = []
    for node_id, label, node_type, module, key, inputs, outputs in structure.get("nodes", ()):
        time, flops, size = (list(figures.get(key) or ()) + [0.0, 0, 0])[:3]
        nodes.append(
            {
                "id": node_id,
                "label": label,
                "kind": node_type,
                "module": module,
                "namespace": "inputs"
                if node_type == "input"
                else (namespaces.get(module, "") if node_type == "op" else ""),
                "inputs": [[src, 0] for src in inputs],
                "outputs": list(outputs),
                "key": key,
                "time": float(time) if node_type == "op" else 0.0,
                "flops": int(flops) if node_type == "op" else 0,
                "bytes": int(size) if node_type == "op" else 0,
                "calls": 1 if node_type == "op" else 0,
            }
        )
    return {
        "exported": True,
        "why_not": None,
        "device": structure.get("device"),
        "clock": structure.get("clock"),
        "call_time": structure.get("call_time"),
        "node_time": structure.get("node_time"),
        "explained": structure.get("explained"),
        "nodes": nodes,
        "ops": [],
        "marked": [],
    }
