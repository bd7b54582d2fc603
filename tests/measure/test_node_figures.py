"""Per-node figures of a measured call on its exported graph (measure.node_figures)."""

from __future__ import annotations

import contextlib

import torch

from pytest_torchperf.measure.node_figures import node_figures


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(16, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.fc(x))


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = torch.nn.Sequential(Block(), torch.nn.Linear(32, 16), Block())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(x).sum(dim=1)


def _figures(target: object, *inputs: torch.Tensor) -> dict:
    return node_figures(target, inputs, {}, "cpu", torch.no_grad, budget_s=0.05)  # type: ignore[arg-type]


def test_each_op_node_has_its_module_path_figures_and_a_stable_key() -> None:
    torch.manual_seed(0)
    graph = _figures(Net().eval(), torch.randn(4, 16))
    assert graph["exported"] is True and graph["why_not"] is None
    ops = [n for n in graph["nodes"] if n["kind"] == "op"]
    by_key = {n["key"]: n for n in ops}
    first = by_key["blocks.0.fc:aten.linear:0"]
    assert first["flops"] == 2 * 4 * 16 * 32  # batch x in x out multiply-adds
    assert first["bytes"] == 4 * 32 * 4 and first["outputs"] == ["float32[4, 32]"]
    assert first["time"] > 0 and first["calls"] == 1
    assert first["namespace"].endswith("Block_0/torch.nn.modules.linear.Linear_fc"), first
    assert "blocks.2:aten.relu:0" in by_key and "blocks.1:aten.linear:0" in by_key
    assert by_key[":aten.sum:0"]["module"] == ""
    inputs = [n for n in graph["nodes"] if n["kind"] == "input"]
    assert inputs and all(n["namespace"] == "inputs" and n["time"] == 0 for n in inputs)
    assert graph["nodes"][-1]["kind"] == "output"
    # Each node's inputs are other nodes of the graph.
    ids = {n["id"] for n in graph["nodes"]}
    assert all(src in ids for n in graph["nodes"] for src, _ in n["inputs"])
    assert graph["node_time"] == sum(n["time"] for n in ops)
    assert graph["call_time"] > 0 and graph["explained"] == graph["node_time"] / graph["call_time"]
    # Exported: the nodes are the figures, no op-level profile is taken beside them.
    assert graph["ops"] == []


def test_a_function_target_is_exported_too() -> None:
    def attention(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return torch.softmax(q @ k.T, dim=-1)

    graph = _figures(attention, torch.randn(8, 4), torch.randn(8, 4))
    labels = [n["label"] for n in graph["nodes"] if n["kind"] == "op"]
    assert "aten.softmax" in labels or "aten._softmax" in labels, labels
    assert all(
        n["namespace"].startswith("torchperf.attention")
        for n in graph["nodes"]
        if n["kind"] == "op"
    )


def test_a_model_export_cannot_handle_keeps_op_figures_and_says_why() -> None:
    class Branchy(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if x.sum().item() > 0:  # data-dependent control flow
                return x * 2
            return x - 1

    graph = _figures(Branchy(), torch.ones(3))
    assert graph["exported"] is False and graph["nodes"] == []
    assert graph["why_not"].startswith("torch.export could not export it ("), graph["why_not"]
    assert graph["ops"], "the op-level figures stand in for the graph"
    assert graph["call_time"] > 0 and graph["explained"] is None


def test_the_measurements_own_preparation_is_used() -> None:
    entered = []

    @contextlib.contextmanager
    def prepared():  # type: ignore[no-untyped-def]
        entered.append(True)
        with torch.no_grad():
            yield

    node_figures(torch.nn.Linear(4, 4), (torch.randn(2, 4),), {}, "cpu", prepared, budget_s=0.01)
    assert entered == [True]
