"""The lab's GPT: one screen per idea.

Learned positional embedding, input and output embedding tied, pre-norm blocks whose
norms have no learnable weights, no biases anywhere, MLP width 4·d. The weight count is
therefore exactly 12·L·d² + V·d + n·d (see `weight_count` in trainer.config).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .config import ModelConfig, heads_divide

# The exact (erf) GELU: on the CPU it is about 2% faster per training step than the tanh
# approximation (measured side by side, docs/PERF.md), and on a GPU the two cost the same.
# trainer.economical recomputes it with the same setting.
GELU_APPROXIMATE = "none"


def norm(x: torch.Tensor) -> torch.Tensor:
    """Layer norm without a learnable scale or shift."""
    return F.layer_norm(x, (x.size(-1),))


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
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.attn = Attention(width, heads)
        self.mlp = MLP(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(norm(x))
        return x + self.mlp(norm(x))


class GPT(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        if not heads_divide(cfg.width, cfg.heads):
            raise ValueError(f"width {cfg.width} does not divide by heads {cfg.heads}")
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab, cfg.width)
        self.pos = nn.Embedding(cfg.context, cfg.width)
        self.blocks = nn.ModuleList(Block(cfg.width, cfg.heads) for _ in range(cfg.layers))
        # How blocks are run in the forward pass; the economical mode replaces it with
        # one that recomputes activations in the backward pass (trainer.economical).
        self.run_block = lambda block, x: block(x)
        self.loss_fn = lm_loss

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
            x = self.run_block(block, x)
        return norm(x)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None) -> torch.Tensor:
        """Logits when no targets are given, else the mean cross-entropy loss."""
        h = self.hidden(idx)
        if targets is None:
            return F.linear(h, self.tok.weight)
        return self.loss_fn(h, self.tok.weight, targets)

    @torch.no_grad()
    def segment_losses(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Mean loss of each sequence in the batch (for evaluation), in fp32."""
        logits = F.linear(self.hidden(idx), self.tok.weight).float()
        per_token = F.cross_entropy(
            logits.view(-1, logits.size(-1)), targets.reshape(-1), reduction="none"
        )
        return per_token.view(targets.shape).mean(dim=1)


def lm_loss(h: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of the tied output layer, computed in fp32 for stability."""
    logits = F.linear(h, weight)
    return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1))


def count_parameters(model: nn.Module) -> int:
    """Distinct parameters (the tied embedding counted once)."""
    return sum(p.numel() for p in model.parameters())
