"""What --torchperf-graph costs, and whether it names the block that was slowed.

On the example project's ResNet-18 (``test_resnet18_batch1``, one 224x224 image, 1 thread):

1. **Cost**: wall time of ``pytest --torchperf-only`` on that test with and without
   ``--torchperf-graph``, ``--repeats`` runs each, interleaved; and the per-node pass alone
   (``measure.node_figures.node_figures`` on the same model in this process: export, one
   warm-up, the node-by-node runs, FLOPs, op-level profile) against the plain call.
2. **Which block**: one save with ``--torchperf-graph``, then one compare per part in
   ``--parts`` with that part slowed on purpose (``VISION_ZOO_SLOW_PART``: it computes three
   times over); prints the block each compare names first (``graph["marked"][0]``), whether
   it is the slowed one, the share of the call's time the nodes explain, and the graph line of
   the failure message.

The timing gates are loosened in these runs (guards off, limit widening off): the figures are
about the graph view, not about whether the machine was quiet enough to judge time.

Usage, from the repository root::

    python3 benchmarks/graph_view.py                      # about 5 minutes on a 2-core VM
    python3 benchmarks/graph_view.py --parts layer3.1 --repeats 3

Numbers depend on the machine and its load: quote them with the command and the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEST = "tests/test_perf.py::test_resnet18_batch1"
LOOSE = [
    "--torchperf-min-cpu-share=0",
    "--torchperf-max-neighbour-load=100%",
    "--torchperf-max-widening=off",
    "--torchperf-max-machine-slowdown=1000%",
    "--torchperf-processes=1",
    "--torchperf-confirm=same",
]


def _pytest(project: Path, *args: str, env: dict[str, str] | None = None) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", TEST, *args],
        cwd=project,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        capture_output=True,
        text=True,
        check=False,
    )
    return time.perf_counter() - start, done.stdout + done.stderr


def cost(project: Path, repeats: int) -> None:
    plain, graph = [], []
    _pytest(project, "--torchperf-only")  # warm-up: imports, caches
    for _ in range(repeats):
        plain.append(_pytest(project, "--torchperf-only")[0])
        graph.append(_pytest(project, "--torchperf-only", "--torchperf-graph")[0])
    print(
        f"cost: pytest --torchperf-only {TEST}: median {statistics.median(plain):.1f} s without "
        f"--torchperf-graph, {statistics.median(graph):.1f} s with (+"
        f"{statistics.median(graph) - statistics.median(plain):.1f} s; {repeats} runs each, "
        f"interleaved)"
    )
    sys.path[:0] = [str(ROOT), str(project)]
    import torch
    from vision_zoo.data import make_images
    from vision_zoo.models import build_resnet18

    from pytest_torchperf.measure.node_figures import node_figures

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = build_resnet18(num_classes=10).eval()
    images = make_images(1)
    start = time.perf_counter()
    record = node_figures(model, (images,), {}, "cpu", torch.no_grad)
    took = time.perf_counter() - start
    ops = [n for n in record["nodes"] if n["kind"] == "op"]
    print(
        f"cost: the per-node pass alone: {took:.1f} s ({len(ops)} op nodes, {record['runs']} "
        f"node-by-node runs, plain call {record['call_time'] * 1e3:.1f} ms, the nodes explain "
        f"{record['explained'] * 100:.0f}% of it)"
    )


def parts(project: Path, slowed: list[str]) -> int:
    storage = project / ".tp"
    took, out = _pytest(
        project, "--torchperf-save", "--torchperf-graph", f"--torchperf-storage={storage}", *LOOSE
    )
    print(f"save with --torchperf-graph: {took:.1f} s")
    wrong = 0
    for part in slowed:
        results = project / f"r-{part}.json"
        took, out = _pytest(
            project,
            "--torchperf-compare",
            "--torchperf-graph",
            f"--torchperf-storage={storage}",
            f"--torchperf-json={results}",
            *LOOSE,
            env={"VISION_ZOO_SLOW_PART": part},
        )
        record = json.loads(results.read_text())["benchmarks"][0]["torchperf"]
        graph = record.get("graph") or {}
        marked = (graph.get("marked") or ["(none)"])[0]
        line = next((x.strip() for x in out.splitlines() if ": on the graph, " in x), "(no line)")
        ok = marked == part
        wrong += not ok
        print(
            f"slowed {part}: marked first {marked} ({'right' if ok else 'WRONG'}); verdict "
            f"{record.get('label')}; nodes explain {(graph.get('explained') or 0) * 100:.0f}% of "
            f"the call; machine factor x{graph.get('machine_factor', 1.0):.2f}; {took:.0f} s\n"
            f"  {line}"
        )
    return wrong


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default="layer1.0,layer2.1,layer3.1,layer4.0")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-cost", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "example"
        shutil.copytree(
            ROOT / "example_project",
            project,
            ignore=shutil.ignore_patterns(".torchperf*", "*.egg-info", "__pycache__"),
        )
        wrong = parts(project, [p for p in args.parts.split(",") if p])
        if not args.skip_cost:
            cost(project, args.repeats)
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
