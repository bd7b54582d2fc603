"""Where a call's time goes on the model's own graph: per-node figures of the measured call
(``--torchperf-graph``), measured after the verdict's timed passes, never on their path.

The call is exported with ``torch.export`` and its graph run node by node by an FX interpreter
that times each node's own work (its ATen op: the clock read around it, CUDA events on a GPU),
counts its FLOPs (``FlopCounterMode`` around that node alone) and its output bytes. The figures
are each node's quickest over several runs of the whole graph (another process only ever adds
time, and on a busy machine it adds it to some nodes more than others: the quickest run of each
node is the least disturbed one). The plain call is timed beside them, the same way, in the
same process, so the record says what share of the call's time the nodes explain: the rest is
Python and dispatch outside the ATen ops (the interpreter's own overhead is outside the clock).

A node is named by where it sits in the model: its module path (``layer3.1.conv2``, from the
export's ``nn_module_stack``), its op, and its place among that module's ops of the same op: the
*key* that finds it again in a baseline saved before other modules gained or lost ops.

Models ``torch.export`` cannot export (data-dependent control flow, unsupported Python) keep
their verdicts: the record says why, and carries the op-level figures of a profiled call
instead (:func:`pytest_torchperf.measure.profiling.profile_call`). torch is imported lazily.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, cast

from pytest_torchperf.core.graph_types import GraphNode, GraphRecord, OpFigure
from pytest_torchperf.core.types import Target, UserValue

if TYPE_CHECKING:  # torch is imported lazily, when a graph is recorded
    import torch
    import torch.fx
    from torch.export import ExportedProgram

#: Seconds the node-by-node runs may take (after one warm-up run); at least MIN_RUNS are made:
#: a node's quickest of 3 runs beside a busy neighbour still read 1.2-2x its quiet time.
BUDGET_S = 2.0
MIN_RUNS = 5
MAX_RUNS = 50


def _as_module(target: Target) -> torch.nn.Module:
    """A callable target as an ``nn.Module`` (``torch.export`` exports modules only)."""
    import torch

    if isinstance(target, torch.nn.Module):
        return target

    class Call(torch.nn.Module):
        def forward(self, *args: UserValue, **kwargs: UserValue) -> UserValue:
            return target(*args, **kwargs)

    # The graph's top namespace names the function, not this wrapper.
    Call.__module__ = "torchperf"
    Call.__qualname__ = getattr(target, "__name__", "call")
    return Call()


def node_figures(
    target: Target,
    inputs: Sequence[UserValue],
    kwargs: Mapping[str, UserValue],
    device: str,
    prepared: Callable[[], AbstractContextManager[None]],
    budget_s: float = BUDGET_S,
) -> GraphRecord:
    """The ``graph`` record of one measured call (see docs/graph.md for its keys).

    ``prepared`` is the measurement's own context (threads, eval, no_grad), so the figures are
    of the call that was timed. Never raises for a model it cannot export: the record says why.
    """
    import torch

    with prepared():
        call_time = _call_time(lambda: target(*inputs, **kwargs), device, budget_s / 4)
        try:
            exported = torch.export.export(
                _as_module(target), tuple(inputs), dict(kwargs) or None, strict=False
            )
        except Exception as exc:  # noqa: BLE001 - any export failure: verdicts stand, ops shown
            first = (str(exc).strip().splitlines() or [""])[0][:300]
            return {
                "exported": False,
                "why_not": f"torch.export could not export it ({type(exc).__name__}: {first})",
                "device": device,
                "clock": _clock_name(device),
                "call_time": call_time,
                "node_time": None,
                "explained": None,
                "nodes": [],
                "ops": _op_figures(lambda: target(*inputs, **kwargs), device),
                "marked": [],
            }
        flat = _flat_inputs(exported, inputs, kwargs)
        runner = _NodeTimer(exported.graph_module, device)
        runner.run(*flat)  # warm-up: one-off allocations stay out of the figures
        flops = runner.count_flops(flat)
        runs = 0
        deadline = time.perf_counter() + budget_s
        while runs < MIN_RUNS or (runs < MAX_RUNS and time.perf_counter() < deadline):
            runner.run(*flat)
            runs += 1
    nodes = _nodes(exported, runner, flops)
    node_time = sum(n["time"] for n in nodes)
    return {
        "exported": True,
        "why_not": None,
        "device": device,
        "clock": _clock_name(device),
        "call_time": call_time,
        "node_time": node_time,
        "explained": node_time / call_time if call_time > 0 else None,
        "runs": runs,
        "nodes": nodes,
        # The graph's nodes are the figures; op-level ones only stand in where it failed.
        "ops": [],
        "marked": [],
    }


def _clock_name(device: str) -> str:
    return "cuda events" if device.startswith("cuda") else "wall"


def _call_time(call: Callable[[], UserValue], device: str, budget_s: float) -> float:
    """Seconds of the quickest of several plain calls (after one warm-up call)."""
    import torch

    cuda = device.startswith("cuda")

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    call()
    sync()
    times: list[float] = []
    deadline = time.perf_counter() + budget_s
    while len(times) < MIN_RUNS or (len(times) < MAX_RUNS and time.perf_counter() < deadline):
        start = time.perf_counter()
        call()
        sync()
        times.append(time.perf_counter() - start)
    return min(times)


def _flat_inputs(
    exported: ExportedProgram, inputs: Sequence[UserValue], kwargs: Mapping[str, UserValue]
) -> list[object]:
    """The graph module's own inputs: lifted parameters, buffers and constants around the
    user's flattened inputs, in the order of its placeholders."""
    flatten = getattr(exported, "_graph_module_flat_inputs", None)
    if flatten is not None:
        return list(flatten(tuple(inputs), dict(kwargs)))
    import torch

    signature = exported.graph_signature
    state = [exported.state_dict[k] for k in (*signature.parameters, *signature.buffers)]
    user = torch.utils._pytree.tree_leaves((tuple(inputs), dict(kwargs)))
    constants = [exported.constants[k] for k in getattr(signature, "lifted_tensor_constants", ())]
    return [*state, *user, *constants]


