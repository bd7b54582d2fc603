"""Does a run still gate on a busy machine and under pytest-xdist? Prints figures.

Scenario ``hog`` (default): a CPU hog (one busy loop per other core) runs for the whole of a save
and of the compares after it. Reported: the save's exit status and what it stored (timing,
counters, numerics of N measurements), each unchanged compare's outcomes (0 failures expected)
and whether an extra ``aten::mul`` injected into one model is caught by its counters.

Scenario ``xdist``: a quiet machine, ``pytest -n 2`` with eight CPU-bound ordinary tests (2 s of
matmuls each) beside the perf tests. Reported: what the save stored, each unchanged compare's
outcomes (0 red runs and 0 ``new`` expected) and whether a +50 % slowdown of one model (a
pure-Python wait of half its stored time: no counter changes, so only timing can catch it) fails
exactly that test.

Scenario ``fallback``: ``--torchperf-fallback instructions``. A quiet save (timing and the
instruction counts beside it), then the cost of one compare on a quiet machine: plain, fallback,
and ``--torchperf-instructions``. Then two CPU hogs for the whole of each compare: unchanged
fallback compares (0 failures expected; how many verdicts time gave and how many the counts gave)
and a +3 % pure-Python slowdown of one model (a loop of 221 instructions per step, as many steps
as make 3 % of its stored count), which must fail exactly that test.

Scenario ``ab``: unchanged A/B runs against HEAD (amp variants of every model, compiled variants of
two): every verdict should pass; then the cost of one A/B run against a plain compare of the
same tests.

    python benchmarks/busy_gates.py --scenario hog --compares 3
    python benchmarks/busy_gates.py --scenario xdist --compares 5
    python benchmarks/busy_gates.py --scenario ab --measurements 20 --compares 5
    python benchmarks/busy_gates.py --scenario fallback --measurements 20 --compares 3 --hogs 2

Each pytest run writes its JSON results; the figures come from them, not from the terminal.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

MODELS = textwrap.dedent("""
    import itertools
    import os
    import time

    import pytest
    import torch

    SLOW = os.environ.get("BUSY_GATES_SLOW", "")
    #: Seconds of pure Python added to each call of model SLOW: half its stored baseline.
    SLOW_S = float(os.environ.get("BUSY_GATES_SLOW_S", "0") or 0)
    EXTRA = os.environ.get("BUSY_GATES_EXTRA_OP", "")
    #: Pure-Python loop steps (about 221 instructions each) added to each call of model STEPS_FOR.
    STEPS_FOR = os.environ.get("BUSY_GATES_STEPS_FOR", "")
    STEPS = int(os.environ.get("BUSY_GATES_STEPS", "0") or 0)


    class Net(torch.nn.Module):
        def __init__(self, name, body, x):
            super().__init__()
            self.name, self.body = name, body

        def forward(self, x):
            y = self.body(x)
            if isinstance(y, tuple):  # GRU: (output, hidden)
                y = y[0]
            if EXTRA == self.name:
                y = y * 1.0
            if STEPS_FOR == self.name:
                total = 0
                for _ in itertools.repeat(None, STEPS):
                    total ^= 1
            if SLOW == self.name:
                # +50 % of the stored time, in pure Python: no op or counter changes.
                end = time.perf_counter() + SLOW_S
                while time.perf_counter() < end:
                    pass
            return y


    def build(kind, seed):
        torch.manual_seed(seed)
        if kind == "mlp":
            return torch.nn.Sequential(
                torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256)
            ), torch.randn(32, 256)
        if kind == "conv":
            return torch.nn.Sequential(
                torch.nn.Conv2d(3, 16, 3), torch.nn.ReLU(), torch.nn.Conv2d(16, 16, 3),
                torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
            ), torch.randn(4, 3, 48, 48)
        if kind == "encoder":
            return torch.nn.TransformerEncoderLayer(64, 4, 128, batch_first=True), torch.randn(
                2, 16, 64
            )
        if kind == "gru":
            return torch.nn.GRU(32, 64, batch_first=True), torch.randn(4, 16, 32)
        import torchvision

        size = {{"resnet18": 64, "mobilenet_v3_small": 96, "squeezenet1_1": 64,
                "shufflenet_v2_x0_5": 64}}[kind]
        return getattr(torchvision.models, kind)(weights=None).eval(), torch.randn(1, 3, size, size)


    KINDS = {kinds}


    @pytest.mark.torchperf(max_slowdown="15%"{variants})
    @pytest.mark.parametrize("i", range({count}))
    def test_model(torchperf, i):
        kind = KINDS[i % len(KINDS)]
        body, x = build(kind, i)
        name = f"{{kind}}-{{i}}"
        torchperf(Net(name, body, x), x, name=name)
