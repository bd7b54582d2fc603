"""vision_zoo: the toy PyTorch project of the pytest-torchperf example.

Two models (a torchvision ResNet-18 with random weights and a small MLP) and deterministic
synthetic data, so that the tests need no downloads and always see the same inputs.
"""

from __future__ import annotations

from .data import make_features, make_images, preprocess
from .models import TinyMLP, build_resnet18

__all__ = ["TinyMLP", "build_resnet18", "make_features", "make_images", "preprocess"]
