"""How noisy is a whole suite between fresh processes, and what red-run rate does a rule give?

    python benchmarks/suite_noise.py collect --processes 30 --out noise.json   # ~30 min, 2 cores
    python benchmarks/suite_noise.py analyse noise.json                        # seconds

``collect`` generates a project of 20 perf measurements (five small models, nine torchvision
classification/video models at small inputs, three of them also as ``amp`` variants, a tiny
MLP and a transformer block) and runs it in ``--processes`` fresh pytest processes, one after
another, in measure-only mode with the plugin's default timing settings. Every process's
per-call times, calibration kernel times, CPU share and (for variants) per-round speedups are
kept in the output file.

``analyse`` replays the plugin's own comparison engine (:func:`pytest_torchperf.judge.compare`:
the guards, tolerance, confirmation rules and the speedup check) and its save guards on those
processes, the way a user's CI would use them: baseline sessions saved by
``k`` processes, then a compare run in another process whose suspected slowdowns are confirmed in
yet another process. Every ordered choice of processes is a simulated CI run of the whole
suite, so it yields both the per-verdict false-alarm rate and the share of **red suite runs**
(at least one of the 20 measurements failing) on unchanged code, and detection when the
candidate's times are scaled by +20 % / +50 %. Because verdicts within one simulated run share
their processes, the suite figure keeps the correlation a real CI run has.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PROJECT_TEST = """
import pytest, torch, torchvision
from torch import nn


def block(c):
    return nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU(),
                         nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU())


tv = torchvision.models
PLAIN = {
    "mlp-tiny": (lambda: nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 8)),
                 lambda: torch.randn(1, 32)),
    "mlp-small": (lambda: nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 256)),
                  lambda: torch.randn(32, 256)),
    "mlp": (lambda: nn.Sequential(*[m for _ in range(3) for m in (nn.Linear(512, 512), nn.ReLU())]),
            lambda: torch.randn(64, 512)),
    "convnet": (lambda: nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), block(32),
                                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10)),
                lambda: torch.randn(8, 3, 64, 64)),
    "resblocks": (lambda: nn.Sequential(nn.Conv2d(3, 64, 7, stride=2, padding=3), block(64),
                                        block(64), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                        nn.Linear(64, 10)),
                  lambda: torch.randn(1, 3, 64, 64)),
    "transformer": (lambda: nn.TransformerEncoder(
                        nn.TransformerEncoderLayer(128, 4, 256, batch_first=True), 2,
                        enable_nested_tensor=False),
                    lambda: torch.randn(4, 64, 128)),
    "encoder-block": (lambda: nn.TransformerEncoderLayer(256, 8, 512, batch_first=True),
                      lambda: torch.randn(2, 32, 256)),
    "mobilenet-v3-small": (lambda: tv.mobilenet_v3_small(), lambda: torch.randn(4, 3, 112, 112)),
    "squeezenet": (lambda: tv.squeezenet1_1(), lambda: torch.randn(2, 3, 112, 112)),
    "shufflenet": (lambda: tv.shufflenet_v2_x0_5(), lambda: torch.randn(4, 3, 112, 112)),
    "regnet": (lambda: tv.regnet_x_400mf(), lambda: torch.randn(1, 3, 112, 112)),
    "mnasnet": (lambda: tv.mnasnet0_5(), lambda: torch.randn(4, 3, 112, 112)),
    "googlenet": (lambda: tv.googlenet(aux_logits=False, init_weights=False),
                  lambda: torch.randn(1, 3, 112, 112)),
    "resnet18-bs4": (lambda: tv.resnet18(), lambda: torch.randn(4, 3, 64, 64)),
}
VARIANTS = {
    "resnet18": (lambda: tv.resnet18(), lambda: torch.randn(1, 3, 112, 112)),
    "efficientnet": (lambda: tv.efficientnet_b0(), lambda: torch.randn(1, 3, 112, 112)),
    "video-resnet": (lambda: tv.video.r3d_18(), lambda: torch.randn(1, 3, 4, 56, 56)),
}


@pytest.mark.torchperf
@pytest.mark.parametrize("name", sorted(PLAIN))
def test_plain(torchperf, name):
    make_model, make_input = PLAIN[name]
    torchperf(make_model(), make_input(), name=name)


@pytest.mark.torchperf(variants=["eager", "amp"])
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_variants(torchperf, name):
    make_model, make_input = VARIANTS[name]
    torchperf(make_model(), make_input(), name=name)
