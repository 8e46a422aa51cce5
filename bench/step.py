"""python -m bench.step — the trainer's step against a plain PyTorch loop of the same shape.

The plain loop is what a tutorial writes: nn.Linear layers, nn.LayerNorm, SDPA, AdamW with
its defaults, random batches from a tensor in memory, `loss.item()` each step. The trainer
side runs the real loop (trainer.run.train.Trainer) — memmapped data with the prefetcher,
events written and flushed every step, gradient clipping — so anything the data path,
logging or checkpointing costs is counted. Both run in this one process, in alternating
order, several series; per-step times are reported as medians with their spread.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from trainer.config.run_config import RunConfig, TrainingConfig, from_dict, parameter_count
from trainer.parallel.distributed import World
from trainer.run.train import Options, Trainer

# Peak dense matmul throughput (FLOP/s) for the model-FLOPs utilisation, by card name.
PEAK_FLOPS = {"T4": 65e12, "A100": 312e12, "H100": 989e12, "H200": 989e12, "L4": 121e12,
              "RTX 3050": 36e12, "RTX 5070 Ti": 176e12, "P100": 19e12}


class PlainBlock(nn.Module):
    def __init__(self, d: int, h: int) -> None:
        super().__init__()
        self.h = h
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d, bias=False) for _ in range(4))
        self.fc1, self.fc2 = nn.Linear(d, 4 * d, bias=False), nn.Linear(4 * d, d, bias=False)

    def forward(self, x):
        b, t, d = x.shape
        y = self.ln1(x)
        q, k, v = (m(y).view(b, t, self.h, d // self.h).transpose(1, 2) for m in (self.q, self.k, self.v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
        x = x + self.o(a)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class PlainGPT(nn.Module):
    def __init__(self, n: int, d: int, h: int, layers: int, vocab: int) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(n, d)
        self.blocks = nn.Sequential(*(PlainBlock(d, h) for _ in range(layers)))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.size(1), device=idx.device))
        return self.head(self.ln(self.blocks(x)))


def plain_series(cfg: RunConfig, tokens: torch.Tensor, steps: int, warmup: int, device: torch.device) -> list[float]:
    m, t = cfg.model, cfg.training
    torch.manual_seed(t.seed)
    model = PlainGPT(m.context, m.width, m.heads, m.layers, m.vocab).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=t.lr)
    times = []
    for i in range(warmup + steps):
        began = time.perf_counter()
        ix = torch.randint(len(tokens) - m.context - 1, (t.batch_per_card,))
        x = torch.stack([tokens[j : j + m.context] for j in ix]).to(device)
        y = torch.stack([tokens[j + 1 : j + 1 + m.context] for j in ix]).to(device)
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss.item()
        if i >= warmup:
            times.append(time.perf_counter() - began)
    return times


def trainer_series(cfg: RunConfig, data_dir: Path, steps: int, warmup: int, device: torch.device) -> list[float]:
    """Per-step wall time of the real loop, events and data path included."""
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp)
        raw = cfg.to_dict()
        raw["data"]["dir"] = str(data_dir)
        raw["training"]["steps_to"] = warmup + steps
        (run / "run.json").write_text(json.dumps(raw))
        trainer = Trainer(from_dict(raw), Options(run, device=device.type), World(), device)
        # In the trainer's own order (trainer.train._run_steps): the plan decides what the
        # data reader and the model are built for.
        trainer.take_plan()
        trainer.open_data()
        trainer.build()
        stamps: list[float] = []
        emit = trainer.events.emit

        def stamping_emit(event, step, **fields):
            record = emit(event, step, **fields)
            if event == "step":
                stamps.append(time.perf_counter())
            return record

        trainer.events.emit = stamping_emit
        trainer.events.echo = False
        stamps.append(time.perf_counter())
        trainer.train()
        trainer.events.close()
    gaps = np.diff(stamps)
    return list(gaps[warmup:])


def write_random_data(folder: Path, vocab: int, n_tokens: int, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    rng.integers(0, vocab, n_tokens, dtype=np.uint16).tofile(folder / "train.bin")
    rng.integers(0, vocab, n_tokens // 10, dtype=np.uint16).tofile(folder / "val.bin")
    (folder / "tokenizer.json").write_text("{}")
    (folder / "meta.json").write_text(json.dumps({"format": 1, "vocab_size": vocab, "data_id": f"random-{seed}"}))
    return folder


def summarize(times: list[float]) -> dict:
    q = np.percentile(times, [25, 50, 75])
    return {"median_ms": q[1] * 1e3, "iqr_ms": [q[0] * 1e3, q[2] * 1e3], "mean_ms": statistics.fmean(times) * 1e3, "n": len(times)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.step", description=__doc__.splitlines()[0])
    p.add_argument("--context", type=int, default=256)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--vocab", type=int, default=4000)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=30, help="measured steps per series")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--series", type=int, default=4, help="series per side, in alternating order")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--json", type=Path, help="also write the results here")
    args = p.parse_args(argv)
    device = torch.device("cuda" if args.device != "cpu" and torch.cuda.is_available() else "cpu")
    cfg = RunConfig()
    cfg.model.__dict__.update(context=args.context, width=args.width, heads=args.heads, layers=args.layers, vocab=args.vocab)
    # No samples: the data here has no tokenizer, and the step is what is timed.
    cfg.training = TrainingConfig(batch_per_card=args.batch, eval_every=10**9, warmup_steps=0, sample_tokens=0)
    with tempfile.TemporaryDirectory() as tmp:
        data = write_random_data(Path(tmp), args.vocab, 2_000_000)
        tokens = torch.from_numpy(np.fromfile(data / "train.bin", dtype=np.uint16).astype(np.int64))
        sides: dict[str, list[float]] = {"trainer": [], "plain": []}
        for s in range(args.series):
            order = ["trainer", "plain"] if s % 2 == 0 else ["plain", "trainer"]
            for side in order:
                if side == "trainer":
                    got = trainer_series(cfg, data, args.steps, args.warmup, device)
                else:
                    got = plain_series(cfg, tokens, args.steps, args.warmup, device)
                sides[side] += got
                print(f"series {s + 1}/{args.series} {side:<8} median {np.median(got) * 1e3:8.2f} ms/step")
    params = parameter_count(cfg.model)
    tokens_per_step = args.batch * args.context
    flops_per_token = 6 * params + 12 * args.layers * args.context * args.width
    result = {
        "device": torch.cuda.get_device_name() if device.type == "cuda" else f"cpu ({torch.get_num_threads()} threads)",
        "torch": torch.__version__,
        "shape": {k: v for k, v in vars(args).items() if k != "json"} | {"params": params, "tokens_per_step": tokens_per_step},
        "trainer": summarize(sides["trainer"]),
        "plain": summarize(sides["plain"]),
    }
    result["ratio_median"] = result["trainer"]["median_ms"] / result["plain"]["median_ms"]
    tps = tokens_per_step / (result["trainer"]["median_ms"] / 1e3)
    result["trainer"]["tokens_per_s"] = tps
    if device.type == "cuda":
        name = torch.cuda.get_device_name()
        peak = next((v for k, v in PEAK_FLOPS.items() if k in name), None)
        result["mfu"] = tps * flops_per_token / peak if peak else None
    print(f"\ntrainer median {result['trainer']['median_ms']:.2f} ms (IQR {result['trainer']['iqr_ms'][0]:.2f}–{result['trainer']['iqr_ms'][1]:.2f}), "
          f"plain median {result['plain']['median_ms']:.2f} ms (IQR {result['plain']['iqr_ms'][0]:.2f}–{result['plain']['iqr_ms'][1]:.2f}); "
          f"trainer/plain = {result['ratio_median']:.3f}; {tps:,.0f} tokens/s on {result['device']}")
    if result.get("mfu") is not None:
        print(f"model-FLOPs utilisation: {result['mfu']:.1%}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    from trainer.base.streams import utf8_stdio

    utf8_stdio()  # a redirected stdout in UTF-8 on Windows too (trainer/base/streams.py)
    raise SystemExit(main())
