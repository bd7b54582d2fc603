"""How far unchanged small models' instruction counts move between a save and later compares.

``--torchperf-instructions`` ignores changes below an absolute floor of instructions per call
(``MIN_CHANGE`` in ``pytest_torchperf/kinds/instructions/judge_counts.py``) because the same code
counted in different processes differs a little. Nearly all of the difference is the memory
allocators' own code (pymalloc's ``_PyObject_Malloc``/``_PyObject_Free`` in steps of 360-1,080
per call as calls cross pools filling or emptying, glibc's ``_int_free``, ``malloc_consolidate``
...), whose state is everything the process allocated before; the rest is Python's type
attribute cache, whose version tags are handed out in order of first use (measured on
2026-11-30 by keeping every function's count: without the allocators' the largest change fell
from 6,756 to 175 per call without a hog, 4,097 to 961 with one). The floor must stand above
that difference for the models it binds (below 1 % of a count it is the limit). This script
measures it on models of 44 k to 4.6 M instructions per call, pure-Python-heavy ones included:

  1. save once (all tests, one Valgrind child);
  2. ``--rounds`` compares of the unchanged code, cycling through selections that change what
     the counting process ran before each model (all tests; without the first; only every other
     one; the last alone), each a fresh pytest process with its own Valgrind child;
     (``--hog``: a CPU hog beside each, its HTML report written too);
  3. prints, per model, the saved count and each compare's change in instructions per call, the
     largest absolute change overall against the floor, and each model's margin under its own
     default limit (1 % of its count, or the floor where that is more), the smallest first;
  4. how many first counts exceeded their limits and were counted again in a fresh process (a
     compare does that before judging: docs/instructions.md), and every verdict that still
     failed unchanged code.

Usage: ``python3 benchmarks/instruction_floor.py [--rounds 8] [--hog] [--keep DIR]`` (about 2 min per
run on a 2-vCPU VM; one core each: counts do not depend on the machine's load). Exit 0, or 1 when
a run failed to produce counts. Needs valgrind.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODELS = '''
import torch
from torch import nn


class Loop(nn.Module):
    """Pure-Python work around a small Linear: attribute and dict lookups every step."""

    def __init__(self, steps):
        super().__init__()
        self.lin = nn.Linear(16, 16)
        self.steps = steps
        self.table = {"a": 1, "b": 2}

    def forward(self, x):
        total = 0
        for i in range(self.steps):
            total += self.table["a"] + len(self.table)
        return self.lin(x) + total * 0.0


def deep(n):
    layers = []
    for _ in range(n):
        layers += [nn.Linear(8, 8), nn.ReLU()]
    return nn.Sequential(*layers)


def test_t0_linear(torchperf):
    torchperf(nn.Linear(8, 8), torch.randn(2, 8), name="linear")


def test_t1_mlp(torchperf):
    body = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    torchperf(body, torch.randn(16, 64), name="mlp")


def test_t2_deep(torchperf):
    torchperf(deep(20), torch.randn(2, 8), name="deep20")


def test_t3_loop(torchperf):
    torchperf(Loop(300), torch.randn(2, 16), name="loop300")


def test_t4_deep(torchperf):
    torchperf(deep(60), torch.randn(2, 8), name="deep60")


def test_t5_wide(torchperf):
    body = nn.Sequential(nn.Linear(64, 1024), nn.ReLU(), nn.Linear(1024, 10))
    torchperf(body, torch.randn(64, 64), name="wide")
'''

INI = """[pytest]
torchperf_min_time = 0.05
torchperf_warmup = 0.02
"""

SELECTIONS = (
    ("all", ()),
    ("without the first", ("-k", "not t0")),
    ("every other", ("-k", "t1 or t3 or t5")),
    ("reversed halves", ("-k", "t3 or t4 or t5")),
    ("last alone", ("-k", "t5")),
)


def run(
    project: Path, log: str, *args: str, json_out: Path | None = None
) -> tuple[dict[str, float], float, dict[str, tuple[float | None, str]]]:
    """One fresh pytest process (its output in ``project/log``); the instructions per call it
    counted first, by model, its wall time, and by model the recount (a count above its limit
    counted again in a fresh process, else None) and the outcome."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"]
    cmd += ["-p", "no:xdist", "--torchperf-instructions", *args]
    if json_out is not None:
        cmd.append(f"--torchperf-json={json_out}")
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=project, capture_output=True, text=True)
    wall = time.perf_counter() - started
    (project / log).write_text(proc.stdout + proc.stderr)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"pytest exited {proc.returncode}:\n{proc.stdout[-3000:]}{proc.stderr}")
    if json_out is None:
        return {}, wall, {}
    data = json.loads(json_out.read_text())
    # pytest-benchmark's layout: one entry per measurement, ours under "torchperf".
    counted = [
        (b["name"].split("[")[-1].rstrip("]"), b["torchperf"])
        for b in data["benchmarks"]
        if (b["torchperf"].get("instructions") or {}).get("per_call")
    ]
    counts = {name: float(own["instructions"]["per_call"]) for name, own in counted}
    judged = {
        name: ((own.get("recount") or {}).get("per_call"), str(own.get("outcome")))
        for name, own in counted
    }
    return counts, wall, judged


