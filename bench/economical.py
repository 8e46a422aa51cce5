"""The economical mode against the normal mode, side by side, in one process.

    python -m bench.economical [--config RUN.json] [--data DIR] [--steps N]
        [--series S] [--level selective|full] [--warmup W] [--device auto|cpu|cuda]
        [--json FILE]
        [--schedule sequential|interleaved]
    (also `ternit bench economical ...`)

Each series trains the normal mode and the economical mode from the same seed on the
same batches (the trainer's own model, optimizer, schedule, data reader and step),
alternating which goes first. On a GPU the two runs of a series go one after the other
(`--schedule sequential`); on the CPU, by default, step by step in ABBA order
(`--schedule interleaved`): on a shared machine whose load changes from minute to
minute, step i of one mode then meets the same load as step i of the other, and the
median of the per-step ratios is reported besides the ratio of the medians. The first W steps of every run are warm-up and not timed
(allocator, caches, kernel selection); the step after them is measured for memory and
not timed either (the CPU's storage tracking slows it). Step times come from CUDA events
on a GPU, from the wall clock (and the process's CPU time, less disturbed by other
programs on a shared machine) on the CPU. The data fetch is outside the timed region.

Memory: the step's peak of allocated memory (torch.cuda.max_memory_allocated, or the
live tensor storages on the CPU: trainer.memory), the activations the forward pass left
for the backward pass, and on a GPU what the card shows the process using (NVML, where
the nvidia-ml-py package is installed; else the driver's free/total).

Quality: both trained models are evaluated on the same held-out segments (96 by
default); the paired per-segment difference (economical − normal), its mean and 95%
confidence interval are reported. That interval measures the segments only: in 16-bit
precision two trainings that differ in nothing but the order of float sums end a little
apart, consistently over all segments, and the interval excludes zero. So each series also
trains a control, untimed: the normal mode from initial weights nudged by one fp32
rounding step (2⁻²³); the economical difference is compared with the controls'
(`quality.rounding`; --no-control skips it).

Without --config the model is the issue's CPU configuration (context 512, width 128,
4 layers, 4 heads, batch 16, vocabulary 1024) on the CPU, and the lab's default model
(context 1024, width 512, 8 layers, 8 heads, batch 6, vocabulary 4000) on a GPU. Without
--data (or data.dir in the config) a synthetic prepared-data folder is made with
bench/synthetic.py.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from trainer import economical
from trainer.config import (
    ConfigError,
    ModelConfig,
    RunConfig,
    TrainingConfig,
    economical_level,
    load,
)
from trainer.data import DataError, Prefetcher, PreparedData, eval_offsets, open_prepared
from trainer.memory import measure_step, model_tensors, optimizer_tensors
from trainer.model import GPT
from trainer.optim import Schedule, make_optimizer, make_scaler, pick_precision
from trainer.step import train_step

from .opcount import count_step
from .synthetic import make_prepared

CPU_MODEL = ModelConfig(context=512, width=128, heads=4, layers=4, vocab=1024)
CPU_BATCH = 16
GPU_MODEL = ModelConfig(context=1024, width=512, heads=8, layers=8, vocab=4000)
GPU_BATCH = 6
MB = 2**20


# ---- set-up ----------------------------------------------------------------------------


def pick_device(name: str) -> torch.device:
    if name == "cuda" or (name == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise SystemExit("error: --device cuda asked for, but torch sees no CUDA device")
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def default_config(device: torch.device) -> RunConfig:
    on_gpu = device.type == "cuda"
    model = GPU_MODEL if on_gpu else CPU_MODEL
    training = TrainingConfig(batch_per_card=GPU_BATCH if on_gpu else CPU_BATCH, warmup_steps=20)
    return RunConfig(name="bench-economical", model=replace(model), training=training)


def synthetic_data(vocab: int, context: int, segments: int) -> Path:
    """A prepared-data folder from bench/synthetic.py, with enough held-out tokens for
    `segments` segments of `context` tokens (the val split is a tenth of the text)."""
    # About five tokens per sentence (six, seen); val is 10 %; a margin of half again.
    sentences = max(6000, int(segments * (context + 1) * 10 / 5 * 1.5))
    out = Path(tempfile.mkdtemp(prefix="ternit-bench-econ-"))
    say(f"making synthetic data ({sentences:,} sentences, vocabulary {vocab}) in {out}")
    return make_prepared(out, vocab=vocab, sentences=sentences)


def say(message: str) -> None:
    print(message, flush=True)


# ---- one run -----------------------------------------------------------------------------


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
    that two runs can go one after the other or interleaved step by step."""

    def __init__(
        self,
        cfg: RunConfig,
        level: str,
        data: PreparedData,
        device: torch.device,
        steps: int,
        warmup: int,
        observed: Observed,
        perturb: int | None = None,
    ) -> None:
        t = cfg.training
        self.cfg, self.level, self.data, self.device = cfg, level, data, device
        self.warmup, self.total, self.observed = warmup, warmup + 1 + steps, observed
        torch.manual_seed(t.seed)
        self.model = GPT(cfg.model)
        self.model.init_weights(t.seed)
        if perturb is not None:
            perturb_weights(self.model, perturb)
        economical.apply(self.model, level)
        self.model.to(device)
        self.precision = pick_precision(t.precision, device)
        self.optimizer = make_optimizer(self.model, t, device)
        self.scaler = make_scaler(self.precision, device)
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
            "steps_timed": len(wall),
            "warmup_steps": self.warmup,
            "step_times_s": wall,
            "step_time_median": statistics.median(wall),
            "step_time_mean": statistics.fmean(wall),
            "step_time_iqr": iqr(wall),
            "peak_bytes": mem["peak_bytes"],
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
    cfg: RunConfig, level: str, data: PreparedData, device: torch.device, steps: int, warmup: int,
    observed: Observed, segments: int, perturb: int | None = None,
) -> dict[str, Any]:
    """One mode's run from a clean allocator to its finish (ModeRun.finish's report)."""
    fresh_device(device)
    run = ModeRun(cfg, level, data, device, steps, warmup, observed, perturb=perturb)
    for i in range(run.total):
        run.step(i)
    return run.finish(segments)


