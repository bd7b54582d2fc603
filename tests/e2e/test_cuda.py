"""The CUDA paths, where a CUDA GPU is present (skipped elsewhere: this project's CI has none).

Each is small (tiny models, the e2e ini's short sampling). On a GPU machine:
``python -m pytest -n 0 -p no:cacheprovider tests/e2e/test_cuda.py tests/e2e/test_devices.py``.
"""

from __future__ import annotations

import gc
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_torchperf.store.records import record_from_benchmark


def _records(path: Path) -> dict[str, dict[str, Any]]:
    """The measurement records of a results file, by measurement name."""
    benchmarks = json.loads(path.read_text())["benchmarks"]
    records = [record_from_benchmark(bench, None) for bench in benchmarks]
    return {r["name"]: r for r in records if r is not None}


def _cuda() -> bool:
    import torch  # already loaded by tests/e2e/conftest.py

    return bool(torch.cuda.is_available())


pytestmark = pytest.mark.skipif(
    not _cuda(), reason="needs a CUDA GPU (torch.cuda.is_available() is False)"
)


def test_peak_memory_is_not_lowered_by_garbage_freed_during_the_counted_call() -> None:
    """Garbage holding CUDA memory (an earlier test's tensors in a reference cycle) is collected
    before the counted call: a collection inside the call would free it there and take its size
    off the peak (a compare read +62.7 % of peak memory on unchanged code)."""
    import torch

    from pytest_torchperf.measure.counters import collect_counters

    junk = SimpleNamespace(tensor=torch.empty(3 << 20, dtype=torch.uint8, device="cuda"))
    junk.me = junk  # a reference cycle: freed only by the garbage collector
    del junk

    def call() -> torch.Tensor:
        gc.collect()  # as an automatic collection may, at any allocation
        return torch.empty(8 << 20, dtype=torch.uint8, device="cuda")

    counted = collect_counters(call, "cuda")
    assert counted["peak_memory"] >= 8 << 20, counted["peak_memory"]


def test_a_cuda_measurement_is_clocked_by_cuda_events_without_the_cpu_guards(
    perf: pytest.Pytester,
) -> None:
    """Its device and clock are CUDA's, the CPU notions (CPU share, calibration kernel) are not
    measured, so a CPU share limit does not refuse its timing; it is stored under a cuda-...
    environment, and a compare of the unchanged model passes, counters (peak memory) included."""
    perf.makepyfile("""
        import torch

        def test_gpu(torchperf):
            torch.manual_seed(0)
            model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU()).cuda()
            r = torchperf(model, torch.randn(64, 256, device="cuda"), name="lin")
            assert r.device.startswith("cuda") and r.clock == "cuda-events", (r.device, r.clock)
            assert r.cpu_share is None and r.calibration is None, (r.cpu_share, r.calibration)
    """)
    save = perf.runpytest(
        "--torchperf-save", "--torchperf-min-cpu-share=0.9", "--torchperf-json=r.json"
    )
    save.assert_outcomes(passed=1)
    save.stdout.fnmatch_lines(["torchperf: stored 1 measurement: timing for 1 of 1*"])
    (env,) = [p.name for p in (perf.path / ".torchperf").iterdir() if p.is_dir()]
    assert env.startswith("cuda-"), env
    record = _records(perf.path / "r.json")["lin"]
    assert record["device"].startswith("cuda") and record["clock"] == "cuda-events", record
    assert record["cpu_share"] is None and record["calibration"] is None, record
    assert record["counters"]["peak_memory"] > 0, record["counters"]
    assert record["passes"][0]["settle"]["blocks"] > 0, record["passes"]  # settled first

    compare = perf.runpytest("--torchperf-compare", "--torchperf-max-slowdown=900%")
    compare.assert_outcomes(passed=1)
    compare.stdout.fnmatch_lines(["*lin*pass*"])


