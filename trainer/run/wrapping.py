"""The parts the training step runs with, built from the plan (trainer/plan/planner.py): the
module the step calls (the model, its DDP wrapper, or the model sharded by FSDP2:
trainer/parallel/sharding.py), the optimizer the step kind takes, the loss scaler; and the sharded
run's checkpoints. Each function takes its inputs and returns what it made; the loop
(trainer/run/train.py) holds them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from trainer.config.run_config import TrainingConfig
from trainer.parallel import sharding
from trainer.plan.planner import Plan
from trainer.state import checkpoint as ckpt
from trainer.step.optim import make_optimizer, make_scaler

if TYPE_CHECKING:
    from pathlib import Path

    from trainer.config.run_config import RunConfig
    from trainer.parallel.distributed import World
    from trainer.run.control import Options


class Holder(Protocol):
    """What the sharded checkpoints' functions below read of the loop that holds the parts
    (trainer/run/train.py's Trainer is one): named here so that this module needs no
    import of the loop, not even for its types."""

    cfg: RunConfig
    opts: Options
    world: World
    sharding: str
    step: int
    model: nn.Module
    optimizer: torch.optim.Optimizer

    def say(self, message: str) -> None: ...

    def load_optimizer(self, state: dict[str, Any], path: Path) -> None: ...


@dataclass
class Parts:
    """What the step runs with: `module` is what it calls (the model itself, its DDP
    wrapper, or the model sharded in place by FSDP2); `notes` are lines for the log."""

    module: nn.Module
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler
    notes: list[str] = field(default_factory=list)


def build_parts(model: nn.Module, plan: Plan, t: TrainingConfig, device: torch.device) -> Parts:
    """The optimizer, scaler and the module the step calls, as `plan` says, for `model`
    (built and on its device)."""
    precision, how = plan.precision.value, plan.sharding.value
    if how == "fsdp":  # sharded first: the optimizer is made over the shards
        note = sharding.shard(model, precision)
        return Parts(model, sharding.make_optimizer(model, t), sharding.make_scaler(precision, device), [note])
    if plan.step.value == "one_pass":
        from trainer.step.one_pass import OnePassOptimizer  # plain torch: no bitsandbytes

        optimizer: torch.optim.Optimizer = OnePassOptimizer(model, t, device, precision)
    elif plan.lean:
        from trainer.step.lean import LeanOptimizer  # bitsandbytes only where the lean state runs

        optimizer = LeanOptimizer(model, t, device, precision, plan.step.value)
    else:
        optimizer = make_optimizer(model, t, device)
    module = model
    if how == "ddp":  # around the model as the optimizer left it (the lean state's bf16 weights)
        module = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    return Parts(module, optimizer, make_scaler(precision, device))


def describe(module: nn.Module, optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler,
             compiled: Any, sampler: Any) -> dict[str, Any]:
    """What the built parts are, in the plan's words (the `start` event's "built"): read
    from the objects themselves, so that a part that differs from its plan shows."""
    from torch.distributed.fsdp import FSDPModule

    model = module.module if isinstance(module, DistributedDataParallel) else module
    return {
        "sharding": "fsdp" if isinstance(module, FSDPModule) else
                    "ddp" if isinstance(module, DistributedDataParallel) else "none",
        "step": getattr(optimizer, "step_kind", "normal"),
        "optimizer": type(optimizer).__name__,
        "loss_scaling": scaler.is_enabled(),
        "weights": str(next(model.parameters()).dtype).removeprefix("torch."),
        "economical": getattr(model, "level", "off"),
        "compile": "on" if compiled is not None else "off",
        "samples": "on" if sampler is not None else "off",
    }


# ---- checkpoints of a sharded run ---------------------------------------------------------


def load_tensors(tr: Holder, state: dict[str, Any], path: Path) -> None:
    """The model's and optimizer's state from a checkpoint of either form into this run,
    sharded or not (a DCP checkpoint read whole on an unsharded run, a .pt one scattered
    over the shards of a sharded run)."""
    if tr.sharding != "fsdp":
        if state.get("sharded"):
            state.update(ckpt.with_tensors(path, state))
            if "lean" not in state["optimizer"]:
                state["optimizer"] = sharding.keep_implementation(state["optimizer"], tr.optimizer)
            tr.say(f"checkpoint {path.name} was saved sharded over {state['world_size']} processes: read whole here")
        tr.model.load_state_dict(state["model"])
        tr.load_optimizer(state, path)
        return
    if state.get("sharded"):
        sharding.load_dcp_sharded(path, tr.model, tr.optimizer)
        if state["world_size"] != tr.world.size:
            tr.say(f"checkpoint {path.name} was saved sharded over {state['world_size']} processes: re-sharded over {tr.world.size}")
        return
    optim = state["optimizer"]
    if "lean" in optim:
        from trainer.step.lean import adamw_state_from_lean

        optim = adamw_state_from_lean(optim, tr.optimizer)
        tr.say(f"checkpoint {path.name} was saved with lean_state: 8-bit moments dequantized to fp32 AdamW")
    sharding.load_full_sharded(tr.model, tr.optimizer, state["model"], optim)
    tr.say(f"checkpoint {path.name} was saved whole ({state.get('world_size', 1)} process(es)): sharded over {tr.world.size}")


def save_sharded(tr: Holder, counters: dict[str, Any]) -> tuple[Path, str] | None:
    """Every process's part of a DCP checkpoint; (path, sha256) on rank 0."""
    from trainer.parallel.distributed import barrier

    extra = None
    if tr.world.is_main:
        extra = {**counters, "sharded": True, "optimizer_names": sharding.optimizer_names(tr.model)}
    return ckpt.save_dcp(
        tr.opts.run_dir, tr.step, lambda folder: sharding.save_dcp(folder, tr.model, tr.optimizer), extra,
        tr.cfg.training.keep_checkpoints, lambda: barrier(tr.world),
    )


def full_state_sha256(tr: Holder) -> str:
    """The hash of the whole state (every rank calls; rank 0's answer is the one said)."""
    if tr.sharding != "fsdp":
        return ckpt.state_sha256(tr.model.state_dict(), tr.optimizer.state_dict())
    model_sd, optim_sd = sharding.full_state(tr.model, tr.optimizer)
    return ckpt.state_sha256(model_sd, optim_sd) if model_sd else ""