""")

#: The A/B scenario's compiled variants (two small models: each side of each pair compiles them).
COMPILED = textwrap.dedent("""


    @pytest.mark.torchperf(max_slowdown="15%", variants=["compiled"])
    @pytest.mark.parametrize("i", range(2))
    def test_compiled(torchperf, i):
        kind = KINDS[i]
        body, x = build(kind, 100 + i)
        name = f"compiled-{kind}-{i}"
        torchperf(Net(name, body, x), x, name=name)
""")

ORDINARY = textwrap.dedent("""
    import time
    import pytest
    import torch

    @pytest.mark.parametrize("i", range(8))
    def test_matmuls(i):
        torch.set_num_threads(1)
        a, end = torch.randn(256, 256), time.time() + 2
        while time.time() < end:
            a = torch.tanh(a @ a)
""")


ALL_KINDS = [
    "mlp",
    "conv",
    "encoder",
    "gru",
    "resnet18",
    "mobilenet_v3_small",
    "squeezenet1_1",
    "shufflenet_v2_x0_5",
]


def hogs(count: int) -> list[subprocess.Popen[bytes]]:
    loop = "while True: pass"
    return [subprocess.Popen([sys.executable, "-c", loop]) for _ in range(count)]


def run(project: Path, args: list[str], env: dict[str, str]) -> tuple[int, list[dict], dict]:
    results = project / "results.json"
    results.unlink(missing_ok=True)
    start = time.time()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:randomly",
            *args,
            f"--torchperf-json={results}",
        ],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
    )
    took = time.time() - start
    if not results.exists():
        # pytest did not get as far as the results (plugin missing, usage error): say so and stop
        # rather than print figures of nothing.
        sys.exit(
            f"pytest {' '.join(args)} wrote no results (exit {proc.returncode}):\n"
            + (proc.stdout + proc.stderr)[-3000:]
        )
    data = json.loads(results.read_text())
    records = [b["torchperf"] for b in data["benchmarks"]]
    coverage = (data.get("torchperf") or {}).get("coverage")
    tail = [
        line
        for line in proc.stdout.splitlines()
        if line.startswith("torchperf: ") and "written to" not in line
    ]
    print(f"  rc={proc.returncode} {took:.0f} s; " + " | ".join(tail[-3:]))
    for b in data["benchmarks"]:
        t = b["torchperf"]
        if t.get("outcome") in ("fail", "improved"):
            message = (t.get("verdict") or {}).get("message", "").split("\n")[0]
            print(f"    {t['outcome']}: {message} {' '.join(t.get('failures') or [])}"[:400])
    return proc.returncode, records, coverage or {}


def baseline_seconds(project: Path, name: str) -> float:
    """Median over the stored sessions of measurement ``name``'s statistic (seconds per call)."""
    import statistics

    for path in (project / ".torchperf").glob("*/*.json"):
        data = json.loads(path.read_text())
        for measurements in (data.get("tests") or {}).values():
            if name in measurements:
                stats = [
                    s["statistic"] for s in measurements[name]["sessions"] if s.get("statistic")
                ]
                return statistics.median(stats)
    sys.exit(f"no stored baseline of {name} under {project / '.torchperf'}")


