"""How ``torchperf history`` finds steps in series with the machine's real noise.

    python benchmarks/history_steps.py                # about 2 minutes, one core
    python benchmarks/history_steps.py --json benchmarks/results/history-steps-2cpu.json

The series are built from real measured processes, not from a noise model:

* timing: benchmarks/results/suite-noise-2cpu.json, 40 pytest processes of unchanged code on a
  2-vCPU VM, 20 measurements (the five models of the example project among them); a process's
  figure is its p25 time per call, as a history run's is;
* instruction counts: the unchanged runs of benchmarks/results/reliability-instructions-2cpu-*
  .json (with and without CPU hogs beside), each process's count over its baseline.

A history of N runs draws, per run, ``--processes`` processes of one measurement at random (with
replacement: runs of main are separate CI jobs; a save measures in five processes, and the run's
figure is their median) and multiplies the runs from a known index on by 1 + step. Instruction
runs count in one process. Printed
per threshold (the score a step needs, ``--threshold``) and measurement:

* false steps per 100 runs of unchanged code (and on the 40 processes in the order they ran,
  where slow spells of the VM last several processes);
* for +5 % and +10 % time steps, and +0.5 % instruction steps, at run 40 of 60 (``--step-at``,
  ``--runs``: short histories too): how often the step is found at its run (and within one run:
  the commit range is then off by one), and how many runs after the step it is first found (the
  series cut after 3, 4, ... runs).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pytest_torchperf.judge.change_points import MIN_SEGMENT, change_points  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
RUNS, STEP_AT = 60, 40
THRESHOLDS = (4.0, 5.0, 6.0)


def timing_processes() -> dict[str, list[tuple[float, float]]]:
    """Each process's (p25, calibration kernel time) per measurement."""
    doc = json.loads((RESULTS / "suite-noise-2cpu.json").read_text())
    found: dict[str, list[tuple[float, float]]] = {}
    for run in doc["runs"]:
        for name, m in run["measurements"].items():
            if m.get("times") and m.get("calibration"):
                p25 = statistics.quantiles(m["times"], n=4)[0]
                found.setdefault(name, []).append((p25, m["calibration"]))
    return found


def instruction_processes() -> dict[str, list[tuple[float, float]]]:
    """Each counting process's count over its baseline per model (and 1.0: no calibration)."""
    found: dict[str, list[tuple[float, float]]] = {}
    for path in sorted(RESULTS.glob("reliability-instructions-2cpu-*.json")):
        conditions = json.loads(path.read_text()).get("conditions") or {}
        # Counts of unchanged code, with or without CPU hogs beside (counts do not see them).
        for key, condition in conditions.items():
            if not key.startswith("unchanged") or not isinstance(condition, dict):
                continue
            for row in condition.get("detail") or []:
                if row.get("ratio"):
                    found.setdefault(f"{row['model']} (instr)", []).append(
                        (float(row["ratio"]), 1.0)
                    )
    return found


def draw(
    rng: random.Random,
    pool: list[tuple[float, float]],
    step: float,
    processes: int = 1,
    normalise: bool = False,
) -> list[float]:
    """A history of RUNS runs. Each run is ``processes`` processes drawn from ``pool``, its figure
    their median p25, each over its own process's calibration kernel time when ``normalise`` (as
    torchperf history reads a results file's record)."""
    runs = []
    for i in range(RUNS):
        drawn = [rng.choice(pool) for _ in range(processes)]
        figure = statistics.median(p25 / cal if normalise else p25 for p25, cal in drawn)
        runs.append(figure * (1 + step if i >= STEP_AT else 1))
    return runs


def delay(values: list[float], threshold: float) -> int | None:
    """Runs after the step until a step within one run of it is found (None: not by the end)."""
    for after in range(MIN_SEGMENT, RUNS - STEP_AT + 1):
        steps = change_points(values[: STEP_AT + after], threshold=threshold)
        if any(abs(s.index - STEP_AT) <= 1 for s in steps):
            return after
    return None


