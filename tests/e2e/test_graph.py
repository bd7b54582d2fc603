"""End-to-end: --torchperf-graph measures each graph node of a measured call, stores the figures
with a save, and a compare names the block of the model where the time grew (issue: the graph
view). A block is slowed by giving it 40 extra ops under an environment variable: its growth is
hundreds of microseconds against nodes of a few, so which block grew does not depend on timing
luck; the verdict itself is made to fail by a baseline edited to an extreme value."""

from __future__ import annotations

import json
import sys

import pytest

from tests.e2e.helpers import assert_sessions_round_trip, edit_baselines, scale_baselines

NET = """
import os
import torch
import pytest


class Block(torch.nn.Module):
    def __init__(self, slow=False):
        super().__init__()
        self.conv = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.slow = slow

    def forward(self, x):
        y = torch.relu(self.conv(x))
        if self.slow:
            for _ in range(20):
                y = y + torch.tanh(y) * 0.01
        return y


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.layer1 = torch.nn.Sequential(Block(), Block())
        self.layer2 = torch.nn.Sequential(Block(), Block(os.environ.get("SLOW") == "1"))
        self.head = torch.nn.Linear(8, 4)

    def forward(self, x):
        return self.head(self.layer2(self.layer1(self.stem(x))).mean((2, 3)))


@pytest.mark.torchperf(max_slowdown="10%", ignore_counters=["ops", "flops", "memory"],
                       accuracy={"eager": {"rel_l2": 1.0}})
def test_net(torchperf):
    torch.manual_seed(0)
    torchperf(Net(), torch.randn(1, 3, 32, 32), name="net")


@pytest.mark.torchperf
def test_branchy(torchperf):
    def branchy(x):
        if x.sum().item() > 0:  # data-dependent control flow: torch.export cannot follow it
            return x * 2
        return x - 1

    torchperf(branchy, torch.ones(64), name="branchy")
"""


def _records(path) -> dict[str, dict]:  # type: ignore[no-untyped-def]
    doc = json.loads(path.read_text())
    return {b["torchperf"]["measurement"]: b["torchperf"] for b in doc["benchmarks"]}


