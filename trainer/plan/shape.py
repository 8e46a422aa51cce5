"""A model and batch shape, and its exact weight count: what the memory model
(trainer/plan/memory_model.py) is computed from. Plain Python, so the lab reads it without
torch (app.sizing.formulas takes both from here)."""

from __future__ import annotations

from dataclasses import dataclass

from trainer.config.run_config import weight_count


@dataclass(frozen=True)
class Shape:
    """The model and batch fields of the run form. Whether the trainer takes them is the
    contract's rule (trainer.config.run_config.shape_problem), asked where a shape enters the sizing."""

    layers: int = 8
    width: int = 512
    heads: int = 8
    context: int = 1024
    vocab: int = 4000
    batch: int = 6  # per card


def param_count(layers: int, width: int, context: int, vocab: int) -> int:
    """Exact weight count: 12·L·d² + V·d + n·d (27,738,112 for 8 × 512, V 4000, n 1024),
    the contract's weight_count."""
    return weight_count(layers, width, context, vocab)
