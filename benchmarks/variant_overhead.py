"""What each variant costs beyond its sampling budget and build time, and the speedups seen.

For each model and variant this measures one ``torchperf`` item the way the plugin runs it
(``run.variant_run.measure_variants`` with the variant plus the eager reference, timed interleaved),
and prints:

* build: seconds to build the variant including its first (compiling) call,
* budget: the sampling budget, ``min_time`` for each of the two interleaved variants,
* wall: the whole measurement,
* extra = wall - build - budget: our overhead (output checks, accuracy, counters, dynamo
  explain for compiled variants, warm-up, calibration blocks, profiling in save mode),
* speedup vs eager (median of interleaved rounds) and relative L2 error vs eager fp32.

Usage (from the repository root, with the example project installed)::

    python benchmarks/variant_overhead.py                 # warm inductor cache, measure-only mode
    python benchmarks/variant_overhead.py --save          # as in a --torchperf-save run
    python benchmarks/variant_overhead.py --cold          # fresh inductor cache: cold compiles

Numbers depend on the machine and its load; quote them with the command and machine.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--min-time", type=float, default=0.5, help="seconds per variant (0.5)")
    parser.add_argument("--save", action="store_true", help="measure as --torchperf-save does")
    parser.add_argument("--cold", action="store_true", help="use an empty inductor cache")
    parser.add_argument("--models", default="resnet18,text", help="resnet18,text")
    args = parser.parse_args()
    if args.cold:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor-cold-")
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")

    import torch

    from pytest_torchperf.measure.torch_state import restore, snapshot
    from pytest_torchperf.options.measure_options import parse_layer, resolve
    from pytest_torchperf.options.settings import RunSettings
    from pytest_torchperf.run.context import RunContext
    from pytest_torchperf.run.saving import flush
    from pytest_torchperf.run.state import TestState
    from pytest_torchperf.run.variant_run import measure_variants

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "example_project"))
    from vision_zoo import TextClassifier, build_resnet18, make_images, make_tokens

    models = {
        "resnet18": (lambda: build_resnet18(num_classes=10), make_images(8, seed=3, size=112)),
        "text": (lambda: TextClassifier(num_classes=4), make_tokens(8, length=32, seed=3)),
    }
    storage = Path(tempfile.mkdtemp(prefix="torchperf-bench-"))
    settings = RunSettings(storage=storage, save=args.save)
    ctx = RunContext(settings)
    print(
        f"torch {torch.__version__}, threads 1, min_time {args.min_time}s per variant, "
        f"{'save' if args.save else 'measure-only'} mode, "
        f"{'cold' if args.cold else 'warm'} inductor cache, cpu count {os.cpu_count()}, "
        f"load {os.getloadavg()[0]:.2f}"
    )
    header = (
        f"{'model':10} {'variant':9} {'build s':>8} {'budget s':>9} {'wall s':>7} "
        f"{'extra s':>8} {'speedup':>8} {'rel-L2':>9}"
    )
    print(header)
    print("-" * len(header))
    for model_name in args.models.split(","):
        build, inputs = models[model_name]
        for variant in ("eager", "compiled", "fused", "amp", "int8"):
            options = resolve(
                parse_layer({"min_time": args.min_time, "variants": [variant]}, "bench")
            )
            state = TestState()
            saved = snapshot()
            torch.manual_seed(0)
            model = build()
            start = time.perf_counter()
            results = measure_variants(
                ctx,
                state,
                f"bench::{model_name}[{variant}]",
                model_name,
                model,
                (inputs,),
                {},
                options,
                (variant,),
            )
            flush(ctx, state)
            wall = time.perf_counter() - start
            restore(saved, reset_dynamo=True)
            result = results[variant]
            built = result.build_time or 0.0
            # eager alone is one timed variant; any other is timed interleaved with eager.
            budget = args.min_time * (1 if variant == "eager" else 2)
            speedup = f"x{result.speedup['median']:.2f}" if result.speedup else "-"
            rel = f"{result.accuracy['rel_l2']:.1e}" if result.accuracy else "-"
            print(
                f"{model_name:10} {variant:9} {built:8.1f} {budget:9.1f} {wall:7.1f} "
                f"{wall - built - budget:8.1f} {speedup:>8} {rel:>9}",
                flush=True,
            )


if __name__ == "__main__":
    main()