def outcomes(records: list[dict]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in records:
        counts[r.get("outcome", "?")] = counts.get(r.get("outcome", "?"), 0) + 1
    return counts


def ab_runs(project: Path, runs: int) -> None:
    """Unchanged A/B runs against HEAD (eager and amp of each model): every verdict, the amp
    speedups' among them, should pass; then the cost against a save + plain compare."""
    env = {**os.environ}
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "models"]):
        subprocess.run(
            ["git", "-c", "user.email=b@example.com", "-c", "user.name=b", *args],
            cwd=project,
            check=True,
        )
    verdicts, fails, speedup_fails, inconclusive, ab_seconds = 0, [], 0, 0, 0.0
    by_variant: dict[str, int] = {}
    for i in range(runs):
        print(f"unchanged A/B run {i + 1}:")
        start = time.time()
        rc, records, cov = run(project, ["--torchperf-ab", "HEAD"], env)
        ab_seconds += time.time() - start
        for r in records:
            if r.get("outcome") in (None, "disabled", "skipped"):
                continue
            verdicts += 1
            variant = r.get("variant") or "eager"
            by_variant[variant] = by_variant.get(variant, 0) + 1
            inconclusive += r.get("outcome") == "inconclusive"
            if r.get("outcome") == "fail":
                fails.append(r["measurement"])
                speedup_fails += any("speedup vs eager" in f for f in r.get("failures") or ())
        print(f"  outcomes {outcomes(records)}; coverage {cov}")
    print(
        f"A/B unchanged: {verdicts} verdicts, {len(fails)} fail ({speedup_fails} on a speedup): "
        f"{fails}; {inconclusive} inconclusive; {ab_seconds / max(runs, 1):.0f} s per run; "
        f"verdicts by variant {by_variant}"
    )
    print("plain save, then compare (cost reference):")
    run(project, ["--torchperf-save"], env)
    start = time.time()
    run(project, ["--torchperf-compare"], env)
    plain = time.time() - start
    print(
        f"cost: A/B {ab_seconds / max(runs, 1):.0f} s per run vs plain compare {plain:.0f} s: "
        f"x{ab_seconds / max(runs, 1) / plain:.2f}"
    )


def stored_count(project: Path, name: str) -> float:
    """Instructions per call stored beside the timing of measurement ``name`` (latest session)."""
    for path in (project / ".torchperf").glob("*/*.json"):
        data = json.loads(path.read_text())
        for measurements in (data.get("tests") or {}).values():
            if name in measurements:
                counted = [s for s in measurements[name]["sessions"] if s.get("instructions")]
                if counted:
                    return float(counted[-1]["instructions"]["per_call"])
    sys.exit(f"no instruction count stored beside the timing of {name}")


