"""DDP under torchrun: who am I, and agreeing on decisions across ranks."""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass
class World:
    rank: int = 0
    local_rank: int = 0
    size: int = 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def active(self) -> bool:
        return self.size > 1


def backend_for(device_type: str) -> str:
    """NCCL between CUDA cards where torch has it (Linux), gloo otherwise.

    Windows' torch has no NCCL: two cards on a Windows PC talk through gloo, which takes
    CUDA tensors but moves every all-reduce through host memory and the loopback network
    (card → RAM → TCP → RAM → card) instead of NCCL's direct copies over PCIe or NVLink. The
    cost is the gradients' all-reduce each step, 4 bytes per weight (≈ 110 MB for 27.7 M
    weights), at host-copy and loopback speed rather than PCIe's: tens of milliseconds per
    step at that size, more for bigger models (not measured: no Windows PC with two cards)."""
    if device_type == "cuda" and dist.is_nccl_available():
        return "nccl"
    return "gloo"


def init_world(device_type: str) -> World:
    """Join the process group torchrun set up (RANK/WORLD_SIZE in the environment)."""
    size = int(os.environ.get("WORLD_SIZE", "1"))
    if size <= 1:
        return World()
    backend = backend_for(device_type)
    if device_type == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group(backend=backend)
    return World(dist.get_rank(), int(os.environ.get("LOCAL_RANK", "0")), dist.get_world_size())


def sum_across(world: World, values: list[float], device: torch.device) -> list[float]:
    """Sum a few floats over all ranks (one small all-reduce; identity on one process)."""
    if not world.active:
        return list(values)
    t = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t.tolist()


def sum_tensor(world: World, t: torch.Tensor) -> torch.Tensor:
    if world.active:
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t


def shutdown(world: World, together: bool = False) -> None:
    """Leave the process group. `together` (a clean end, reached by every rank): wait at a
    barrier first. Without it a rank that finished early (rank 0 still writing the last
    checkpoint) tore its connections down under the other, and gloo aborted the process
    (SIGABRT, "terminate called without an active exception") in about one run in ten
    after the run itself had ended well — a finished run reported as failed. Not after a
    failure: the other ranks may be inside another collective, and a barrier there could
    pair with it."""
    if not (world.active and dist.is_initialized()):
        return
    if together:
        if dist.get_backend() == "nccl":
            dist.barrier(device_ids=[world.local_rank])
        else:
            dist.barrier()
    dist.destroy_process_group()


def barrier(world: World) -> None:
    """All ranks meet here (nothing on one process)."""
    if not (world.active and dist.is_initialized()):
        return
    if dist.get_backend() == "nccl":
        dist.barrier(device_ids=[world.local_rank])
    else:
        dist.barrier()
