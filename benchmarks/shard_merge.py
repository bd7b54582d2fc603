"""The example project's suite split in three shards and merged, against one unsplit run.

    python benchmarks/shard_merge.py                     # about 4-5 minutes on a 2-vCPU VM
    python benchmarks/shard_merge.py --json benchmarks/results/shard-merge-2cpu.json

Copies example_project/ to a temporary folder (its committed baselines are left alone) and, each
in a fresh pytest process as a user would run them:

1. saves baselines (``--torchperf-processes 1``: one session is enough for this comparison);
2. edits them to extreme values as tests/test_example_project.py does (every stored time 10x
   slower under a 900 % limit, ResNet-18's then 100x faster), so that every verdict is decided
   by the edit, not by the machine's noise between the runs;
3. compares the whole suite in one run, and the same suite in the three shards of the example's
   workflow (.github/workflows/perf.yml), each writing its results file;
4. merges the shards with ``torchperf merge`` and compares the merged file with the unsplit one.

Prints, per measurement: both runs' outcome, label and p25 time; then how many verdicts and
labels agree (the goal: all), whether the deterministic figures (counters: FLOPs, ATen op
counts, parameters, peak memory) agree, how far the timed figures of two runs of the same code
are apart (the machine's noise, not the merge's: the merged file holds each shard's figures as
written, which the script checks too), and the wall times: the unsplit compare, the longest
shard (what a CI matrix waits for), the three shards in sequence and the merge. Exit status 1
when a verdict, a label or a counter disagrees or the merge changed a figure.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "example_project"
#: The shards of the example project's workflow (its compare job's matrix).
SHARDS = [
    ["tests/test_perf.py"],
    ["tests/test_variants.py"],
    ["tests/test_autoencoder.py", "tests/test_instruments.py"],
]
RESNET = "tests/test_perf.py::test_resnet18_batch1"
#: The guards are off (as in the repository's tests): verdicts come from the edited baselines.
LOOSE = [
    "--torchperf-min-cpu-share=0",
    "--torchperf-max-spread=1000%",
    "--torchperf-max-neighbour-load=100%",
    "--torchperf-max-machine-slowdown=1000%",
]


def run(cwd: Path, *args: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["COLUMNS"] = "200"
    start = time.perf_counter()
    done = subprocess.run(list(args), cwd=cwd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if done.returncode not in (0, 1):
        print(done.stdout[-4000:] + done.stderr[-4000:])
        raise SystemExit(f"{' '.join(args)} exited with {done.returncode}")
    return wall, done


def pytest(project: Path, *args: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    return run(project, sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *LOOSE, *args)


def scale(storage: Path, factor: float, nodeid: str | None = None) -> None:
    for path in storage.glob("*/*.py.json"):
        doc = json.loads(path.read_text())
        for test, measurements in doc["tests"].items():
            if nodeid not in (None, test):
                continue
            for entry in measurements.values():
                for session in entry["sessions"]:
                    session["statistic"] *= factor
                    session["times"] = [t * factor for t in session["times"]]
        path.write_text(json.dumps(doc))


def benchmarks(path: Path) -> dict[str, dict[str, Any]]:
    return {
        f"{b['torchperf']['nodeid']} {b['torchperf']['measurement']}": b
        for b in json.loads(path.read_text())["benchmarks"]
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", metavar="PATH", help="also write the figures here")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="shard-merge-"))
    project = work / "example_project"
    shutil.copytree(
        EXAMPLE,
        project,
        ignore=shutil.ignore_patterns(
            ".torchperf", ".torchperf-report", "__pycache__", "*.egg-info", ".pytest_cache"
        ),
    )
    storage = project / ".torchperf"
    save_wall, saved = pytest(project, "--torchperf-save", "--torchperf-processes", "1")
    print(f"save: {save_wall:.0f} s, exit {saved.returncode}")
    scale(storage, 10.0)
    scale(storage, 1 / 10 / 100, RESNET)
    compare = ["--torchperf-compare", "--torchperf-max-slowdown=900%"]
    unsplit_wall, unsplit = pytest(project, *compare, "--torchperf-json=all.json")
    walls = []
    for i, paths in enumerate(SHARDS, 1):
        wall, done = pytest(project, *paths, *compare, f"--torchperf-json=shard-{i}.json")
        walls.append(wall)
        print(f"shard {i} ({' '.join(paths)}): {wall:.0f} s, exit {done.returncode}")
    merge_wall, merged = run(
        project,
        sys.executable,
        "-m",
        "pytest_torchperf.cli",
        "merge",
        *(f"shard-{i}.json" for i in range(1, len(SHARDS) + 1)),
        "-o",
        "merged.json",
    )
    print(merged.stdout.splitlines()[0])
    one, joined = benchmarks(project / "all.json"), benchmarks(project / "merged.json")
    shards: dict[str, dict[str, Any]] = {}
    for i in range(1, len(SHARDS) + 1):
        shards.update(benchmarks(project / f"shard-{i}.json"))
    rows, ratios = [], []
    for key in sorted(one.keys() | joined.keys()):
        a, b = one.get(key, {}).get("torchperf", {}), joined.get(key, {}).get("torchperf", {})
        pa = (one.get(key, {}).get("stats") or {}).get("q1")
        pb = (joined.get(key, {}).get("stats") or {}).get("q1")
        if pa and pb:
            ratios.append(pb / pa)
        rows.append(
            {
                "measurement": key,
                "unsplit": a.get("label"),
                "merged": b.get("label"),
                "outcome_agrees": a.get("outcome") == b.get("outcome"),
                "label_agrees": a.get("label") == b.get("label"),
                "counters_agree": a.get("counters") == b.get("counters"),
                "p25_unsplit_s": pa,
                "p25_merged_s": pb,
            }
        )
    width = max(len(r["measurement"]) for r in rows)
    for r in rows:
        times = (
            f"{r['p25_unsplit_s'] * 1e3:9.3f} ms {r['p25_merged_s'] * 1e3:9.3f} ms"
            if r["p25_unsplit_s"] and r["p25_merged_s"]
            else ""
        )
        print(
            f"{r['measurement']:<{width}}  {r['unsplit'] or '-':<22} {r['merged'] or '-':<22} {times}"
        )
    figures = {
        "machine": f"{platform.node()} {os.cpu_count()} CPUs",
        "measurements_unsplit": len(one),
        "measurements_merged": len(joined),
        "verdicts_agree": sum(r["outcome_agrees"] for r in rows),
        "labels_agree": sum(r["label_agrees"] for r in rows),
        "counters_agree": sum(r["counters_agree"] for r in rows),
        "merge_changed_no_figure": joined == shards,
        "p25_merged_over_unsplit": {
            "median": statistics.median(ratios) if ratios else None,
            "min": min(ratios, default=None),
            "max": max(ratios, default=None),
        },
        "wall_s": {
            "save": round(save_wall, 1),
            "unsplit_compare": round(unsplit_wall, 1),
            "shards": [round(w, 1) for w in walls],
            "longest_shard": round(max(walls), 1),
            "merge": round(merge_wall, 2),
        },
        "exit": {"unsplit": unsplit.returncode, "merge": merged.returncode},
    }
    print(json.dumps(figures, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
    shutil.rmtree(work, ignore_errors=True)
    n = len(rows)
    ok = (
        figures["verdicts_agree"] == figures["labels_agree"] == figures["counters_agree"] == n
        and figures["merge_changed_no_figure"]
        and unsplit.returncode == merged.returncode
    )
    print("all verdicts, labels and counters agree" if ok else "DISAGREEMENT (see above)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
