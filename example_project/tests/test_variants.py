"""Variants side by side: eager fp32, torch.compile, inference-frozen (fused), AMP and int8.

``@pytest.mark.torchperf(variants=[...])`` turns each test into one item per variant
(``test_resnet18_variants[int8]``), so JUnit XML, ``-k int8`` and ``--torchperf-variants``
work per variant. Each item times its variant interleaved with eager (the speedup is a same-run
ratio), checks its outputs against eager fp32 (relative L2, cosine, max abs, top-1 agreement),
and computes the labelled-batch accuracy given by ``metric=`` on ``data=``.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn
from vision_zoo import TextClassifier, build_resnet18, make_images, make_tokens

ALL_VARIANTS = ["eager", "compiled", "fused", "amp", "int8"]
NUM_CLASSES = 10


def accuracy(logits: torch.Tensor, labels: torch.Tensor) -> float:
    """Top-1 accuracy of a batch: the ``metric=`` every variant is scored with."""
    return (logits.float().argmax(dim=-1) == labels).float().mean().item()


# A small labelled batch, generated deterministically (labels are arbitrary: with random weights
# the accuracy is a fixed number whose change means the numerics changed).
IMAGES = make_images(8, seed=3, size=112)
IMAGE_LABELS = torch.arange(8) % NUM_CLASSES
TOKENS = make_tokens(8, length=32, seed=3)
TOKEN_LABELS = torch.arange(8) % 4


@pytest.mark.torchperf(
    variants=ALL_VARIANTS, group="variants", metric=accuracy, data=(IMAGES, IMAGE_LABELS)
)
def test_resnet18_variants(torchperf, torchperf_variant: str) -> None:
    model: nn.Module = build_resnet18(num_classes=NUM_CLASSES)  # seeded by torchperf (seed=0)
    result = torchperf(model, IMAGES, name="resnet18")
    if result.disabled:
        return
    assert result.variant == torchperf_variant
    if torchperf_variant != "eager":
        print(
            f"{torchperf_variant}: x{result.speedup['median']:.2f} vs eager, "
            f"rel-L2 {result.accuracy['rel_l2']:.1e}, built in {result.build_time:.1f} s"
        )


# Widen the int8 tolerance for this model (its attention logits are sensitive to activation
# quantization: rel-L2 0.006 from fp32 on a CPU with VNNI/AMX, 0.15 on one without VNNI, whose
# int8 products saturate in 16-bit intermediates) and require nothing of the speedups: they
# are reported, and gated against the baseline with --torchperf-compare.
@pytest.mark.torchperf(
    variants=ALL_VARIANTS,
    group="variants",
    metric=accuracy,
    data=(TOKENS, TOKEN_LABELS),
    accuracy={"int8": {"rel_l2": 0.2, "cosine": 0.99}},
)
def test_text_classifier_variants(torchperf) -> None:
    model = TextClassifier(num_classes=4)
    torchperf(model, TOKENS, name="text-classifier")
