"""The ``--torchperf-instructions`` conditions of ``benchmarks/reliability.py --mode instructions``.

Same generated project of five models, real ``pytest --torchperf-instructions`` runs (each one
fresh pytest process plus its child under Valgrind), default settings (1 % limit):

  1. save once; the instructions per call of each model are read from the stored sessions;
  2. calibrate the injected work: one compare with 1,000 extra pure-Python loop steps per call,
     one with 20 extra elementwise ops (``out * 1.0``) per call; each model's instructions per
     step / per op follow from the measured change;
  3. unchanged code: compare runs (several at once with ``--parallel``: counts do not depend on
     the load), and runs with two CPU-hog processes beside them;
  4. injected +1 % and +3 % (loop steps, and separately extra ops, rounded up to reach at least
     that share of each model's count): how many verdicts catch it.

An extra op also changes the op counters (``FAIL (counters)`` too); detection here is the
*instruction* verdict's own outcome, so the figure says what instruction counts catch.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

FLAGS = ("--torchperf-instructions",)


def instruction_conditions(
    project: Path,
    runs: Callable[[int], int],
    run_pytest: Callable[..., tuple[list[dict], float]],
    wilson: Callable[[int, int], tuple[float, float]],
    parallel: int = 1,
) -> dict[str, Any]:
    storage = project / "instructions"
    started = time.perf_counter()
    # --project of an earlier run: its save and calibration are reused (each takes 10+ minutes).
    reused = (project / "c2.json").exists()
    save_wall = float("nan")
    if not reused:
        _, save_wall = run_pytest(
            project, *FLAGS, "--torchperf-save", f"--torchperf-storage={storage}"
        )
    base = _stored_counts(storage)
    print(
        f"saved in {save_wall:.0f} s; instructions per call: "
        + ", ".join(f"{k} {v / 1e6:.2f} M" for k, v in base.items()),
        flush=True,
    )

    def compare(
        work: dict[str, tuple[int, int]], out: Path, hogs: int = 0
    ) -> tuple[list[dict], float]:
        procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(hogs)]
        try:
            return run_pytest(
                project,
                *FLAGS,
                "--torchperf-compare",
                f"--torchperf-storage={storage}",
                json_out=out,
                work=work,
            )
        finally:
            for p in procs:
                p.kill()
                p.wait()

    calib_steps, calib_ops = 1000, 20
    if reused:
        step_records, op_records = _records(project / "c1.json"), _records(project / "c2.json")
        quiet_wall = float("nan")
    else:
        step_records, quiet_wall = compare({m: (calib_steps, 0) for m in base}, project / "c1.json")
        op_records, _ = compare({m: (0, calib_ops) for m in base}, project / "c2.json")
    # At least one instruction per unit: a model far larger than the calibration work could read
    # a change at its noise level.
    per_step = {
        r["name"]: max(1.0, (r["verdict"]["ratio"] - 1) * base[r["name"]] / calib_steps)
        for r in step_records
    }
    if os.environ.get("RELIABILITY_STEP_COST"):
        # Measured once with count_instructions on the loop alone (221 with Python 3.11).
        per_step = dict.fromkeys(base, float(os.environ["RELIABILITY_STEP_COST"]))
    per_op = {
        r["name"]: max(1.0, (r["verdict"]["ratio"] - 1) * base[r["name"]] / calib_ops)
        for r in op_records
    }
    print(
        "instructions per injected unit: "
        + ", ".join(f"{m} {per_step[m]:.0f}/step {per_op[m] / 1e3:.1f} k/op" for m in base),
        f"(compare wall {quiet_wall / len(base):.1f} s per test, quiet)",
        flush=True,
    )

    # An injection of exactly the limit is a coin toss for any gate ("more than 1 %"), so each
    # condition injects RELIABILITY_MARGIN (default 1.05) times its nominal share.
    margin = float(os.environ.get("RELIABILITY_MARGIN", "1.05"))

    def work_for(fraction: float, kind: str) -> tuple[dict[str, tuple[int, int]], dict[str, float]]:
        fraction *= margin
        work, injected = {}, {}
        for m, count in base.items():
            unit = per_step[m] if kind == "python" else per_op[m]
            n = max(1, math.ceil(fraction * count / unit))
            work[m] = (n, 0) if kind == "python" else (0, n)
            injected[m] = n * unit / count
        return work, injected

    figures: dict[str, Any] = {
        "save_wall_s": save_wall,
        "compare_wall_s_per_test_quiet": quiet_wall / len(base),
        "per_call": base,
        "per_step": per_step,
        "per_op": per_op,
        "conditions": {},
    }

    def campaign(
        label: str, count: int, fraction: float = 0.0, kind: str = "python", hogs: int = 0
    ) -> None:
        work, injected = work_for(fraction, kind) if fraction else ({}, {})
        width = 1 if hogs else max(1, parallel)
        with ThreadPoolExecutor(width) as pool:
            results = list(
                pool.map(
                    lambda i: compare(
                        work, project / f"run-{label.replace(' ', '_')}-{i}.json", hogs
                    ),
                    range(count),
                )
            )
        verdicts = [
            {
                "model": r["name"],
                "outcome": r["outcome"],
                "instruction_outcome": (r.get("verdict") or {}).get("outcome"),
                "ratio": (r.get("verdict") or {}).get("ratio"),
                "windows": (r.get("instructions") or {}).get("windows"),
            }
            for records, _ in results
            for r in records
        ]
        n = len(verdicts)
        tally: dict[str, int] = {}
        for v in verdicts:
            tally[v["instruction_outcome"]] = tally.get(v["instruction_outcome"], 0) + 1
        fails = tally.get("fail", 0)
        low, high = wilson(fails, n)
        changes = [v["ratio"] - 1 for v in verdicts if v["ratio"] is not None]
        figures["conditions"][label] = {
            "runs": count,
            "verdicts": n,
            "instruction_outcomes": tally,
            "fail_rate": fails / n if n else None,
            "fail_rate_95ci": [low, high],
            "injected": injected,
            "hogs": hogs,
            "change_min": min(changes, default=None),
            "change_max": max(changes, default=None),
            "wall_s_per_test": sum(w for _, w in results) / max(1, n),
            "detail": verdicts,
        }
        print(
            f"{label:<34} runs {count:>3}  verdicts {n:>4}  instruction verdicts {dict(sorted(tally.items()))}  "
            f"fail {100 * fails / max(n, 1):5.1f}% (95% CI {100 * low:.1f}-{100 * high:.1f}%)  "
            f"change {100 * min(changes, default=0):+.2f}..{100 * max(changes, default=0):+.2f}%"
            + (
                f"  injected {100 * min(injected.values()):.2f}-{100 * max(injected.values()):.2f}%"
                if injected
                else ""
            ),
            flush=True,
        )

    only = os.environ.get("RELIABILITY_ONLY")  # e.g. "+": only the conditions starting so
    for label, count, fraction, kind, hogs in (
        ("unchanged", runs(16), 0.0, "python", 0),
        ("unchanged, 2 CPU hogs", runs(4), 0.0, "python", 2),
        ("+1% python loop", runs(2), 0.01, "python", 0),
        ("+3% python loop", runs(2), 0.03, "python", 0),
        ("+1% extra torch ops", runs(2), 0.01, "op", 0),
        ("+3% extra torch ops", runs(2), 0.03, "op", 0),
    ):
        if not only or label.startswith(only):
            campaign(label, count, fraction, kind, hogs)
    figures["total_s"] = time.perf_counter() - started
    print(f"total {figures['total_s'] / 60:.1f} min", flush=True)
    return figures


def _records(path: Path) -> list[dict]:
    """The torchperf records of an earlier run's results file, as ``run_pytest`` returns them."""
    data = json.loads(path.read_text())
    return [
        b["torchperf"] | {"name": b["name"].split("[")[-1].rstrip("]")} for b in data["benchmarks"]
    ]


