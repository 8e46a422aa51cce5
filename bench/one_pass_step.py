"""ternit bench one-pass (python -m bench.one_pass_step) [--layers L --width D --heads H --context N --vocab V --batch B --rounds R]:
the trainer's one-pass lean step (lean_state "one_pass") against its normal step (AdamW) at a
small shape on the CPU, alternating: each round times one step of each, in turns (which goes
first alternates), after a warm-up; prints the medians, the per-round ratio's median and its
quartiles (the spread), as JSON. The steps are trainer.step.step.train_step, unchanged."""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import torch

from trainer.config.run_config import ModelConfig, TrainingConfig
from trainer.model.gpt import GPT
from trainer.step.one_pass import OnePassOptimizer
from trainer.step.optim import make_optimizer, make_scaler
from trainer.step.step import train_step


def measure(cfg: ModelConfig, batch: int, rounds: int, warmup: int = 3, threads: int = 1) -> dict[str, Any]:
    torch.set_num_threads(threads)
    cpu = torch.device("cpu")
    t = TrainingConfig(lr=1e-3, grad_clip=1.0, batch_per_card=batch)
    arms = {}
    for kind in ("normal", "one_pass"):
        model = GPT(cfg)
        model.init_weights(t.seed)
        opt = make_optimizer(model, t, cpu) if kind == "normal" else OnePassOptimizer(model, t, cpu, "fp32")
        arms[kind] = (model, opt)
    scaler = make_scaler("fp32", cpu)
    g = torch.Generator().manual_seed(0)

    def one(kind: str) -> float:
        model, opt = arms[kind]
        x = torch.randint(0, cfg.vocab, (batch, cfg.context + 1), generator=g)
        start = time.perf_counter()
        loss = train_step(model, opt, scaler, (x[:, :-1], x[:, 1:]), t.lr, "fp32", cpu, t.grad_clip, kind)
        float(loss)
        return (time.perf_counter() - start) * 1000

    times: dict[str, list[float]] = {"normal": [], "one_pass": []}
    for r in range(warmup + rounds):
        order = ("normal", "one_pass") if r % 2 == 0 else ("one_pass", "normal")
        got = {k: one(k) for k in order}
        if r >= warmup:
            for k, v in got.items():
                times[k].append(v)
    ratios = sorted(b / a for a, b in zip(times["normal"], times["one_pass"], strict=True))
    q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    return {"shape": {"layers": cfg.layers, "width": cfg.width, "heads": cfg.heads, "context": cfg.context,
                      "vocab": cfg.vocab, "batch": batch}, "rounds": rounds, "threads": threads,
            "normal_ms_median": statistics.median(times["normal"]),
            "one_pass_ms_median": statistics.median(times["one_pass"]),
            "ratio_median": statistics.median(ratios), "ratio_quartiles": [q[0], q[2]],
            "ratio_range": [ratios[0], ratios[-1]], "torch": torch.__version__}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.one_pass_step", description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--context", type=int, default=256)
    ap.add_argument("--vocab", type=int, default=4000)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args(argv)
    cfg = ModelConfig(context=a.context, width=a.width, heads=a.heads, layers=a.layers, vocab=a.vocab)
    print(json.dumps(measure(cfg, a.batch, a.rounds, threads=a.threads), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
