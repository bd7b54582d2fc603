"""Which counters stay the same on another CPU class? Evidence for the cross-machine counter rule.

    python benchmarks/counter_portability.py                  # ~6-10 min on a 2-core VM
    python benchmarks/counter_portability.py --keep DIR       # keep the saved baselines in DIR

The example project is saved (``pytest --torchperf-save``, short timing) once per simulated
CPU class on this machine, each in a fresh process with its own inductor cache:

* ``native``: whatever this CPU offers;
* ``avx512-vnni``: oneDNN capped below AVX-512 BF16/FP16 and AMX (``ONEDNN_MAX_CPU_ISA``);
* ``avx2``: ATen, inductor and oneDNN capped at AVX2 (``ATEN_CPU_CAPABILITY=avx2``);
* ``default``: no vector ISA at all for ATen/inductor, SSE4.1 for oneDNN.

The caps reach every kernel choice made below Python (ATen's dispatch by CPU capability,
oneDNN's JIT, inductor's vector ISA); choices made in Python from CPUID (some of torchao's)
cannot be capped, so the example project's committed baselines, saved on a real machine of
another class, are compared too when present. The script prints, per counter and kind of
measurement, in how many measurements any two environments disagree.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "example_project"
CLASSES = {
    "native": {},
    "avx512-vnni": {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_VNNI"},
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
    "default": {"ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "SSE41"},
}
COUNTERS = ("flops", "ops", "params", "peak_memory", "graphs")


def save(project: Path, storage: Path, extra_env: dict[str, str], cache: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update(extra_env, TORCHINDUCTOR_CACHE_DIR=str(cache))
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "--torchperf-save",
        f"--torchperf-storage={storage}",
        "--torchperf-min-time",
        "0.05",
        "--torchperf-min-cpu-share",
        "0",
        "--torchperf-max-spread",
        "1000%",
        "--torchperf-max-neighbour-load",
        "100%",
        "--torchperf-max-machine-slowdown",
        "1000%",
    ]
    proc = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True, check=False)
    if proc.returncode not in (0, 1):
        raise SystemExit(
            f"save failed ({proc.returncode}) with {extra_env}:\n{proc.stdout[-3000:]}"
        )
    # A test failing on this class (an accuracy gate, say) saves nothing: say so, keep going.
    for line in proc.stdout.splitlines():
        if line.startswith("FAILED"):
            print(f"  {line[:300]}")


def load(storage: Path) -> dict[str, dict[tuple[str, str], dict]]:
    """environment label -> (nodeid, name) -> latest session (with the environment's cpu fields)."""
    found: dict[str, dict[tuple[str, str], dict]] = {}
    for env_dir in sorted(p for p in storage.iterdir() if p.is_dir()):
        exact = json.loads((env_dir / "environment.json").read_text())["exact"]
        label = f"{exact['cpu_capability']}/{exact['cpu_isa']}"
        for path in env_dir.glob("*.json"):
            if path.name == "environment.json":
                continue
            for nodeid, measurements in json.loads(path.read_text())["tests"].items():
                for name, entry in measurements.items():
                    if entry["sessions"]:
                        found.setdefault(label, {})[(nodeid, name)] = entry["sessions"][-1]
    return found


def kind(session: dict) -> str:
    counters = session.get("counters") or {}
    variant = session.get("variant", "eager")
    if variant != "eager":
        return variant
    ops = counters.get("ops") or {}
    quantized = any("quant" in op or "int_mm" in op or "_scaled_mm" in op for op in ops)
    dtypes = counters.get("dtypes")
    low = dtypes is not None and any(
        d not in ("float32", "float64", "int64", "int32", "bool") for d in dtypes
    )
    return "eager (quantized/low precision)" if quantized or low else "eager fp32"


def differs(counter: str, a: dict, b: dict) -> bool | None:
    if counter == "graphs":
        keys = ("graphs", "graph_breaks")
        if not any(k in a and k in b for k in keys):
            return None
        return any(a.get(k) != b.get(k) for k in keys if k in a and k in b)
    if counter not in a or counter not in b:
        return None
    if counter == "params":
        return a["params"] != b["params"] or a.get("param_bytes") != b.get("param_bytes")
    if counter == "peak_memory":
        return abs(a[counter] - b[counter]) > 0.01 * max(a[counter], 1)
    return a[counter] != b[counter]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--keep", type=Path, help="save the baselines here instead of a temp folder"
    )
    parser.add_argument("--classes", default=",".join(CLASSES), help="simulated classes to run")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="torchperf-portability-"))
    storage = args.keep or work / "storage"
    storage.mkdir(parents=True, exist_ok=True)
    project = work / "example_project"
    shutil.copytree(
        EXAMPLE,
        project,
        ignore=shutil.ignore_patterns(
            ".torchperf", ".torchperf-report", "__pycache__", "*.egg-info", ".pytest_cache"
        ),
    )
    try:
        for name in args.classes.split(","):
            print(f"saving the example project as {name} {CLASSES[name]} ...", flush=True)
            save(project, storage / name, CLASSES[name], work / f"inductor-{name}")
        envs = {
            f"{name} {label}": sessions
            for name in args.classes.split(",")
            for label, sessions in load(storage / name).items()
        }
        committed = EXAMPLE / ".torchperf"
        if committed.is_dir():
            for label, sessions in load(committed).items():
                envs.setdefault(f"committed {label}", sessions)
    finally:
        shutil.rmtree(work / "example_project", ignore_errors=True)
    print("\nenvironments:", ", ".join(envs))
    table: dict[tuple[str, str], list[int]] = {}
    examples: dict[tuple[str, str], str] = {}
    keys = set().union(*(set(s) for s in envs.values()))
    for key in sorted(keys):
        present = [(label, s[key]) for label, s in envs.items() if key in s]
        for counter in COUNTERS:
            verdicts = []
            for (la, a), (lb, b) in itertools.combinations(present, 2):
                d = differs(counter, a.get("counters") or {}, b.get("counters") or {})
                if d is not None:
                    verdicts.append(d)
                    if d and (kind(a), counter) not in examples:
                        examples[(kind(a), counter)] = f"{key[1]}: {la} vs {lb}"
            if verdicts:
                row = table.setdefault((kind(present[0][1]), counter), [0, 0])
                row[0] += any(verdicts)
                row[1] += 1
    print(f"\n{'kind of measurement':34} {'counter':12} measurements differing")
    for (k, counter), (bad, total) in sorted(table.items()):
        print(
            f"{k:34} {counter:12} {bad} of {total}"
            + (f"   e.g. {examples[(k, counter)]}" if (k, counter) in examples else "")
        )
    if args.keep is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
