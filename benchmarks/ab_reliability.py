"""The A/B conditions of ``benchmarks/reliability.py --mode ab`` (``--torchperf-ab HEAD``).

Same generated project of five models, now a git repository: side A is its last commit (the
models unchanged), side B the working tree, where the injected slowdown is written into the test
file itself (an A/B run's two sides share the environment, so an environment variable cannot
tell them apart). Real ``pytest --torchperf-ab HEAD`` runs at the default settings (3 process
pairs, up to 8 while undecided, limit 5 %, ``min_time`` 1 s):

  1. unchanged (B = A): every verdict should pass; also with two CPU-hog processes running
     (then pass or inconclusive, never fail);
  2. injected +10 % and +20 % of each model's per-call time (side A's p25 in the unchanged runs;
     a spin on ``time.perf_counter`` after the forward, as in the timing conditions);
  3. cost: wall time per test of an A/B run vs a plain ``--torchperf-compare`` of the same tests
     against a default save.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

EXTRA_LINE = 'EXTRA = json.loads(os.environ.get("RELIABILITY_EXTRA", "{}"))'


def _git(project: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=bench@example.com", "-c", "user.name=bench", *args],
        cwd=project,
        check=True,
        capture_output=True,
    )


def ab_conditions(
    project: Path,
    runs: Callable[[int], int],
    run_pytest: Callable[..., tuple[list[dict], float]],
    wilson: Callable[[int, int], tuple[float, float]],
) -> dict[str, Any]:
    test_file = project / "test_models.py"
    source = test_file.read_text()
    assert EXTRA_LINE in source
    if not (project / ".git").exists():
        _git(project, "init", "-q")
        _git(project, "add", "test_models.py", "pytest.ini")
        _git(project, "commit", "-qm", "models")
    started = time.perf_counter()
    figures: dict[str, Any] = {}
    a_times: dict[str, list[float]] = {}

    def campaign(label: str, count: int, extra: dict[str, float], hogs_running: int = 0) -> None:
        test_file.write_text(source.replace(EXTRA_LINE, f"EXTRA = {json.dumps(extra)}"))
        outcomes: dict[str, int] = {}
        verdicts, walls = [], []
        for i in range(count):
            hogs = [
                subprocess.Popen([sys.executable, "-c", "while True: pass"])
                for _ in range(hogs_running)
            ]
            try:
                records, wall = run_pytest(
                    project, "--torchperf-ab", "HEAD", json_out=project / "ab.json"
                )
            finally:
                for h in hogs:
                    h.kill()
            walls.append(wall / max(1, len(records)))
            for r in records:
                outcomes[r["outcome"]] = outcomes.get(r["outcome"], 0) + 1
                v = r.get("verdict") or {}
                ab = r.get("ab") or {}
                pairs = len(ab.get("pairs") or [])
                if not extra and v.get("baseline_statistic"):
                    a_times.setdefault(r["name"], []).append(v["baseline_statistic"])
                verdicts.append(
                    {
                        "run": i,
                        "model": r["name"],
                        "outcome": r["outcome"],
                        "ratio": v.get("ratio"),
                        "interval": ab.get("interval"),
                        "pairs": pairs,
                        "pair_ratios": [
                            statistics.median(b / a for a, b in zip(p["a"], p["b"], strict=False))
                            for p in ab.get("pairs") or []
                        ],
                        "message": (v.get("message") or "").splitlines()[0][:300],
                    }
                )
        n = sum(outcomes.values())
        fails = outcomes.get("fail", 0)
        low, high = wilson(fails, n)
        pairs_used = [v["pairs"] for v in verdicts]
        figures[label] = {
            "runs": count,
            "verdict_count": n,
            "outcomes": outcomes,
            "fail_rate": fails / n if n else None,
            "fail_rate_95ci": [low, high],
            "wall_s_per_test": sum(walls) / len(walls),
            "injected_s": extra,
            "hogs": hogs_running,
            "pairs_per_verdict": {
                "median": statistics.median(pairs_used) if pairs_used else None,
                "max": max(pairs_used, default=None),
            },
            "verdicts": verdicts,
        }
        print(
            f"{label:<28} runs {count:>3}  verdicts {n:>4}  fail {fails:>4} "
            f"({100 * fails / max(n, 1):5.1f}%, 95% CI {100 * low:.1f}-{100 * high:.1f}%)  "
            f"{dict(sorted(outcomes.items()))}  pairs median {statistics.median(pairs_used)} "
            f"max {max(pairs_used)}  {sum(walls) / len(walls):.1f} s/test",
            flush=True,
        )

    try:
        campaign("A/B unchanged", runs(20), {})
        per_call = {k: statistics.median(v) for k, v in sorted(a_times.items())}
        print(
            "side A p25 per call: "
            + ", ".join(f"{k} {v * 1e3:.3f} ms" for k, v in per_call.items()),
            flush=True,
        )
        campaign("A/B +10%", runs(6), {k: 0.10 * v for k, v in per_call.items()})
        campaign("A/B +20%", runs(4), {k: 0.20 * v for k, v in per_call.items()})
        campaign("A/B unchanged, 2 CPU hogs", runs(4), {}, hogs_running=2)
        # The same tests compared the plain way against a default (5-process) save.
        test_file.write_text(source)
        storage = project / "plain"
        _, save_wall = run_pytest(project, "--torchperf-save", f"--torchperf-storage={storage}")
        plain = []
        for _ in range(max(1, runs(2))):
            records, wall = run_pytest(
                project,
                "--torchperf-compare",
                f"--torchperf-storage={storage}",
                json_out=project / "plain.json",
            )
            plain.append(wall / max(1, len(records)))
        ab_wall = figures["A/B unchanged"]["wall_s_per_test"]
        figures["cost"] = {
            "plain_compare_s_per_test": statistics.median(plain),
            "ab_s_per_test": ab_wall,
            "ab_vs_plain": ab_wall / statistics.median(plain),
            "plain_save_s": save_wall,
        }
        print(
            f"cost: A/B {ab_wall:.1f} s/test vs plain compare {statistics.median(plain):.1f} "
            f"s/test: x{ab_wall / statistics.median(plain):.2f}",
            flush=True,
        )
        figures["per_call_s"] = per_call
    finally:
        test_file.write_text(source)
    print(f"total {(time.perf_counter() - started) / 60:.1f} min", flush=True)
    return figures