"""


def collect(processes: int, out: Path, hog: int = 0) -> None:
    project = Path(tempfile.mkdtemp(prefix="torchperf-suite-noise-"))
    (project / "test_suite.py").write_text(PROJECT_TEST)
    (project / "pytest.ini").write_text("[pytest]\n")
    runs: list[dict[str, Any]] = []
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(hog)]
    try:
        for process in range(processes):
            json_out = project / f"run-{process}.json"
            start = time.perf_counter()
            proc = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pytest",
                    "-q",
                    "-p",
                    "no:cacheprovider",
                    "-p",
                    "no:xdist",
                    "-p",
                    "no:benchmark",
                    f"--torchperf-json={json_out}",
                ],
                cwd=project,
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            wall = time.perf_counter() - start
            if proc.returncode != 0:
                raise SystemExit(f"process {process} failed:\n{proc.stdout[-3000:]}")
            data = json.loads(json_out.read_text())
            measurements = {}
            for bench in data["benchmarks"]:
                tp = bench["torchperf"]
                passes = tp.get("passes") or []
                measurements[tp["measurement"]] = {
                    "times": bench["stats"]["data"] if not passes else passes[0]["times"],
                    "calibration": tp.get("calibration"),
                    "cpu_share": tp.get("cpu_share"),
                    "neighbour_load": tp.get("neighbour_load"),
                    "speedup": tp.get("speedup"),
                }
            runs.append(
                {
                    "process": process,
                    "wall_s": round(wall, 1),
                    "started": time.strftime("%H:%M:%S"),
                    "measurements": measurements,
                }
            )
            print(
                f"process {process + 1}/{processes}: {len(measurements)} measurements in "
                f"{wall:.0f} s",
                flush=True,
            )
            out.write_text(json.dumps({"hogs": hog, "runs": runs}, indent=1))
    finally:
        for h in hogs:
            h.kill()


def _sample(m: dict[str, Any], scale: float = 1.0) -> Any:
    from pytest_torchperf.core.stats import summarize
    from pytest_torchperf.judge.samples import Sample

    times = tuple(t * scale for t in m["times"])
    return Sample(
        summarize(times),
        m.get("cpu_share"),
        times,
        m.get("calibration"),
        neighbour_load=m.get("neighbour_load"),
    )


def _session(m: dict[str, Any]) -> dict[str, Any]:
    return {
        "statistic": _sample(m).summary.p25,
        "calibration": m.get("calibration"),
        "calibration_kernel": "mm64-fp32",
        "speedup": m.get("speedup"),
    }


def spread_table(runs: list[dict[str, Any]]) -> None:
    """Per measurement: how far fresh processes disagree, raw and relative to the calibration."""
    from pytest_torchperf.core.stats import robust_cv, summarize

    names = sorted(runs[0]["measurements"])
    print(
        f"\n{'measurement':22} {'median p25':>11} {'robust CV':>9} {'max/min':>8} "
        f"{'norm. CV':>9} {'max/min':>8}"
    )
    for name in names:
        ms = [r["measurements"][name] for r in runs]
        p25s = [summarize(m["times"]).p25 for m in ms]
        norm = [
            p / m["calibration"] for p, m in zip(p25s, ms, strict=False) if m.get("calibration")
        ]
        print(
            f"{name:22} {statistics.median(p25s) * 1e3:9.3f}ms {robust_cv(p25s):9.1%} "
            f"{max(p25s) / min(p25s):8.2f} {robust_cv(norm):9.1%} {max(norm) / min(norm):8.2f}"
        )
    cals = [statistics.median(m["calibration"] for m in r["measurements"].values()) for r in runs]
    print(f"calibration kernel, median per process: {min(cals) * 1e6:.2f}-{max(cals) * 1e6:.2f} us")


def saved_sessions(runs: list[dict[str, Any]], processes: list[int], name: str) -> list[dict]:
    """The sessions a ``--torchperf-save`` over these processes would store for ``name``: the
    plugin's save guards (contention, spread, neighbours, machine speed vs the stored sessions and
    the rest of the run) decide which, in order."""
    from pytest_torchperf.judge.samples import guard_problem, machine_disturbance

    stored: list[dict[str, Any]] = []
    for process in processes:
        m = runs[process]["measurements"][name]
        run_cals = [
            x["calibration"] for x in runs[process]["measurements"].values() if x.get("calibration")
        ]
        if guard_problem(_sample(m)) or machine_disturbance(
            m.get("calibration"),
            [("stored", [s["calibration"] for s in stored]), ("run", run_cals)],
        ):
            continue
        stored.append(_session(m))
    return stored


def simulate(
    runs: list[dict[str, Any]],
    *,
    save_processes: int,
    draws: int,
    seed: int,
    limit: float,
    scale: float,
    confirm: str = "fresh",
) -> dict[str, Any]:
    """Simulated CI runs of the whole suite through the plugin's own decision code.

    Per run: ``save_processes`` processes are the saved baseline (through the save guards), one
    process is the compare run, two others are the fresh processes that confirm a suspected
    slowdown (and a speedup fall), two more stand in for re-measures after a guard problem (the
    data holds one pass per process, so these are as independent as fresh processes).
    """
    from pytest_torchperf.judge.compare import Candidate, Gate, compare
    from pytest_torchperf.store.sessions import Session

    rng = random.Random(seed)
    names = sorted(runs[0]["measurements"])
    red_runs, outcomes, fails_by_name = 0, {}, {}
    for _ in range(draws):
        chosen = rng.sample(range(len(runs)), save_processes + 5)
        base, (cand, f1, f2, a1, a2) = chosen[:save_processes], chosen[save_processes:]
        red = False
        for name in names:
            sessions = [Session.from_json(s) for s in saved_sessions(runs, base, name)]
            if not sessions:
                outcomes["new"] = outcomes.get("new", 0) + 1
                continue
            cm = runs[cand]["measurements"][name]
            fresh = [_sample(runs[f]["measurements"][name], scale) for f in (f1, f2)]
            spare = [_sample(runs[a]["measurements"][name], scale) for a in (a1, a2)]
            candidate = Candidate(
                name,
                _sample(cm, scale),
                speedup=cm.get("speedup"),
                variant="amp" if cm.get("speedup") else "eager",
                calibration_kernel="mm64-fp32",
            )
            result = compare(
                candidate,
                sessions,
                Gate(max_slowdown=limit, confirm=confirm),
                remeasure=lambda spare=spare: spare.pop(0) if len(spare) > 1 else spare[0],
                confirm=(lambda fresh=fresh: fresh.pop(0) if fresh else None)
                if confirm == "fresh"
                else None,
                confirm_speedups=lambda name=name, pair=(f1, f2): [
                    runs[f]["measurements"][name]["speedup"] for f in pair
                ],
            )
            outcome = result.outcome
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
            if outcome == "fail":
                red = True
                fails_by_name[name] = fails_by_name.get(name, 0) + 1
        red_runs += red
    total = sum(outcomes.values())
    return {
        "outcomes": {k: v / total for k, v in sorted(outcomes.items())},
        "red_runs": red_runs / draws,
        "draws": draws,
        "fails_by_name": fails_by_name,
        "verdicts": total,
    }


def analyse(path: Path, save_processes: list[int], draws: int, seed: int, limit: float) -> None:
    data = json.loads(path.read_text())
    runs = data["runs"]
    print(
        f"{path}: {len(runs)} processes x {len(runs[0]['measurements'])} measurements; "
        f"limit {limit:.0%}; {draws} simulated CI runs per line"
    )
    spread_table(runs)
    print(f"\n{'saved':>5} {'change':>9}  {'red runs':>8}  verdicts")
    for k in save_processes:
        for scale in (1.0, 1.2, 1.5):
            r = simulate(runs, save_processes=k, draws=draws, seed=seed, limit=limit, scale=scale)
            what = "unchanged" if scale == 1.0 else f"+{(scale - 1) * 100:.0f} %"
            print(
                f"{k:5} {what:>9} {r['red_runs']:8.1%}  "
                + ", ".join(f"{o} {v:.1%}" for o, v in r["outcomes"].items())
            )
            if scale == 1.0 and r["fails_by_name"]:
                print(
                    "      false failures: "
                    + ", ".join(
                        f"{n} {c}"
                        for n, c in sorted(r["fails_by_name"].items(), key=lambda kv: -kv[1])
                    )
                )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--processes", type=int, default=30)
    c.add_argument("--hogs", type=int, default=0, help="CPU-hog processes running meanwhile")
    c.add_argument("--out", type=Path, required=True)
    a = sub.add_parser("analyse")
    a.add_argument("file", type=Path)
    a.add_argument("--save-processes", default="1,3,5", help="comma-separated session counts")
    a.add_argument("--draws", type=int, default=400)
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--limit", type=float, default=0.10)
    args = parser.parse_args()
    if args.command == "collect":
        collect(args.processes, args.out, args.hogs)
    else:
        analyse(
            args.file,
            [int(k) for k in args.save_processes.split(",")],
            args.draws,
            args.seed,
            args.limit,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
