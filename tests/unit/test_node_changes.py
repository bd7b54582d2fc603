"""Where on the graph the time changed (judge.node_changes): nodes matched by key, the block
that holds most of the growth named, a uniformly slower graph not blamed on one block."""

from __future__ import annotations

from typing import Any

from pytest_torchperf.judge.node_changes import growth, growth_line, with_baseline
from pytest_torchperf.store.graphs import latest_stored, stored_nodes
from pytest_torchperf.store.sessions import Session


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


#: Enough unchanged nodes (layer1.1) that the median node tells the machine's speed.
STEADY = [_op("layer1.1", "aten.add", i, 10e-6) for i in range(6)]
BASE = _graph(
    _op("stem", "aten.conv2d", 0, 100e-6),
    _op("layer1.0.conv", "aten.conv2d", 0, 200e-6),
    _op("layer1.0", "aten.relu", 0, 10e-6),
    _op("layer2.1.conv", "aten.conv2d", 0, 200e-6),
    _op("layer2.1", "aten.relu", 0, 10e-6),
    _op("head", "aten.linear", 0, 20e-6),
    *STEADY,
)


def _scaled(factor: float, only: str | None = None, by: float = 1.0) -> list[dict[str, Any]]:
    """BASE's ops, all ``factor`` times slower, those of module ``only`` ``by`` times more."""
    return [
        {**n, "time": n["time"] * factor * (by if n["module"] == only else 1.0)}
        for n in BASE["nodes"]
        if n["kind"] == "op"
    ]


def test_a_save_stores_each_op_nodes_figures_by_key_only() -> None:
    stored = stored_nodes(BASE)
    assert stored["layer2.1.conv:aten.conv2d:0"] == [200e-6, 10, 4]
    assert set(stored) == {n["key"] for n in BASE["nodes"] if n["kind"] == "op"}
    with_nodes = Session.from_json({"nodes": {"a": [1.0, 0, 0]}})
    assert latest_stored([with_nodes, Session(statistic=1.0)]) == {"a": [1.0, 0, 0]}
    assert latest_stored([Session(statistic=1.0)]) is None


def test_a_block_that_gained_ops_is_named_with_its_new_nodes() -> None:
    now = _graph(
        _op("stem", "aten.conv2d", 0, 101e-6),
        _op("layer1.0.conv", "aten.conv2d", 0, 199e-6),
        _op("layer1.0", "aten.relu", 0, 10e-6),
        _op("layer2.1.conv", "aten.conv2d", 0, 230e-6),
        _op("layer2.1", "aten.relu", 0, 10e-6),
        *[_op("layer2.1", "aten.tanh", i, 20e-6) for i in range(10)],
        _op("head", "aten.linear", 0, 20e-6),
        *STEADY,
    )
    judged = with_baseline(now, stored_nodes(BASE))
    # stem's +1 us is noise, not listed beside the block (under 5 % of the growth).
    assert judged["marked"] == ["layer2.1"] and judged["machine_factor"] == 1.0
    [new] = [n for n in judged["nodes"] if n.get("key") == "layer2.1:aten.tanh:3"]
    assert new["baseline_time"] is None and new["change"] is None
    [conv] = [n for n in judged["nodes"] if n.get("key") == "layer2.1.conv:aten.conv2d:0"]
    assert abs(conv["change"] - 0.15) < 1e-9
    line = growth_line("net", judged)
    assert line is not None
    assert line.startswith("net: on the graph, layer2.1 grew by 230 us, +109.5% ("), line
    assert "10 new nodes (aten.tanh x10: 200 us)" in line
    assert "layer2.1.conv aten.conv2d 200 us -> 230 us" in line


def test_the_deepest_block_holding_nearly_all_the_growth_is_named() -> None:
    [top, *_] = growth(with_baseline(_graph(*_scaled(1.0, "layer1.0.conv", 3)), stored_nodes(BASE)))
    assert top.module == "layer1.0.conv" and abs(top.share - 1.0) < 1e-9
    # Both layers of a block grew: the block is named, not one of them.
    both = [
        {**n, "time": n["time"] + 100e-6} if n["module"].startswith("layer2.1") else n
        for n in _scaled(1.0)
    ]
    [top, *_] = growth(with_baseline(_graph(*both), stored_nodes(BASE)))
    assert top.module == "layer2.1"


