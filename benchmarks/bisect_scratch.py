"""``torchperf bisect`` on a scratch repository of 32 commits with a slowdown at a known commit.

    python benchmarks/bisect_scratch.py                       # both modes, about 15 minutes
    python benchmarks/bisect_scratch.py --mode instructions   # +3 % pure-Python, counted
    python benchmarks/bisect_scratch.py --mode ab             # +20 %, A/B process pairs
    python benchmarks/bisect_scratch.py --json benchmarks/results/bisect-scratch-2cpu.json

Builds, in a temporary folder, a git repository whose first commit (GOOD) holds a perf test of
an MLP (64 -> 1024 -> 10, batch 64) and 32 more commits (the last is BAD) that touch other
files, one of which (commit 19 by default) slows the model's ``forward`` down:

* ``instructions``: a pure-Python loop of about 3 % of the model's instructions per call, which
  no op counter sees and wall-clock noise on a shared VM hides;
* ``ab``: a loop of about 20 % of its time per call (sized by timing both in this process).

Then runs ``torchperf bisect GOOD BAD -k test_b --mode MODE`` there as a user would, and prints
whether it named the commit that slowed the model down, in how many steps, and the wall time.
Exit status 1 when a mode named another commit.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
import timeit
from pathlib import Path
from typing import Any

COMMITS = 32
MODEL = """
import itertools

import pytest
import torch
from torch import nn

#: Pure-Python steps per call (one commit makes it non-zero).
STEPS = {steps}


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(64, 1024), nn.ReLU(), nn.Linear(1024, 10))

    def forward(self, x):
        total = 0
        for _ in itertools.repeat(None, STEPS):
            total ^= 1
        return self.body(x)


def test_b(torchperf):
    torch.manual_seed(0)
    torchperf(Net(), torch.randn(64, 64), name="b")
"""
#: Instructions of one loop step above under Valgrind (tests/e2e/test_instructions.py measures it).
INSTRUCTIONS_PER_STEP = 221
#: Instructions per call of the model without the loop, about (1 thread, Valgrind's AVX2 paths).
MODEL_INSTRUCTIONS = 4.6e6


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.org", *args],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def loop_steps_for_time(share: float) -> int:
    """Loop steps that take ``share`` of the model's time per call, timed in this process."""
    import torch
    from torch import nn

    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(64, 1024), nn.ReLU(), nn.Linear(1024, 10)).eval()
    x = torch.randn(64, 64)
    with torch.no_grad():
        per_call = min(timeit.repeat(lambda: model(x), number=200, repeat=5)) / 200
    import itertools

    def loop() -> None:
        total = 0
        for _ in itertools.repeat(None, 10_000):
            total ^= 1

    per_step = min(timeit.repeat(loop, number=20, repeat=5)) / 20 / 10_000
    return math.ceil(share * per_call / per_step)


def scratch(root: Path, slow_at: int, steps: int) -> list[str]:
    root.mkdir(parents=True)
    git(root, "init", "-q")
    (root / "pytest.ini").write_text("[pytest]\nfilterwarnings =\n    ignore:.*No CUDA runtime.*\n")
    ids = []
    for i in range(COMMITS + 1):
        (root / "test_model.py").write_text(MODEL.format(steps=steps if i >= slow_at else 0))
        (root / "CHANGES.txt").write_text(f"change {i}\n")
        git(root, "add", "-A", ".")
        git(
            root,
            "commit",
            "-qm",
            f"change {i}" + (" (slows the model down)" if i == slow_at else ""),
        )
        ids.append(git(root, "rev-parse", "HEAD"))
    return ids


def run_mode(mode: str, slow_at: int) -> dict[str, Any]:
    steps = (
        math.ceil(0.03 * MODEL_INSTRUCTIONS / INSTRUCTIONS_PER_STEP)
        if mode == "instructions"
        else loop_steps_for_time(0.20)
    )
    root = Path(tempfile.mkdtemp(prefix=f"bisect-{mode}-")) / "repo"
    ids = scratch(root, slow_at, steps)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["COLUMNS"] = "200"
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest_torchperf.cli", "bisect", ids[0], ids[-1]]
        + ["-k", "test_b", "--mode", mode],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - started
    out = done.stdout + done.stderr
    print(f"--- {mode}: {steps} loop steps at commit {slow_at} ---")
    print("\n".join(line for line in out.splitlines() if not line.startswith("W1")))
    named = re.search(r"first bad commit: ([0-9a-f]{40})", out)
    worktrees = git(root, "worktree", "list").splitlines()
    return {
        "mode": mode,
        "loop_steps": steps,
        "slow_at": slow_at,
        "exit": done.returncode,
        "found": named.group(1) if named else None,
        "exact": bool(named and named.group(1) == ids[slow_at]),
        "steps": len(re.findall(r"^step \d+:", out, re.M)),
        "pytest_runs": len(re.findall(r"^step \d+:", out, re.M)) + (1 if mode == "ab" else 2),
        "wall_s": round(wall, 1),
        "worktrees_left": len(worktrees) - 1,
        "output": out.splitlines()[-40:],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=("instructions", "ab", "both"), default="both")
    parser.add_argument("--slow-at", type=int, default=19, help="the commit that slows down")
    parser.add_argument("--json", metavar="PATH", help="also write the figures here")
    args = parser.parse_args()
    modes = ("instructions", "ab") if args.mode == "both" else (args.mode,)
    results = [run_mode(mode, args.slow_at) for mode in modes]
    for r in results:
        print(
            f"{r['mode']}: {'exact' if r['exact'] else 'WRONG: ' + str(r['found'])}, "
            f"{r['steps']} steps (+ GOOD and BAD), {r['pytest_runs']} pytest runs, "
            f"{r['wall_s']} s, {r['worktrees_left']} worktrees left"
        )
    if args.json:
        Path(args.json).write_text(
            json.dumps({"commits": COMMITS, "runs": results}, indent=1) + "\n"
        )
    return 0 if all(r["exact"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
