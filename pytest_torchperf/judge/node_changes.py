"""Where on the model's graph a call's time changed: a measurement's per-node figures
(:mod:`pytest_torchperf.measure.node_figures`) against those a save stored. Pure.

Nodes are matched by key (module path, op, place among that module's ops of that op), so a
block that gained an op does not shift every later node. The block named as where the time grew
is the deepest module that holds at least half of the graph's net growth: a change in one block
is named there, while a uniformly slower machine spreads the growth over every block and none
is named (the verdict already says the machine differed).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_torchperf.core.units import counted, format_change, format_percent, format_time

#: The share of the graph's net growth a block must hold to be named as where it grew.
HOLDS = 0.5
#: A module is named rather than the block around it when it holds this share of the block's
#: growth.
NEARLY_ALL = 0.8
#: Growth below this share of the (scaled) baseline's node time is no growth.
NEGLIGIBLE = 0.02
#: A module besides the named block is listed where its own nodes hold this share of the growth.
WORTH_NAMING = 0.05
#: Matched nodes needed to estimate how much slower the machine ran every node.
MIN_MATCHED = 5


@dataclass(frozen=True)
class Growth:
    """How much a module's nodes' own time changed against the baseline."""

    module: str
    #: Seconds: this run's summed node time minus the baseline's, and the baseline's sum.
    delta: float
    baseline: float
    #: Its share of the graph's net growth.
    share: float

    @property
    def change(self) -> float | None:
        return self.delta / self.baseline if self.baseline > 0 else None


def with_baseline(
    graph: Mapping[str, Any], stored: Mapping[str, Sequence[float]]
) -> dict[str, Any]:
    """``graph`` with each op node's ``baseline_time`` (``None`` for a node the baseline lacks)
    and ``change`` against it, the baseline's nodes this run lacks under ``removed``, the
    ``machine_factor`` and ``marked``: the block that holds most of the growth, then other
    modules whose nodes grew (empty when no block holds half of it).

    The baseline's times are scaled by the machine factor, the median ratio of a node's time
    now to its stored one: a machine busier or slower than at the save slows every node alike,
    and would otherwise make every block look grown. A change confined to a few nodes hardly
    moves the median (with fewer than :data:`MIN_MATCHED` nodes matched, no scaling)."""
    matched = [
        (node["time"], float(stored[node["key"]][0]))
        for node in graph.get("nodes", ())
        if node.get("kind") == "op" and node.get("key") in stored and stored[node["key"]][0] > 0
    ]
    factor = (
        statistics.median(now / before for now, before in matched)
        if len(matched) >= MIN_MATCHED
        else 1.0
    )
    nodes = []
    for node in graph.get("nodes", ()):
        if node.get("kind") != "op":
            nodes.append(dict(node))
            continue
        before = stored.get(node["key"])
        base = float(before[0]) * factor if before else None
        nodes.append(
            {**node, "baseline_time": base, "change": node["time"] / base - 1 if base else None}
        )
    keys = {n.get("key") for n in nodes}
    removed = {k: float(v[0]) * factor for k, v in stored.items() if k not in keys}
    updated = {**graph, "nodes": nodes, "removed": removed, "machine_factor": factor}
    grown = growth(updated)
    # Marked (and drawn as where the time grew) only where one block holds it: a growth spread
    # over the model names no block, in the view as in the why line.
    updated["marked"] = [g.module for g in grown] if grown and grown[0].share >= HOLDS else []
    return updated


def growth(graph: Mapping[str, Any]) -> list[Growth]:
    """The module that holds at least :data:`HOLDS` of the graph's growth (the sum of its
    top-level blocks' net growth where positive), the deepest such one,
    then the other modules whose own nodes grew, by how much (empty when nothing grew or no
    baseline was attached)."""
    ops = [n for n in graph.get("nodes", ()) if n.get("kind") == "op" and "baseline_time" in n]
    if not ops:
        return []
    delta: dict[str, float] = {}
    base: dict[str, float] = {}
    own: dict[str, float] = {}
    own_base: dict[str, float] = {}

    def add(module: str, d: float, b: float, direct: bool) -> None:
        for prefix in _prefixes(module):
            delta[prefix] = delta.get(prefix, 0.0) + d
            base[prefix] = base.get(prefix, 0.0) + b
        if direct:
            own[module] = own.get(module, 0.0) + d
            own_base[module] = own_base.get(module, 0.0) + b

    for node in ops:
        b = node["baseline_time"] or 0.0
        add(node["module"], node["time"] - b, b, True)
    for key, b in (graph.get("removed") or {}).items():
        module = key.split(":", 1)[0]
        add(module, -b, b, True)
    # What grew, counted per top-level block (noise within a block partly cancels; a block that
    # got faster takes nothing from one that grew): the measure of "half the growth".
    total = sum(max(d, 0.0) for m, d in delta.items() if m and "." not in m) + max(
        own.get("", 0.0), 0.0
    )
    if total <= NEGLIGIBLE * base.get("", 0.0):
        return []

    def entry(module: str, d: float) -> Growth:
        # The model's own forward ("") counts its own nodes only: its prefix sums are the graph's.
        b = own_base.get("", 0.0) if module == "" else base.get(module, 0.0)
        return Growth(module, d, b, min(d / total, 1.0))

    # The deepest module that holds nearly all of what its largest enclosing block holds: a
    # block whose two convolutions both grew is named, not one of them.
    largest = max((d for m, d in delta.items() if m), default=0.0)
    holding = [
        m for m, d in delta.items() if m and d >= HOLDS * total and d >= NEARLY_ALL * largest
    ]
    holding.sort(key=lambda m: (-m.count("."), -delta[m]))
    named = holding[:1]
    # The model's own forward, outside every submodule (a loop of ops in the root's forward,
    # the likeliest place for one), is a block of its own: named where it holds the growth.
    root = own.get("", 0.0)
    if root >= HOLDS * total and root > max((delta[m] for m in named), default=0.0):
        named = [""]
    # Then the modules whose own nodes grew by a share worth naming (on a busy machine every
    # module's nodes move a little).
    others = sorted(
        (
            m
            for m, d in own.items()
            if d >= WORTH_NAMING * total and m not in named and not _within(named, m)
        ),
        key=lambda m: -own[m],
    )
    return [entry(m, own[m] if m == "" else delta[m]) for m in named] + [
        entry(m, own[m]) for m in others[:4]
    ]


def module_label(module: str) -> str:
    """A module as messages name it: its dotted path, or the root module's own forward."""
    return module or "the model's own forward (outside its submodules)"