def rounding_control(normal: list[float], econ: list[float], controls: list[list[float]]) -> dict[str, Any]:
    """Is the economical mode's held-out difference of the size rounding alone makes?

    Two trainings that differ only in the order of float sums end at slightly different
    models, and with 96 paired segments even a difference of 1e-5 has a confidence
    interval clear of zero (seen in bf16: docs/PERF.md) — that interval measures the
    segments, not training's sensitivity to rounding. The controls measure that: the
    normal mode retrained from weights nudged by one rounding step. The economical mode
    counts as within rounding noise when its mean difference is at most 3× the controls'
    root-mean-square difference (about three standard deviations of a rounding-sized
    change, if those differences are centred on zero)."""
    diffs = [paired(normal, c)["diff"] for c in controls]
    rms = math.sqrt(statistics.fmean(d * d for d in diffs))
    econ_diff = paired(normal, econ)["diff"]
    ratio = abs(econ_diff) / rms if rms > 0 else (0.0 if econ_diff == 0 else math.inf)
    return {"control_diffs": diffs, "control_rms": rms, "ratio_to_control": ratio,
            "within_rounding_noise": ratio <= 3.0}


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
    """Mean loss of each of the same `segments` validation segments (fp32)."""
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


# ---- statistics --------------------------------------------------------------------------


def iqr(values: list[float]) -> list[float]:
    q = (
        statistics.quantiles(values, n=4, method="inclusive")
        if len(values) > 1
        else [values[0]] * 3
    )
    return [q[0], q[2]]


def t_quantile_975(df: int) -> float:
    """Student's t 97.5 % point (Cornish–Fisher expansion around the normal: good to 1e-3
    for df ≥ 8, which is all a 96-segment comparison needs)."""
    z = statistics.NormalDist().inv_cdf(0.975)
    return (
        z
        + (z**3 + z) / (4 * df)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * df**3)
    )


def paired(normal: list[float], econ: list[float]) -> dict[str, Any]:
    """Mean paired difference (economical − normal) and its 95 % confidence interval."""
    diffs = [e - n for n, e in zip(normal, econ, strict=True)]
    k = len(diffs)
    mean = statistics.fmean(diffs)
    if k < 2:
        return {"segments": k, "diff": mean, "ci95": [float("nan"), float("nan")]}
    half = t_quantile_975(k - 1) * statistics.stdev(diffs) / math.sqrt(k)
    return {
        "segments": k,
        "normal_loss": statistics.fmean(normal),
        "economical_loss": statistics.fmean(econ),
        "diff": mean,
        "ci95": [mean - half, mean + half],
        "ci_includes_zero": mean - half <= 0 <= mean + half,
    }


