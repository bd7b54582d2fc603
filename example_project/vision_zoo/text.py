"""A small transformer-encoder text classifier (the shape of a BERT-style model, scaled down)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class EncoderBlock(nn.Module):
    """Pre-norm transformer block: self-attention (``scaled_dot_product_attention``) then an MLP.

    Args:
        dim: Model width.
        heads: Attention heads; ``dim`` must be divisible by it.
        mlp_ratio: Hidden width of the MLP as a multiple of ``dim``.
    """

    def __init__(self, dim: int, heads: int, mlp_ratio: int = 4) -> None:
        super().__init__()
        if dim % heads:
            raise ValueError(f"dim {dim} is not divisible by heads {heads}")
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(
            nn.Linear(dim, mlp_ratio * dim), nn.GELU(), nn.Linear(mlp_ratio * dim, dim)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, dim = x.shape
        q, k, v = (
            self.qkv(self.norm1(x))
            .view(batch, length, 3, self.heads, dim // self.heads)
            .permute(2, 0, 3, 1, 4)
            .unbind(0)
        )
        attended = F.scaled_dot_product_attention(q, k, v)
        x = x + self.proj(attended.transpose(1, 2).reshape(batch, length, dim))
        return x + self.mlp(self.norm2(x))


class TextClassifier(nn.Module):
    """Token ids ``(batch, length)`` -> class logits ``(batch, num_classes)``.

    Embedding + learned positions, ``depth`` encoder blocks, mean pooling, linear head.
    """

    def __init__(
        self,
        vocab_size: int = 1000,
        dim: int = 64,
        heads: int = 4,
        depth: int = 2,
        max_length: int = 64,
        num_classes: int = 4,
    ) -> None:
        super().__init__()
        self.max_length = max_length
        self.embed = nn.Embedding(vocab_size, dim)
        self.position = nn.Parameter(torch.zeros(1, max_length, dim))
        nn.init.normal_(self.position, std=0.02)
        self.blocks = nn.ModuleList(EncoderBlock(dim, heads) for _ in range(depth))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        length = tokens.shape[1]
        if length > self.max_length:
            raise ValueError(
                f"sequence of {length} tokens is longer than max_length {self.max_length}"
            )
        x = self.embed(tokens) + self.position[:, :length]
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x).mean(dim=1))


def make_tokens(
    batch: int, length: int = 32, vocab_size: int = 1000, seed: int = 0
) -> torch.Tensor:
    """Random token ids of shape ``(batch, length)`` from a private, seeded generator."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab_size, (batch, length), generator=generator)
