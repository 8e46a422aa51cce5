"""One mode's training run for the economical-mode benchmark (bench.economical): the
trainer's own model, optimizer (fused AdamW or the lean state's 8-bit one), schedule,
data reader and step, timed a step at a time; its memory, its held-out losses."""

from __future__ import annotations

import gc
import os
import statistics
import time
from dataclasses import replace
from typing import Any

import numpy as np
import torch

from trainer.config.run_config import RunConfig
from trainer.model.gpt import GPT
from trainer.run.data import Prefetcher, PreparedData, eval_offsets
from trainer.run.hardware import plan_here
from trainer.run.wrapping import build_parts
from trainer.step.memory import measure_step, model_tensors, optimizer_tensors
from trainer.step.optim import Schedule
from trainer.step.step import train_step

from .econ_stats import iqr
from .opcount import count_step


class Observed:
    """What the card shows this process using: NVML's per-process figure where the
    nvidia-ml-py package is present, else the device's used memory from the driver."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.handle: Any = None
        self.source = "none"
        if device.type != "cuda":
            return
        self.source = "cudaMemGetInfo (whole device)"
        try:
            import pynvml

            pynvml.nvmlInit()
            uuid = str(torch.cuda.get_device_properties(device).uuid)
            self.handle = pynvml.nvmlDeviceGetHandleByUUID(("GPU-" + uuid).encode())
            self.nvml = pynvml
            self.source = "NVML (this process)"
        except Exception:  # noqa: BLE001 — any NVML trouble falls back to the driver's figure
            self.handle = None

    def sample(self) -> int | None:
        if self.device.type != "cuda":
            return None
        if self.handle is not None:
            try:
                for proc in self.nvml.nvmlDeviceGetComputeRunningProcesses(self.handle):
                    if proc.pid == os.getpid() and proc.usedGpuMemory is not None:
                        return int(proc.usedGpuMemory)
            except Exception:  # noqa: BLE001
                pass
        free, total = torch.cuda.mem_get_info(self.device)
        return int(total - free)


class ModeRun:
    """One mode's training run of `warmup + 1 + steps` steps, driven a step at a time so
    that two runs can go one after the other or interleaved step by step. A mode is an
    activation level and a lean-state mode ("off", "on", "offload")."""

    def __init__(
        self,
        cfg: RunConfig,
        level: str,
        lean: str,
        data: PreparedData,
        device: torch.device,
        steps: int,
        warmup: int,
        observed: Observed,
        perturb: int | None = None,
    ) -> None:
        t = cfg.training
        self.cfg, self.level, self.lean, self.data, self.device = cfg, level, lean, data, device
        self.warmup, self.total, self.observed = warmup, warmup + 1 + steps, observed
        torch.manual_seed(t.seed)
        # What the trainer would run for this mode here (the step is timed eagerly).
        mode = replace(cfg, training=replace(t, economical=level, lean_state=lean, compile="off"))
        self.plan = plan_here(mode, device)
        self.model = GPT(cfg.model, self.plan.economical.value)
        self.model.init_weights(t.seed)
        if perturb is not None:
            perturb_weights(self.model, perturb)
        self.model.to(device)
        self.precision = self.plan.precision.value
        # The trainer's optimizer for the mode: fused AdamW, or the lean state's 8-bit AdamW
        # (which also turns the weights to bf16 under bf16 and hooks the backward pass).
        parts = build_parts(self.model, self.plan, t, device)
        self.optimizer, self.scaler = parts.optimizer, parts.scaler
        warm = min(t.warmup_steps, self.total // 10)
        self.schedule = Schedule.fresh(replace(t, steps_to=self.total, warmup_steps=warm))
        self.fetch = Prefetcher(data.train, cfg.model.context, t.batch_per_card, t.seed, 0, device)
        self.losses: list[torch.Tensor] = []
        self.wall: list[float] = []
        self.cpu: list[float] = []
        self.events: list[tuple[Any, Any]] = []
        self.memory: dict[str, Any] = {}
        self.work: dict[str, Any] = {}
        self.observed_max = 0

    def _train(self, step: int, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        t = self.cfg.training
        lr = self.schedule.at(step)
        return train_step(
            self.model,
            self.optimizer,
            self.scaler,
            batch,
            lr,
            self.precision,
            self.device,
            t.grad_clip,
            self.plan.step.value,
        )

    def step(self, step: int) -> None:
        batch = self.fetch.get(step)  # outside the timed region
        if step == self.warmup - 1:
            # The last warm-up step, counted: kernels launched and FLOPs (bench.opcount).
            loss, self.work = count_step(lambda: self._train(step, batch))
        elif step < self.warmup:
            loss = self._train(step, batch)
        elif step == self.warmup:
            alive = [*model_tensors(self.model), *optimizer_tensors(self.optimizer), *batch]
            loss, self.memory = measure_step(
                lambda: self._train(step, batch),
                alive=alive,
                device=self.device,
                forward_of=self.model,
            )
        elif self.device.type == "cuda":
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            loss = self._train(step, batch)
            end.record()
            self.events.append((start, end))
            if (step - self.warmup) % 64 == 0:
                self.observed_max = max(self.observed_max, self.observed.sample() or 0)
        else:
            w0, c0 = time.perf_counter(), time.process_time()
            loss = self._train(step, batch)
            self.wall.append(time.perf_counter() - w0)
            self.cpu.append(time.process_time() - c0)
        self.losses.append(loss)

    def finish(self, segments: int) -> dict[str, Any]:
        """Times, memory, losses and the held-out losses of the trained model."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            self.wall = [s.elapsed_time(e) / 1000 for s, e in self.events]
            self.observed_max = max(self.observed_max, self.observed.sample() or 0)
        wall, mem = self.wall, self.memory
        loss_values = torch.stack(self.losses).float().cpu().tolist()
        result = {
            "level": self.level,
            "lean_state": self.lean,
            "steps_timed": len(wall),
            "warmup_steps": self.warmup,
            "step_times_s": wall,
            "step_time_median": statistics.median(wall),
            "step_time_mean": statistics.fmean(wall),
            "step_time_iqr": iqr(wall),
            "peak_bytes": mem["peak_bytes"],
            "library_temporaries_bytes": (
                library_temporaries_bytes(self.model)
                if self.lean != "off" and self.device.type == "cpu"
                else 0
            ),
            "activation_bytes": mem["activation_bytes"],
            "baseline_bytes": mem["baseline_bytes"],
            "memory_method": mem["method"],
            "ops_per_step": self.work.get("ops"),
            "flops_per_step": self.work.get("flops"),
            "top_ops": self.work.get("top_ops"),
            "observed_bytes": self.observed_max or None,
            "final_loss": loss_values[-1],
            "losses": loss_values,
        }
        if self.cpu:
            result["cpu_times_s"] = self.cpu
            result["cpu_time_median"] = statistics.median(self.cpu)
        if self.device.type == "cuda":
            result["run_peak_bytes"] = torch.cuda.max_memory_allocated(self.device)
        result["segment_losses"] = held_out_losses(
            self.model, self.data, self.cfg, self.device, segments
        )
        return result


