"""Instruction counts under Valgrind (pytest_torchperf.measure.callgrind), for real: one child
Python under callgrind counts a small MLP, the same MLP with one extra elementwise op, and with a
pure-Python loop beside it (about 60 s on a 2-vCPU VM, most of it ``import torch`` under
Valgrind)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_torchperf.judge.instructions import WINDOW_AGREEMENT, WINDOW_AGREEMENT_FLOOR
from pytest_torchperf.measure.callgrind import DUMP_DIR_ENV, valgrind_command

CHILD = r"""
import json, os, sys
from pathlib import Path
import torch
torch.set_num_threads(1)
torch.manual_seed(0)
from pytest_torchperf.measure.callgrind import count_instructions
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
x = torch.randn(16, 64)
dump = Path(os.environ["PYTEST_TORCHPERF_CALLGRIND_DIR"])

def plain():
    with torch.no_grad():
        return model(x)

def extra_op():
    with torch.no_grad():
        return model(x) * 1.0

def python_loop():
    total = 0
    for i in range(300):
        total += i
    return plain()

out = {}
for name, call in (("plain", plain), ("op", extra_op), ("python", python_loop)):
    count = count_instructions(call, dump)  # windows sized as the plugin sizes them
    out[name] = {"windows": list(count.windows), "functions": count.functions}
print("COUNTS " + json.dumps(out))
"""


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
@pytest.mark.slow  # a Valgrind child: ~50 s
def test_counts_repeat_and_see_one_extra_op_and_a_python_loop(tmp_path: Path) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"))
    env[DUMP_DIR_ENV] = str(tmp_path)
    proc = subprocess.run(
        valgrind_command([sys.executable, str(script)], tmp_path),
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0 and "COUNTS " in proc.stdout, proc.stderr[-3000:]
    counts = json.loads(proc.stdout.split("COUNTS ", 1)[1].splitlines()[0])
    plain, op, loop = (counts[k]["windows"] for k in ("plain", "op", "python"))
    # Two windows of the same calls agree as closely as a verdict trusts them to (0.1 %, or a
    # tenth of the smallest change a verdict acts on).
    for first, second in (plain, op, loop):
        assert (
            abs(second - first) / first <= WINDOW_AGREEMENT
            or abs(second - first) <= WINDOW_AGREEMENT_FLOOR
        ), counts
    # One extra elementwise op and a 300-step Python loop are both plainly visible.
    assert op[1] > plain[1] * 1.01, (op, plain)
    assert loop[1] > plain[1] * 1.01, (loop, plain)
    # The per-function table names where the work went, and the loop grew the interpreter.
    functions = counts["python"]["functions"]
    assert functions and max(functions.values()) > 0
    assert not list(tmp_path.glob("callgrind.out.*.*")), "profile parts must be cleaned up"
