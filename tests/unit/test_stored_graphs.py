"""What a baseline keeps of a --torchperf-graph record (store.graphs) and the store keeping the
structure in its latest session only."""

from __future__ import annotations

import json
from pathlib import Path

from pytest_torchperf.store.baselines import BaselineStore
from pytest_torchperf.store.graphs import graph_from_stored, stored_nodes, stored_structure
from pytest_torchperf.store.sessions import Session

GRAPH = {
    "exported": True,
    "device": "cpu",
    "clock": "wall",
    "call_time": 2e-3,
    "node_time": 1.5e-3,
    "explained": 0.75,
    "nodes": [
        {"id": "x", "label": "input", "kind": "input", "module": "", "namespace": "inputs",
         "inputs": [], "outputs": ["float32[1, 4]"], "key": "input:x", "time": 0.0},
        {"id": "linear", "label": "aten.linear", "kind": "op", "module": "fc",
         "namespace": "m.Net/torch.nn.modules.linear.Linear_fc", "inputs": [["x", 0]],
         "outputs": ["float32[1, 2]"], "key": "fc:aten.linear:0", "time": 1.23456e-3,
         "flops": 16, "bytes": 8, "calls": 1},
        {"id": "output", "label": "output", "kind": "output", "module": "", "namespace": "",
         "inputs": [["linear", 0]], "outputs": [], "key": "output:output", "time": 0.0},
    ],
}  # fmt: skip


def test_a_stored_graph_is_drawn_again_with_its_figures() -> None:
    rebuilt = graph_from_stored(
        json.loads(json.dumps(stored_structure(GRAPH))), stored_nodes(GRAPH)
    )
    [x, linear, out] = rebuilt["nodes"]
    assert linear["time"] == 1.235e-3 and linear["flops"] == 16 and linear["bytes"] == 8
    assert linear["namespace"] == "m.Net/torch.nn.modules.linear.Linear_fc"
    assert linear["inputs"] == [["x", 0]] and linear["outputs"] == ["float32[1, 2]"]
    assert (
        x["namespace"] == "inputs" and out["kind"] == "output" and out["inputs"] == [["linear", 0]]
    )
    assert rebuilt["explained"] == 0.75 and rebuilt["exported"] is True


def test_only_the_latest_session_keeps_the_structure(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path)
    session = Session.from_json({"statistic": 1e-3, "times": [1e-3], "nodes": stored_nodes(GRAPH)})
    graphed = session.updated({"graph": stored_structure(GRAPH)})
    for _ in range(3):
        store.record("env", {}, "t.py::t", "net", graphed)
    store.record("env", {}, "t.py::t", "net", session)  # a save without --torchperf-graph
    sessions = store.load_sessions("env", "t.py::t", "net")
    assert [s.has("graph") for s in sessions] == [False, False, True, False]
    assert all(s.extra("nodes") for s in sessions)