def library_temporaries_bytes(model: GPT) -> int:
    """The bound of what bitsandbytes' CPU update holds inside one operator, unseen by the
    storage count: five fp32 tensors of the largest parameter (two dequantized moments,
    the gradient, the weight, the denominator)."""
    return 5 * 4 * max(p.numel() for p in model.parameters())


# The control's nudge to the initial weights: one part in 2²³, an fp32 rounding step.
PERTURBATION = 2.0**-23


@torch.no_grad()
def perturb_weights(model: GPT, seed: int) -> None:
    """Scale every initial weight by 1 ± 2⁻²³ (random signs from `seed`): a change of the
    size of one rounding, so the normal mode trained from it shows how far rounding alone
    moves the trained model's held-out loss (the control for the quality comparison)."""
    g = torch.Generator().manual_seed(seed)
    for p in model.parameters():
        sign = torch.randint(0, 2, p.shape, generator=g).to(p.dtype) * 2 - 1
        p.mul_(1 + PERTURBATION * sign)


def run_whole(
    cfg: RunConfig, mode: tuple[str, str], data: PreparedData, device: torch.device, steps: int,
    warmup: int, observed: Observed, segments: int, perturb: int | None = None,
) -> dict[str, Any]:
    """One mode's run, (level, lean), from a clean allocator to its finish (ModeRun.finish's
    report)."""
    fresh_device(device)
    run = ModeRun(cfg, *mode, data, device, steps, warmup, observed, perturb=perturb)
    for i in range(run.total):
        run.step(i)
    return run.finish(segments)


def fresh_device(device: torch.device) -> None:
    """Let a run start from a clean allocator, so its peak and NVML figures are its own."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


@torch.no_grad()
def held_out_losses(
    model: GPT, data: PreparedData, cfg: RunConfig, device: torch.device, segments: int
) -> list[float]:
    """Mean loss of each of the same `segments` validation segments (fp32). A model whose
    weights are 16-bit (the lean state's bf16) is evaluated from an fp32 copy of them,
    the weights an export writes, so both modes are judged by the same arithmetic."""
    if any(p.dtype != torch.float32 for p in model.parameters()):
        copy = GPT(cfg.model)
        copy.load_state_dict({k: v.float() for k, v in model.state_dict().items()})
        model = copy.to(device)
    n = cfg.model.context
    offsets = eval_offsets(len(data.val), n, segments)
    model.eval()
    out: list[float] = []
    for i in range(0, len(offsets), cfg.training.batch_per_card):
        rows = np.stack(
            [
                np.asarray(data.val[o : o + n + 1], dtype=np.int64)
                for o in offsets[i : i + cfg.training.batch_per_card]
            ]
        )
        t = torch.from_numpy(rows).to(device)
        out.extend(model.segment_losses(t[:, :-1], t[:, 1:]).double().cpu().tolist())
    model.train()
    return out


