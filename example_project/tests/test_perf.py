"""Speed and correctness tests of vision_zoo.

Perf tests (marked ``@pytest.mark.torchperf`` or using the ``torchperf`` fixture) are ordinary
tests in a plain ``pytest`` run: each target is timed, nothing is compared. They compare against
stored baselines with ``--torchperf-compare`` and record baselines with ``--torchperf-save``.
``--torchperf-skip`` leaves only the correctness tests, ``--torchperf-only`` only the perf tests.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn
from vision_zoo import (
    TinyMLP,
    build_mobilenet_v3_small,
    build_resnet18,
    make_features,
    make_images,
    preprocess,
)

NUM_CLASSES = 10
IN_FEATURES = 128


@pytest.fixture(scope="module")
def resnet18() -> nn.Module:
    torch.manual_seed(0)  # random weights, but the same ones every run
    return build_resnet18(num_classes=NUM_CLASSES)


@pytest.fixture(scope="module")
def mlp() -> TinyMLP:
    torch.manual_seed(0)
    return TinyMLP(in_features=IN_FEATURES, hidden=256, num_classes=NUM_CLASSES)


# ------------------------------------------------------------------------------------------------
# Perf tests
# ------------------------------------------------------------------------------------------------


def test_resnet18_batch1(torchperf, resnet18: nn.Module) -> None:
    """Single-image latency of ResNet-18 (the fixture times ``resnet18(images)`` in eval mode)."""
    images = make_images(1)
    result = torchperf(resnet18, images, name="resnet18", group="vision")
    print(result)  # shown with -s or on failure: median, p25, IQR, blocks x calls, device, threads


def test_mobilenet_v3_small_batch8(torchperf) -> None:
    """MobileNetV3-Small at batch 8: depthwise convolutions, hard-swish, squeeze-excitation."""
    model = build_mobilenet_v3_small(num_classes=NUM_CLASSES)  # seeded by torchperf (seed=0)
    torchperf(model, make_images(8, size=160), name="mobilenet-v3-small-bs8", group="vision")


# The MLP is sub-millisecond, where timings are relatively noisier: allow 15 % instead of 10 %.
@pytest.mark.torchperf(max_slowdown="15%", group="mlp")
def test_mlp_batch_sizes(torchperf, mlp: TinyMLP) -> None:
    """One test, two measurements: each torchperf(...) call needs its own name."""
    small = torchperf(mlp, make_features(1, IN_FEATURES), name="mlp-bs1")
    large = torchperf(mlp, make_features(64, IN_FEATURES), name="mlp-bs64")
    if large.disabled:  # --torchperf-disable: each target ran once, untimed, so no figures to check
        return
    # Results are ordinary objects: batching amortises per-call overhead, so 64 rows must cost far
    # less than 64 single-row calls.
    assert large.median < 64 * small.median


# No fixture: the whole test body is the timed workload (fixtures are set up once, outside timing).
@pytest.mark.torchperf(name="preprocess-4x256", warmup="0.1s")
def test_preprocess_speed() -> None:
    images = make_images(4, seed=1, size=256)
    out = preprocess(images)
    assert out.shape == (4, 3, 224, 224)


# ------------------------------------------------------------------------------------------------
# Correctness tests (not perf tests: --torchperf-skip keeps them, --torchperf-only skips them)
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("batch", [1, 3])
def test_resnet18_output_shape(resnet18: nn.Module, batch: int) -> None:
    resnet18.eval()
    with torch.inference_mode():
        logits = resnet18(make_images(batch, size=64))
    assert logits.shape == (batch, NUM_CLASSES)
    assert torch.isfinite(logits).all()


@pytest.mark.parametrize("hidden", [16, 256])
def test_mlp_output_shape(hidden: int) -> None:
    model = TinyMLP(in_features=IN_FEATURES, hidden=hidden, num_classes=NUM_CLASSES).eval()
    with torch.inference_mode():
        logits = model(make_features(5, IN_FEATURES))
    assert logits.shape == (5, NUM_CLASSES)


def test_data_is_deterministic() -> None:
    assert torch.equal(make_images(2, seed=3, size=32), make_images(2, seed=3, size=32))
    assert not torch.equal(make_images(2, seed=3, size=32), make_images(2, seed=4, size=32))
    assert torch.equal(make_features(4, seed=7), make_features(4, seed=7))


def test_preprocess_normalises() -> None:
    images = torch.full((2, 3, 64, 64), 0.5)
    out = preprocess(images, size=32)
    assert out.shape == (2, 3, 32, 32)
    expected = (0.5 - torch.tensor([0.485, 0.456, 0.406])) / torch.tensor([0.229, 0.224, 0.225])
    torch.testing.assert_close(out[:, :, 0, 0], expected.expand(2, 3))
