"""One training step: forward, backward, clip, optimizer update.

Kept apart from the loop so the benchmarks (bench.step, the economical-mode benchmark)
time exactly the step the trainer runs.
"""

from __future__ import annotations

import torch
from torch import nn

from .optim import autocast


def train_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler,
    batch: tuple[torch.Tensor, torch.Tensor],
    lr: float,
    precision: str,
    device: torch.device,
    grad_clip: float,
) -> torch.Tensor:
    """Run one update; returns the loss (a detached scalar tensor, not yet synchronised)."""
    for group in optimizer.param_groups:
        group["lr"] = lr
    x, y = batch
    if getattr(optimizer, "steps_in_backward", False):
        # The lean state (trainer/lean.py): each parameter is updated from its gradient
        # hook during the backward pass, clipped by the previous step's global norm.
        optimizer.begin_step()
        with autocast(precision, device):
            loss = model(x, y)
        loss.backward()
        optimizer.end_step()
        return loss.detach()
    with autocast(precision, device):
        loss = model(x, y)
    scaler.scale(loss).backward()
    if grad_clip > 0:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip, foreach=True)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach()
