"""GPU verdicts, measured: process noise of wall and kernel time, and what the gates catch.

For each model (a 3-layer MLP eager / amp / compiled, torchvision ResNet-18 eager / amp), fresh
processes of unchanged code each time one pass the way the plugin did before settling (0.2 s
warm-up, then timing: "before") and one the way it does now (blocks settled first: "after"),
then profile the kernels (3 sessions). Then processes of the same code slowed by a spin kernel
(``torch.cuda._sleep``: no ATen op, so only timing can see it) adding +5 % and +10 % of the
model's kernel time. From those figures, with the plugin's own judges:

- process noise (robust CV and max/min) of wall time before/after and of kernel time;
- kernel-time verdicts (``kinds/kernels/judge_times.py`` at ``max_kernel_slowdown`` 3 %) and wall-time
  first-pass verdicts (10 %, widened by the baseline's noise, bounded at 3x) of every unchanged
  process against baselines of 5 other unchanged processes (false failures), and of every
  slowed process (slowdowns caught);
- the amp and compiled speedups' spread between processes (target: within 5 %);
- per process: SM clocks (NVML, when installed), busy share, kernel-name set.

    python benchmarks/gpu_verdicts.py --out $OUT/gpu-verdicts.json          # on a GPU machine
    python benchmarks/gpu_verdicts.py --device cpu --processes 3 --slowed 2 # smoke test on CPU

Each child's result is appended to ``--out`` as it comes (a run cut short keeps what it took);
``--budget`` seconds stops starting children. On CPU there are no kernels: only wall time.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

GROUPS = {"mlp": ("eager", "amp", "compiled"), "resnet18": ("eager", "amp")}


def build(model: str, device: str) -> tuple[Any, Any]:
    import torch

    torch.manual_seed(0)
    small = device == "cpu"  # the CPU smoke test: same code, models a CPU times quickly
    if model == "mlp":
        width = 256 if small else 4096
        net = torch.nn.Sequential(
            torch.nn.Linear(width // 2, width),
            torch.nn.ReLU(),
            torch.nn.Linear(width, width),
            torch.nn.ReLU(),
            torch.nn.Linear(width, 1000),
        )
        x = torch.randn(16 if small else 512, width // 2)
    else:
        import torchvision

        net = torchvision.models.resnet18()
        x = torch.randn(1, 3, 64, 64) if small else torch.randn(32, 3, 224, 224)
    return net.to(device).eval(), x.to(device)


def variant_call(net: Any, x: Any, variant: str, device: str, spin: int) -> Any:
    import torch

    target = torch.compile(net) if variant == "compiled" else net
    dtype = torch.float16 if device.startswith("cuda") else torch.bfloat16

    def call() -> Any:
        with torch.no_grad():
            if variant == "amp":
                with torch.autocast(device.split(":")[0], dtype=dtype):
                    out = target(x)
            else:
                out = target(x)
            if spin and device.startswith("cuda"):
                torch.cuda._sleep(spin)  # a kernel no ATen op counter sees
            elif spin:
                torch.mm(x.flatten(1)[:, :64], torch.ones(64, spin))  # CPU smoke: extra work
            return out

    return call


def timed_pass(call: Any, device: str, settle: bool) -> dict[str, Any]:
    """One pass the plugin's way (its Measurer's block runner and sampling)."""
    from pytest_torchperf.core.stats import summarize
    from pytest_torchperf.measure.gpu_clocks import clock_reader, summarize_readings
    from pytest_torchperf.measure.sampling import GPU_SETTLE, collect
    from pytest_torchperf.measure.timing import Measurer
    from pytest_torchperf.options.measure_options import MeasureOptions

    options = MeasureOptions(min_time=0.3, inference=False)
    measurer = Measurer(call, (), {}, options, device=device, calibrate=False)
    run_block, clock = measurer.block_runner()
    reader = clock_reader(device) if device.startswith("cuda") else "cpu"
    readings: list[Any] = []
    raw = collect(
        run_block,
        min_time=options.min_time,
        warmup=options.warmup,
        settle=GPU_SETTLE if settle else None,
        after_block=(lambda: readings.append(reader.read()))
        if not isinstance(reader, str)
        else None,
    )
    clocks = summarize_readings(readings)
    return {
        "p25": summarize(raw.times).p25,
        "clock": clock,
        "settle_blocks": raw.settle_blocks,
        "settled": raw.settled,
        "gpu_clock": clocks.to_record() if clocks else reader if isinstance(reader, str) else None,
    }


def child(model: str, spin: int, device: str, variants: tuple[str, ...]) -> dict[str, Any]:
    """One fresh process: ``variants`` of ``model``."""
    from pytest_torchperf.kinds.kernels.measure import KernelTimeUnavailable, kernel_times

    net, x = build(model, device)
    found: dict[str, Any] = {}
    for variant in variants:
        call = variant_call(net, x, variant, device, spin)
        for _ in range(3):
            call()  # compile, lazy init
        before = timed_pass(call, device, settle=False)
        after = timed_pass(call, device, settle=True)
        entry: dict[str, Any] = {"before": before, "after": after}
        if device.startswith("cuda"):
            try:
                kt = kernel_times(call, device, after["p25"])
                entry["kernels"] = kt.to_record()
                entry["busy"] = kt.busy
                entry["kernel_names"] = sorted(k.name for k in kt.kernels)
            except KernelTimeUnavailable as exc:
                entry["kernels_unavailable"] = str(exc)
        found[variant] = entry
    return found


def calibrate_spin(model: str, device: str) -> dict[str, Any]:
    """The model's kernel time (wall time on CPU) and the spin per +1 %."""
    import torch

    net, x = build(model, device)
    call = variant_call(net, x, "eager", device, 0)
    for _ in range(5):
        call()
    if not device.startswith("cuda"):
        per_call = timed_pass(call, device, settle=False)["p25"]
        return {"per_call": per_call, "spin_per_percent": 1}
    from pytest_torchperf.kinds.kernels.measure import kernel_times

    per_call = kernel_times(call, device, None).per_call
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    torch.cuda._sleep(1_000_000)
    end.record()
    end.synchronize()
    cycles_per_second = 1_000_000 / (start.elapsed_time(end) / 1000)
    return {"per_call": per_call, "spin_per_percent": per_call / 100 * cycles_per_second}


