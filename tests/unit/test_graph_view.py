"""The Model Explorer files of a measurement's graph (report/explorer.py), built from a hand-made
record of the contract's shape (tests/data/graph_record.json: two inputs, three ops, the output;
``block.fc`` slowed to twice its baseline and marked)."""

from __future__ import annotations

import ast
import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from pytest_torchperf.report import explorer
from pytest_torchperf.report.explorer import (
    CHANGE_THRESHOLDS,
    MARKED_BG,
    NoGraph,
    focus,
    graph_view,
    op_rows,
    url_data,
)

RECORD_FILE = Path(__file__).resolve().parents[1] / "data" / "graph_record.json"


def _record() -> dict[str, Any]:
    return json.loads(RECORD_FILE.read_text())


def _nodes(view: explorer.GraphView) -> dict[str, dict[str, Any]]:
    return {n["id"]: n for n in view.graph["graphs"][0]["nodes"]}


def _attrs(node: dict[str, Any]) -> dict[str, str]:
    return {a["key"]: a["value"] for a in node["attrs"]}


def _overlay(view: explorer.GraphView, file: str) -> dict[str, Any]:
    [document] = [o.document for o in view.node_data if o.file == file]
    return dict(document[view.graph_id])


def test_the_graph_is_a_graph_collection_model_explorer_loads() -> None:
    view = graph_view(_record())

    # What Model Explorer's JSON loader accepts: {"label", "graphs": [{"id", "nodes"}]}.
    assert set(view.graph) == {"label", "graphs"}
    assert "nodes explain 80% of the call's time" in view.graph["label"]
    [graph] = view.graph["graphs"]
    assert graph["id"] == "bs1" == view.graph_id
    nodes = _nodes(view)
    assert list(nodes) == ["x", "p_block_fc_weight", "linear", "relu", "sum_1", "output"]
    linear = nodes["linear"]
    assert linear["label"] == "aten.linear"
    assert linear["namespace"].endswith("tests.Block_block/torch.nn.modules.linear.Linear_fc")
    assert nodes["x"]["namespace"] == "inputs"
    assert linear["incomingEdges"] == [
        {"sourceNodeId": "x", "sourceNodeOutputId": "0", "targetNodeInputId": "0"},
        {"sourceNodeId": "p_block_fc_weight", "sourceNodeOutputId": "0", "targetNodeInputId": "1"},
    ]
    assert linear["outputsMetadata"] == [
        {"id": "0", "attrs": [{"key": "tensor_shape", "value": "float32[8, 64]"}]}
    ]
    # Every edge's source is a node of the graph.
    for node in nodes.values():
        for edge in node["incomingEdges"]:
            assert edge["sourceNodeId"] in nodes
    # Strict JSON: no NaN or infinity sneaks into a file the browser parses.
    json.dumps(view.graph, allow_nan=False)
    for overlay in view.node_data:
        json.dumps(overlay.document, allow_nan=False)


def test_each_op_node_tells_its_figures_in_the_side_panel() -> None:
    nodes = _nodes(graph_view(_record()))

    assert _attrs(nodes["linear"]) == {
        "own time": "1.2 ms",
        "share of call": "60%",
        "baseline time": "600 us",
        "change": "+100.0%",
        "FLOPs": "65,536",
        "output bytes": "2.0 KiB",
        "calls": "1",
        "module": "block.fc",
        "key": "block.fc:aten.linear:0",
    }
    # The baseline lacks this node: no baseline time; a new node, said as such.
    assert _attrs(nodes["sum_1"])["change"] == "new: not in the baseline"
    assert _attrs(nodes["sum_1"])["module"] == "(top level)"
    # Inputs and the output carry no time figures.
    assert "own time" not in _attrs(nodes["x"])


def test_overlays_hold_the_op_nodes_figures_and_the_change_colours_the_graph() -> None:
    view = graph_view(_record())

    files = [o.file for o in view.node_data]
    # Model Explorer colours the graph by the overlay it was given last: the change.
    assert files == [
        "share-of-call-pct.json",
        "flops.json",
        "output-bytes.json",
        "own-time-ms.json",
        "change-vs-baseline-pct.json",
    ]
    time = _overlay(view, "own-time-ms.json")
    assert time["results"] == {
        "linear": {"value": 1.2},
        "relu": {"value": 0.3},
        "sum_1": {"value": 0.1},
    }
    stops = [g["stop"] for g in time["gradient"]]
    assert stops[0] == 0 and stops[-1] == 1
    share = _overlay(view, "share-of-call-pct.json")["results"]
    assert sum(r["value"] for r in share.values()) == pytest.approx(80.0)
    assert _overlay(view, "flops.json")["results"]["linear"] == {"value": 65536}
    assert _overlay(view, "output-bytes.json")["results"]["sum_1"] == {"value": 4}


def test_the_change_is_diverging_and_the_first_marked_module_stands_out() -> None:
    view = graph_view(_record())

    change = _overlay(view, "change-vs-baseline-pct.json")
    # Every op node; a new one (sum_1: the baseline lacks it) at the scale's top; the marked
    # module's node drawn in the marked colour.
    assert change["results"] == {
        "linear": {"value": 100.0, "bgColor": MARKED_BG, "textColor": "#ffffff"},
        "relu": {"value": 0.0},
        "sum_1": {"value": explorer.NEW_NODE_PCT},
    }
    values = [t["value"] for t in change["thresholds"]]
    assert values == sorted(values)
    # Faster is green, unchanged pale, slower red; nothing is left uncoloured above the last.
    assert values[0] < 0 < values[-1] and values[-1] >= 1e9
    neutral = [t for t in change["thresholds"] if t["value"] > 0][0]
    assert neutral["bgColor"] == "#f5f5f4"
    assert {t[1] for t in CHANGE_THRESHOLDS[:3]}.isdisjoint({t[1] for t in CHANGE_THRESHOLDS[4:]})


