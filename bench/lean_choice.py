"""Which library holds the lean state's 8-bit moments: bitsandbytes or torchao, measured.

    python -m bench.lean_choice [--steps N] [--warmup W] [--variants a,b,...]
        [--width D] [--layers L] [--context T] [--batch B] [--vocab V] [--json FILE]
        [--clip C] [--keep-compile-cache]

On the CPU with one thread, every variant trains its own copy of the same small model
(the trainer's GPT, the same initial weights) on the same batches, step by step side by
side in one process; the order of the variants is rotated every step, so that on a
shared machine each meets the same changing load in every position. The variants:

    adamw          torch AdamW, fused, fp32 weights and moments (the normal mode)
    bnb8           bitsandbytes AdamW8bit, fp32 weights (clip exact, step after backward)
    ao8            torchao AdamW8bit, fp32 weights
    lean           trainer/step/lean.py at fp32, lean_state "fused": bitsandbytes 8-bit
                   moments, the step inside the second of two backward passes, clipped
                   exactly (trainer.step.step.train_step)
    adamw_bf16     torch AdamW fused, fp32 weights, bf16 autocast (the normal mode at bf16)
    lean_bf16      trainer/step/lean.py at bf16: bf16 weights with stochastic rounding
    ao8_bf16sr     torchao AdamW8bit(bf16_stochastic_round=True) on bf16 weights
    ao_bf16sr      torchao _AdamW(bf16_stochastic_round=True): bf16 weights, fp32 moments

The torchao variants are skipped (said so) when torchao is not installed. torchao's step
is compiled (torch.compile) at its first call: the first step's time is reported apart
("first step"), and by default the compile cache is a fresh temporary folder, so the
figure is the cold compile a user's first run pays (--keep-compile-cache uses the usual
one). The first W steps are not timed. Step times are the wall clock of the whole step
(forward, backward, clipping, update) and, where the update is a separate call, of the
update alone (`opt_s`); the fused lean variants have no separate update.

Memory: the bytes of the optimizer's state tensors (each storage counted once) and of the
weights. Quality: the mean held-out loss of each trained model on the same validation
segments, and its paired difference from `adamw` (or from `adamw_bf16` for the bf16
variants: the same forward precision). The data: bench/synthetic.py's prepared folder.
The library's own effect is bnb8 and ao8 against adamw; the lean variants add the
trainer's bf16 rounding and its fused step (an earlier version clipped by the previous
step's norm there, which moved their loss far more than the library: bench/clip_lag.py).
The choice and the figures: docs/LEAN.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from trainer.config.run_config import ModelConfig, TrainingConfig
from trainer.model.gpt import GPT
from trainer.run.data import PreparedData, eval_offsets, get_batch, open_prepared
from trainer.step.optim import Schedule, autocast, make_optimizer, make_scaler
from trainer.step.step import train_step

from .synthetic import make_prepared

VARIANTS = ("adamw", "bnb8", "ao8", "lean", "adamw_bf16", "lean_bf16", "ao8_bf16sr", "ao_bf16sr")
BF16 = {"adamw_bf16", "lean_bf16", "ao8_bf16sr", "ao_bf16sr"}
TORCHAO = {"ao8", "ao8_bf16sr", "ao_bf16sr"}
BETAS, EPS = (0.9, 0.95), 1e-8


def torchao_available() -> bool:
    try:
        import torchao.optim  # noqa: F401
    except ImportError:
        return False
    return True


def _groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    from trainer.step.lean import param_groups

    return param_groups(model, weight_decay)


def make_variant_optimizer(name: str, model: nn.Module, t: TrainingConfig) -> torch.optim.Optimizer:
    """The optimizer of variant `name` over `model` (already in its weights' dtype)."""
    cpu = torch.device("cpu")
    if name in ("adamw", "adamw_bf16"):
        return make_optimizer(model, t, cpu)
    if name == "bnb8":
        from trainer.step.lean import import_library

        bnb = import_library()
        return bnb.optim.AdamW8bit(_groups(model, t.weight_decay), lr=t.lr, betas=BETAS, eps=EPS)
    if name in ("lean", "lean_bf16"):
        from trainer.step.lean import LeanOptimizer

        return LeanOptimizer(model, t, cpu, "bf16" if name == "lean_bf16" else "fp32", "fused")
    from torchao.optim import AdamW8bit, _AdamW

    groups = _groups(model, t.weight_decay)
    if name == "ao8":
        return AdamW8bit(groups, lr=t.lr, betas=BETAS, eps=EPS)
    if name == "ao8_bf16sr":
        return AdamW8bit(groups, lr=t.lr, betas=BETAS, eps=EPS, bf16_stochastic_round=True)
    if name == "ao_bf16sr":
        return _AdamW(groups, lr=t.lr, betas=BETAS, eps=EPS, bf16_stochastic_round=True)
    raise ValueError(f"unknown variant {name!r}; known: {', '.join(VARIANTS)}")


def state_bytes(optimizer: torch.optim.Optimizer) -> int:
    """Bytes of every tensor in the optimizer's state, each storage once (bitsandbytes shares
    its quantization map; torchao's 8-bit state is a tensor subclass of codes and scales)."""
    seen: dict[int, int] = {}

    def count(t: torch.Tensor) -> None:
        flatten = getattr(type(t), "__tensor_flatten__", None)
        if flatten is not None and type(t) is not torch.Tensor and not isinstance(t, nn.Parameter):
            names, _ = t.__tensor_flatten__()
            for n in names:
                count(getattr(t, n))
            return
        st = t.untyped_storage()
        seen[st.data_ptr()] = st.nbytes()

    for s in optimizer.state.values():
        for v in s.values():
            if torch.is_tensor(v):
                count(v)
    return sum(seen.values())


@dataclass
class Variant:
    """One variant's model, optimizer and measurements."""

    name: str
    model: GPT
    optimizer: torch.optim.Optimizer
    precision: str
    clip: float
    wall: list[float] = field(default_factory=list)
    opt: list[float] = field(default_factory=list)
    warm_wall: list[float] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)

    @property
    def fused(self) -> bool:
        return getattr(self.optimizer, "step_kind", None) == "fused"

    def step(self, batch: tuple[torch.Tensor, torch.Tensor], lr: float, timed: bool) -> None:
        for g in self.optimizer.param_groups:
            if torch.is_tensor(g["lr"]):  # torchao keeps the rate in a tensor (no recompile)
                g["lr"].fill_(lr)
            else:
                g["lr"] = lr
        x, y = batch
        cpu = torch.device("cpu")
        w0 = time.perf_counter()
        if self.fused:  # the trainer's own step: two backward passes, the update inside
            loss = train_step(self.model, self.optimizer, make_scaler("fp32", cpu), batch, lr,
                              self.precision, cpu, self.clip, "fused")
            opt_s = None
        else:
            with autocast(self.precision, cpu):
                loss = self.model(x, y)
            loss.backward()
            if self.clip > 0:
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip, foreach=True)
            o0 = time.perf_counter()
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
            opt_s = time.perf_counter() - o0
        wall = time.perf_counter() - w0
        self.losses.append(float(loss.detach()))
        if timed:
            self.wall.append(wall)
            if opt_s is not None:
                self.opt.append(opt_s)
        else:
            self.warm_wall.append(wall)


