"""The model's size and compute, from its shape alone (the same arithmetic as trainer/).

Weights: 12·L·d² (per block: fused qkv 3d², projection d², MLP 4d² + 4d²; no biases, norms
without weights) + V·d (token embedding, tied with the output layer) + n·d (learned
positions): `trainer.config.run_config.weight_count`, the run.json contract's one formula (the
contract is plain Python, so the window reads it without torch); a test counts the real
model's parameters against it.

Compute per token of training, in FLOPs (multiply-add = 2):
    6·weights  +  12·L·n·d
6·weights is the forward (2 per weight) and the backward (4 per weight) of every matrix
product. The tied V·d matrix really is multiplied (it is the output layer); the n·d
position table is only looked up, so counting it over-states compute by n·d/weights
(1.9 % for the default model) — kept for agreement with the usual formula. 12·L·n·d is the
attention itself, which has no weights: per layer, q·kᵀ and weights·v cost 2·n·d each in
the forward (4·n·d), times 3 for forward + backward (PaLM, appendix B; nanoGPT's
estimate_mfu). It counts the full n×n square; causal kernels skip about half of it.
"""

from __future__ import annotations

from trainer.config.run_config import weight_count

# The shape and its weight count live with the memory model, in the trainer's plan room.
from trainer.plan.shape import Shape, param_count

__all__ = ["Shape", "flops_per_token", "param_count", "step_cost", "tokens_per_step", "vocab_from_params"]


def flops_per_token(layers: int, width: int, context: int, vocab: int) -> int:
    """Training FLOPs per token: 6·weights + 12·L·n·d (see the module's note)."""
    return 6 * param_count(layers, width, context, vocab) + 12 * layers * context * width


def tokens_per_step(batch: int, cards: int, context: int) -> int:
    """Tokens one optimizer step trains on: batch per card × cards × n (12,288 for 6 × 2 × 1024)."""
    return batch * cards * context


def vocab_from_params(params: int, layers: int, width: int, context: int) -> int:
    """The vocabulary a measured run had, recovered from its exact weight count."""
    return max(1, round((params - weight_count(layers, width, context, 0)) / width))  # the V·d term


def step_cost(
    layers: int, width: int, context: int, vocab: int, small_width: float = 0.0,
    rows: int | None = None, small_rows: float = 0.0,
) -> float:
    """Relative time per token on one device:
    FLOPs per token × (1 + small_width / d) × (1 + small_rows / rows).

    Speed is scaled between sizes by this cost. With both terms 0 it is compute per
    token, as the guide says (24 layers ≈ 3× slower than 8). A CPU also spends time that
    grows with L·d, not L·d² (norms, GELU, residual adds, the optimizer's pass over the
    weights: memory-bound work), so narrow models run at a lower FLOP rate: the device's
    `small_width` (a width in units of d) carries that. Likewise matrix products over few
    rows (rows = batch per card × n tokens in a step) run less efficiently: `small_rows`.
    Both are 0 for the GPUs (not measured here) and measured for the CPU (app.sizing.gpus).
    """
    cost = flops_per_token(layers, width, context, vocab) * (1.0 + small_width / width)
    if rows:
        cost *= 1.0 + small_rows / rows
    return cost
