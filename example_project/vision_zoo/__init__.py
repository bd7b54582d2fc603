"""vision_zoo: the toy PyTorch project of the pytest-torchperf example.

Image classifiers (torchvision ResNet-18 and MobileNetV3-Small with random weights), a small MLP,
a small transformer-encoder text classifier, an autoencoder written like a Lightning module, and
deterministic synthetic data, so that the tests need no downloads and always see the same inputs.
"""

from __future__ import annotations

from .autoencoder import LitAutoEncoder, make_digits, optimisation_step
from .data import make_features, make_images, preprocess
from .models import TinyMLP, build_mobilenet_v3_small, build_resnet18
from .text import TextClassifier, make_tokens

__all__ = [
    "LitAutoEncoder",
    "TextClassifier",
    "TinyMLP",
    "build_mobilenet_v3_small",
    "build_resnet18",
    "make_digits",
    "make_features",
    "make_images",
    "make_tokens",
    "optimisation_step",
    "preprocess",
]
