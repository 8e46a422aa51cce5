"""One training step: forward, backward, clip, optimizer update, of the plan's kind
(trainer/plan/planner.py, STEP_KINDS): "normal" (AdamW after the backward pass, through the
GradScaler), "held" (the lean state's update after a backward pass that held the
gradients; under fp16 through the GradScaler), "fused" and "offload" (the lean state's
update inside a second backward pass), "one_pass" (the update inside the one backward pass,
clipped by the progressive estimate: trainer/step/one_pass.py).

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

from trainer.plan.planner import IN_BACKWARD_STEPS
from trainer.step.optim import autocast

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
    kind: str = "normal",
) -> torch.Tensor:
    """Run one update of `kind` over `batch` (one (inputs, targets) pair, or a list of
    them: the micro-steps of one update); returns the mean loss (a detached scalar tensor,
    not yet synchronised). `optimizer` is the one the plan's kind takes (trainer.step.lean's
    LeanOptimizer for all but "normal")."""
    for group in optimizer.param_groups:
        group["lr"] = lr
    micro = batch if isinstance(batch, list) else [batch]
    if kind in IN_BACKWARD_STEPS:
        if len(micro) != 1:  # the plan refuses it: the first micro-steps' gradients would be held
            raise ValueError(f"a {kind} step takes one micro-step, not {len(micro)}")
        if kind == "one_pass":
            return _one_pass_step(model, optimizer, micro[0], precision, device, grad_clip)
        return _fused_step(model, optimizer, micro[0], precision, device, grad_clip)
    if kind == "held" and not scaler.is_enabled():
        # The lean state clips exactly and updates one parameter at a time; under fp16 the
        # GradScaler's check comes first, by the path below.
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


def _one_pass_step(model: nn.Module, optimizer: torch.optim.Optimizer, batch: Batch, precision: str,
                   device: torch.device, grad_clip: float) -> torch.Tensor:
    """The "one_pass" step: one forward pass, one backward pass whose hooks clip by the
    progressive estimate and update each parameter. Where the optimizer has no last step's
    squares to estimate with (a run's first step, a converted checkpoint), a backward pass
    that keeps the graph and only takes them comes first, once."""
    x, y = batch
    with autocast(precision, device):
        loss = model(x, y)
    if optimizer.needs_priming(grad_clip):
        optimizer.begin("prime")
        loss.backward(retain_graph=True)
        optimizer.end()
    optimizer.begin("update", grad_clip)
    loss.backward()
    optimizer.end()
    return loss.detach()


def _mean(losses: list[torch.Tensor]) -> torch.Tensor:
    return losses[0] if len(losses) == 1 else torch.stack(losses).float().mean()
