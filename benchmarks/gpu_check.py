"""Exercise the CUDA paths of pytest-torchperf on a real GPU and print what happened.

Run on a machine with an NVIDIA GPU (one command, about a minute):

    python3 benchmarks/gpu_check.py

It checks, and prints figures for: device selection (``auto`` -> cuda, ``cuda:N`` bounds), block
timing with CUDA events vs synchronize + perf_counter (they should agree within a few percent for
a GPU-bound model, while an unsynchronised host clock would under-report), the peak-memory counter
(``max_memory_allocated`` after a reset), the profiler with CUDA activity (self device times
non-zero), NVTX ranges (push/pop succeed) and AMP fp16 outputs being fp16. On a machine without a
GPU it says so and exits 0, so it is safe to run anywhere.
"""

from __future__ import annotations

import sys
import time


def main() -> int:
    import torch

    from pytest_torchperf.measure.counters import collect_counters
    from pytest_torchperf.measure.devices import DeviceUnavailable, select_device
    from pytest_torchperf.measure.profiling import Profiler, nvtx_range
    from pytest_torchperf.measure.timing import Measurer
    from pytest_torchperf.options.measure_options import MeasureOptions

    print(f"torch {torch.__version__}, cuda available: {torch.cuda.is_available()}")
    if not torch.cuda.is_available():
        print("no CUDA GPU here: nothing to check (CPU paths are covered by the test suite)")
        return 0
    print(f"GPU: {torch.cuda.get_device_name(0)}, {torch.cuda.device_count()} device(s)")
    ok = True

    device = select_device("auto")
    print(f"select_device('auto') -> {device}")
    ok &= device.type == "cuda"
    try:
        select_device(f"cuda:{torch.cuda.device_count()}")
        print("select_device past the last GPU did not raise")
        ok = False
    except DeviceUnavailable as exc:
        print(f"select_device past the last GPU -> skipped: {exc}")

    model = torch.nn.Sequential(*[torch.nn.Linear(4096, 4096) for _ in range(8)]).to(device)
    x = torch.randn(256, 4096, device=device)
    options = MeasureOptions(min_time=0.5, warmup=0.2)
    events = Measurer(model, (x,), {}, options).sample()
    print(
        f"events clock: {events.clock}, median per call "
        f"{sorted(events.raw.times)[len(events.raw.times) // 2] * 1e3:.3f} ms, "
        f"{events.raw.number_per_block} calls/block"
    )

    # Same model clocked by synchronize + perf_counter (what the 'sync' clock does).
    with torch.inference_mode():
        for _ in range(5):
            model(x)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(20):
            model(x)
        torch.cuda.synchronize()
        sync_per_call = (time.perf_counter() - t0) / 20
        t0 = time.perf_counter()
        for _ in range(20):
            model(x)
        unsynced = (time.perf_counter() - t0) / 20  # launches only: must look much faster
        torch.cuda.synchronize()
    event_median = sorted(events.raw.times)[len(events.raw.times) // 2]
    print(
        f"sync clock per call {sync_per_call * 1e3:.3f} ms; events/sync ratio "
        f"{event_median / sync_per_call:.3f}; unsynchronised host clock {unsynced * 1e3:.3f} ms "
        f"(launch time only)"
    )
    ok &= 0.8 < event_median / sync_per_call < 1.25

    with torch.inference_mode():
        counters = collect_counters(lambda: model(x), str(device), module=model)
    expected_act = 256 * 4096 * 4
    print(
        f"counters: flops {counters['flops']:,}, peak memory {counters['peak_memory']:,} B "
        f"(one activation is {expected_act:,} B), params {counters['params']:,}"
    )
    ok &= counters["peak_memory"] >= expected_act

    with Profiler(device=str(device), iterations=3) as prof:
        with torch.inference_mode():
            for _ in range(3):
                model(x)
        torch.cuda.synchronize()
    rows = prof.top_ops(5)
    print("profiler top ops (per iteration):")
    print(prof.table(5))
    ok &= any(r["self_device"] > 0 for r in rows)

    with nvtx_range("gpu-check"):
        model(x)
    print("nvtx_range: push/pop ok")

    with torch.inference_mode(), torch.autocast("cuda", dtype=torch.float16):
        out = model(x)
    print(f"autocast fp16 output dtype: {out.dtype}")
    ok &= out.dtype == torch.float16

    print("ALL CUDA CHECKS PASSED" if ok else "SOME CUDA CHECKS FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