class _NodeTimer:
    """Runs an exported graph node by node, timing each ``call_function`` node's own work."""

    def __init__(self, graph_module: torch.fx.GraphModule, device: str) -> None:
        import torch.fx

        self.graph_module = graph_module
        self.cuda = device.startswith("cuda")
        #: Node name -> its time in each timed run (seconds).
        self.times: dict[str, list[float]] = {}
        self._timing = False
        timer = self

        class Interpreter(torch.fx.Interpreter):
            def run_node(self, n: torch.fx.Node) -> object:
                if n.op != "call_function" or not timer._timing:
                    return super().run_node(n)
                # Only the op itself is on the clock, not the interpreter fetching its inputs.
                args, kwargs = self.fetch_args_kwargs_from_env(n)
                # A call_function node's target is the function; torch's Node.target type also
                # allows the method name a call_method node has.
                function = cast("Callable[..., object]", n.target)
                return timer._timed(n, lambda: function(*args, **kwargs))

        self._interpreter = Interpreter(graph_module)
        self._pending: list[tuple[str, torch.cuda.Event, torch.cuda.Event]] = []

    def _timed(self, node: torch.fx.Node, run: Callable[[], object]) -> object:
        import torch

        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            out = run()
            end.record()
            self._pending.append((node.name, start, end))
            return out
        begin = time.perf_counter()
        out = run()
        self.times.setdefault(node.name, []).append(time.perf_counter() - begin)
        return out

    def run(self, *flat: object) -> object:
        import torch

        self._timing = True
        try:
            out = self._interpreter.run(*flat)
        finally:
            self._timing = False
        if self.cuda:
            torch.cuda.synchronize()
            for name, start, end in self._pending:
                self.times.setdefault(name, []).append(start.elapsed_time(end) / 1e3)
            self._pending.clear()
        return out

    def count_flops(self, flat: Sequence[object]) -> dict[str, int]:
        """Node name -> FLOPs of one run (each node under its own counter)."""
        import torch.fx
        from torch.utils.flop_counter import FlopCounterMode

        counted: dict[str, int] = {}

        class Counting(torch.fx.Interpreter):
            def run_node(self, n: torch.fx.Node) -> object:
                if n.op != "call_function":
                    return super().run_node(n)
                with FlopCounterMode(display=False) as counter:
                    out = super().run_node(n)
                counted[n.name] = int(counter.get_total_flops())
                return out

        Counting(self.graph_module).run(*flat)
        return counted