def build(name: str, cfg: ModelConfig, t: TrainingConfig) -> Variant:
    model = GPT(cfg)
    model.init_weights(t.seed)
    bf16 = name in BF16
    if bf16 and not name.startswith(("adamw", "lean")):
        model.to(torch.bfloat16)  # torchao's stochastic rounding updates bf16 weights
    optimizer = make_variant_optimizer(name, model, t)  # the lean state casts its own
    return Variant(name, model, optimizer, "bf16" if bf16 else "fp32", t.grad_clip)


@torch.no_grad()
def held_out(model: GPT, data: PreparedData, context: int, segments: int, batch: int) -> list[float]:
    offsets = eval_offsets(len(data.val), context, segments)
    model.eval()
    out: list[float] = []
    for i in range(0, len(offsets), batch):
        rows = np.stack([np.asarray(data.val[o : o + context + 1], dtype=np.int64) for o in offsets[i : i + batch]])
        tk = torch.from_numpy(rows)
        out.extend(model.segment_losses(tk[:, :-1], tk[:, 1:]).double().tolist())
    model.train()
    return out


def spread(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    q = statistics.quantiles(values, n=4, method="inclusive") if len(values) > 1 else [values[0]] * 3
    return {"median": statistics.median(values), "q1": q[0], "q3": q[2], "min": min(values), "max": max(values)}


def train_side_by_side(
    variants: list[Variant], data: PreparedData, cfg: ModelConfig, t: TrainingConfig, steps: int, warmup: int,
    say: Callable[[str], None],
) -> None:
    schedule = Schedule.fresh(t)
    total = warmup + steps
    for i in range(total):
        batch = get_batch(data.train, cfg.context, t.batch_per_card, t.seed, i, 0)
        k = i % len(variants)
        for v in variants[k:] + variants[:k]:  # rotated: every variant in every position
            v.step(batch, schedule.at(i), timed=i >= warmup)
        if i == 0 or (i + 1) % 10 == 0:
            say(f"step {i + 1}/{total}")


def report_of(v: Variant, data: PreparedData, cfg: ModelConfig, batch: int, segments: int) -> dict[str, Any]:
    weights = sum(p.numel() for p in v.model.parameters())
    return {
        "variant": v.name,
        "precision": v.precision,
        "fused_into_backward": v.fused,
        "first_step_s": v.warm_wall[0] if v.warm_wall else None,
        "warmup_steps_s": v.warm_wall,
        "step_s": spread(v.wall),
        "opt_s": spread(v.opt),
        "step_times_s": v.wall,
        "opt_times_s": v.opt,
        "state_bytes": state_bytes(v.optimizer),
        "state_bytes_per_weight": state_bytes(v.optimizer) / weights,
        "weight_bytes": sum(p.numel() * p.element_size() for p in v.model.parameters()),
        "final_train_loss": v.losses[-1],
        "losses": v.losses,
        "segment_losses": held_out(v.model, data, cfg.context, segments, batch),
    }


def compare(results: dict[str, dict[str, Any]]) -> None:
    """Each variant's held-out difference from its reference, and time ratios."""
    for name, r in results.items():
        ref_name = "adamw_bf16" if name in BF16 and "adamw_bf16" in results else "adamw"
        ref = results.get(ref_name)
        r["held_out"] = statistics.fmean(r["segment_losses"])
        if ref is None:
            continue
        diffs = [a - b for a, b in zip(r["segment_losses"], ref["segment_losses"], strict=True)]
        r["reference"] = ref_name
        r["held_out_diff"] = statistics.fmean(diffs)
        r["held_out_diff_sd"] = statistics.stdev(diffs) if len(diffs) > 1 else 0.0
        # Per-step ratios (the same step of both, met under the same load), their median.
        r["step_ratio"] = statistics.median(a / b for a, b in zip(r["step_times_s"], ref["step_times_s"], strict=True))
        if r["opt_times_s"] and ref["opt_times_s"]:
            r["opt_ratio"] = statistics.median(a / b for a, b in zip(r["opt_times_s"], ref["opt_times_s"], strict=True))


def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info: dict[str, Any] = {"cpu": cpu, "cores": os.cpu_count(), "threads_used": torch.get_num_threads(),
                            "python": platform.python_version(), "torch": torch.__version__}
    try:
        import bitsandbytes

        info["bitsandbytes"] = bitsandbytes.__version__
    except ImportError:
        info["bitsandbytes"] = None
    try:
        import torchao

        info["torchao"] = torchao.__version__
    except ImportError:
        info["torchao"] = None
    if hasattr(os, "getloadavg"):
        info["load_average"] = list(os.getloadavg())
    return info


def table(report: dict[str, Any]) -> str:
    lines = [
        f"{'variant':<11} {'step ms (q1–q3)':>20} {'×ref':>6} {'update ms':>10} {'×ref':>6} "
        f"{'1st step s':>10} {'state B/w':>9} {'held-out':>8} {'Δ ref':>8}"
    ]
    for r in report["results"].values():
        s, o = r["step_s"], r["opt_s"]
        step = f"{s['median'] * 1e3:.0f} ({s['q1'] * 1e3:.0f}–{s['q3'] * 1e3:.0f})"
        upd = f"{o['median'] * 1e3:.1f}" if o else "in bwd"
        lines.append(
            f"{r['variant']:<11} {step:>20} {r.get('step_ratio', 1.0):>6.2f} {upd:>10} "
            f"{r.get('opt_ratio', 1.0) if o else float('nan'):>6.2f} {r['first_step_s']:>10.2f} "
            f"{r['state_bytes_per_weight']:>9.2f} {r['held_out']:>8.4f} {r.get('held_out_diff', 0.0):>+8.4f}"
        )
    return "\n".join(lines)


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.lean_choice", description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=40, help="timed steps after the warm-up")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first (torchao compiles in the first)")
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--context", type=int, default=128)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--vocab", type=int, default=4000)
    p.add_argument("--segments", type=int, default=64, help="held-out segments for the loss")
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--clip", type=float, default=1.0, help="training.grad_clip (0: off)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--data", type=Path, help="a prepared-data folder (default: a synthetic one)")
    p.add_argument("--json", type=Path, help="write the whole report here")
    p.add_argument("--keep-compile-cache", action="store_true",
                   help="use inductor's usual cache instead of a fresh one (torchao's first step)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    torch.set_num_threads(args.threads)

    def say(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    names = [n.strip() for n in args.variants.split(",") if n.strip()]
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        say(f"unknown variant(s) {', '.join(unknown)}; known: {', '.join(VARIANTS)}")
        return 2
    if not torchao_available() and any(n in TORCHAO for n in names):
        say("torchao is not installed: its variants are skipped (pip install torchao to measure them)")
        names = [n for n in names if n not in TORCHAO]
    cache = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    try:
        return _measure(args, names, say)
    finally:  # the fresh compile cache was this run's only
        if cache is None:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
        else:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache


def _measure(args: argparse.Namespace, names: list[str], say: Callable[[str], None]) -> int:
    with tempfile.TemporaryDirectory(prefix="ternit-lean-choice-") as tmp:
        if not args.keep_compile_cache:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(Path(tmp) / "inductor")
        data = open_prepared(args.data or make_prepared(Path(tmp) / "data", vocab=512, sentences=20000))
        if data.vocab_size > args.vocab:
            say(f"the data's vocabulary ({data.vocab_size}) is larger than --vocab {args.vocab}")
            return 2
        cfg = ModelConfig(context=args.context, width=args.width, heads=args.heads, layers=args.layers,
                          vocab=args.vocab)
        total = args.warmup + args.steps
        t = TrainingConfig(batch_per_card=args.batch, lr=args.lr, warmup_steps=max(1, total // 10),
                           steps_to=total, grad_clip=args.clip)
        before = machine()
        variants = [build(n, cfg, t) for n in names]
        weights = sum(p.numel() for p in variants[0].model.parameters())
        say(f"{weights:,} weights; variants: {', '.join(names)}; {total} steps on {args.threads} thread(s)")
        started = time.perf_counter()
        train_side_by_side(variants, data, cfg, t, args.steps, args.warmup, say)
        results = {v.name: report_of(v, data, cfg, args.batch, args.segments) for v in variants}
        compare(results)
        report = {
            "machine": before,
            "load_average_after": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
            "wall_s": time.perf_counter() - started,
            "model": {"context": cfg.context, "width": cfg.width, "heads": cfg.heads, "layers": cfg.layers,
                      "vocab": cfg.vocab, "weights": weights, "batch": args.batch},
            "steps": args.steps, "warmup": args.warmup, "lr": args.lr, "clip": args.clip,
            "results": results,
        }
    print(table(report))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    from trainer.base.streams import utf8_stdio

    utf8_stdio()  # a redirected stdout in UTF-8 on Windows too (trainer/base/streams.py)
    sys.exit(main())
