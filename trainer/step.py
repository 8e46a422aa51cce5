"""One training step: forward, backward, clip, optimizer update.

Kept apart from the loop so the benchmarks (bench.step, the economical-mode benchmark)
time exactly the step the trainer runs.

A step may be several micro-steps (gradient accumulation, run.json
`training.tokens_per_step`): each micro-batch's loss is divided by their number before
its backward pass, so the gradients add up to those of the mean loss over the whole
batch; under DDP only the last backward pass averages them across the processes.
"""

from __future__ import annotations

from contextlib import nullcontext

import torch
from torch import nn

from .optim import autocast

Batch = tuple[torch.Tensor, torch.Tensor]


def train_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler,
    batch: Batch | list[Batch],
    lr: float,
    precision: str,
    device: torch.device,
    grad_clip: float,
) -> torch.Tensor:
    """Run one update over `batch` (one (inputs, targets) pair, or a list of them: the
    micro-steps of one update); returns the mean loss (a detached scalar tensor, not yet
    synchronised)."""
    for group in optimizer.param_groups:
        group["lr"] = lr
    micro = batch if isinstance(batch, list) else [batch]
    if getattr(optimizer, "clips_itself", False):
        # The lean state (trainer/lean.py) clips exactly and updates one parameter at a time.
        if optimizer.fused and len(micro) == 1:
            return _fused_step(model, optimizer, micro[0], precision, device, grad_clip)
        losses = _backward_all(model, micro, precision, device, len(micro), None)
        optimizer.step_held(grad_clip)
        return _mean(losses)
    losses = _backward_all(model, micro, precision, device, len(micro), scaler)
    if grad_clip > 0:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip, foreach=True)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    return _mean(losses)


def _backward_all(
    model: nn.Module, micro: list[Batch], precision: str, device: torch.device, count: int,
    scaler: torch.amp.GradScaler | None,
) -> list[torch.Tensor]:
    """Forward and backward over the micro-batches of one step; `count` is their number
    (the loss divisor). DDP's all-reduce is held back (no_sync) on every backward pass but
    the step's last."""
    losses = []
    hold = getattr(model, "no_sync", None)  # a DistributedDataParallel wrapper has it
    for i, (x, y) in enumerate(micro):
        syncs = i == len(micro) - 1
        with hold() if hold is not None and not syncs else nullcontext():
            with autocast(precision, device):
                loss = model(x, y)
            # Divided only when there are several: a step of one stays bit for bit the
            # step the trainer made before accumulation existed.
            scaled = loss / count if count > 1 else loss
            (scaler.scale(scaled) if scaler is not None else scaled).backward()
        losses.append(loss.detach())
    return losses


def _fused_step(model: nn.Module, optimizer: torch.optim.Optimizer, batch: Batch, precision: str,
                device: torch.device, grad_clip: float) -> torch.Tensor:
    """The lean state's "fused" step: one forward pass, two backward passes over its graph
    (the first takes the gradients' norm, the second updates each parameter from its hook
    with the exact clip coefficient); no set of gradients is ever held."""
    x, y = batch
    with autocast(precision, device):
        loss = model(x, y)
    optimizer.norm_pass()
    loss.backward(retain_graph=True)  # the saved tensors stay for the second pass
    optimizer.update_pass(grad_clip)
    loss.backward()
    optimizer.end_pass()
    return loss.detach()


def _mean(losses: list[torch.Tensor]) -> torch.Tensor:
    return losses[0] if len(losses) == 1 else torch.stack(losses).float().mean()
