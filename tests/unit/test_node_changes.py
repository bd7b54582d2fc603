"""Where on the graph the time changed (judge.node_changes): nodes matched by key, the block
that holds most of the growth named, a uniformly slower graph not blamed on one block."""

from __future__ import annotations

from typing import Any

from pytest_torchperf.judge.node_changes import (
    growth,
    growth_line,
    latest_stored,
    stored_nodes,
    with_baseline,
)


def _op(module: str, label: str, nth: int, time: float) -> dict[str, Any]:
    return {
        "id": f"{label}_{module}_{nth}",
        "label": label,
        "kind": "op",
        "module": module,
        "key": f"{module}:{label}:{nth}",
        "time": time,
        "flops": 10,
        "bytes": 4,
    }


def _graph(*ops: dict[str, Any]) -> dict[str, Any]:
    nodes = [{"id": "x", "kind": "input", "key": "input:x", "time": 0.0}, *ops]
    return {"exported": True, "nodes": [*nodes, {"id": "output", "kind": "output", "time": 0.0}]}


BASE = _graph(
    _op("stem", "aten.conv2d", 0, 100e-6),
    _op("layer1.0.conv", "aten.conv2d", 0, 200e-6),
    _op("layer1.0", "aten.relu", 0, 10e-6),
    _op("layer2.1.conv", "aten.conv2d", 0, 200e-6),
    _op("layer2.1", "aten.relu", 0, 10e-6),
    _op("head", "aten.linear", 0, 20e-6),
)


def test_a_save_stores_each_op_nodes_figures_by_key_only() -> None:
    stored = stored_nodes(BASE)
    assert stored["layer2.1.conv:aten.conv2d:0"] == [200e-6, 10, 4]
    assert set(stored) == {n["key"] for n in BASE["nodes"] if n["kind"] == "op"}
    assert latest_stored([{"nodes": {"a": [1.0, 0, 0]}}, {"statistic": 1.0}]) == {"a": [1.0, 0, 0]}
    assert latest_stored([{"statistic": 1.0}]) is None


def test_a_block_that_gained_ops_is_named_with_its_new_nodes() -> None:
    now = _graph(
        _op("stem", "aten.conv2d", 0, 101e-6),
        _op("layer1.0.conv", "aten.conv2d", 0, 199e-6),
        _op("layer1.0", "aten.relu", 0, 10e-6),
        _op("layer2.1.conv", "aten.conv2d", 0, 230e-6),
        _op("layer2.1", "aten.relu", 0, 10e-6),
        *[_op("layer2.1", "aten.tanh", i, 20e-6) for i in range(10)],
        _op("head", "aten.linear", 0, 20e-6),
    )
    judged = with_baseline(now, stored_nodes(BASE))
    assert judged["marked"][0] == "layer2.1"
    [new] = [n for n in judged["nodes"] if n.get("key") == "layer2.1:aten.tanh:3"]
    assert new["baseline_time"] is None and new["change"] is None
    [conv] = [n for n in judged["nodes"] if n.get("key") == "layer2.1.conv:aten.conv2d:0"]
    assert abs(conv["change"] - 0.15) < 1e-9
    line = growth_line("net", judged)
    assert line is not None
    assert line.startswith("net: on the graph, layer2.1 grew by 230 us, +109.5% ("), line
    assert "10 new nodes (aten.tanh x10: 200 us)" in line
    assert "layer2.1.conv aten.conv2d 200 us -> 230 us" in line


def test_the_deepest_block_holding_half_the_growth_is_named() -> None:
    now = _graph(
        *[
            _op(
                n["module"], n["label"], 0, n["time"] * (3 if n["module"] == "layer1.0.conv" else 1)
            )
            for n in BASE["nodes"]
            if n["kind"] == "op"
        ]
    )
    [top, *_] = growth(with_baseline(now, stored_nodes(BASE)))
    assert top.module == "layer1.0.conv" and abs(top.share - 1.0) < 1e-9


def test_a_uniformly_slower_graph_names_no_block() -> None:
    now = _graph(
        *[
            _op(n["module"], n["label"], 0, n["time"] * 1.3)
            for n in BASE["nodes"]
            if n["kind"] == "op"
        ]
    )
    judged = with_baseline(now, stored_nodes(BASE))
    line = growth_line("net", judged)
    assert line == (
        "net: on the graph, no block holds half of the nodes' growth: the time grew across the "
        "model (all nodes 540 us -> 702 us)"
    )


def test_nothing_grew_or_no_baseline_says_nothing() -> None:
    assert growth_line("net", BASE) is None
    faster = _graph(
        *[
            _op(n["module"], n["label"], 0, n["time"] / 2)
            for n in BASE["nodes"]
            if n["kind"] == "op"
        ]
    )
    judged = with_baseline(faster, stored_nodes(BASE))
    assert growth_line("net", judged) is None and judged["marked"] == []


def test_a_removed_node_counts_against_its_block() -> None:
    # layer2.1 lost its relu and its conv grew by the same: no net growth there.
    now = _graph(
        *[
            _op(n["module"], n["label"], 0, n["time"])
            for n in BASE["nodes"]
            if n["kind"] == "op" and n["key"] != "layer2.1:aten.relu:0"
        ]
    )
    now["nodes"][4]["time"] += 10e-6  # layer2.1.conv
    judged = with_baseline(now, stored_nodes(BASE))
    assert judged["removed"] == {"layer2.1:aten.relu:0": 10e-6}
    assert growth_line("net", judged) is None
