"""Two or more processes under torchrun: DDP, or the training state sharded (FSDP2).

run.json `training.sharding`:
- "ddp": every process holds the whole state (fp32 weights, gradients, AdamW's moments:
  16 bytes a weight) and the gradients are averaged (DistributedDataParallel);
- "fsdp": PyTorch's FSDP2 (`torch.distributed.fsdp.fully_shard`) splits weights,
  gradients and moments over the processes (each holds 1/N of the 16 bytes a weight),
  gathering one block's weights at a time for its forward and backward passes and
  reduce-scattering its gradients; under bf16/fp16 the gathered weights are 16-bit
  (MixedPrecisionPolicy: half the traffic) and the gradients are reduced in fp32;
- "auto" (the default; trainer/plan/planner.py decides it and says why): fsdp when the whole
  state (16 bytes a weight) would take more than half of one card and the lean state is
  off, else ddp. DDP is kept wherever it fits because it is the faster
  of the two when the state fits (one all-reduce overlapping the backward pass, no
  all-gather of the weights in every pass) and the long-tested path for the lab's
  default model (0.44 GB of state); at the full model (1.67 B weights, 26.7 GB of state)
  no single card of the lab's holds it, and fsdp is the only way on two of them. The
  lean state runs under DDP only (true; the fused steps on one process). On the CPU
  (gloo, the tests) auto is ddp.

FSDP's checkpoints are saved and loaded through `torch.distributed.checkpoint` (DCP: a
folder `step-XXXXXXXX.dcp/` in which every process writes its own shards, with the run's
counters in `extra.pt`; trainer/state/checkpoint.py keeps its SHA-256 manifest beside it and
validates it on load), so a run saved on two processes continues on one and back: DCP
re-shards on load, and one process reads the whole state from it.

What FSDP does not combine with here, refused by the plan in one line before anything is
built: the lean state (its per-parameter step in the backward pass would need FSDP's
sharded gradients, which arrive only after the reduce-scatter), and compilation `on`
(trainer/step/compiling.py). The economical levels run inside each block's own forward pass
(trainer.model.gpt.Block), so under every level only one block's weights are gathered at a
time (plus the one FSDP fetches ahead), as trainer.plan.state_bytes models it.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from trainer.config.run_config import TrainingConfig
from trainer.state.dcp import to_ids, to_named


def shard(model: nn.Module, precision: str) -> str:
    """Apply FSDP2 to a trainer.model.gpt.GPT in place (FSDP's way: the module is the sharded
    model from then on); returns a line for the log."""
    from torch.distributed.fsdp import (
        MixedPrecisionPolicy,
        fully_shard,
        register_fsdp_forward_method,
    )

    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    mp = MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=torch.float32) if dtype else MixedPrecisionPolicy()
    for block in model.blocks:
        fully_shard(block, mp_policy=mp)
    units = f"{len(model.blocks)} blocks + the embeddings"
    if model.level != "off":  # the level runs inside each block's forward pass: gathered per block
        units += f" (per block under the economical level {model.level} too)"
    fully_shard(model, mp_policy=mp)
    # Evaluation calls this method, not forward: FSDP gathers the weights around it too.
    register_fsdp_forward_method(model, "segment_losses")
    gathered = f", weights gathered in {precision}, gradients reduced in fp32" if dtype else ""
    return f"sharding: fsdp over {units}{gathered}"


def make_optimizer(model: nn.Module, t: TrainingConfig) -> torch.optim.AdamW:
    """The normal AdamW (trainer.step.optim's groups and settings) over the sharded weights.
    Not fused: torch 2.13's fused AdamW fails on DTensor weights under the GradScaler
    ("output with shape [] doesn't match the broadcast shape [1]"). Not foreach either:
    the foreach step makes its denominator (√v / bias correction + ε) for a whole group
    at once, an fp32 temporary of all the matrices' shards (3.3 GB a card at the full
    model on two cards: the 2×T4 fit's margin and more; seen on the CPU with two gloo
    processes at tests/test_fsdp_memory.py's shape: the step peaked in the optimizer,
    2.4 MB over the gradients, until foreach was off). Parameter by parameter, it is two fp32 temporaries of
    the largest parameter's shard (trainer.plan.memory_model models it), for about 600 more
    small kernel launches a step at the full model (26 layers), against a step of
    seconds there."""
    from trainer.step.lean import param_groups

    return torch.optim.AdamW(param_groups(model, t.weight_decay), lr=t.lr, betas=(0.9, 0.95), eps=1e-8,
                             foreach=False)


def make_scaler(precision: str, device: torch.device) -> torch.amp.GradScaler:
    """fp16's loss scaler; each process sees only its gradient shards, so the sharded
    scaler agrees on infinities across them (all ranks skip a step together)."""
    from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

    return ShardedGradScaler(device.type, enabled=precision == "fp16")


# ---- state dicts ------------------------------------------------------------------------


def optimizer_names(model: nn.Module) -> list[str]:
    """The parameters' names in the optimizer's order (a torch optimizer state dict's
    integer ids are positions in this list): trainer.step.optim's two groups, matrices with
    weight decay first, then the rest, each in the model's order. Found by name, not by
    identity: FSDP swaps the module's parameter objects between sharded and gathered."""
    decay, rest = [], []
    for name, p in model.named_parameters():
        (decay if p.dim() >= 2 and not name.startswith(("tok.", "pos.")) else rest).append(name)
    return decay + rest


