"""An autoencoder written the way a PyTorch Lightning ``LightningModule`` is, without Lightning.

Lightning is not needed to run it: the hooks a Trainer would call (``training_step``,
``validation_step``, ``configure_optimizers``) are ordinary methods, so a test can call them
directly, and a project that does use Lightning can swap the base class for
``lightning.LightningModule`` unchanged. Perf tests time both what inference costs (``forward``
returns the embedding, as in Lightning's autoencoder example) and what one optimisation step costs.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class LitAutoEncoder(nn.Module):
    """``28x28`` images -> ``latent`` features -> reconstructed images.

    Args:
        latent: Size of the embedding.
        hidden: Width of the hidden layer of encoder and decoder.
        lr: Learning rate of the Adam optimiser from :meth:`configure_optimizers`.
    """

    def __init__(self, latent: int = 16, hidden: int = 128, lr: float = 1e-3) -> None:
        super().__init__()
        self.lr = lr
        self.encoder = nn.Sequential(
            nn.Flatten(), nn.Linear(28 * 28, hidden), nn.ReLU(), nn.Linear(hidden, latent)
        )
        self.decoder = nn.Sequential(
            nn.Linear(latent, hidden),
            nn.ReLU(),
            nn.Linear(hidden, 28 * 28),
            nn.Unflatten(1, (1, 28, 28)),
        )

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Inference: the embedding of ``images`` ``(batch, 1, 28, 28)`` -> ``(batch, latent)``."""
        return self.encoder(images)

    def reconstruct(self, images: torch.Tensor) -> torch.Tensor:
        """Encode and decode: the images as the model sees them."""
        return self.decoder(self.encoder(images))

    def training_step(
        self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int
    ) -> torch.Tensor:
        """The reconstruction loss of one batch (labels are ignored, as in Lightning's example)."""
        images, _ = batch
        return F.mse_loss(self.reconstruct(images), images)

    def validation_step(
        self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int
    ) -> torch.Tensor:
        with torch.no_grad():
            return self.training_step(batch, batch_idx)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=self.lr)


def make_digits(batch: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A deterministic MNIST-shaped batch: images ``(batch, 1, 28, 28)`` in [0, 1] and labels."""
    generator = torch.Generator().manual_seed(seed)
    images = torch.rand(batch, 1, 28, 28, generator=generator)
    labels = torch.randint(0, 10, (batch,), generator=generator)
    return images, labels


def optimisation_step(
    model: LitAutoEncoder,
    optimizer: torch.optim.Optimizer,
    batch: tuple[torch.Tensor, torch.Tensor],
) -> torch.Tensor:
    """What a Trainer does per batch: loss, backward, step, zero the gradients."""
    loss = model.training_step(batch, 0)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach()
