#!/usr/bin/env bash
# The one GPU check: everything a GPU machine must show, in under eight minutes on an H100/H200,
# its logs under $OUT (or /tmp/gpu_e2e).
#
#   bash benchmarks/gpu_e2e.sh
#
# 1. The machine (GPU, clocks, driver, torch) and the CUDA primitives (benchmarks/gpu_check.py).
# 2. benchmarks/gpu_verdicts.py: process noise of wall time (before/after settling) and kernel
#    time, +5 % / +10 % spin-kernel slowdowns caught, false failures of unchanged code, amp and
#    compiled speedup spread (gpu-verdicts.json; budget GPU_VERDICTS_BUDGET seconds, 240).
# 3. The README workflow on ResNet-18 (eager, amp) and an MLP: save (3 processes), compare
#    unchanged, compare with a spin kernel adding 5 % and 10 % of the GPU time.
# 4. The suite's GPU tests (tests/e2e/test_cuda.py and tests/unit/test_kernel_time.py).
# GPU_E2E_SUITE=1 adds the whole suite at the end (about 5 minutes with -n 14).
set -u
out=${OUT:-/tmp/gpu_e2e}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
exec > >(tee "$out/all.log") 2>&1
here=$(pwd)
step() {
    local limit=$1; shift
    echo "=== $* (limit ${limit}s)"
    local start=$SECONDS
    timeout "$limit" "$@"
    echo "=== rc=$? after $((SECONDS - start))s"
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,persistence_mode \
    --format=csv
python3 -c "import sys, torch; print(sys.version.split()[0], torch.__version__, 'cuda', torch.version.cuda)"
python3 -c "import pynvml" 2>/dev/null && echo "nvidia-ml-py: present" || echo "nvidia-ml-py: ABSENT (clock guard off)"
python3 -m pip install -q --no-deps --no-build-isolation -e . -e ./example_project 2>&1 | tail -2
step 40 python3 benchmarks/gpu_check.py

step $(( ${GPU_VERDICTS_BUDGET:-240} + 40 )) python3 benchmarks/gpu_verdicts.py \
    --budget "${GPU_VERDICTS_BUDGET:-240}" --out "$out/gpu-verdicts.json"

# The README workflow on a project of its own; SPIN=0.05 appends a spin kernel lasting 5 % of
# the model's GPU time (calibrated in the test process: no ATen op, so only timing sees it).
proj=$(mktemp -d)
cat > "$proj/test_gpu_models.py" <<'PY'
import os

import pytest
import torch
import torchvision
from torch import nn

SPIN = float(os.environ.get("SPIN", "0"))


def spin_cycles(model, x):
    """Cycles of torch.cuda._sleep lasting SPIN of the model's GPU time per call."""
    if not SPIN:
        return 0
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with torch.no_grad():
        for _ in range(20):
            model(x)
        start.record()
        for _ in range(50):
            model(x)
        end.record()
        end.synchronize()
        per_call = start.elapsed_time(end) / 50
        start.record()
        torch.cuda._sleep(1_000_000)
        end.record()
        end.synchronize()
    return int(SPIN * per_call / start.elapsed_time(end) * 1_000_000)


class Spun(nn.Module):
    def __init__(self, model, cycles):
        super().__init__()
        self.model, self.cycles = model, cycles

    def forward(self, x):
        out = self.model(x)
        if self.cycles:
            torch.cuda._sleep(self.cycles)
        return out


@pytest.mark.torchperf(variants=["eager", "amp"])
def test_resnet18(torchperf, torchperf_variant):
    model = torchvision.models.resnet18().cuda().eval()
    x = torch.randn(32, 3, 224, 224, device="cuda")
    torchperf(Spun(model, spin_cycles(model, x)), x, name="resnet18-bs32")


def test_mlp(torchperf):
    model = nn.Sequential(
        nn.Linear(2048, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 1000)
    ).cuda()
    x = torch.randn(512, 2048, device="cuda")
    torchperf(Spun(model, spin_cycles(model, x)), x, name="mlp-bs512")
PY
printf '[pytest]\ntorchperf_min_time = 0.5s\n' > "$proj/pytest.ini"
cd "$proj"
step 90 python3 -m pytest -p no:cacheprovider -q --torchperf-save --torchperf-processes 3 \
    --torchperf-json="$out/readme-save.json"
cp -r .torchperf "$out/readme-baselines"
for spin in 0 0.05 0.10; do
    SPIN=$spin step 45 python3 -m pytest -p no:cacheprovider -q -rA --torchperf-compare \
        --torchperf-json="$out/readme-compare-$spin.json" 2>&1 | grep -E "torchperf|PASS|FAIL|kernel|launch-bound|passed|failed"
done
cd "$here"

step 60 python3 -m pytest -p no:cacheprovider -q -n 0 -rA tests/e2e/test_cuda.py tests/e2e/test_devices.py \
    tests/unit/test_kernel_time.py tests/unit/test_gpu_clocks.py

if [ -n "${GPU_E2E_SUITE:-}" ]; then
    step 330 python3 -m pytest tests -p no:cacheprovider -q -n 14 -rf \
        --junitxml "$out/suite_junit.xml" 2>&1 | tee "$out/suite.log" | grep -E "FAILED|ERROR|passed|failed"
fi
echo "=== done in ${SECONDS}s"
