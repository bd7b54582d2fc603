"""The Lightning-style autoencoder: inference and one optimisation step, both guarded.

A training step is a perf target like any other: pass ``inference=False`` so the plugin does not
switch the module to ``eval()`` or turn gradients off, and hand it a callable that does what the
Trainer would (loss, backward, optimiser step). Its counters then include the backward pass and the
optimiser's ops, so a change that silently adds work to training fails even on a noisy runner.
"""

from __future__ import annotations

import functools

import pytest
import torch
from vision_zoo import LitAutoEncoder, make_digits, optimisation_step


@pytest.fixture
def autoencoder() -> LitAutoEncoder:
    return LitAutoEncoder()  # seeded by torchperf before every perf test (seed=0)


@pytest.mark.torchperf(group="autoencoder")
def test_embedding_speed(torchperf, autoencoder: LitAutoEncoder) -> None:
    images, _ = make_digits(64)
    result = torchperf(autoencoder, images, name="autoencoder-embed-bs64")
    if not result.disabled:
        assert result.counters["params"] == sum(p.numel() for p in autoencoder.parameters())


@pytest.mark.torchperf(group="autoencoder", max_slowdown="15%")
def test_training_step_speed(torchperf, autoencoder: LitAutoEncoder) -> None:
    optimizer = autoencoder.configure_optimizers()
    step = functools.partial(optimisation_step, autoencoder, optimizer)
    # Training mode with gradients: the plugin's eval()/no_grad() is for inference targets only.
    torchperf(step, make_digits(64), name="autoencoder-train-step-bs64", inference=False)


def test_training_reduces_the_loss(autoencoder: LitAutoEncoder) -> None:
    torch.manual_seed(0)
    batch = make_digits(64)
    optimizer = autoencoder.configure_optimizers()
    before = autoencoder.validation_step(batch, 0).item()
    for _ in range(20):
        optimisation_step(autoencoder, optimizer, batch)
    assert autoencoder.validation_step(batch, 0).item() < before


def test_embedding_shape(autoencoder: LitAutoEncoder) -> None:
    images, _ = make_digits(3)
    assert autoencoder(images).shape == (3, 16)
    assert autoencoder.reconstruct(images).shape == images.shape
