"""Models of the example project."""

from __future__ import annotations

import os

import torch
import torchvision
from torch import nn

#: A demonstration knob (README, "Where the time went"): the path of one part of ResNet-18
#: (a block such as ``layer3.1``, or a layer such as ``layer3.1.conv2``) that does its work three
#: times over, a slowdown confined to that part.
SLOW_PART_ENV = "VISION_ZOO_SLOW_PART"


def build_resnet18(num_classes: int = 10) -> nn.Module:
    """A torchvision ResNet-18 with randomly initialised weights (nothing is downloaded).

    Args:
        num_classes: Size of the final classification layer.

    Returns:
        The model, in training mode as torchvision returns it; with ``VISION_ZOO_SLOW_PART``
        set, that part slowed down on purpose (:func:`slow_down`).
    """
    model = torchvision.models.resnet18(weights=None, num_classes=num_classes)
    part = os.environ.get(SLOW_PART_ENV)
    if part:
        slow_down(model.get_submodule(part))
    return model


def slow_down(part: nn.Module, times: int = 3) -> None:
    """Wasted work for demonstrations: ``part`` computes its output ``times`` times and adds
    the extra ones times zero, so the result is unchanged (bit for bit) and its module path too;
    only the time grows."""
    forward = part.forward

    def slowed(x: torch.Tensor) -> torch.Tensor:
        out = forward(x)
        for _ in range(times - 1):
            out = out + 0.0 * forward(x)
        return out

    part.forward = slowed  # type: ignore[method-assign]


def build_mobilenet_v3_small(num_classes: int = 10) -> nn.Module:
    """A torchvision MobileNetV3-Small with randomly initialised weights (nothing is downloaded).

    Depthwise convolutions, hard-swish and squeeze-excitation: a different kernel mix from
    ResNet-18, so a regression in one family of kernels shows up in one test, not both.
    """
    return torchvision.models.mobilenet_v3_small(weights=None, num_classes=num_classes)


class TinyMLP(nn.Module):
    """A small multi-layer perceptron classifier for flat feature vectors.

    ``in_features -> hidden -> hidden -> num_classes`` with ReLU activations and dropout.

    Args:
        in_features: Length of each input feature vector.
        hidden: Width of the two hidden layers.
        num_classes: Number of output logits.
        dropout: Dropout probability between the hidden layers (inactive in ``eval()`` mode).
    """

    def __init__(
        self, in_features: int = 128, hidden: int = 256, num_classes: int = 10, dropout: float = 0.1
    ) -> None:
        super().__init__()
        self.in_features = in_features
        self.hidden = hidden
        self.num_classes = num_classes
        self.net = nn.Sequential(
            nn.Linear(in_features, hidden),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits of shape ``(batch, num_classes)`` for features of shape ``(batch, in_features)``."""
        return self.net(x)