def _nodes(
    exported: ExportedProgram, timer: _NodeTimer, flops: Mapping[str, int]
) -> list[GraphNode]:
    """The record's nodes, in graph order: inputs, ops (with their figures) and the output."""
    nth: dict[tuple[str, str], int] = {}
    nodes: list[GraphNode] = []
    for node in exported.graph.nodes:
        kind = {"placeholder": "input", "output": "output"}.get(node.op, "op")
        module, namespace = (
            _where(node) if kind == "op" else ("", "inputs" if kind == "input" else "")
        )
        label = _op_label(node.target) if kind == "op" else kind
        seen = nth.get((module, label), 0)
        nth[(module, label)] = seen + 1
        times = timer.times.get(node.name, [])
        users = list(node.users)
        nodes.append(
            {
                "id": node.name,
                "label": label,
                "kind": kind,
                "module": module,
                "namespace": namespace,
                "inputs": [[n.name, 0] for n in node.all_input_nodes],
                "outputs": _shapes(node.meta.get("val")),
                "key": f"{module}:{label}:{seen}" if kind == "op" else f"{kind}:{node.name}",
                "time": min(times) if times else 0.0,
                "flops": int(flops.get(node.name, 0)),
                "bytes": _bytes(node.meta.get("val")),
                "calls": 1 if kind == "op" else 0,
                "users": len(users),
            }
        )
    return nodes


def _op_label(target: object) -> str:
    if hasattr(target, "overloadpacket"):
        return str(target.overloadpacket)
    return getattr(target, "__name__", str(target))


def _where(node: torch.fx.Node) -> tuple[str, str]:
    """The node's module path (``layer3.1.conv2``) and Model Explorer's namespace for it (each
    enclosing module's class with the last part of its path: ``...BasicBlock_1/...Conv2d_conv2``)."""
    stack = node.meta.get("nn_module_stack") or {}
    path, parts = "", []
    for entry in stack.values():
        name, cls = entry if isinstance(entry, (tuple, list)) else (str(entry), "")
        cls_name = cls if isinstance(cls, str) else f"{cls.__module__}.{cls.__qualname__}"
        path = _module_path(str(name))
        parts.append(cls_name + ("_" + path.split(".")[-1] if path else ""))
    return path, "/".join(parts)


def _module_path(name: str) -> str:
    """``L['self'].layer3[1].conv2`` or ``layer3.1.conv2`` -> ``layer3.1.conv2``."""
    name = name.replace("L['self']", "").replace("L__self__", "")
    for old, new in (("['", "."), ("']", ""), ("[", "."), ("]", "")):
        name = name.replace(old, new)
    return name.strip("._")


def _shapes(value: object) -> list[str]:
    values = value if isinstance(value, (tuple, list)) else [value]
    shapes = []
    for v in values:
        shape = getattr(v, "shape", None)
        if shape is not None and hasattr(v, "dtype"):
            dims = ", ".join(str(int(d)) if str(d).isdigit() else str(d) for d in shape)
            shapes.append(f"{str(v.dtype).replace('torch.', '')}[{dims}]")
    return shapes


def _bytes(value: object) -> int:
    values = value if isinstance(value, (tuple, list)) else [value]
    total = 0
    for v in values:
        if hasattr(v, "numel") and hasattr(v, "element_size"):
            try:
                total += int(v.numel()) * int(v.element_size())
            except Exception:  # noqa: BLE001 - symbolic sizes (dynamic shapes): no figure
                continue
    return total


def _op_figures(call: Callable[[], UserValue], device: str) -> list[OpFigure]:
    """Op-level figures of a profiled call: what a graph that could not be exported shows."""
    from pytest_torchperf.measure.profiling import profile_call

    rows, _ = profile_call(call, device, iterations=6)
    return [
        {
            "op": r["op"],
            "time": r["self_device"] if device.startswith("cuda") else r["self_cpu"],
            "cpu_time": r["self_cpu"],
            "calls": r["calls"],
        }
        for r in rows
    ]