def stored(storage: Path) -> dict[str, float]:
    found: dict[str, float] = {}
    for path in storage.glob("instructions-*/*.py.json"):
        for measurements in json.loads(path.read_text())["tests"].values():
            for name, entry in measurements.items():
                found[name] = float(entry["sessions"][-1]["instructions"]["per_call"])
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=8, help="compares after the save")
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it")
    parser.add_argument(
        "--hog",
        action="store_true",
        help="a CPU hog beside each compare, and its reports written (JSON and HTML), as the "
        "e2e test whose unchanged model once read +4 k per call",
    )
    options = parser.parse_args()
    if shutil.which("valgrind") is None:
        print("needs valgrind (apt-get install valgrind)")
        return 1
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from pytest_torchperf.kinds.instructions.judge_counts import MIN_CHANGE, effective_limit
    from pytest_torchperf.kinds.instructions.options import DEFAULT_MAX_INCREASE

    project = options.keep or Path(tempfile.mkdtemp(prefix="instruction-floor-"))
    project.mkdir(parents=True, exist_ok=True)
    (project / "pytest.ini").write_text(INI)
    (project / "test_floor.py").write_text(MODELS)
    os.environ.pop("PYTEST_ADDOPTS", None)
    _, wall, _ = run(project, "save.log", "--torchperf-save", "--torchperf-storage=.torchperf")
    base = stored(project / ".torchperf")
    if len(base) < MODELS.count("def test_"):
        print(f"the save stored counts of {sorted(base)} only; its output: {project / 'save.log'}")
        return 1
    print(f"saved in {wall:.0f} s; instructions per call:")
    print("  " + ", ".join(f"{m} {v / 1e3:.1f} k" for m, v in base.items()), flush=True)
    worst: dict[str, float] = {}
    recounted, failed = 0, []
    for i in range(options.rounds):
        label, selection = SELECTIONS[i % len(SELECTIONS)]
        out = project / f"compare-{i}.json"
        extra = ("--torchperf-html", str(project / f"compare-{i}.html")) if options.hog else ()
        hog = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if options.hog else None
        try:
            counts, wall, judged = run(
                project, f"compare-{i}.log", "--torchperf-compare", *selection, *extra, json_out=out
            )
        finally:
            if hog is not None:
                hog.kill()
                hog.wait()
        if not counts:
            print(f"compare {i} ({label}) counted nothing")
            return 1
        changes = {m: counts[m] - base[m] for m in counts if m in base}
        for m, d in changes.items():
            worst[m] = max(worst.get(m, 0.0), abs(d))
        again = {m: r for m, (r, _) in judged.items() if r is not None and m in base}
        recounted += len(again)
        failed += [f"{m} (compare {i + 1})" for m, (_, o) in judged.items() if o == "fail"]
        print(
            f"compare {i + 1:>2} ({label:<17}, {wall:4.0f} s): "
            + ", ".join(f"{m} {d:+.0f} ({100 * d / base[m]:+.2f}%)" for m, d in changes.items())
            + "".join(
                f"; {m} above its limit, counted again: {r - base[m]:+.0f}"
                for m, r in again.items()
            ),
            flush=True,
        )
    print(
        "largest |change| per call by model: "
        + ", ".join(f"{m} {d:.0f} ({100 * d / base[m]:.2f}%)" for m, d in worst.items())
    )
    top = max(worst.values(), default=0.0)
    print(
        f"largest overall: {top:.0f} instructions per call; the floor (MIN_CHANGE) is "
        f"{MIN_CHANGE:.0f}: {'above' if top < MIN_CHANGE else 'NOT above'} it "
        f"({MIN_CHANGE / top if top else float('inf'):.1f}x)"
    )
    # What decides a false failure is each model's change against its own limit: the default
    # 1 % of its count, or the floor where that is larger (small models).
    margins = {
        m: effective_limit(base[m], DEFAULT_MAX_INCREASE) * base[m] / d
        for m, d in worst.items()
        if d > 0
    }
    if margins:
        m = min(margins, key=margins.__getitem__)
        limit = effective_limit(base[m], DEFAULT_MAX_INCREASE) * base[m]
        print(
            f"smallest margin under the default limit: {m}, {worst[m]:.0f} vs {limit:.0f} "
            f"instructions per call ({margins[m]:.1f}x); "
            + ", ".join(f"{name} {x:.1f}x" for name, x in margins.items())
        )
    print(
        f"{recounted} first counts above their limits were counted again in a fresh process; "
        f"verdicts that failed unchanged code after that: {', '.join(failed) or 'none'}"
    )
    if options.keep is None:
        shutil.rmtree(project, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
