"""This machine as the plan sees it (trainer.plan.planner.Machine), filled from torch at the
trainer's start: the processes, the device, the card's memory and compute capability, and
which libraries and compilers the choices need are installed."""

from __future__ import annotations

import torch

from trainer.config.run_config import ConfigError, RunConfig
from trainer.parallel.distributed import World
from trainer.plan.planner import Machine, Plan, Refusal, installed_libraries, native_bf16, plan


def this_machine(device: torch.device, world: World) -> Machine:
    libraries = installed_libraries()
    memory_mb = capability = None
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        memory_mb, capability = props.total_memory / 2**20, (props.major, props.minor)
    return Machine(
        processes=world.size, device=device.type, card_memory_mb=memory_mb, capability=capability,
        bf16=native_bf16(device.type, capability), bitsandbytes=libraries.bitsandbytes,
        triton=libraries.triton, compiler=libraries.compiler,
    )


def plan_here(cfg: RunConfig, device: torch.device, world: World | None = None) -> Plan:
    """The plan of `cfg` on this machine (`world`: one process unless given); a refusal is
    a ConfigError (one line). The trainer's start and the benchmarks that run its step ask
    this."""
    decided = plan(cfg, this_machine(device, world or World()))
    if isinstance(decided, Refusal):
        raise ConfigError(decided)
    return decided