# How an optimizer computes, not what it has learnt: kept from the receiving optimizer
# when a state crosses between the sharded (foreach) and the unsharded (fused) form —
# a fused flag loaded into FSDP's optimizer would run the fused kernel on DTensors, a
# foreach one loaded into a fused optimizer breaks the GradScaler's fused path.
IMPLEMENTATION = ("fused", "foreach", "capturable", "differentiable")


def keep_implementation(sd: dict[str, Any], optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """`sd` (an optimizer state dict) with `optimizer`'s implementation flags per group."""
    groups = []
    for saved, mine in zip(sd["param_groups"], optimizer.param_groups, strict=True):
        groups.append({**saved, **{k: mine[k] for k in IMPLEMENTATION if k in mine}})
    return {**sd, "param_groups": groups}


def full_state(model: nn.Module, optimizer: torch.optim.Optimizer) -> tuple[dict, dict]:
    """The whole (unsharded) model and optimizer state on the CPU of rank 0 (other ranks
    get empty dicts; every rank must call it), the optimizer in integer ids, so that its
    hash (checkpoint.state_sha256) compares with a run on one process."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

    names = optimizer_names(model)
    msd, osd = get_state_dict(model, optimizer, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    if not msd:
        return {}, {"state": {}, "param_groups": []}
    return msd, to_ids(osd, names)


def save_dcp(folder: Path, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """Every process writes its shards of the model and optimizer into `folder` (DCP)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    msd, osd = get_state_dict(model, optimizer)
    dcp.save({"model": msd, "optimizer": osd}, checkpoint_id=str(folder))


def load_dcp_sharded(folder: Path, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """Read a DCP checkpoint into the sharded model and optimizer (DCP re-shards: it may
    have been written by another number of processes)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    msd, osd = get_state_dict(model, optimizer)
    sd = {"model": msd, "optimizer": osd}
    dcp.load(sd, checkpoint_id=str(folder))
    set_state_dict(model, optimizer, model_state_dict=sd["model"], optim_state_dict=sd["optimizer"])


def load_full_sharded(model: nn.Module, optimizer: torch.optim.Optimizer, model_sd: dict[str, torch.Tensor],
                      optim_sd: dict[str, Any]) -> None:
    """Load a whole state (a .pt checkpoint, integer ids) into the sharded model and
    optimizer: each process keeps its own shards of it."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_state_dict

    names = optimizer_names(model)
    optim_sd = keep_implementation(optim_sd, optimizer)
    set_state_dict(model, optimizer, model_state_dict=model_sd, optim_state_dict=to_named(optim_sd, names),
                   options=StateDictOptions(full_state_dict=True))


def local_tensors(tensors: Iterable[Any]) -> list[torch.Tensor]:
    """DTensors' local shards (what this process holds), plain tensors as they are."""
    out = []
    for t in tensors:
        if isinstance(t, torch.Tensor):
            out.append(t.to_local() if hasattr(t, "to_local") else t)
    return out
