"""vision_zoo: the toy PyTorch project of the pytest-torchperf example.

Three models (a torchvision ResNet-18 with random weights, a small MLP and a small
transformer-encoder text classifier) and deterministic synthetic data, so that the tests need no
downloads and always see the same inputs.
"""

from __future__ import annotations

from .data import make_features, make_images, preprocess
from .models import TinyMLP, build_resnet18
from .text import TextClassifier, make_tokens

__all__ = ["TextClassifier", "TinyMLP", "build_resnet18", "make_features", "make_images",
           "make_tokens", "preprocess"]
