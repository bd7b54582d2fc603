"""What a variant item's ``model_ops`` costs: its model's eager ATen op counts.

A variant item (``test_x[amp]``) keeps the op counts of the eager model it was built from, so
an edit of the model that leaves the outputs alone is seen by a save and a compare. The count is
taken in the call that checks eager's outputs are deterministic, which ran anyway; its cost is
the counting dispatch mode's overhead over that call. This prints, per model, the minimum over
``--repeat`` calls (1 intra-op thread, CPU, eval under no_grad) of:

* plain: one call of the model,
* ops only: the call under the op-counting mode alone (``collect_op_counts``, what a variant-only
  item now pays in place of the plain call),
* all counters: the call under FLOP, op and memory counting (``collect_counters``, what an eager
  item pays).

Usage (from the repository root)::

    python benchmarks/model_ops_cost.py [--repeat 5]

Numbers depend on the machine and its load; quote them with the command and machine.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable


def _best(call: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="calls per figure (the minimum)")
    repeat = parser.parse_args().repeat

    import torch
    import torchvision

    from pytest_torchperf.measure.counters import collect_counters, collect_op_counts

    torch.set_num_threads(1)
    layer = torch.nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True)
    models = {
        "mlp (10 Linear, batch 8)": (
            torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(10)]),
            torch.randn(8, 64),
        ),
        "resnet18 (1x3x224x224)": (torchvision.models.resnet18(), torch.randn(1, 3, 224, 224)),
        "encoder (6 layers, 2x64x256)": (
            torch.nn.TransformerEncoder(layer, 6, enable_nested_tensor=False),
            torch.randn(2, 64, 256),
        ),
    }
    print(
        f"{'model':30s} {'plain':>10s} {'ops only':>10s} {'all counters':>13s}  (min of {repeat})"
    )
    for name, (model, x) in models.items():
        model.eval()
        with torch.no_grad():
            model(x)  # warm-up

            def plain(model: torch.nn.Module = model, x: torch.Tensor = x) -> object:
                return model(x)

            figures = [
                _best(plain, repeat),
                _best(lambda p=plain: collect_op_counts(p), repeat),
                _best(lambda p=plain, m=model: collect_counters(p, "cpu", m), repeat),
            ]
        print(
            f"{name:30s} "
            + " ".join(f"{t * 1e3:8.2f} ms" for t in figures[:2])
            + f"  {figures[2] * 1e3:8.2f} ms"
        )


if __name__ == "__main__":
    main()
