"""This machine's training rate, measured quickly: a few real training steps of a small
GPT on random tokens on the CPU (the trainer's own model, optimizer and step), timed
after one warm-up step. The lab starts it as a child process when it knows nothing of the
CPU's speed (app/sizing/cpu_rate.py), so the window never imports torch.

    python -m trainer.run.rate --layers 4 --width 256 --heads 4 --context 256 --vocab 4000 \
        --batch 4 --steps 4 --out RATE.json

Writes (to --out, atomically, else stdout) one JSON object: the shape, the threads, the
step times and tokens_per_s (tokens of the timed steps over their time).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch

from trainer.config.run_config import ModelConfig, TrainingConfig
from trainer.model.gpt import GPT
from trainer.step.optim import make_optimizer, make_scaler
from trainer.step.step import train_step


def measure(layers: int, width: int, heads: int, context: int, vocab: int, batch: int, steps: int) -> dict:
    torch.manual_seed(0)
    model = GPT(ModelConfig(context=context, width=width, heads=heads, layers=layers, vocab=vocab))
    model.init_weights(0)
    dev = torch.device("cpu")
    opt = make_optimizer(model, TrainingConfig(), dev)
    scaler = make_scaler("fp32", dev)
    x = torch.randint(0, vocab, (batch, context))
    y = torch.randint(0, vocab, (batch, context))
    times = []
    for i in range(steps + 1):  # the first step builds the optimizer's state: not timed
        t0 = time.perf_counter()
        train_step(model, opt, scaler, (x, y), 1e-3, "fp32", dev, 1.0)
        if i:
            times.append(time.perf_counter() - t0)
    return {
        "layers": layers, "width": width, "heads": heads, "context": context, "vocab": vocab, "batch": batch,
        "params": sum(p.numel() for p in model.parameters()), "threads": torch.get_num_threads(),
        "step_s": times, "tokens_per_s": batch * context * len(times) / sum(times),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m trainer.run.rate", description=__doc__.split("\n\n")[0])
    for name, default in (("layers", 4), ("width", 256), ("heads", 4), ("context", 256), ("vocab", 4000),
                          ("batch", 4), ("steps", 4)):
        p.add_argument(f"--{name}", type=int, default=default)
    p.add_argument("--out", type=Path, default=None)
    a = p.parse_args(argv)
    result = measure(a.layers, a.width, a.heads, a.context, a.vocab, a.batch, max(1, a.steps))
    text = json.dumps(result)
    if a.out is None:
        print(text)
        return 0
    tmp = a.out.with_name(f".{a.out.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, a.out)  # a reader never sees half a file
    return 0


if __name__ == "__main__":
    from trainer.base.streams import utf8_stdio

    utf8_stdio()  # a redirected stdout in UTF-8 on Windows too (trainer/base/streams.py)
    sys.exit(main())
