"""The other fixtures, as a project would use them beside its perf tests.

- ``torchperf_device``: the device to run on (``--torchperf-device``; a real accelerator if present,
  else cpu; an absent device skips the test with the reason).
- ``torchperf_timer``: time any callable with the same block protocol; shown in the summary, not
  compared or saved unless ``gate=True``.
- ``torchperf_profiler`` + ``torchperf_nvtx``: a torch.profiler pass with named ranges (NVTX
  ranges for Nsight Systems on CUDA, profiler ranges everywhere); the trace goes to
  ``.torchperf-report/traces/`` and the top ops into the test's report.
- ``torchperf_quantized_model``: an int8 copy of a model with the recommended stack for the
  device (torchao dynamic int8 + torch.compile for this MLP), measured like any model.
"""

from __future__ import annotations

import torch
from vision_zoo import TinyMLP, make_features, make_images, preprocess

IN_FEATURES = 128


def test_mlp_on_the_selected_device(torchperf, torchperf_device: torch.device) -> None:
    model = TinyMLP(in_features=IN_FEATURES).to(torchperf_device)
    features = make_features(64, IN_FEATURES).to(torchperf_device)
    result = torchperf(model, features, name="mlp-bs64-device")
    assert result.device.startswith(torchperf_device.type)


def test_preprocess_timer(torchperf_timer) -> None:
    images = make_images(4, seed=1, size=256)
    timing = torchperf_timer(preprocess, images, name="preprocess-timer")
    if not timing.disabled:
        assert timing.median > 0


def test_profile_one_forward(torchperf_profiler, torchperf_nvtx) -> None:
    model = TinyMLP(in_features=IN_FEATURES).eval()
    features = make_features(32, IN_FEATURES)
    with torch.no_grad(), torchperf_profiler() as prof:
        for _ in range(3):
            with torchperf_nvtx("mlp-forward"):
                model(features)
    ops = {row["op"] for row in prof.top_ops()}
    assert "aten::addmm" in ops  # the three Linear layers
    assert prof.trace.is_file()


def test_int8_mlp(torchperf_quantized_model, torchperf) -> None:
    model = TinyMLP(in_features=IN_FEATURES)
    features = make_features(64, IN_FEATURES)
    quantized = torchperf_quantized_model(model, features)  # skipped with the reason if unavailable
    assert quantized.torchperf_quantization.quantized == 3
    torchperf(quantized, features, name="mlp-int8-bs64", max_slowdown="20%")