@pytest.mark.any_device  # test_body takes the accelerator on purpose
def test_on_a_gpu_machine_cpu_targets_stay_cpu_and_a_whole_body_takes_the_gpu(
    perf: pytest.Pytester,
) -> None:
    """A closure over a CPU tensor is a CPU measurement (CPU clock, CPU share measured) with a
    GPU present; a whole test body, which names no device, is timed on the GPU."""
    perf.makepyfile("""
        import pytest, torch

        x = torch.randn(64, 64)

        def test_cpu_closure(torchperf):
            r = torchperf(lambda: x @ x, name="cpu")
            assert (r.device, r.clock) == ("cpu", "cpu"), (r.device, r.clock)
            assert r.cpu_share is not None

        @pytest.mark.torchperf(name="body")
        def test_body():
            torch.ones(64, 64, device="cuda").sum()
    """)
    result = perf.runpytest("--torchperf-json=r.json")
    result.assert_outcomes(passed=2)
    records = _records(perf.path / "r.json")
    assert records["cpu"]["device"] == "cpu", records["cpu"]
    assert records["body"]["device"].startswith("cuda"), records["body"]
    assert records["body"]["clock"] == "cuda-events", records["body"]


def test_amp_on_cuda_autocasts_to_float16(perf: pytest.Pytester) -> None:
    """amp is bf16 on CPU and fp16 on CUDA, within its default accuracy limits there."""
    perf.makepyfile("""
        import pytest, torch

        @pytest.mark.torchperf(variants=["eager", "amp"])
        def test_mlp(torchperf):
            torch.manual_seed(0)
            model = torch.nn.Sequential(
                torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)
            ).cuda()
            torchperf(model, torch.randn(32, 64, device="cuda"), name="mlp")
    """)
    result = perf.runpytest()
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*mlp[[]amp[]]: torch.autocast('cuda', dtype=float16)*"])


SPUN = """
import torch

SPIN = {spin}


class Spun(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU())

    def forward(self, x):
        out = self.body(x)
        if SPIN:
            torch.cuda._sleep(SPIN)  # a kernel that no ATen op counter sees
        return out


def test_gpu(torchperf):
    torch.manual_seed(0)
    torchperf(Spun().cuda(), torch.randn(256, 512, device="cuda"), name="spun")
"""


def test_kernel_time_is_stored_per_process_and_an_added_kernel_fails_on_it(
    perf: pytest.Pytester,
) -> None:
    """A CUDA save stores each process's own kernel time; an unchanged compare notes the kernel
    verdict; a spin kernel (no ATen op: the counters cannot see it) fails on its kernel time,
    naming the new kernel."""
    perf.makepyfile(SPUN.format(spin=0))
    save = perf.runpytest("--torchperf-save", "--torchperf-processes=2")
    save.assert_outcomes(passed=1)
    (path,) = [
        p for p in (perf.path / ".torchperf").glob("*/*.json") if p.name != "environment.json"
    ]
    (entry,) = json.loads(path.read_text())["tests"].values()
    sessions = entry["spun"]["sessions"]
    assert len(sessions) == 2 and all(s["kernels"]["per_call"] > 0 for s in sessions), sessions
    assert sessions[0]["kernels"] != sessions[1]["kernels"]  # each process profiled its own
    assert sessions[0]["gate"]["kind"] == "time-and-kernels"

    same = perf.runpytest("--torchperf-compare", "--torchperf-max-slowdown=900%")
    same.assert_outcomes(passed=1)
    same.stdout.fnmatch_lines(["*note: GPU kernel time *vs baseline*"])

    perf.makepyfile(SPUN.format(spin=2_000_000))  # about a millisecond per call
    spun = perf.runpytest("--torchperf-compare", "--torchperf-max-slowdown=900%")
    spun.assert_outcomes(failed=1)
    spun.stdout.fnmatch_lines(
        ["*spun: GPU kernel time +*vs baseline*every profiler session over it*new kernel*"]
    )
    spun.stdout.fnmatch_lines(["*FAIL (*kernel time*)*"])
