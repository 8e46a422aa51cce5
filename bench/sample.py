"""python -m bench.sample — text generation with the key/value cache against a plain loop.

Side by side in one process, in alternating order, several series: `trainer.text.generate`
(each new token one position's forward pass over the cached keys and values) against the
loop nanoGPT's `generate` writes (the whole context run again for every new token), both
greedy from the same prompt on the same random-weight model, so their tokens must agree
(checked each series). Reported: tokens/s per side as medians with the spread.

Then what samples during training cost (trainer.run.samples: a few prompts, a short cached
continuation each, with every evaluation), as a share of the training time between two
evaluations: measured directly at the same model (one sampling round against training
steps of the trainer's model with AdamW at the default batch), and read from the events of
a real tiny trainer run with samples on (its `sample` events' seconds against its `step`
events' step_ms).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from trainer.config.run_config import ModelConfig
from trainer.model.gpt import GPT
from trainer.run.samples import PROMPT_TOKENS, PROMPTS
from trainer.text.generate import Sampling, generate, training_samples


@torch.no_grad()
def plain_generate(model: GPT, prompt: list[int], new: int) -> list[int]:
    """nanoGPT's loop, greedy: the whole (cropped) context through the model per token;
    like nanoGPT's inference forward, the output layer only at the last position."""
    n = model.cfg.context
    idx = torch.tensor([prompt])
    for _ in range(new):
        cond = idx if idx.size(1) <= n else idx[:, -n:]
        logits = F.linear(model.hidden(cond)[:, -1, :], model.tok.weight)
        nxt = torch.argmax(logits, dim=-1, keepdim=True)
        idx = torch.cat((idx, nxt), dim=1)
    return idx[0, len(prompt):].tolist()


def cached_generate(model: GPT, prompt: list[int], new: int) -> list[int]:
    return list(generate(model, prompt, new, Sampling(temperature=0), seed=0))


def spread(values: list[float]) -> dict:
    q = np.percentile(values, [0, 25, 50, 75, 100])
    return {"median": float(q[2]), "iqr": [float(q[1]), float(q[3])], "min": float(q[0]), "max": float(q[4]), "n": len(values)}


def side_by_side(model: GPT, prompt: list[int], new: int, series: int) -> dict:
    sides = {"cached": cached_generate, "plain": plain_generate}
    speed: dict[str, list[float]] = {"cached": [], "plain": []}
    equal = []
    cached_generate(model, prompt, 4)  # warm-up: the first calls allocate
    plain_generate(model, prompt, 4)
    for s in range(series):
        order = ["cached", "plain"] if s % 2 == 0 else ["plain", "cached"]
        out = {}
        for side in order:
            began = time.perf_counter()
            out[side] = sides[side](model, prompt, new)
            seconds = time.perf_counter() - began
            speed[side].append(len(out[side]) / seconds)
            print(f"series {s + 1}/{series} {side:<6} {speed[side][-1]:9.1f} tokens/s ({seconds:.2f} s)", flush=True)
        equal.append(out["cached"] == out["plain"])
    result = {side: spread(v) for side, v in speed.items()}
    result["speedup_median"] = result["cached"]["median"] / result["plain"]["median"]
    result["speedup_per_series"] = [c / p for c, p in zip(speed["cached"], speed["plain"], strict=True)]
    result["equal_output"] = all(equal)
    return result


def training_share(model: GPT, batch: int, steps: int, sample_tokens: int, eval_every: int, rounds: int) -> dict:
    """One round of training samples (PROMPTS prompts of PROMPT_TOKENS tokens, `sample_tokens`
    new each, as trainer.run.samples does) against training steps of the same model."""
    n, vocab = model.cfg.context, model.cfg.vocab
    gen = torch.Generator().manual_seed(1)
    prompts = [torch.randint(vocab, (PROMPT_TOKENS,), generator=gen).tolist() for _ in range(PROMPTS)]
    sample_s = []
    for _ in range(rounds):
        began = time.perf_counter()
        training_samples(model, prompts, sample_tokens, 1337, "fp32", lambda ids: "", None, vocab)
        sample_s.append(time.perf_counter() - began)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    step_s = []
    for i in range(steps + 1):
        x = torch.randint(vocab, (batch, n + 1), generator=gen)
        began = time.perf_counter()
        loss = model(x[:, :-1], x[:, 1:])
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if i:  # the first step allocates the optimizer's state
            step_s.append(time.perf_counter() - began)
    model.eval()
    per_eval = float(np.median(step_s)) * eval_every
    return {"sample_s": spread(sample_s), "step_s": spread(step_s), "batch": batch, "eval_every": eval_every,
            "sample_tokens": sample_tokens, "prompts": PROMPTS,
            "share": float(np.median(sample_s)) / (per_eval + float(np.median(sample_s)))}