def _stored_counts(storage: Path) -> dict[str, float]:
    counts: dict[str, float] = {}
    for path in storage.glob("instructions-*/test_models.py.json"):
        for measurements in json.loads(path.read_text())["tests"].values():
            for name, entry in measurements.items():
                counts[name] = entry["sessions"][-1]["instructions"]["per_call"]
    if not counts:
        raise SystemExit(f"no instruction counts were saved under {storage}")
    return dict(sorted(counts.items()))


def tally_runs(project: Path) -> None:
    """Print, per condition, the verdicts in the results files a run left in ``project``
    (``run-<condition>-<i>.json``, one per compare process), finished or not: the figures of a
    run stopped before a condition completed (each compare takes minutes under Valgrind)."""
    from reliability import wilson

    by_condition: dict[str, list[Path]] = {}
    for path in sorted(project.glob("run-*.json")):
        by_condition.setdefault(path.stem[len("run-") :].rsplit("-", 1)[0], []).append(path)
    for condition, paths in by_condition.items():
        outcomes: dict[str, int] = {}
        changes = []
        for path in paths:
            for record in _records(path):
                verdict = record.get("verdict") or {}
                outcome = str(verdict.get("outcome"))
                outcomes[outcome] = outcomes.get(outcome, 0) + 1
                if verdict.get("ratio") is not None:
                    changes.append(verdict["ratio"] - 1)
        n = sum(outcomes.values())
        low, high = wilson(outcomes.get("fail", 0), n)
        print(
            f"{condition.replace('_', ' '):<26} runs {len(paths):>3}  verdicts {n:>4}  "
            f"{dict(sorted(outcomes.items()))}  fail 95% CI {100 * low:.1f}-{100 * high:.1f}%  "
            f"change {100 * min(changes, default=0):+.3f}..{100 * max(changes, default=0):+.3f}%"
        )


if __name__ == "__main__":
    # python benchmarks/instruction_reliability.py tally PROJECT
    if len(sys.argv) != 3 or sys.argv[1] != "tally":
        raise SystemExit("usage: python benchmarks/instruction_reliability.py tally PROJECT")
    tally_runs(Path(sys.argv[2]))
