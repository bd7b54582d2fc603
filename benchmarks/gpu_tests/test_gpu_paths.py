"""Perf tests that only mean something on a CUDA GPU; run by ``benchmarks/gpu_e2e.sh``.

Not part of the CI suite (``testpaths = ["tests"]``): CI has no GPU. Each test uses
``torchperf_device`` so that on a GPU machine it runs there, and checks what the CUDA path must do:
the variants build and run on the GPU (amp = fp16 autocast there), a device OOM fails only its own
test with the peak memory in the message, and the profiler/NVTX fixtures see CUDA activity.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn


def convnet() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1),
        nn.BatchNorm2d(32),
        nn.ReLU(),
        nn.Conv2d(32, 64, 3, padding=1),
        nn.BatchNorm2d(64),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(64, 10),
    ).eval()


@pytest.mark.torchperf(variants=["eager", "compiled", "fused", "amp", "int8"], max_slowdown="50%")
def test_convnet_variants(
    torchperf, torchperf_device: torch.device, torchperf_variant: str
) -> None:
    model = convnet().to(torchperf_device)
    images = torch.randn(64, 3, 64, 64, device=torchperf_device)
    result = torchperf(model, images, name="convnet-bs64")
    print(result)
    assert result.device.startswith(torchperf_device.type)


@pytest.mark.torchperf(max_slowdown="50%")
def test_linear_stack(torchperf, torchperf_device: torch.device) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(2048, 2048) for _ in range(4)]).to(torchperf_device)
    result = torchperf(model, torch.randn(512, 2048, device=torchperf_device), name="linear-stack")
    print(result)
    if torchperf_device.type == "cuda":
        assert result.clock == "cuda-events", result.clock


@pytest.mark.torchperf
def test_out_of_memory(torchperf, torchperf_device: torch.device) -> None:
    """Must FAIL with the OOM message (peak/total memory), not crash the session."""

    def allocate_a_petabyte() -> torch.Tensor:
        return torch.empty(1 << 50, dtype=torch.uint8, device=torchperf_device)

    torchperf(allocate_a_petabyte, name="oom")


def test_device_still_usable_after_oom(torchperf_device: torch.device) -> None:
    assert torch.ones(4, device=torchperf_device).sum().item() == 4


def test_profiler_and_nvtx(
    torchperf_profiler, torchperf_nvtx, torchperf_device: torch.device
) -> None:
    model = nn.Linear(1024, 1024).to(torchperf_device)
    x = torch.randn(256, 1024, device=torchperf_device)
    with torch.no_grad(), torchperf_profiler() as prof:
        for _ in range(3):
            with torchperf_nvtx("linear"):
                model(x)
    rows = prof.top_ops()
    print(prof.table(5))
    if torchperf_device.type == "cuda":
        assert any(row["self_device"] > 0 for row in rows), rows
