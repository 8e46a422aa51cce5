"""The lab's GPT: one screen per idea.

Learned positional embedding, input and output embedding tied, pre-norm blocks whose
norms have no learnable weights, no biases anywhere, MLP width 4·d. The weight count is
therefore exactly 12·L·d² + V·d + n·d (see `weight_count` in trainer.config.run_config).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from trainer.config.run_config import ModelConfig, economical_level, heads_divide
from trainer.model import economical
from trainer.model.functional import GELU_APPROXIMATE, lm_loss, norm


class Attention(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width, bias=False)
        self.proj = nn.Linear(width, width, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).unbind(2)
        # (b, heads, t, head_dim); SDPA picks the fused kernel the device has.
        y = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
        )
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class MLP(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.up = nn.Linear(width, 4 * width, bias=False)
        self.down = nn.Linear(4 * width, width, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.gelu(self.up(x), approximate=GELU_APPROXIMATE))


class Block(nn.Module):
    """Attention then MLP, each on the normed residual stream. In an economical level
    (trainer/model/economical.py) the training step's pass keeps fewer activations and
    recomputes the rest; evaluation and generation (no gradients) run the normal pass."""

    def __init__(self, width: int, heads: int, level: str = "off", mlp_chunks: tuple[int, int] = (1, 1)) -> None:
        super().__init__()
        self.attn = Attention(width, heads)
        self.mlp = MLP(width)
        self.level, self.mlp_chunks = level, mlp_chunks

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.level != "off" and torch.is_grad_enabled():
            return economical.block_forward(self, x)
        x = x + self.attn(norm(x))
        return x + self.mlp(norm(x))


class GPT(nn.Module):
    """The model of `cfg`, trained in the economical `level` ("off", "selective", "full";
    run.json's training.economical): the level changes what the forward pass keeps for
    the backward pass, never the parameters, their names or the results."""

    def __init__(self, cfg: ModelConfig, level: str | bool = "off") -> None:
        super().__init__()
        if not heads_divide(cfg.width, cfg.heads):
            raise ValueError(f"width {cfg.width} does not divide by heads {cfg.heads}")
        self.cfg = cfg
        self.level = economical_level(level)
        self.tok = nn.Embedding(cfg.vocab, cfg.width)
        self.pos = nn.Embedding(cfg.context, cfg.width)
        chunks = economical.mlp_chunks(cfg.layers)
        self.blocks = nn.ModuleList(Block(cfg.width, cfg.heads, self.level, chunks) for _ in range(cfg.layers))

    def init_weights(self, seed: int) -> None:
        """GPT-2 initialisation from a seed of its own, so it does not depend on other RNG use."""
        g = torch.Generator().manual_seed(seed)
        out_std = 0.02 / math.sqrt(2 * self.cfg.layers)
        with torch.no_grad():
            for name, p in self.named_parameters():
                std = out_std if name.endswith(("proj.weight", "down.weight")) else 0.02
                p.copy_(torch.randn(p.shape, generator=g) * std)

    def hidden(self, idx: torch.Tensor) -> torch.Tensor:
        """The normed final hidden states, (batch, time, width)."""
        t = idx.size(1)
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        for block in self.blocks:
            x = block(x)
        return norm(x)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None) -> torch.Tensor:
        """Logits when no targets are given, else the mean cross-entropy loss."""
        h = self.hidden(idx)
        if targets is None:
            return F.linear(h, self.tok.weight)
        if self.level == "off":
            return lm_loss(h, self.tok.weight, targets)
        # The economical levels' loss never holds the (tokens, vocab) logits.
        return economical.chunked_lm_loss(h, self.tok.weight, targets, layers=len(self.blocks))

    @torch.no_grad()
    def segment_losses(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Mean loss of each sequence in the batch (for evaluation), in fp32."""
        logits = F.linear(self.hidden(idx), self.tok.weight).float()
        per_token = F.cross_entropy(
            logits.view(-1, logits.size(-1)), targets.reshape(-1), reduction="none"
        )
        return per_token.view(targets.shape).mean(dim=1)


def count_parameters(model: nn.Module) -> int:
    """Distinct parameters (the tied embedding counted once)."""
    return sum(p.numel() for p in model.parameters())