def fallback_runs(project: Path, compares: int, hog_count: int) -> None:
    """``--torchperf-fallback instructions``: quiet save and costs, then compares beside hogs."""
    env = {**os.environ}
    fallback = ["--torchperf-fallback", "instructions"]
    print("quiet save (timing + counts beside it):")
    start = time.time()
    rc, records, cov = run(project, [*fallback, "--torchperf-save"], env)
    print(f"  save exit {rc} in {time.time() - start:.0f} s; coverage {cov}")
    costs = {}
    for label, args in (
        ("plain compare", ["--torchperf-compare"]),
        ("fallback compare", [*fallback, "--torchperf-compare"]),
        ("instructions compare", ["--torchperf-instructions", "--torchperf-compare"]),
    ):
        print(f"quiet {label} (cost):")
        start = time.time()
        run(project, args, env)
        costs[label] = time.time() - start
    plain = costs["plain compare"]
    print(
        "cost on a quiet machine: "
        + ", ".join(f"{k} {v:.0f} s (x{v / plain:.2f})" for k, v in costs.items())
    )
    verdicts, failed, by_basis = 0, [], {}
    for i in range(compares):
        print(f"unchanged fallback compare {i + 1}, {hog_count} CPU hogs:")
        started = hogs(hog_count)
        try:
            rc, records, cov = run(project, [*fallback, "--torchperf-compare"], env)
        finally:
            for hog in started:
                hog.kill()
        for r in records:
            verdict = r.get("verdict") or {}
            if not verdict:
                continue
            verdicts += 1
            key = f"{verdict.get('basis')} {r.get('outcome')}"
            by_basis[key] = by_basis.get(key, 0) + 1
            if r.get("outcome") == "fail":
                failed.append(r["measurement"])
        print(f"  outcomes {outcomes(records)}; coverage {cov}")
    print(
        f"unchanged fallback compares beside {hog_count} hogs: {verdicts} verdicts, "
        f"{len(failed)} fail {failed}; by basis and outcome {by_basis}"
    )
    target = "mlp-0"
    steps = int(0.03 * stored_count(project, target) / 221) + 1
    print(f"+3 % pure-Python slowdown of {target} ({steps} loop steps), {hog_count} CPU hogs:")
    started = hogs(hog_count)
    try:
        rc, records, _ = run(
            project,
            [*fallback, "--torchperf-compare"],
            {**env, "BUSY_GATES_STEPS_FOR": target, "BUSY_GATES_STEPS": str(steps)},
        )
    finally:
        for hog in started:
            hog.kill()
    failed = sorted(r["measurement"] for r in records if r.get("outcome") == "fail")
    print(f"  failed: {failed} (expected exactly ['{target}'])")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", choices=("hog", "xdist", "ab", "fallback"), default="hog")
    parser.add_argument("--measurements", type=int, default=20)
    parser.add_argument("--compares", type=int, default=3)
    parser.add_argument("--hogs", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    args = parser.parse_args()

    project = Path(tempfile.mkdtemp(prefix="busy-gates-"))
    (project / "pytest.ini").write_text("[pytest]\n")
    variants = ', variants=["amp"]' if args.scenario == "ab" else ""
    # Under Valgrind the torchvision models cost minutes per count: the fallback scenario keeps
    # to the four small kinds.
    kinds = ALL_KINDS[:4] if args.scenario == "fallback" else ALL_KINDS
    (project / "test_models.py").write_text(
        MODELS.format(count=args.measurements, variants=variants, kinds=repr(kinds))
    )
    if args.scenario == "ab":
        with (project / "test_models.py").open("a") as models:
            models.write(COMPILED)
        ab_runs(project, args.compares)
        return
    if args.scenario == "fallback":
        fallback_runs(project, args.compares, args.hogs)
        return
    extra_args: list[str] = []
    if args.scenario == "xdist":
        (project / "test_ordinary.py").write_text(ORDINARY)
        extra_args = ["-n", "2"]
    env = {**os.environ}
    print(f"scenario {args.scenario}: {args.measurements} measurements, project {project}")
    started = hogs(args.hogs) if args.scenario == "hog" else []
    try:
        print("save:")
        rc, records, cov = run(project, [*extra_args, "--torchperf-save"], env)
        print(f"  save exit {rc}; coverage {cov}")
        red = new = 0
        for i in range(args.compares):
            print(f"unchanged compare {i + 1}:")
            rc, records, cov = run(project, [*extra_args, "--torchperf-compare"], env)
            counts = outcomes(records)
            red += rc != 0
            new += counts.get("new", 0) - sum(
                1 for r in records if (r.get("verdict") or {}).get("untimed")
            )
            print(f"  outcomes {counts}; coverage {cov}")
        print(f"unchanged compares: {red} of {args.compares} red; {new} plain 'new' verdicts")
        target = "mlp-0"
        if args.scenario == "hog":
            print(f"extra aten::mul in {target}:")
            rc, records, _ = run(
                project,
                [*extra_args, "--torchperf-compare"],
                {**env, "BUSY_GATES_EXTRA_OP": target},
            )
        else:
            stored = baseline_seconds(project, target)
            print(
                f"+50 % slowdown of {target} (+{stored * 0.5 * 1e6:.0f} us on {stored * 1e6:.0f} us):"
            )
            rc, records, _ = run(
                project,
                [*extra_args, "--torchperf-compare"],
                {**env, "BUSY_GATES_SLOW": target, "BUSY_GATES_SLOW_S": str(stored * 0.5)},
            )
        failed = sorted(r["measurement"] for r in records if r.get("outcome") == "fail")
        print(f"  failed: {failed} (expected exactly ['{target}'])")
    finally:
        for hog in started:
            hog.kill()


if __name__ == "__main__":
    main()
