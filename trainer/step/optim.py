"""Optimizer, learning-rate schedule and precision."""

from __future__ import annotations

import math
from contextlib import nullcontext
from dataclasses import dataclass

import torch
from torch import nn

from trainer.config.run_config import TrainingConfig


def make_optimizer(model: nn.Module, t: TrainingConfig, device: torch.device) -> torch.optim.AdamW:
    """AdamW, fused where the device supports it; no weight decay on embeddings."""
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and not n.startswith(("tok.", "pos."))]
    rest = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and not n.startswith(("tok.", "pos.")))]
    groups = [{"params": decay, "weight_decay": t.weight_decay}, {"params": rest, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=t.lr, betas=(0.9, 0.95), eps=1e-8, fused=_fused_ok(device))


def _fused_ok(device: torch.device) -> bool:
    return device.type in ("cuda", "cpu")


@dataclass
class Schedule:
    """Linear warm-up, then a cosine decay from `anchor_lr` at `anchor_step` to the minimum
    at `steps_to`. A continued run with a new `steps_to` re-anchors at its current step and
    rate, so the rate stays continuous and the decay stretches to the new end."""

    lr: float
    warmup_steps: int
    steps_to: int
    min_lr: float
    anchor_step: int
    anchor_lr: float

    @classmethod
    def fresh(cls, t: TrainingConfig) -> Schedule:
        return cls(t.lr, t.warmup_steps, t.steps_to, t.lr * t.min_lr_ratio, t.warmup_steps, t.lr)

    def restretched(self, step: int, steps_to: int) -> Schedule:
        """The same schedule, continued from `step` to a different end."""
        if steps_to == self.steps_to:
            return self
        return Schedule(self.lr, self.warmup_steps, steps_to, self.min_lr, step, self.at(step))

    def at(self, step: int) -> float:
        """The learning rate for the update that step `step` makes (0-based)."""
        if step < self.warmup_steps and self.anchor_step == self.warmup_steps:
            return self.lr * (step + 1) / self.warmup_steps
        if step >= self.steps_to:
            return self.min_lr
        span = max(1, self.steps_to - self.anchor_step)
        progress = min(1.0, max(0.0, (step - self.anchor_step) / span))
        return self.min_lr + 0.5 * (self.anchor_lr - self.min_lr) * (1 + math.cos(math.pi * progress))

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def pick_precision(requested: str, device: torch.device) -> str:
    """The plan's precision (trainer.plan.planner.precision_choice) on `device`, for the tools that
    run the model outside a training run (generation, the benchmarks)."""
    from trainer.plan.planner import Machine, native_bf16, precision_choice

    cc = torch.cuda.get_device_capability(device) if device.type == "cuda" else None
    machine = Machine(device=device.type, capability=cc, bf16=native_bf16(device.type, cc))
    return precision_choice(requested, machine).value


def autocast(precision: str, device: torch.device):
    if precision == "fp32":
        return nullcontext()
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device_type=device.type, dtype=dtype)


def make_scaler(precision: str, device: torch.device) -> torch.amp.GradScaler:
    return torch.amp.GradScaler(device.type, enabled=precision == "fp16")