def study(
    pool: list[tuple[float, float]],
    steps: list[float],
    reps: int,
    seed: int,
    processes: int,
    normalise: bool,
) -> dict[str, Any]:
    rng = random.Random(seed)
    out: dict[str, Any] = {"processes_measured": len(pool)}
    unchanged = [draw(rng, pool, 0.0, processes, normalise) for _ in range(reps)]
    in_order = [p25 / cal if normalise else p25 for p25, cal in pool]
    out["false_per_100_runs"] = {
        t: 100 * sum(len(change_points(v, threshold=t)) for v in unchanged) / (reps * RUNS)
        for t in THRESHOLDS
    }
    out["false_in_measured_order"] = {
        t: len(change_points(in_order, threshold=t)) for t in THRESHOLDS
    }
    for step in steps:
        series = [draw(rng, pool, step, processes, normalise) for _ in range(reps)]
        per_threshold = {}
        for t in THRESHOLDS:
            found = [change_points(v, threshold=t) for v in series]
            exact = sum(any(s.index == STEP_AT for s in f) for f in found)
            near = sum(any(abs(s.index - STEP_AT) <= 1 for s in f) for f in found)
            extra = sum(sum(abs(s.index - STEP_AT) > 1 for s in f) for f in found)
            # The commit range the step line names: its run, widened by one where a run next
            # to the step lies far from its level (Step.candidates).
            in_range = sum(any(STEP_AT in s.candidates for s in f) for f in found)
            near_steps = [s for f in found for s in f if abs(s.index - STEP_AT) <= 1]
            widened = sum(len(s.candidates) > 1 for s in near_steps)
            delays = [delay(v, t) for v in series[: max(10, reps // 5)]]
            seen = [d for d in delays if d is not None]
            per_threshold[t] = {
                "found_exact": exact / reps,
                "named_in_range": in_range / reps,
                "ranges_widened": widened / len(near_steps) if near_steps else None,
                "found_within_1": near / reps,
                "other_steps_per_100_runs": 100 * extra / (reps * RUNS),
                "runs_after_median": statistics.median(seen) if seen else None,
                f"found_by_run_{RUNS}": len(seen) / len(delays),
            }
        out[f"step_{step:+.3f}"] = per_threshold
    return out


def main() -> int:
    # The series' shape is read by draw(), delay() and study() from these (a script's settings).
    global RUNS, STEP_AT, THRESHOLDS
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=100, help="series per measurement and case")
    parser.add_argument(
        "--processes",
        type=int,
        default=5,
        help="processes per timed run, its figure their median (a save: 5; a compare: 1)",
    )
    parser.add_argument(
        "--normalise",
        action="store_true",
        help="time over the calibration kernel's time in the same process (machine speed out)",
    )
    parser.add_argument("--runs", type=int, default=RUNS, help=f"runs per history (default {RUNS})")
    parser.add_argument(
        "--step-at",
        type=int,
        default=STEP_AT,
        help=f"the first run after the step, counted from 0 (default {STEP_AT})",
    )
    parser.add_argument(
        "--thresholds",
        default=",".join(f"{t:g}" for t in THRESHOLDS),
        help="the scores a step needs, comma-separated (default 4,5,6)",
    )
    parser.add_argument("--json", metavar="PATH", help="also write the figures here")
    args = parser.parse_args()
    RUNS, STEP_AT = args.runs, args.step_at
    THRESHOLDS = tuple(float(t) for t in args.thresholds.split(","))
    if not MIN_SEGMENT <= STEP_AT <= RUNS - MIN_SEGMENT:
        parser.error(f"--step-at must leave {MIN_SEGMENT} runs or more on each side of the step")
    started = time.perf_counter()
    figures: dict[str, Any] = {
        "runs": RUNS,
        "step_at": STEP_AT,
        "thresholds": THRESHOLDS,
        "reps": args.reps,
        "processes_per_timed_run": args.processes,
        "normalised_by_calibration": args.normalise,
    }
    for kind, pools, steps, processes in [
        ("time", timing_processes(), [0.05, 0.10], args.processes),
        ("instructions", instruction_processes(), [0.005], 1),
    ]:
        figures[kind] = {}
        for i, (name, pool) in enumerate(sorted(pools.items())):
            normalise = args.normalise and kind == "time"
            figures[kind][name] = result = study(pool, steps, args.reps, i, processes, normalise)
            figure = [p[0] for p in pool]
            cv = statistics.pstdev(figure) / statistics.mean(figure)
            cells = []
            for t in THRESHOLDS:
                line = f"t={t:g}: false {result['false_per_100_runs'][t]:.2f}/100"
                for step in steps:
                    r = result[f"step_{step:+.3f}"][t]
                    after = r["runs_after_median"]
                    line += (
                        f", {step * 100:+g}% found {r['found_within_1'] * 100:.0f}%"
                        f" (exact {r['found_exact'] * 100:.0f}%) after "
                        f"{'-' if after is None else f'{after:g}'} runs"
                    )
                cells.append(line)
            print(f"{name:<22} cv {cv * 100:6.3f}%  " + "\n" + "\n".join("    " + c for c in cells))
    for kind in ("time", "instructions"):
        print(f"\n{kind}: over all measurements")
        for t in THRESHOLDS:
            rows = figures[kind].values()
            false = statistics.mean(r["false_per_100_runs"][t] for r in rows)
            ordered = sum(r["false_in_measured_order"][t] for r in rows)
            text = f"  threshold {t:g}: false steps {false:.2f} per 100 runs (measured order: {ordered} in all)"
            for key in [k for k in next(iter(rows)) if k.startswith("step_")]:
                found = statistics.mean(r[key][t]["found_within_1"] for r in rows)
                exact = statistics.mean(r[key][t]["found_exact"] for r in rows)
                in_range = statistics.mean(r[key][t]["named_in_range"] for r in rows)
                delays = [
                    r[key][t]["runs_after_median"] for r in rows if r[key][t]["runs_after_median"]
                ]
                text += (
                    f"; {float(key[5:]) * 100:+g}%: found {found * 100:.0f}% (at its run"
                    f" {exact * 100:.0f}%, its commit in the range named {in_range * 100:.0f}%),"
                    f" median {statistics.median(delays) if delays else '-'} runs after"
                )
            print(text)
    figures["total_s"] = round(time.perf_counter() - started, 1)
    print(f"\n{figures['total_s']} s")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