def _median_of(runs: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def pooled(runs: list[dict[str, Any]], key: str = "step_times_s") -> list[float]:
    return [v for r in runs for v in r[key]]


# ---- the whole comparison ------------------------------------------------------------------


def compare(
    cfg: RunConfig,
    level: str,
    data: PreparedData,
    device: torch.device,
    steps: int,
    series: int,
    warmup: int,
    segments: int,
    schedule: str = "sequential",
    control: bool = True,
) -> dict[str, Any]:
    observed = Observed(device)
    controls: list[list[float]] = []
    modes: dict[str, list[dict[str, Any]]] = {"normal": [], "economical": []}
    names = {"normal": "off", "economical": level}
    load_before = os.getloadavg() if hasattr(os, "getloadavg") else None
    began = time.time()
    for s in range(series):
        order = ["normal", "economical"] if s % 2 == 0 else ["economical", "normal"]
        if schedule == "sequential":
            for position, mode in enumerate(order, 1):
                say(
                    f"series {s + 1}/{series}: {mode} ({names[mode]}) run {position} of 2, {warmup}+1+{steps} steps"
                )
                r = run_whole(cfg, names[mode], data, device, steps, warmup, observed, segments)
                r.update(series=s + 1, order=position)
                modes[mode].append(r)
                say(
                    f"  median {r['step_time_median'] * 1000:.1f} ms, peak {r['peak_bytes'] / MB:.1f} MB"
                )
        else:
            say(
                f"series {s + 1}/{series}: both modes step by step, {order[0]} first, {warmup}+1+{steps} steps"
            )
            fresh_device(device)
            runs = {
                mode: ModeRun(cfg, names[mode], data, device, steps, warmup, observed)
                for mode in order
            }
            for i in range(runs["normal"].total):
                # ABBA...: which mode goes first alternates every step.
                for mode in order if i % 2 == 0 else order[::-1]:
                    runs[mode].step(i)
            for position, mode in enumerate(order, 1):
                r = runs[mode].finish(segments)
                r.update(series=s + 1, order=position)
                modes[mode].append(r)
                say(
                    f"  {mode}: median {r['step_time_median'] * 1000:.1f} ms, peak {r['peak_bytes'] / MB:.1f} MB"
                )
            del runs
        if control:
            say(f"series {s + 1}/{series}: control, the normal mode from weights nudged by 2^-23, not timed")
            # The normal mode from initial weights nudged by a rounding step (not timed).
            control = run_whole(cfg, "off", data, device, steps, warmup, observed, segments, perturb=1000 + s)
            controls.append(control["segment_losses"])
    normal, econ = modes["normal"], modes["economical"]
    nt, et = pooled(normal), pooled(econ)
    ratios = {
        "peak_bytes": _median_of(econ, "peak_bytes") / _median_of(normal, "peak_bytes"),
        "activation_bytes": _median_of(econ, "activation_bytes")
        / _median_of(normal, "activation_bytes"),
        "step_time_median": statistics.median(et) / statistics.median(nt),
        "step_time_mean": statistics.fmean(et) / statistics.fmean(nt),
        "step_time_median_by_series": [
            e["step_time_median"] / n["step_time_median"] for n, e in zip(normal, econ, strict=True)
        ],
    }
    if normal[0]["ops_per_step"] and econ[0]["ops_per_step"]:
        # What a launch-bound GPU and a compute-bound one would feel (bench.opcount).
        ratios["ops_per_step"] = econ[0]["ops_per_step"] / normal[0]["ops_per_step"]
        ratios["flops_per_step"] = econ[0]["flops_per_step"] / normal[0]["flops_per_step"]
    if schedule == "interleaved":
        # Step i of one mode ran next to step i of the other: under a load that changes
        # with time, the median of these ratios is the steadier figure.
        pairs = [
            e / n
            for rn, re in zip(normal, econ, strict=True)
            for n, e in zip(rn["step_times_s"], re["step_times_s"], strict=True)
        ]
        ratios["step_time_paired_median"] = statistics.median(pairs)
    if device.type == "cpu":
        ratios["cpu_time_median"] = statistics.median(
            pooled(econ, "cpu_times_s")
        ) / statistics.median(pooled(normal, "cpu_times_s"))
    if all(r["observed_bytes"] for r in normal + econ):
        ratios["observed_bytes"] = _median_of(econ, "observed_bytes") / _median_of(
            normal, "observed_bytes"
        )
    quality = paired(normal[-1]["segment_losses"], econ[-1]["segment_losses"])
    quality["same_in_every_series"] = all(
        r["segment_losses"] == modes[m][0]["segment_losses"] for m in modes for r in modes[m]
    )
    if controls:
        quality["rounding"] = rounding_control(
            normal[-1]["segment_losses"], econ[-1]["segment_losses"], controls
        )
    time_target = 1.02 if device.type == "cuda" else 1.15
    return {
        "device": describe_device(device),
        "observed_source": observed.source,
        "config": cfg.to_dict(),
        "level": level,
        "steps": steps,
        "series": series,
        "warmup": warmup,
        "schedule": schedule,
        "load_average": {"before": load_before, "after": os.getloadavg() if load_before else None},
        "seconds": round(time.time() - began, 1),
        "ratios": ratios,
        "quality": quality,
        "targets": {
            "peak_bytes_at_most": 0.46,
            "step_time_median_at_most": time_target,
            "met": {
                "peak_bytes": ratios["peak_bytes"] <= 0.46,
                "step_time_median": ratios["step_time_median"] <= time_target,
                "quality_ci_includes_zero": bool(quality.get("ci_includes_zero")),
                **(
                    {"quality_within_rounding_noise": quality["rounding"]["within_rounding_noise"]}
                    if "rounding" in quality
                    else {}
                ),
            },
        },
        "modes": modes,
    }


def describe_device(device: torch.device) -> dict[str, Any]:
    if device.type == "cuda":
        p = torch.cuda.get_device_properties(device)
        return {
            "type": "cuda",
            "name": p.name,
            "memory_bytes": p.total_memory,
            "torch": torch.__version__,
        }
    return {
        "type": "cpu",
        "name": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
    }


def table(report: dict[str, Any]) -> str:
    lines = [
        f"device: {report['device']['name']} ({report['device']['type']}); level {report['level']}; "
        f"{report['steps']} timed steps per run, {report['series']} series ({report['schedule']}), "
        f"{report['warmup']} warm-up",
        f"level {report['level']}: {economical.ABOUT.get(report['level'], '')}",
        f"{'mode':<11} {'series':>6} {'order':>5} {'median ms':>10} {'mean ms':>9} {'IQR ms':>17} "
        f"{'peak MB':>9} {'activ. MB':>9} {'observed MB':>11}",
    ]
    for mode, runs in report["modes"].items():
        for r in runs:
            q1, q3 = r["step_time_iqr"]
            obs = f"{r['observed_bytes'] / MB:.0f}" if r["observed_bytes"] else "-"
            lines.append(
                f"{mode:<11} {r['series']:>6} {r['order']:>5} {r['step_time_median'] * 1000:>10.1f} "
                f"{r['step_time_mean'] * 1000:>9.1f} {f'{q1 * 1000:.1f}–{q3 * 1000:.1f}':>17} "
                f"{r['peak_bytes'] / MB:>9.1f} {r['activation_bytes'] / MB:>9.1f} {obs:>11}"
            )
    ra, q = report["ratios"], report["quality"]
    lines.append(
        f"economical/normal: peak {ra['peak_bytes']:.3f}, activations {ra['activation_bytes']:.3f}, "
        f"median step {ra['step_time_median']:.3f}, mean step {ra['step_time_mean']:.3f}"
        + (
            f", paired median {ra['step_time_paired_median']:.3f}"
            if "step_time_paired_median" in ra
            else ""
        )
        + (f", CPU time {ra['cpu_time_median']:.3f}" if "cpu_time_median" in ra else "")
        + (f", observed {ra['observed_bytes']:.3f}" if "observed_bytes" in ra else "")
    )
    if "ops_per_step" in ra:
        n0, e0 = report["modes"]["normal"][0], report["modes"]["economical"][0]
        lines.append(
            f"work per step: operator calls (kernel launches) {e0['ops_per_step']} vs "
            f"{n0['ops_per_step']} ({ra['ops_per_step']:.3f}), FLOPs {e0['flops_per_step']:.3g} vs "
            f"{n0['flops_per_step']:.3g} ({ra['flops_per_step']:.3f})"
        )
    lines.append(
        f"held-out loss on {q['segments']} segments: normal {q.get('normal_loss', float('nan')):.4f}, "
        f"economical {q.get('economical_loss', float('nan')):.4f}, difference {q['diff']:+.3g} "
        f"(95% CI {q['ci95'][0]:+.3g} … {q['ci95'][1]:+.3g})"
    )
    if "rounding" in q:
        rc = q["rounding"]
        lines.append(
            "rounding control (normal mode from weights nudged by 2^-23): differences "
            + ", ".join(f"{d:+.3g}" for d in rc["control_diffs"])
            + f"; the economical difference is {rc['ratio_to_control']:.2f}x their RMS"
            + (" — within rounding noise" if rc["within_rounding_noise"] else " — beyond rounding noise")
        )
    met = report["targets"]["met"]
    lines.append(
        "targets: " + ", ".join(f"{k} {'met' if v else 'NOT met'}" for k, v in met.items())
    )
    return "\n".join(lines)


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.economical", description=__doc__.split("\n\n")[0]
    )
    p.add_argument(
        "--config",
        type=Path,
        help="a run.json (default: the issue's CPU configuration, or the lab's default model on a GPU)",
    )
    p.add_argument(
        "--data",
        type=Path,
        help="a prepared-data folder (default: data.dir of the config, else synthetic)",
    )
    p.add_argument(
        "--steps", type=int, help="timed steps per run (default 1024 on a GPU, 64 on the CPU)"
    )
    p.add_argument(
        "--series",
        type=int,
        default=2,
        help="series, alternating which mode goes first (default 2)",
    )
    p.add_argument(
        "--warmup",
        type=int,
        help="untimed steps at the start of each run (default 20 on a GPU, 3 on the CPU)",
    )
    p.add_argument(
        "--level",
        choices=["selective", "full"],
        help="the economical level (default: the config's, else selective)",
    )
    p.add_argument(
        "--segments", type=int, default=96, help="held-out segments for quality (default 96)"
    )
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument(
        "--schedule",
        choices=["sequential", "interleaved"],
        help="whole runs one after the other (default on a GPU), or both modes step by step, "
        "ABBA (default on the CPU: fairer on a shared machine; CPU memory is counted per model)",
    )
    p.add_argument(
        "--threads",
        type=int,
        help="CPU threads for torch (default: torch's own choice); with 1 the process's CPU "
        "time measures the work itself, even while other programs share the cores",
    )
    p.add_argument(
        "--no-control",
        dest="control",
        action="store_false",
        help="skip the rounding control (a third, untimed run per series: the normal mode "
        "from weights nudged by one rounding step, to tell a quality change from rounding noise)",
    )
    p.add_argument("--json", type=Path, help="write the full report here")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    try:
        cfg = load(args.config) if args.config else default_config(device)
        configured = economical_level(cfg.training.economical)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    level = args.level or (configured if configured != "off" else "selective")
    on_gpu = device.type == "cuda"
    steps = args.steps if args.steps is not None else (1024 if on_gpu else 64)
    warmup = args.warmup if args.warmup is not None else (20 if on_gpu else 3)
    if steps < 2 or args.series < 1 or warmup < 0:
        print(
            "error: --steps must be at least 2, --series at least 1, --warmup at least 0",
            file=sys.stderr,
        )
        return 2
    data_dir = args.data or (Path(cfg.data.dir) if cfg.data.dir else None)
    if data_dir is None:
        data_dir = synthetic_data(cfg.model.vocab, cfg.model.context, args.segments)
    try:
        data = open_prepared(data_dir)
    except DataError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if data.vocab_size > cfg.model.vocab:
        print(
            f"error: the data's vocabulary ({data.vocab_size}) is larger than model.vocab ({cfg.model.vocab})",
            file=sys.stderr,
        )
        return 2
    if device.type == "cuda" and cfg.training.deterministic:
        torch.use_deterministic_algorithms(True, warn_only=True)
    say(
        f"economical ({level}) vs normal on {device}: {steps} timed steps per run, {args.series} series"
    )
    schedule = args.schedule or ("sequential" if on_gpu else "interleaved")
    if schedule == "interleaved" and on_gpu:
        print(
            "error: --schedule interleaved is for the CPU: on a GPU the allocator's peak would mix both models",
            file=sys.stderr,
        )
        return 2
    report = compare(
        cfg, level, data, device, steps, args.series, warmup, args.segments, schedule, args.control
    )
    print(table(report), flush=True)
    if args.json:
        write_json(args.json, report)
        say(f"wrote {args.json}")
    return 0


def write_json(path: Path, report: dict[str, Any]) -> None:
    """Atomically: a temporary file in the same folder, fsync, rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main())