def test_graph_figures_are_saved_and_a_compare_names_the_block_that_grew(
    perf: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    perf.makepyfile(test_net=NET)
    saved = perf.runpytest("--torchperf-save", "--torchperf-graph", "--torchperf-json=saved.json")
    saved.assert_outcomes(passed=2)
    records = _records(perf.path / "saved.json")
    graph = records["net"]["graph"]
    assert graph["exported"] is True and graph["explained"] > 0
    keys = {n["key"] for n in graph["nodes"] if n["kind"] == "op"}
    assert "layer2.1.conv:aten.conv2d:0" in keys and "head:aten.linear:0" in keys
    # What the baseline keeps: per op node [seconds, FLOPs, bytes], nothing of the structure.
    stored: dict[str, dict] = {}
    edit_baselines(perf.path / ".torchperf", lambda _n, name, s: stored.setdefault(name, s))
    # Sessions holding the graph's keys (nodes, graph) are read and written back unchanged.
    assert assert_sessions_round_trip(perf.path / ".torchperf") >= 2
    assert set(stored["net"]["nodes"]) == keys
    assert stored["net"]["nodes"]["layer2.1.conv:aten.conv2d:0"][1] == 2 * 8 * 8 * 9 * 32 * 32
    # A model torch.export cannot follow keeps its verdicts and shows op-level figures.
    branchy = records["branchy"]["graph"]
    assert branchy["exported"] is False and branchy["ops"]
    assert "torch.export could not export it" in branchy["why_not"]
    assert "nodes" not in stored["branchy"]
    # The baseline folder alone draws the graph again (structure kept in the latest session).
    assert len(stored["net"]["graph"]["nodes"]) == len(graph["nodes"])
    out = perf.path / "view"
    drawn = perf.run(
        sys.executable, "-m", "pytest_torchperf.cli", "graph", ".torchperf", "-k", "net",
        "--no-browser", "--out", str(out),
    )  # fmt: skip
    assert drawn.ret == 0, drawn.stderr.str()
    assert "nodes explain" in drawn.stdout.str() and (out / "graph.json").exists()
    drawn_nodes = json.loads((out / "graph.json").read_text())["graphs"][0]["nodes"]
    assert {n["id"] for n in drawn_nodes} >= {"conv2d", "linear"}

    def extreme(_nodeid: str, name: str, session: dict) -> None:
        if name == "net":
            session["statistic"] = 1e-7
            session["times"] = [1e-7] * len(session["times"])

    edit_baselines(perf.path / ".torchperf", extreme)
    monkeypatch.setenv("SLOW", "1")
    # Only the slowed net: a 10 us function's time is at the machine's mercy.
    compared = perf.runpytest(
        "--torchperf-compare",
        "--torchperf-graph",
        "--torchperf-json=compared.json",
        "test_net.py::test_net",
    )
    compared.assert_outcomes(failed=1)
    compared.stdout.re_match_lines(
        [
            r".*net: on the graph, layer2\.1 grew by \S+ \S+, \+\S+% \(\S+% of the nodes' growth; "
            r"all nodes \S+ \S+ -> \S+ \S+[^)]*\); 60 new nodes \(aten\.\w+ x20, aten\.\w+ x20, "
            r"aten\.\w+ x20: \S+ \S+\).* \(torchperf graph compared\.json -k net draws it\)$"
        ]
    )
    graph = _records(perf.path / "compared.json")["net"]["graph"]
    assert graph["marked"][0] == "layer2.1"
    conv = next(n for n in graph["nodes"] if n.get("key") == "layer2.1.conv:aten.conv2d:0")
    assert conv["baseline_time"] > 0 and conv["change"] is not None
    assert any(
        n.get("key") == "layer2.1:aten.tanh:19" and n["baseline_time"] is None
        for n in graph["nodes"]
    )


def test_without_the_option_nothing_is_exported_or_stored(perf: pytest.Pytester) -> None:
    perf.makepyfile(test_net=NET)
    perf.runpytest(
        "--torchperf-save", "--torchperf-json=saved.json", "test_net.py::test_net"
    ).assert_outcomes(passed=1)
    assert "graph" not in _records(perf.path / "saved.json")["net"]
    stored: list[dict] = []
    edit_baselines(perf.path / ".torchperf", lambda _n, _name, s: stored.append(s))
    assert stored and all("nodes" not in s for s in stored)
    # A compare with the option against such a baseline says why its graph has no change
    # (the baseline made 1000x slower: the verdict cannot depend on this machine's noise).
    scale_baselines(perf.path / ".torchperf", 1000.0)
    compared = perf.runpytest(
        "--torchperf-compare",
        "--torchperf-graph",
        "--torchperf-json=c.json",
        "test_net.py::test_net",
    )
    compared.assert_outcomes(passed=1)
    assert "--torchperf-graph: the baseline of net (and of any other measurement saved without" in (
        compared.stdout.str()
    )
    graph = _records(perf.path / "c.json")["net"]["graph"]
    assert graph["no_baseline"].startswith("its baseline was saved without --torchperf-graph")
    assert "marked" in graph and graph["marked"] == []


def test_a_variants_tests_eager_item_records_its_graph(perf: pytest.Pytester) -> None:
    """A `variants=` test recorded no graph for any item, eager included, and said nothing;
    `torchperf graph` then asked for the option the run had (newcomer pass)."""
    perf.makepyfile(
        test_v="""
import pytest, torch

@pytest.mark.torchperf(variants=["eager", "amp"])
def test_mlp(torchperf):
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    torchperf(model, torch.randn(4, 16), name="mlp")

@pytest.mark.torchperf(variants=["amp"])
def test_amp_only(torchperf):
    torchperf(torch.nn.Linear(16, 4), torch.randn(4, 16), name="lin")
"""
    )
    result = perf.runpytest("--torchperf-graph", "--torchperf-json=g.json")
    result.assert_outcomes(passed=3)
    records = _records(perf.path / "g.json")
    assert records["mlp"].get("graph") and not records["mlp[amp]"].get("graph")
    result.stdout.fnmatch_lines(
        [
            "*test_v.py::test_amp_only: no graph recorded: --torchperf-graph draws a variants test's "
            "eager item only*"
        ]
    )
