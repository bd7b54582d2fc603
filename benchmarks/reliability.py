"""How far can you trust a verdict on *this* machine? False alarms, detection, contention, cost.

    python benchmarks/reliability.py                 # ~35-45 min on a 2-core runner
    python benchmarks/reliability.py --scale 0.25    # a quick look (~10 min), wider error bars
    python benchmarks/reliability.py --out figures.json
    python benchmarks/reliability.py --mode instructions --parallel 2   # --torchperf-instructions
    python benchmarks/reliability.py --mode ab       # --torchperf-ab HEAD (A/B in one job)

Everything goes through real ``pytest --torchperf-save`` / ``--torchperf-compare`` runs, each a
fresh process, on a generated project of five small models (an MLP at two sizes, a conv net,
resnet18-like blocks at 64 px, a transformer encoder) at the plugin's **default settings**
(``min_time`` 1 s, ``max_slowdown`` 10 %, contention and spread guards on). Verdicts are read from
each run's ``--torchperf-json``. Nothing is simulated offline.

Slowdowns are injected exactly: every model is wrapped in a module that, after the forward, spins
on ``time.perf_counter`` for ``X x`` the model's own per-call time,
so "+20 %" is +20 % of wall time, of the same kind (CPU-bound) as the model's work, and changes no
counter (no ATen op). The model's per-call time is the median p25 of all saved baseline sessions.

It measures:
  (a) false alarms on unchanged models: one fresh compare process against a baseline saved the
      default way (five fresh processes; two such baselines, rotated), and against a baseline of
      one saved session (``--torchperf-processes 1``, the old default); per verdict and per suite
      run ("red runs": compare runs with at least one failing test);
  (b) detection of +10 / +20 / +50 % at the default 10 % limit;
  (c) contention: two CPU-hog processes (both cores busy), and one busy neighbour (the other core
      busy, this process keeps its own): every verdict must be pass/inconclusive, none a failure;
  (d) ``--torchperf-processes 3 --torchperf-max-slowdown 7.5%`` (a dedicated runner's setting);
  (e) wall time per perf test in each mode.
The 20-test suite figure on the same machine comes from ``benchmarks/suite_noise.py``, which
replays the plugin's decision code over 40 real fresh processes of a 20-measurement suite.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROJECT_TEST = '''
import itertools, json, os, time
import pytest, torch
from torch import nn

EXTRA = json.loads(os.environ.get("RELIABILITY_EXTRA", "{}"))   # name -> seconds added per call
# Instruction mode: name -> [pure-Python loop steps, extra torch ops] added per call.
WORK = json.loads(os.environ.get("RELIABILITY_WORK", "{}"))


class Slowed(nn.Module):
    """The model, then a spin of a fixed number of seconds (0 when unchanged), then extra work
    (a pure-Python loop, extra elementwise ops) for the instruction-count conditions."""
    def __init__(self, model, extra, work=(0, 0)):
        super().__init__()
        self.model, self.extra = model, extra
        self.steps, self.ops = work
    def forward(self, x):
        out = self.model(x)
        if self.extra:
            end = time.perf_counter() + self.extra
            while time.perf_counter() < end:
                pass
        total = 0
        for _ in itertools.repeat(None, self.steps):  # a constant 221 instructions per step
            total ^= 1
        for _ in range(self.ops):
            out = out * 1.0
        return out


def block(c):
    return nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU(),
                         nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU())


MODELS = {
    "mlp-small": (lambda: nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 256)),
                  lambda: torch.randn(32, 256)),
    "mlp": (lambda: nn.Sequential(*[m for _ in range(3) for m in (nn.Linear(512, 512), nn.ReLU())]),
            lambda: torch.randn(64, 512)),
    "convnet": (lambda: nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), block(32),
                                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10)),
                lambda: torch.randn(8, 3, 64, 64)),
    "resblocks": (lambda: nn.Sequential(nn.Conv2d(3, 64, 7, stride=2, padding=3), block(64), block(64),
                                        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10)),
                  lambda: torch.randn(1, 3, 64, 64)),
    "transformer": (lambda: nn.TransformerEncoder(
                        nn.TransformerEncoderLayer(128, 4, 256, batch_first=True), 2,
                        enable_nested_tensor=False),
                    lambda: torch.randn(4, 64, 128)),
}


@pytest.mark.torchperf
@pytest.mark.parametrize("name", sorted(MODELS))
def test_model(torchperf, name):
    make_model, make_input = MODELS[name]
    torchperf(Slowed(make_model(), EXTRA.get(name, 0.0), WORK.get(name, (0, 0))), make_input(),
              name=name)
'''


def run_pytest(
    project: Path,
    *args: str,
    extra: dict[str, float] | None = None,
    json_out: Path | None = None,
    work: dict[str, tuple[int, int]] | None = None,
) -> tuple[list[dict], float]:
    """One fresh pytest process; returns the torchperf records of its JSON report and wall time."""
    env = {
        **os.environ,
        "RELIABILITY_EXTRA": json.dumps(extra or {}),
        "RELIABILITY_WORK": json.dumps(work or {}),
    }
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:randomly",
        "-p",
        "no:xdist",
        "-p",
        "no:benchmark",
        *args,
    ]
    if json_out is not None:
        cmd += [f"--torchperf-json={json_out}"]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(
            f"pytest failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}"
        )
    if json_out is None:
        return [], wall
    data = json.loads(json_out.read_text())
    return [
        b["torchperf"] | {"name": b["name"].split("[")[-1].rstrip("]"), "p25": b["stats"].get("q1")}
        for b in data["benchmarks"]
    ], wall


def wilson(k: int, n: int) -> tuple[float, float]:
    """95 % Wilson interval of a proportion k/n."""
    if n == 0:
        return (0.0, 1.0)
    z, p = 1.96, k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the number of runs")
    parser.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    parser.add_argument(
        "--mode",
        choices=("time", "instructions", "ab"),
        default="time",
        help="the timing conditions (default), the --torchperf-instructions ones "
        "(benchmarks/instruction_reliability.py; ~60-90 min with --parallel 2) or the "
        "--torchperf-ab HEAD ones (benchmarks/ab_reliability.py; ~60 min, --scale 0.5 ~30)",
    )
    parser.add_argument(
        "--parallel",
        type=int,
        default=1,
        help="instructions mode: compare runs of the conditions without hogs at once "
        "(counts do not depend on the load; wall times then do)",
    )
    parser.add_argument(
        "--project",
        type=Path,
        default=None,
        help="instructions mode: reuse the save and calibration of an earlier run's project "
        "folder (printed on its first line)",
    )
    args = parser.parse_args()
    runs = lambda n: max(1, round(n * args.scale))  # noqa: E731

    project = args.project or Path(tempfile.mkdtemp(prefix="torchperf-reliability-"))
    (project / "test_models.py").write_text(PROJECT_TEST)
    (project / "pytest.ini").write_text("[pytest]\nconsole_output_style = classic\n")
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"python {platform.python_version()}; project {project}"
    )
    if args.mode == "ab":
        from ab_reliability import ab_conditions

        figures = ab_conditions(project, runs, run_pytest, wilson)
        if args.out:
            args.out.write_text(json.dumps(figures, indent=2) + "\n")
        return 0
    if args.mode == "instructions":
        from instruction_reliability import instruction_conditions

        figures = instruction_conditions(project, runs, run_pytest, wilson, args.parallel)
        if args.out:
            args.out.write_text(json.dumps(figures, indent=2) + "\n")
        return 0
    started = time.perf_counter()

    defaults = [project / f"default{i}" for i in range(2)]
    for storage in defaults:  # the default save: five fresh processes
        _, save_wall = run_pytest(project, "--torchperf-save", f"--torchperf-storage={storage}")
    singles = [project / f"single{i}" for i in range(2)]
    for storage in singles:
        run_pytest(
            project,
            "--torchperf-save",
            "--torchperf-processes",
            "1",
            f"--torchperf-storage={storage}",
        )
    print(
        f"baselines saved: 2 default (5-process) storages ({save_wall:.0f} s each), "
        f"2 single-session storages"
    )
    # "+X %" is X % of the baseline the comparison is made against: the median of all stored p25s.
    stored: dict[str, list[float]] = {}
    for path in project.glob("*/*/test_models.py.json"):
        for measurements in json.loads(path.read_text())["tests"].values():
            for name, entry in measurements.items():
                stored.setdefault(name, []).extend(s["statistic"] for s in entry["sessions"])
    per_call = {name: statistics.median(values) for name, values in sorted(stored.items())}
    print(
        "baseline p25 per call: " + ", ".join(f"{k} {v * 1e3:.3f} ms" for k, v in per_call.items())
    )

    def extra(fraction: float) -> dict[str, float]:
        return {k: v * fraction for k, v in per_call.items()}

    figures: dict[str, dict] = {}

    def campaign(
        label: str,
        count: int,
        fraction: float,
        processes: int = 1,
        hogs_running: int = 0,
        limit: str | None = None,
        single: bool = False,
    ) -> None:
        outcomes: dict[str, int] = {}
        walls, verdicts, red = [], [], 0
        for i in range(count):
            storage = (singles if single else defaults)[i % 2]
            hogs = [
                subprocess.Popen([sys.executable, "-c", "while True: pass"])
                for _ in range(hogs_running)
            ]
            try:
                records, wall = run_pytest(
                    project,
                    "--torchperf-compare",
                    f"--torchperf-storage={storage}",
                    *(["--torchperf-processes", str(processes)] if processes > 1 else []),
                    *(["--torchperf-max-slowdown", limit] if limit else []),
                    extra=extra(fraction),
                    json_out=project / "compare.json",
                )
            finally:
                for h in hogs:
                    h.kill()
            walls.append(wall / max(1, len(records)))
            red += any(r["outcome"] == "fail" for r in records)
            for r in records:
                outcomes[r["outcome"]] = outcomes.get(r["outcome"], 0) + 1
                v = r.get("verdict") or {}
                verdicts.append(
                    {
                        "run": i,
                        "model": r["name"],
                        "outcome": r["outcome"],
                        **{
                            k: v.get(k)
                            for k in (
                                "ratio",
                                "first_ratio",
                                "confirm_ratio",
                                "machine_ratio",
                                "effective_tolerance",
                            )
                        },
                        "message": (v.get("message") or "").splitlines()[0][:300],
                    }
                )
        n = sum(outcomes.values())
        fails = outcomes.get("fail", 0)
        low, high = wilson(fails, n)
        red_low, red_high = wilson(red, count)
        figures[label] = {
            "runs": count,
            "verdict_count": n,
            "outcomes": outcomes,
            "fail_rate": fails / n if n else None,
            "fail_rate_95ci": [low, high],
            "red_runs": red,
            "red_run_rate_95ci": [red_low, red_high],
            "wall_s_per_test": sum(walls) / len(walls),
            "processes": processes,
            "injected": fraction,
            "hogs": hogs_running,
            "baseline": "1 session" if single else "default save (5 processes)",
            "max_slowdown": limit or "10% (default)",
            "by_model": {
                m: {
                    o: sum(1 for v in verdicts if v["model"] == m and v["outcome"] == o)
                    for o in sorted({v["outcome"] for v in verdicts})
                }
                for m in sorted({v["model"] for v in verdicts})
            },
            "verdicts": verdicts,
        }
        print(
            f"{label:<40} runs {count:>3}  verdicts {n:>4}  fail {fails:>4} "
            f"({100 * fails / max(n, 1):5.1f}%, 95% CI {100 * low:.1f}-{100 * high:.1f}%)  "
            f"red runs {red}/{count} (95% CI {100 * red_low:.0f}-{100 * red_high:.0f} per 100)  "
            f"{dict(sorted(outcomes.items()))}  {sum(walls) / len(walls):.1f} s/test",
            flush=True,
        )

    campaign("unchanged", runs(30), 0.0)
    campaign("unchanged, 1-session baseline", runs(10), 0.0, single=True)
    campaign("+10%", runs(6), 0.10)
    campaign("+20%", runs(6), 0.20)
    campaign("+50%", runs(6), 0.50)
    campaign("unchanged, 2 CPU hogs", runs(3), 0.0, hogs_running=2)
    campaign("unchanged, one busy neighbour", runs(4), 0.0, hogs_running=1)
    campaign("+50%, one busy neighbour", runs(2), 0.50, hogs_running=1)
    # A dedicated runner gating tighter: 3 candidate processes vs the 5-process baseline at 7.5 %.
    campaign("unchanged, processes 3, limit 7.5%", runs(4), 0.0, processes=3, limit="7.5%")
    campaign("+10%, processes 3, limit 7.5%", runs(4), 0.10, processes=3, limit="7.5%")
    unchanged = figures["unchanged"]
    rate = unchanged["fail_rate"] or 0.0
    print(
        f"suite level: {unchanged['red_runs']} red runs in {unchanged['runs']} unchanged runs of "
        f"this {len(per_call)}-test suite; at the measured per-verdict rate {100 * rate:.2f}% a "
        f"20-test suite would be red in {100 * (1 - (1 - rate) ** 20):.1f} of 100 runs if "
        f"verdicts were independent (benchmarks/suite_noise.py replays real processes instead)"
    )
    total = time.perf_counter() - started
    print(f"total {total / 60:.1f} min")
    if args.out:
        args.out.write_text(
            json.dumps(
                {
                    "machine": platform.processor(),
                    "cpus": os.cpu_count(),
                    "per_call_s": per_call,
                    "figures": figures,
                    "total_s": total,
                },
                indent=2,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
