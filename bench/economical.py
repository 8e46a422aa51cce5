"""The economical mode against the normal mode, side by side, in one process.

    python -m bench.economical [--config RUN.json] [--data DIR] [--steps N]
        [--series S] [--level off|selective|full] [--lean-state off|on|fused|offload]
        [--warmup W] [--device auto|cpu|cuda] [--json FILE]
        [--schedule sequential|interleaved] [--controls C]
    (also `ternit bench economical ...`)

The economical combination is an activation level (training.economical: selective or
full recompute) and the lean training state (training.lean_state: 8-bit moments, 16-bit
weights, the optimizer step inside the backward pass: trainer/step/lean.py), as RUN.json names
them or the flags override; the normal mode is neither.

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
live tensor storages on the CPU: trainer.step.memory), the activations the forward pass left
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

Without --config and with the lean state off, the model is issue 8's CPU configuration
(context 512, width 128, 4 layers, 4 heads, batch 16, vocabulary 1024) on the CPU, and the lab's default model
(context 1024, width 512, 8 layers, 8 heads, batch 6, vocabulary 4000) on a GPU. Without
--data (or data.dir in the config) a synthetic prepared-data folder is made with
bench/synthetic.py. Without --config and with the lean state on, it is issue 13's
state-dominated shape (context 256, width 1024, 4 layers, 8 heads, vocabulary 4000,
batch 1, bf16: ≈ 54.7 M weights, where weights, gradients and moments dwarf the
activations, as at the lab's full model), on the CPU and on a GPU alike.

On the CPU, bitsandbytes' 8-bit update is a Python fallback: its fp32 temporaries (the
dequantized moments, the gradient, the weight and the denominator of one parameter) live
inside one library operator, where the storage count cannot see them. The report gives
their bound (`library_temporaries_bytes`, 20 bytes a weight of the largest parameter); a
GPU runs the update as one kernel without them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from trainer.config.run_config import (
    ECONOMICAL_LEVELS,
    LEAN_MODES,
    ConfigError,
    ModelConfig,
    RunConfig,
    TrainingConfig,
    economical_level,
    lean_mode,
    load,
)
from trainer.plan.preflight import DataError
from trainer.run.data import PreparedData, open_prepared

from .econ_report import describe_device, table, write_json
from .econ_run import (  # noqa: F401 — perturb_weights re-exported for the tests
    ModeRun,
    Observed,
    fresh_device,
    perturb_weights,
    run_whole,
)
from .econ_stats import (  # noqa: F401 — t_quantile_975 re-exported for the tests
    iqr,
    median_of,
    paired,
    pooled,
    rounding_control,
    t_quantile_975,
)
from .synthetic import make_prepared

CPU_MODEL = ModelConfig(context=512, width=128, heads=4, layers=4, vocab=1024)
CPU_BATCH = 16
GPU_MODEL = ModelConfig(context=1024, width=512, heads=8, layers=8, vocab=4000)
GPU_BATCH = 6
# Issue 13's state-dominated shape: 1 × 256 tokens a step, ≈ 54.7 M weights.
STATE_MODEL = ModelConfig(context=256, width=1024, heads=8, layers=4, vocab=4000)
STATE_BATCH = 1
MB = 2**20
# The peak targets (economical / normal): issue 8's activation levels alone, and issue
# 13's lean state with selective recompute at the state-dominated shape.
PEAK_TARGET = 0.46
LEAN_PEAK_TARGET = 0.35


# ---- set-up ----------------------------------------------------------------------------


def pick_device(name: str) -> torch.device:
    if name == "cuda" or (name == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise SystemExit("error: --device cuda asked for, but torch sees no CUDA device")
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def default_config(device: torch.device, lean: str = "off") -> RunConfig:
    """Issue 13's state-dominated shape for the lean state, else issue 8's shapes."""
    if lean != "off":
        training = TrainingConfig(batch_per_card=STATE_BATCH, warmup_steps=20, precision="bf16")
        return RunConfig(name="bench-economical", model=replace(STATE_MODEL), training=training)
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
    lean: str = "off",
    controls: int | None = None,
) -> dict[str, Any]:
    """Normal mode against the combination (level, lean) over `series` series; with
    `control`, `controls` rounding-control runs in all (default one per series)."""
    observed = Observed(device)
    control_losses: list[list[float]] = []
    modes: dict[str, list[dict[str, Any]]] = {"normal": [], "economical": []}
    names = {"normal": ("off", "off"), "economical": (level, lean)}
    n_controls = (series if controls is None else controls) if control else 0
    load_before = os.getloadavg() if hasattr(os, "getloadavg") else None
    began = time.time()
    for s in range(series):
        order = ["normal", "economical"] if s % 2 == 0 else ["economical", "normal"]
        run = run_sequential if schedule == "sequential" else run_interleaved
        for position, (mode, r) in enumerate(run(cfg, names, order, data, device, steps, warmup,
                                                   observed, segments, f"series {s + 1}/{series}"), 1):
            r.update(series=s + 1, order=position)
            modes[mode].append(r)
        for c in range(s, n_controls, series):  # this series' share of the controls
            say(f"series {s + 1}/{series}: control {c + 1}/{n_controls}, the normal mode from "
                "weights nudged by 2^-23, not timed")
            done = run_whole(cfg, ("off", "off"), data, device, steps, warmup, observed, segments,
                             perturb=1000 + c)
            control_losses.append(done["segment_losses"])
    report = summarize(modes, control_losses, device, schedule, lean, level)
    report.update(
        observed_source=observed.source, config=cfg.to_dict(), steps=steps, series=series,
        warmup=warmup, schedule=schedule, seconds=round(time.time() - began, 1),
        load_average={"before": load_before, "after": os.getloadavg() if load_before else None},
    )
    return report


def run_sequential(
    cfg: RunConfig, names: dict[str, tuple[str, str]], order: list[str], data: PreparedData,
    device: torch.device, steps: int, warmup: int, observed: Observed, segments: int, label: str,
) -> list[tuple[str, dict[str, Any]]]:
    """Whole runs one after the other, in `order`."""
    out = []
    for position, mode in enumerate(order, 1):
        say(f"{label}: {mode} ({describe_mode(*names[mode])}) run {position} of 2, {warmup}+1+{steps} steps")
        r = run_whole(cfg, names[mode], data, device, steps, warmup, observed, segments)
        say(f"  median {r['step_time_median'] * 1000:.1f} ms, peak {r['peak_bytes'] / MB:.1f} MB")
        out.append((mode, r))
    return out


def run_interleaved(
    cfg: RunConfig, names: dict[str, tuple[str, str]], order: list[str], data: PreparedData,
    device: torch.device, steps: int, warmup: int, observed: Observed, segments: int, label: str,
) -> list[tuple[str, dict[str, Any]]]:
    """Both modes step by step, ABBA: which goes first alternates every step."""
    say(f"{label}: both modes step by step, {order[0]} first, {warmup}+1+{steps} steps")
    fresh_device(device)
    runs = {mode: ModeRun(cfg, *names[mode], data, device, steps, warmup, observed) for mode in order}
    for i in range(runs["normal"].total):
        for mode in order if i % 2 == 0 else order[::-1]:
            runs[mode].step(i)
    out = []
    for mode in order:
        r = runs[mode].finish(segments)
        say(f"  {mode}: median {r['step_time_median'] * 1000:.1f} ms, peak {r['peak_bytes'] / MB:.1f} MB")
        out.append((mode, r))
    return out


def describe_mode(level: str, lean: str) -> str:
    return level if lean == "off" else f"{level} + lean_state {lean}"


def summarize(
    modes: dict[str, list[dict[str, Any]]], controls: list[list[float]], device: torch.device,
    schedule: str, lean: str, level: str,
) -> dict[str, Any]:
    """The ratios (economical / normal), the held-out quality and the targets."""
    normal, econ = modes["normal"], modes["economical"]
    nt, et = pooled(normal), pooled(econ)
    ratios = {
        "peak_bytes": median_of(econ, "peak_bytes") / median_of(normal, "peak_bytes"),
        "activation_bytes": median_of(econ, "activation_bytes")
        / max(1, median_of(normal, "activation_bytes")),
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
        if lean != "off":
            # The lean state's CPU update holds fp32 temporaries the count cannot see: the
            # ratio with their bound added to the economical peak, the pessimistic figure.
            ratios["peak_bytes_with_library_temporaries"] = (
                median_of(econ, "peak_bytes") + econ[0]["library_temporaries_bytes"]
            ) / median_of(normal, "peak_bytes")
    if all(r["observed_bytes"] for r in normal + econ):
        ratios["observed_bytes"] = median_of(econ, "observed_bytes") / median_of(
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
    return {"device": describe_device(device), "level": level, "lean_state": lean,
            "ratios": ratios, "quality": quality,
            "targets": targets(ratios, quality, device, lean), "modes": modes}


def targets(ratios: dict[str, Any], quality: dict[str, Any], device: torch.device, lean: str) -> dict[str, Any]:
    """Issue 8's targets for the activation levels; issue 13's for the lean state (peak
    ≤ 0.35×, a step ≤ 1.10× on a GPU, no speed target on the CPU)."""
    peak_target = LEAN_PEAK_TARGET if lean != "off" else PEAK_TARGET
    if lean != "off":
        time_target = 1.10 if device.type == "cuda" else None
    else:
        time_target = 1.02 if device.type == "cuda" else 1.15
    met: dict[str, bool] = {"peak_bytes": ratios["peak_bytes"] <= peak_target}
    if time_target is not None:
        met["step_time_median"] = ratios["step_time_median"] <= time_target
    met["quality_ci_includes_zero"] = bool(quality.get("ci_includes_zero"))
    if "rounding" in quality:
        met["quality_within_rounding_noise"] = quality["rounding"]["within_rounding_noise"]
    return {"peak_bytes_at_most": peak_target, "step_time_median_at_most": time_target, "met": met}


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
        choices=list(ECONOMICAL_LEVELS),
        help="the economical level (default: the config's; without the lean state, selective "
        "where the config says off)",
    )
    p.add_argument(
        "--lean-state",
        choices=list(LEAN_MODES),
        help="the lean training state of the economical mode (default: the config's "
        "training.lean_state, else off); without --config, on picks issue 13's "
        "state-dominated shape",
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
    p.add_argument(
        "--controls",
        type=int,
        help="rounding-control runs in all, shared out over the series (default one per series)",
    )
    p.add_argument("--json", type=Path, help="write the full report here")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    try:
        cfg = load(args.config) if args.config else default_config(device, args.lean_state or "off")
        configured = economical_level(cfg.training.economical)
        lean = args.lean_state or lean_mode(cfg.training.lean_state)
        if lean != "off":  # a missing library or an unserved device: one line, before any run
            from trainer.step.lean import check_device

            check_device(device)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    level = args.level or configured
    if level == "off" and lean == "off":
        level = "selective"  # something to compare with the normal mode
    on_gpu = device.type == "cuda"
    steps = args.steps if args.steps is not None else (1024 if on_gpu else 64)
    warmup = args.warmup if args.warmup is not None else (20 if on_gpu else 3)
    if steps < 2 or args.series < 1 or warmup < 0 or (args.controls or 0) < 0:
        print(
            "error: --steps must be at least 2, --series at least 1, --warmup and --controls at least 0",
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
        f"economical ({describe_mode(level, lean)}) vs normal on {device}: {steps} timed steps per run, "
        f"{args.series} series"
    )
    schedule = args.schedule or ("sequential" if on_gpu else "interleaved")
    if schedule == "interleaved" and on_gpu:
        print(
            "error: --schedule interleaved is for the CPU: on a GPU the allocator's peak would mix both models",
            file=sys.stderr,
        )
        return 2
    report = compare(
        cfg, level, data, device, steps, args.series, warmup, args.segments, schedule, args.control,
        lean=lean, controls=args.controls,
    )
    print(table(report), flush=True)
    if args.json:
        write_json(args.json, report)
        say(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    from trainer.base.streams import utf8_stdio

    utf8_stdio()  # a redirected stdout in UTF-8 on Windows too (trainer/base/streams.py)
    sys.exit(main())