def spread(values: list[float]) -> dict[str, float]:
    from pytest_torchperf.core.stats import robust_cv

    return {
        "n": len(values),
        "robust_cv": robust_cv(values) if len(values) > 2 else float("nan"),
        "max_over_min": max(values) / min(values) - 1 if values else float("nan"),
    }


def analyse(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Noise, verdicts and speedup spread from the children's rows."""
    from pytest_torchperf.judge.tolerance import effective_tolerance, widened_beyond
    from pytest_torchperf.kinds.kernels.judge_times import judge_kernels
    from pytest_torchperf.kinds.kernels.measure import KernelTimes

    report: dict[str, Any] = {}
    for model, variants in GROUPS.items():
        same = [
            r["result"] for r in rows if r["model"] == model and r["slow"] == 0 and "result" in r
        ]
        for variant in variants:
            runs = [r[variant] for r in same if variant in r]
            if not runs:
                continue
            key = f"{model}-{variant}"
            entry: dict[str, Any] = {
                "wall_before": spread([r["before"]["p25"] for r in runs]),
                "wall_after": spread([r["after"]["p25"] for r in runs]),
            }
            kernels = [KernelTimes.from_record(r["kernels"]) for r in runs if r.get("kernels")]
            if kernels:
                entry["kernel"] = spread([k.per_call for k in kernels])
                entry["busy"] = [r.get("busy") for r in runs]
                entry["kernel_sets"] = len({tuple(r.get("kernel_names") or ()) for r in runs})
            if variant != "eager":
                speedups = [
                    r["eager"]["after"]["p25"] / r[variant]["after"]["p25"]
                    for r in same
                    if variant in r and "eager" in r
                ]
                entry["speedup"] = {"values": speedups, **spread(speedups)}
            report[key] = entry
        # Verdicts of eager: every unchanged process against baselines of 5 others; every slowed one.
        eager = [r["eager"] for r in same if "eager" in r]
        verdicts: dict[str, Any] = {}
        for label, pool in (
            ("unchanged", eager),
            *(
                (
                    f"+{int(s * 100)}%",
                    [
                        r["result"]["eager"]
                        for r in rows
                        if r["model"] == model and r["slow"] == s and "result" in r
                    ],
                )
                for s in sorted({r["slow"] for r in rows if r["slow"]})
            ),
        ):
            kernel_fail = wall_fail = wall_nogate = total = 0
            for i, cand in enumerate(pool):
                others = [e for j, e in enumerate(eager) if label != "unchanged" or j != i]
                for base in itertools.islice(itertools.combinations(others, 5), 20):
                    total += 1
                    stats = [b["after"]["p25"] for b in base]
                    limit, _ = effective_tolerance(0.10, stats)
                    ratio = cand["after"]["p25"] / statistics.median(stats)
                    if widened_beyond(limit, 0.10, 3.0):
                        wall_nogate += 1
                    elif ratio > 1 + limit:
                        wall_fail += 1
                    if cand.get("kernels") and all(b.get("kernels") for b in base):
                        v = judge_kernels(
                            "m",
                            KernelTimes.from_record(cand["kernels"]),
                            [KernelTimes.from_record(b["kernels"]) for b in base],
                            0.03,
                            3.0,
                        )
                        kernel_fail += v.outcome.value == "fail"
            verdicts[label] = {
                "verdicts": total,
                "kernel_fail": kernel_fail,
                "wall_first_pass_over_limit": wall_fail,
                "wall_no_gate": wall_nogate,
            }
        report[f"{model}-verdicts"] = verdicts
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--processes", type=int, default=8, help="unchanged processes per model")
    parser.add_argument(
        "--variant-processes", type=int, default=5, help="of them, those timing amp and compiled"
    )
    parser.add_argument("--slowed", type=int, default=3, help="processes per slowdown and model")
    parser.add_argument("--slowdowns", default="0.05,0.10")
    parser.add_argument("--models", default="mlp,resnet18")
    parser.add_argument("--budget", type=float, default=320.0, help="seconds to start children")
    parser.add_argument("--out", type=Path, default=Path("gpu-verdicts.json"))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--spin", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--variants", default="eager", help=argparse.SUPPRESS)
    parser.add_argument("--calibrate", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(
            json.dumps(child(args.child, args.spin, args.device, tuple(args.variants.split(","))))
        )
        return 0
    if args.calibrate:
        print(json.dumps(calibrate_spin(args.calibrate, args.device)))
        return 0

    started = time.monotonic()
    rows: list[dict[str, Any]] = []
    args.out.write_text("")

    def run(*extra: str) -> dict[str, Any] | str:
        cmd = [sys.executable, __file__, "--device", args.device, *extra]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=os.environ)
        if done.returncode:
            return done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed"
        parsed: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return parsed

    slowdowns = [float(s) for s in args.slowdowns.split(",") if s]
    for model in args.models.split(","):
        calibration = run("--calibrate", model)
        print(f"{model}: calibration {calibration}", flush=True)
        plan = [0.0] * args.processes
        for slow in slowdowns:
            plan += [slow] * args.slowed
        for index, slow in enumerate(plan):
            variants = GROUPS[model] if index < args.variant_processes else ("eager",)
            if time.monotonic() - started > args.budget:
                print(f"budget of {args.budget:.0f} s spent: no more children", flush=True)
                break
            spin = (
                round(slow * 100 * calibration["spin_per_percent"])
                if slow and isinstance(calibration, dict)
                else 0
            )
            t0 = time.monotonic()
            result = run("--child", model, "--spin", str(spin), "--variants", ",".join(variants))
            row = {"model": model, "slow": slow, "spin": spin, "seconds": time.monotonic() - t0}
            row["result" if isinstance(result, dict) else "error"] = result
            rows.append(row)
            with args.out.open("a") as handle:
                handle.write(json.dumps(row) + "\n")
            eager = result.get("eager", {}) if isinstance(result, dict) else {}
            print(
                f"{model} slow={slow:.2f}: {row['seconds']:.0f} s, wall before "
                f"{eager.get('before', {}).get('p25', 0) * 1e6:.1f} us, after "
                f"{eager.get('after', {}).get('p25', 0) * 1e6:.1f} us, kernels "
                f"{(eager.get('kernels') or {}).get('per_call', 0) * 1e6:.1f} us, busy "
                f"{eager.get('busy')}" + (f" ERROR {result}" if isinstance(result, str) else ""),
                flush=True,
            )
    report = analyse(rows)
    print(json.dumps(report, indent=1, default=str))
    with args.out.open("a") as handle:
        handle.write(json.dumps({"analysis": report}, default=str) + "\n")
    print(f"done in {time.monotonic() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