def growth_line(name: str, graph: Mapping[str, Any]) -> str | None:
    """The why line's graph part: the block where the time grew, its figures and its node that
    grew most; or that no block holds most of it. None without a baseline or any growth."""
    grown = growth(graph)
    if not grown:
        return None
    top = grown[0]
    if top.share < HOLDS:
        return (
            f"{name}: on the graph, no block holds half of the nodes' growth: the time grew "
            f"across the model ({_node_total(graph)})"
        )
    nodes = [
        n
        for n in graph["nodes"]
        if n.get("kind") == "op"
        and (n["module"] == "" if top.module == "" else _within([top.module], n["module"]))
    ]
    change = f", {format_change(1 + top.change)}" if top.change is not None else ""
    line = (
        f"{name}: on the graph, {module_label(top.module)} grew by {format_time(top.delta)}{change} "
        f"({format_percent(top.share)} of the nodes' growth; {_node_total(graph)})"
    )
    return line + "".join(f"; {part}" for part in _what_grew(nodes))


def _what_grew(nodes: Sequence[Mapping[str, Any]]) -> list[str]:
    """In a block: its new nodes by op (count and time), then its existing node that grew most."""
    new: dict[str, list[float]] = {}
    for n in nodes:
        if n.get("baseline_time") is None:
            new.setdefault(n["label"], []).append(n["time"])
    parts = []
    if new:
        count = sum(len(t) for t in new.values())
        ops = ", ".join(
            f"{label} x{len(t)}" if len(t) > 1 else label
            for label, t in sorted(new.items(), key=lambda kv: -sum(kv[1]))[:3]
        )
        more = ", ..." if len(new) > 3 else ""
        total = sum(sum(t) for t in new.values())
        parts.append(f"{counted(count, 'new node')} ({ops}{more}: {format_time(total)})")
    grown = [n for n in nodes if n.get("baseline_time") is not None]
    worst = max(grown, key=lambda n: n["time"] - n["baseline_time"], default=None)
    if worst is not None and worst["time"] > worst["baseline_time"]:
        # The root's own nodes need no module: the line has named that block already.
        where = f"{worst['module']} " if worst["module"] else ""
        parts.append(
            f"{where}{worst['label']} "
            f"{format_time(worst['baseline_time'])} -> {format_time(worst['time'])}"
        )
    return parts


def _node_total(graph: Mapping[str, Any]) -> str:
    ops = [n for n in graph.get("nodes", ()) if n.get("kind") == "op"]
    now = sum(n["time"] for n in ops)
    before = sum((n.get("baseline_time") or 0.0) for n in ops) + sum(
        (graph.get("removed") or {}).values()
    )
    factor = float(graph.get("machine_factor") or 1.0)
    scaled = (
        f", the baseline's scaled x{factor:.2f}: the median node ran that much "
        + ("slower" if factor > 1 else "faster")
        if not 0.95 <= factor <= 1.05
        else ""
    )
    return f"all nodes {format_time(before)} -> {format_time(now)}{scaled}"


def _prefixes(module: str) -> list[str]:
    """``layer3.1.conv2`` -> ``["", "layer3", "layer3.1", "layer3.1.conv2"]``."""
    parts = module.split(".") if module else []
    return [""] + [".".join(parts[: i + 1]) for i in range(len(parts))]


def _within(parents: Sequence[str], module: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in parents if p)
