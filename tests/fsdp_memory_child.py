"""Run by tests/test_fsdp_memory.py as two gloo processes (forked ranks, or torchrun): training
steps of a small model sharded with FSDP2 at an economical level, and the peak of live
storages of a step once the optimizer has its state (trainer.step.memory.StoragePeak), for the
trainer's own sharding (trainer.parallel.sharding.shard: per block) and for the whole model as one
FSDP unit (how the levels ran before). Writes OUT/rank<r>.json.

    python -m torch.distributed.run --standalone --nproc_per_node=2 -m tests.fsdp_memory_child OUT PRECISION LEVEL...

(the whole model as one unit: at the first LEVEL only)
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.distributed.fsdp._fully_shard import _fsdp_param, _fsdp_param_group

from trainer.config.run_config import ModelConfig, TrainingConfig
from trainer.model.gpt import GPT
from trainer.parallel import sharding
from trainer.step.memory import StoragePeak, optimizer_tensors
from trainer.step.step import train_step

SHAPE = {"layers": 6, "width": 128, "heads": 4, "context": 64, "vocab": 300}
BATCH = 4


@contextmanager
def fsdp_resizes_counted(tracker: StoragePeak) -> Any:
    """FSDP frees and refills the gathered weights by resizing their storages, which no
    operator shows: each resize is told to the tracker (test instrumentation only)."""
    saved = (_fsdp_param.alloc_storage, _fsdp_param.free_storage, _fsdp_param_group.alloc_storage)

    def told(fn: Callable[[torch.Tensor], None]) -> Callable[[torch.Tensor], None]:
        def wrapped(t: torch.Tensor) -> None:
            fn(t)
            tracker.resized(t)
        return wrapped

    _fsdp_param.alloc_storage, _fsdp_param.free_storage = told(saved[0]), told(saved[1])
    _fsdp_param_group.alloc_storage = told(saved[2])
    try:
        yield
    finally:
        _fsdp_param.alloc_storage, _fsdp_param.free_storage, _fsdp_param_group.alloc_storage = saved


def step_peak(per_block: bool, level: str, precision: str) -> dict[str, Any]:
    torch.manual_seed(0)
    model = GPT(ModelConfig(**SHAPE), level)
    model.init_weights(1)
    if per_block:
        sharding.shard(model, precision)
    else:  # the levels' former sharding: one unit, gathered for the whole step
        from torch.distributed.fsdp import MixedPrecisionPolicy

        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
        fully_shard(model, mp_policy=MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=torch.float32))
    t = TrainingConfig()
    opt, scaler = sharding.make_optimizer(model, t), sharding.make_scaler(precision, torch.device("cpu"))
    g = torch.Generator().manual_seed(dist.get_rank())
    batch = [(torch.randint(0, SHAPE["vocab"], (BATCH, SHAPE["context"]), generator=g),) * 2]
    batch = [(x, torch.roll(x, 1, 1)) for x, _ in batch]
    for _ in range(8):  # until the optimizer has its state (fp16's first steps may be skipped)
        if opt.state:
            break
        train_step(model, opt, scaler, batch, 1e-3, precision, torch.device("cpu"), 1.0)
    alive = [*sharding.local_tensors(model.parameters()), *sharding.local_tensors(optimizer_tensors(opt)),
             *(x for b in batch for x in b)]
    tracker = StoragePeak(alive)
    with tracker, fsdp_resizes_counted(tracker):
        train_step(model, opt, scaler, batch, 1e-3, precision, torch.device("cpu"), 1.0)
    return {"peak_bytes": tracker.peak_bytes, "baseline_bytes": tracker.baseline_bytes, "has_state": bool(opt.state)}


def main() -> None:
    out, precision, levels = Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    result = {"per_block": {level: step_peak(True, level, precision) for level in levels},
              "whole": step_peak(False, levels[0], precision), "shape": {**SHAPE, "batch": BATCH}}
    (out / f"rank{dist.get_rank()}.json").write_text(json.dumps(result), encoding="utf-8")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
