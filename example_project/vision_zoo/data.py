"""Deterministic synthetic data and preprocessing.

Every generator takes an explicit ``seed`` and draws from its own ``torch.Generator``, so the
results do not depend on (and do not disturb) the global random state.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

#: Per-channel mean and standard deviation of ImageNet, as torchvision's pretrained models expect.
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def _generator(seed: int) -> torch.Generator:
    generator = torch.Generator(device="cpu")
    generator.manual_seed(seed)
    return generator


def make_images(batch: int, seed: int = 0, size: int = 224, channels: int = 3) -> torch.Tensor:
    """A batch of random RGB images with values in ``[0, 1)``.

    Args:
        batch: Number of images.
        seed: Seed of the private generator; equal seeds give equal tensors.
        size: Height and width in pixels.
        channels: Number of colour channels.

    Returns:
        A float32 tensor of shape ``(batch, channels, size, size)``.
    """
    return torch.rand(batch, channels, size, size, generator=_generator(seed))


def make_features(batch: int, in_features: int = 128, seed: int = 0) -> torch.Tensor:
    """A batch of standard-normal feature vectors for :class:`~vision_zoo.models.TinyMLP`.

    Args:
        batch: Number of vectors.
        in_features: Length of each vector.
        seed: Seed of the private generator; equal seeds give equal tensors.

    Returns:
        A float32 tensor of shape ``(batch, in_features)``.
    """
    return torch.randn(batch, in_features, generator=_generator(seed))


def preprocess(images: torch.Tensor, size: int = 224) -> torch.Tensor:
    """Resize images to ``size x size`` (bilinear) and normalise them with the ImageNet statistics.

    Args:
        images: Float tensor of shape ``(batch, 3, H, W)`` with values in ``[0, 1]``.
        size: Output height and width.

    Returns:
        A float32 tensor of shape ``(batch, 3, size, size)``.
    """
    if images.ndim != 4 or images.shape[1] != 3:
        raise ValueError(f"expected images of shape (batch, 3, H, W), got {tuple(images.shape)}")
    resized = F.interpolate(
        images, size=(size, size), mode="bilinear", align_corners=False, antialias=True
    )
    mean = torch.tensor(IMAGENET_MEAN, dtype=resized.dtype).view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD, dtype=resized.dtype).view(1, 3, 1, 1)
    return (resized - mean) / std
