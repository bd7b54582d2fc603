"""What instruction counts under Valgrind cost and how well they repeat, for the planned
instruction-count mode (issue: "Instruction-count mode").

For each model it starts one child Python under ``valgrind --tool=callgrind`` with
instrumentation off, imports torch and builds the model uninstrumented, switches instrumentation
on (``callgrind_control -i on``), runs warm-up calls, then counts two windows of calls (collection
toggled by ``torch._C._valgrind_toggle*``, one profile dump per window), all through the
plugin's own ``pytest_torchperf.kinds.instructions.measure_callgrind.count_instructions``. It prints per model: the
wall time of the child's phases (start-up and imports; counting, which includes switching
instrumentation on and off, warm-up and reading the profiles), the
instructions per call of each window and how far the two windows disagree, with and without
``--cache-sim=yes`` (simulated cache misses; "estimated cycles" need them). Sensitivity: the same
model with one extra elementwise op and with a pure-Python loop beside it.

    python benchmarks/valgrind_probe.py                # all models, ~15 min on a 2-vCPU VM
    python benchmarks/valgrind_probe.py --models mlp --cache-sim no

Results on this project's CI VM: benchmarks/results/valgrind-probe-2cpu.log (and .json).

Cachegrind is not measured: Valgrind 3.19 (this project's machine image) has no client request to
start and stop cachegrind's instrumentation (3.22 added it), so it would count ``import torch``
too (about 120 s of CPU per child, measured with callgrind's ``--instr-atstart=yes``).
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

CHILD = r"""
import json, os, subprocess, sys, time
t0 = time.time()
import torch
torch.set_num_threads(1)
model_name, calls, extra = sys.argv[1], int(sys.argv[2]), sys.argv[3]

def build(name):
    torch.manual_seed(0)
    if name == "mlp":
        m = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
        return m.eval(), torch.randn(64, 256)
    if name == "tiny":  # the hard case: ~200 k instructions per call, mostly Python and dispatch
        m = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
        return m.eval(), torch.randn(16, 64)
    if name == "convnet":
        m = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(),
                                torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(),
                                torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(32, 10))
        return m.eval(), torch.randn(4, 3, 32, 32)
    if name == "transformer":
        m = torch.nn.TransformerEncoderLayer(64, 4, 128, batch_first=True)
        return m.eval(), torch.randn(2, 32, 64)
    raise SystemExit(f"unknown model {name}")

model, x = build(model_name)

def call():
    with torch.no_grad():
        y = model(x)
        if extra == "op":
            y = y * 1.0
        elif extra == "python":
            s = 0
            for i in range(int(os.environ.get("PY_STEPS", "2000"))):
                s += i
    return y

t1 = time.time()
from pathlib import Path
import pytest_torchperf.kinds.instructions.measure_callgrind as cg
from pytest_torchperf.kinds.instructions.measure_callgrind import count_instructions
if os.environ.get("PROBE_WARMUP_S"):
    cg.WARMUP_SECONDS = float(os.environ["PROBE_WARMUP_S"])
count = count_instructions(call, Path(os.environ["PYTEST_TORCHPERF_CALLGRIND_DIR"]), calls=calls)
t2 = time.time()
top = sorted(count.functions.items(), key=lambda kv: -kv[1])[:5]
print("PHASES " + json.dumps({"imports_and_build": t1 - t0, "counting": t2 - t1,
                              "windows": list(count.windows), "top": top}))
"""


def run(model: str, calls: int, extra: str, cache_sim: bool, warmup_s: float | None = None) -> dict:
    from pytest_torchperf.kinds.instructions.measure_callgrind import DUMP_DIR_ENV, valgrind_command

    work = Path(tempfile.mkdtemp(prefix="vgprobe-"))
    script = work / "child.py"
    script.write_text(CHILD)
    cmd = valgrind_command(
        [sys.executable, str(script), model, str(calls), extra], work, cache_sim=cache_sim
    )
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(work / "inductor"))
    env[DUMP_DIR_ENV] = str(work)
    if warmup_s is not None:
        env["PROBE_WARMUP_S"] = str(warmup_s)
    start = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    wall = time.time() - start
    shutil.rmtree(work, ignore_errors=True)
    if proc.returncode != 0 or "PHASES " not in proc.stdout:
        raise RuntimeError(f"child failed ({proc.returncode}): {proc.stderr[-2000:]}")
    phases = json.loads(proc.stdout.split("PHASES ", 1)[1].splitlines()[0])
    return {"wall_s": wall, "phases": phases, "ir_per_call": phases["windows"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="mlp,convnet,transformer", help="also: tiny")
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--cache-sim", choices=("both", "yes", "no"), default="both")
    parser.add_argument("--json", type=Path, help="write every run here too")
    parser.add_argument(
        "--warmup-seconds",
        type=float,
        default=None,
        help="cap on the uninstrumented warm-up (default: the plugin's WARMUP_SECONDS)",
    )
    parser.add_argument("--extras", default="none,op,python", help="injected changes to run")
    parser.add_argument("--summarize", type=Path, help="only print the summary of a --json file")
    args = parser.parse_args()
    if args.summarize:
        summarize(json.loads(args.summarize.read_text()))
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not on PATH: apt-get install valgrind")
    version = subprocess.run(["valgrind", "--version"], capture_output=True, text=True).stdout
    print(f"{version.strip()}, python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    sims = {"both": (False, True), "yes": (True,), "no": (False,)}[args.cache_sim]
    rows = []
    for model in args.models.split(","):
        for extra in args.extras.split(","):
            for sim in sims:
                if extra != "none" and sim:
                    continue  # sensitivity is about instructions: no need to repeat it with cache-sim
                r = run(model, args.calls, extra, sim, args.warmup_seconds)
                a, b = r["ir_per_call"][:2]
                ph = r["phases"]
                rows.append({"model": model, "extra": extra, "cache_sim": sim, **r})
                print(
                    f"{model:12} extra={extra:7} cache-sim={'yes' if sim else 'no ':3} "
                    f"wall {r['wall_s']:6.1f} s (imports+build {ph['imports_and_build']:5.1f} s, "
                    f"counting {ph['counting']:5.1f} s); Ir/call {a:,.0f} then {b:,.0f} "
                    f"({(b - a) / a * 100:+.4f}%)",
                    flush=True,
                )
    summarize(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


def summarize(rows: list[dict]) -> None:
    """Each injected change against the same model's plain run without cache simulation."""
    base = {
        r["model"]: r["ir_per_call"][1] for r in rows if r["extra"] == "none" and not r["cache_sim"]
    }
    for r in rows:
        if r["extra"] != "none":
            change = (r["ir_per_call"][1] - base[r["model"]]) / base[r["model"]] * 100
            print(f"{r['model']:12} +{r['extra']:7} instructions {change:+.2f}% per call")


if __name__ == "__main__":
    main()