def trainer_run_share(steps_to: int, eval_every: int, sample_tokens: int) -> dict:
    """A real tiny trainer run with samples on: sampling seconds per evaluation against the
    steps' own time between evaluations, from its events.jsonl."""
    from bench.synthetic import make_prepared

    with tempfile.TemporaryDirectory() as tmp:
        data = make_prepared(Path(tmp) / "data")
        run = Path(tmp) / "run"
        run.mkdir()
        model = {"context": 64, "width": 64, "heads": 2, "layers": 2, "vocab": 300}
        training = {"batch_per_card": 8, "steps_to": steps_to, "eval_every": eval_every, "eval_segments": 8,
                    "warmup_steps": 5, "sample_tokens": sample_tokens}
        (run / "run.json").write_text(json.dumps({"name": "bench-sample", "model": model, "training": training,
                                                  "data": {"dir": str(data)}, "target": {"kind": "local", "gpu": "cpu"}}))
        done = subprocess.run([sys.executable, "-m", "trainer", "--run", str(run), "--device", "cpu"],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"the trainer run failed (exit {done.returncode}): {done.stderr.strip()[-400:]}")
        events = [json.loads(x) for x in (run / "events.jsonl").read_text(encoding="utf-8").splitlines() if x.strip()]
    step_ms = {e["step"]: e["step_ms"] for e in events if e["event"] == "step"}
    by_step: dict[int, float] = {}
    for e in events:
        if e["event"] == "sample":
            by_step[e["step"]] = by_step.get(e["step"], 0.0) + float(e["seconds"])
    shares, last = [], 0
    for step in sorted(by_step):
        train_s = sum(ms for s, ms in step_ms.items() if last < s <= step) / 1000
        shares.append(by_step[step] / (train_s + by_step[step]))
        last = step
    return {"model": model, "training": training, "evaluations": len(shares),
            "sample_s_per_eval": spread(list(by_step.values())), "share": spread(shares)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.sample", description=__doc__.splitlines()[0])
    p.add_argument("--context", type=int, default=1024)
    p.add_argument("--width", type=int, default=512)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--vocab", type=int, default=4000)
    p.add_argument("--prompt", type=int, default=64, help="prompt tokens")
    p.add_argument("--new", type=int, default=256, help="new tokens per series")
    p.add_argument("--series", type=int, default=4, help="series per side, in alternating order")
    p.add_argument("--train-batch", type=int, default=6, help="batch of the training steps the samples are set against")
    p.add_argument("--train-steps", type=int, default=2)
    p.add_argument("--sample-tokens", type=int, default=32, help="training.sample_tokens")
    p.add_argument("--eval-every", type=int, default=200, help="training.eval_every")
    p.add_argument("--run-steps", type=int, default=200, help="steps of the tiny real trainer run (0: skip it)")
    p.add_argument("--run-eval-every", type=int, default=50)
    p.add_argument("--json", type=Path, help="also write the results here")
    args = p.parse_args(argv)
    if min(args.prompt, args.new, args.series, args.train_steps) < 1 or args.prompt + args.new > args.context:
        print("bench.sample: --prompt, --new, --series, --train-steps must be ≥ 1 and prompt + new ≤ context",
              file=sys.stderr)
        return 2
    torch.manual_seed(0)
    model = GPT(ModelConfig(args.context, args.width, args.heads, args.layers, args.vocab))
    model.init_weights(0)
    model.eval()
    prompt = torch.randint(args.vocab, (args.prompt,), generator=torch.Generator().manual_seed(2)).tolist()
    shape = {k: getattr(args, k) for k in ("context", "width", "heads", "layers", "vocab", "prompt", "new")}
    print(f"model {shape}, {sum(x.numel() for x in model.parameters()):,} weights, "
          f"cpu ({torch.get_num_threads()} threads), torch {torch.__version__}", flush=True)
    result: dict = {"device": f"cpu ({torch.get_num_threads()} threads)", "torch": torch.__version__, "shape": shape}
    result["generation"] = g = side_by_side(model, prompt, args.new, args.series)
    print(f"\ncached median {g['cached']['median']:.1f} tokens/s (IQR {g['cached']['iqr'][0]:.1f}–{g['cached']['iqr'][1]:.1f}), "
          f"plain median {g['plain']['median']:.1f} tokens/s (IQR {g['plain']['iqr'][0]:.1f}–{g['plain']['iqr'][1]:.1f}); "
          f"cached/plain = {g['speedup_median']:.1f}×; equal output: {g['equal_output']}", flush=True)
    result["training_share"] = s = training_share(model, args.train_batch, args.train_steps, args.sample_tokens,
                                                  args.eval_every, args.series)
    print(f"samples per evaluation: {s['sample_s']['median']:.3f} s; training step {s['step_s']['median']:.3f} s "
          f"× eval_every {args.eval_every}: share {s['share']:.3%}", flush=True)
    if args.run_steps:
        result["trainer_run"] = r = trainer_run_share(args.run_steps, args.run_eval_every, args.sample_tokens)
        print(f"tiny trainer run: {r['evaluations']} evaluations, samples {r['sample_s_per_eval']['median']:.3f} s each, "
              f"share of training time median {r['share']['median']:.2%} "
              f"(range {r['share']['min']:.2%}–{r['share']['max']:.2%})", flush=True)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0 if g["equal_output"] else 1


if __name__ == "__main__":
    from trainer.base.streams import utf8_stdio

    utf8_stdio()  # a redirected stdout in UTF-8 on Windows too (trainer/base/streams.py)
    raise SystemExit(main())