def test_the_marked_modules_group_is_filled_and_the_groups_above_it_bordered() -> None:
    view = graph_view(_record())

    configs = view.graph["graphs"][0]["groupNodeConfigs"]
    namespace = _nodes(view)["linear"]["namespace"]
    assert re.fullmatch(configs[0]["namespaceRegex"], namespace)
    assert configs[0]["backgroundColor"]
    # Each enclosing group, up to the top, gets a border; none matches a sibling group.
    parents = ["tests.Net/tests.Block_block", "tests.Net"]
    for config, parent in zip(configs[1:], parents, strict=True):
        assert re.search(config["namespaceRegex"], parent)
        assert not re.search(config["namespaceRegex"], "tests.Net/torch.nn.modules.activation")


def test_the_view_opens_on_the_marked_modules_node() -> None:
    view = graph_view(_record())

    assert focus(view) == (
        "linear",
        "tests.Net/tests.Block_block/torch.nn.modules.linear.Linear_fc___group___",
    )
    data = url_data(view, "/d/graph.json", ["/d/a.json", "/d/b.json"])
    assert data["models"] == [{"url": "/d/graph.json"}]
    assert data["nodeData"] == ["/d/a.json", "/d/b.json"]
    assert data["nodeDataTargets"] == ["", ""]
    [pane] = data["uiState"]["paneStates"]
    assert pane["selectedNodeId"] == "linear"
    assert pane["selectedGraphId"] == "bs1"

    # Nothing marked: the node with the most time.
    record = _record()
    record["graph"]["marked"] = []
    record["graph"]["nodes"][2]["time"] = 1e-5
    assert focus(graph_view(record))[0] == "relu"


def test_without_a_baseline_there_is_no_change_overlay_and_time_colours_the_graph() -> None:
    record = _record()
    for node in record["graph"]["nodes"]:
        node.pop("baseline_time", None)
        node.pop("change", None)
    record["graph"]["marked"] = []

    view = graph_view(record)

    assert [o.file for o in view.node_data][-1] == "own-time-ms.json"
    assert "change-vs-baseline-pct.json" not in [o.file for o in view.node_data]
    assert "groupNodeConfigs" not in view.graph["graphs"][0]


def test_a_graph_that_could_not_be_exported_says_why_and_keeps_the_op_figures() -> None:
    record = _record()
    graph = record["graph"]
    graph.update(exported=False, why_not="torch.export failed: data-dependent control flow")
    graph["nodes"] = []

    with pytest.raises(NoGraph, match="data-dependent control flow"):
        graph_view(record)
    rows = op_rows(graph)
    assert [r["op"] for r in rows] == ["aten::linear", "aten::relu", "aten::sum"]
    assert rows[0] == {
        "op": "aten::linear",
        "time": "1.2 ms",
        "share": "60%",
        "calls": 1,
        "FLOPs": "65,536",
    }


def test_a_record_without_a_graph_names_the_option_that_records_one() -> None:
    record = copy.deepcopy(_record())
    del record["graph"]
    with pytest.raises(NoGraph, match="--torchperf-graph"):
        graph_view(record)


def test_the_builder_imports_neither_torch_nor_model_explorer() -> None:
    tree = ast.parse(Path(explorer.__file__).read_text())
    imported = {
        name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for name in (
            [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
        )
    }
    assert not imported & {"torch", "model_explorer"}


def test_a_marked_parent_module_is_the_group_that_holds_its_submodules_nodes() -> None:
    record = _record()
    record["graph"]["marked"] = ["block"]

    view = graph_view(record)

    configs = view.graph["graphs"][0]["groupNodeConfigs"]
    assert re.fullmatch(configs[0]["namespaceRegex"], "tests.Net/tests.Block_block")
    assert focus(view) == (
        "linear",
        "tests.Net/tests.Block_block/torch.nn.modules.linear.Linear_fc___group___",
    )
    change = _overlay(view, "change-vs-baseline-pct.json")["results"]
    assert change["linear"]["bgColor"] == MARKED_BG and "bgColor" not in change["relu"]


def test_a_node_new_since_the_baseline_is_coloured_as_grown_and_says_so() -> None:
    """On a real slowed ResNet-18, 18 of layer3.1's 25 nodes were new and stayed white in the
    change overlay: the nodes that held all the growth."""
    record = _record()
    new = copy.deepcopy(next(n for n in record["graph"]["nodes"] if n["id"] == "linear"))
    new.update(id="linear_1", key="block.fc:aten.linear:1", baseline_time=None, change=None)
    record["graph"]["nodes"].insert(-1, new)
    view = graph_view(record)
    change = _overlay(view, "change-vs-baseline-pct.json")
    assert change["results"]["linear_1"]["value"] == explorer.NEW_NODE_PCT
    assert change["results"]["linear_1"]["bgColor"] == MARKED_BG  # inside the marked module
    assert _attrs(_nodes(view)["linear_1"])["change"] == "new: not in the baseline"


def test_the_models_own_forward_marked_fills_no_group() -> None:
    """Marked ``""`` (ops of the root's forward grew): its namespace is the whole model's, so a
    filled group would mark every submodule; the view opens on the root's own op instead."""
    record = _record()
    record["graph"]["marked"] = [""]

    view = graph_view(record)

    assert view.graph["graphs"][0].get("groupNodeConfigs", []) == []
    assert focus(view)[0] == "sum_1"
