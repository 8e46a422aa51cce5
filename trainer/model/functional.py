"""The model's plain functions, shared by the normal forward pass (trainer/model/gpt.py) and
the economical levels' written-out one (trainer/model/economical.py): the norm, the GELU's
setting and the loss."""

from __future__ import annotations

import torch
import torch.nn.functional as F

# The exact (erf) GELU: on the CPU it is about 2% faster per training step than the tanh
# approximation (measured side by side, docs/PERF.md), and on a GPU the two cost the same.
# trainer.model.economical recomputes it with the same setting.
GELU_APPROXIMATE = "none"


def norm(x: torch.Tensor) -> torch.Tensor:
    """Layer norm without a learnable scale or shift."""
    return F.layer_norm(x, (x.size(-1),))


def lm_loss(h: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of the tied output layer, computed in fp32 for stability."""
    logits = F.linear(h, weight)
    return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1))