def test_a_busier_machine_slows_every_node_and_no_block_is_blamed() -> None:
    judged = with_baseline(_graph(*_scaled(1.8)), stored_nodes(BASE))
    assert abs(judged["machine_factor"] - 1.8) < 1e-9
    assert growth_line("net", judged) is None and judged["marked"] == []
    # A block that grew on top of it is still found, and the line says the baseline was scaled.
    judged = with_baseline(_graph(*_scaled(1.8, "layer2.1.conv", 2)), stored_nodes(BASE))
    line = growth_line("net", judged) or ""
    assert line.startswith("net: on the graph, layer2.1.conv grew by 360 us, +100.0% ("), line
    assert "the baseline's scaled x1.80: the median node ran that much slower" in line


def test_growth_spread_over_blocks_names_none() -> None:
    spread = [
        {**n, "time": n["time"] * 1.5}
        if n["module"] in ("stem", "layer1.0.conv", "layer2.1.conv", "head")
        else n
        for n in _scaled(1.0)
    ]
    line = growth_line("net", with_baseline(_graph(*spread), stored_nodes(BASE)))
    assert line == (
        "net: on the graph, no block holds half of the nodes' growth: the time grew across the "
        "model (all nodes 600 us -> 860 us)"
    )


def test_nothing_grew_or_no_baseline_says_nothing() -> None:
    assert growth_line("net", BASE) is None
    judged = with_baseline(_graph(*_scaled(0.5)), stored_nodes(BASE))
    assert growth_line("net", judged) is None and judged["marked"] == []


def test_a_removed_node_counts_against_its_block() -> None:
    # layer2.1 lost its relu and its conv grew by the same: no net growth there.
    now = [n for n in _scaled(1.0) if n["key"] != "layer2.1:aten.relu:0"]
    now[3] = {**now[3], "time": now[3]["time"] + 10e-6}  # layer2.1.conv
    judged = with_baseline(_graph(*now), stored_nodes(BASE))
    assert judged["removed"] == {"layer2.1:aten.relu:0": 10e-6}
    assert growth_line("net", judged) is None


def test_a_growth_spread_over_the_model_marks_no_block_for_the_view() -> None:
    """The view drew maxpool as the slowed block while the why line said the time grew across
    the model: a block is marked only where one holds half of the growth."""
    spread = [
        {**n, "time": n["time"] * 1.5}
        if n["module"] in ("stem", "layer1.0.conv", "layer2.1.conv", "head")
        else n
        for n in _scaled(1.0)
    ]
    assert with_baseline(_graph(*spread), stored_nodes(BASE))["marked"] == []


def test_ops_added_to_the_models_own_forward_are_named_there() -> None:
    """A loop of ops in the root module's forward (module ``""``), the likeliest place for one,
    was named nowhere: neither the why line nor the view's marked block."""
    root_base = _graph(*BASE["nodes"][1:-1], _op("", "aten.mul", 0, 5e-6))
    now = _graph(*_scaled(1.0), *[_op("", "aten.mul", i, 5e-6) for i in range(30)])
    judged = with_baseline(now, stored_nodes(root_base))
    assert judged["marked"][:1] == [""]
    [top, *_] = growth(judged)
    assert top.module == "" and abs(top.delta - 145e-6) < 1e-12 and abs(top.change - 29) < 1e-9
    line = growth_line("mlp", judged)
    assert line is not None
    assert line.startswith(
        "mlp: on the graph, the model's own forward (outside its submodules) grew by 145 us, "
        "+2900.0% (100% of the nodes' growth;"
    ), line
    assert "29 new nodes (aten.mul x29: 145 us)" in line, line


def test_a_grown_op_of_the_models_own_forward_is_named_without_a_module() -> None:
    """The block is already named "the model's own forward": its op that grew read
    "top level aten.mul", a name the line had not used."""
    root_base = _graph(*BASE["nodes"][1:-1], _op("", "aten.mul", 0, 5e-6))
    now = _graph(*_scaled(1.0), _op("", "aten.mul", 0, 150e-6))
    line = growth_line("mlp", with_baseline(now, stored_nodes(root_base)))
    assert line is not None
    assert line.startswith("mlp: on the graph, the model's own forward (outside"), line
    assert line.endswith("; aten.mul 5 us -> 150 us"), line
