"""How the trainer's model is wrapped for the step: DDP or FSDP over processes
(trainer/sharding.py), torch.compile (trainer/compiling.py), and the sharded run's
checkpoints. Kept apart from the loop (trainer/train.py), which calls these hooks."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from torch.nn.parallel import DistributedDataParallel

from . import checkpoint as ckpt
from . import compiling, sharding
from .config import economical_level, lean_mode
from .optim import make_optimizer, make_scaler

if TYPE_CHECKING:
    from pathlib import Path

    from .train import Trainer


def setup(tr: Trainer) -> None:
    """After the model is built and on its device: sharding, optimizer, scaler, the DDP
    wrapper and the compiled step (tr.sharding, tr.optimizer, tr.scaler, tr.ddp,
    tr.compiled). Refusals are ConfigErrors (one line, exit 2) before any step."""
    t = tr.cfg.training
    lean, level = lean_mode(t.lean_state), economical_level(t.economical)
    tr.sharding = sharding.decide(t, tr.world, tr.device, tr.params, lean)
    use_compile, note = compiling.decide(t.compile, tr.device, lean, tr.sharding)
    if tr.sharding == "fsdp":
        tr.say(sharding.shard(tr.model, tr.precision, level))
        tr.optimizer = sharding.make_optimizer(tr.model, t)
        tr.scaler = sharding.make_scaler(tr.precision, tr.device)
        tr.ddp = tr.model
        if tr.sampler is not None:  # rank 0 alone would call a model whose weights all ranks hold
            tr.sampler = None
            tr.say("samples during training are off under FSDP: the weights are spread over the processes "
                   "(ternit sample works on the checkpoints)")
    else:
        if lean != "off":
            from .lean import LeanOptimizer

            tr.optimizer = LeanOptimizer(tr.model, t, tr.device, tr.precision, lean)
        else:
            tr.optimizer = make_optimizer(tr.model, t, tr.device)
        tr.scaler = make_scaler(tr.precision, tr.device)
        tr.ddp = (
            DistributedDataParallel(tr.model, device_ids=[tr.device.index] if tr.device.type == "cuda" else None)
            if tr.world.active
            else tr.model
        )
    if tr.world.active:
        tr.say(f"processes: {tr.world.size}, sharding {tr.sharding}")
    tr.compiled = None
    if note:
        tr.say(note)
    if use_compile:
        tr.compiled = compiling.CompiledStep(tr.ddp, lambda why: compile_failed(tr, why),
                                             lambda: tr.optimizer.zero_grad(set_to_none=True))
        tr.say(f"compile: on (torch.compile, backend {compiling.backend()}; the first step compiles)")


def compile_failed(tr: Trainer, why: str) -> None:
    tr.warn("compile_failed", f"torch.compile failed at the first step ({why}); training goes on without compilation "
            "(set training.compile to \"off\" to skip the attempt)")


def step_with(tr: Trainer, step: Any) -> torch.Tensor:
    """Run `step(module)` with the compiled module where compilation is on (made at the
    first step, eager from then on if that failed), else with the eager one."""
    if tr.compiled is None:
        return step(tr.ddp)
    loss = tr.compiled.run(step)
    if tr.compiled.failed:
        tr.compiled = None
    return loss


# ---- checkpoints of a sharded run ---------------------------------------------------------


def load_tensors(tr: Trainer, state: dict[str, Any], path: Path) -> None:
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
        from .lean import adamw_state_from_lean

        optim = adamw_state_from_lean(optim, tr.optimizer)
        tr.say(f"checkpoint {path.name} was saved with lean_state: 8-bit moments dequantized to fp32 AdamW")
    sharding.load_full_sharded(tr.model, tr.optimizer, state["model"], optim)
    tr.say(f"checkpoint {path.name} was saved whole ({state.get('world_size', 1)} process(es)): sharded over {tr.world.size}")


def save_sharded(tr: Trainer, counters: dict[str, Any]) -> tuple[Path, str] | None:
    """Every process's part of a DCP checkpoint; (path, sha256) on rank 0."""
    from .distributed import barrier

    extra = None
    if tr.world.is_main:
        extra = {**counters, "sharded": True, "optimizer_names": sharding.optimizer_names(tr.model)}
    return ckpt.save_dcp(
        tr.opts.run_dir, tr.step, lambda folder: sharding.save_dcp(folder, tr.model, tr.optimizer), extra,
        tr.cfg.training.keep_checkpoints, lambda: barrier(tr.world),
    )


def full_state_sha256(tr: Trainer) -> str:
    """The hash of the whole state (every rank calls; rank 0's answer is the one said)."""
    if tr.sharding != "fsdp":
        return ckpt.state_sha256(tr.model.state_dict(), tr.optimizer.state_dict())
    model_sd, optim_sd = sharding.full_state(tr.model, tr.optimizer)
    return ckpt.state_sha256(model_sd, optim_sd) if model_sd else ""
