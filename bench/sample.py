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
import os
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


# ---- against Hugging Face's cached generate (--against-hf) ----------------------------


def hf_peer(model: GPT):  # -> transformers.GPT2LMHeadModel (transformers: the dev extra)
    """The lab's model as transformers' GPT2LMHeadModel, in memory, through the same mapping
    `python -m trainer.model.export --format hf` writes (tests/test_export_hf.py: equal logits)."""
    import transformers

    from trainer.model.export import hf_config, hf_tensors

    transformers.logging.set_verbosity_error()
    c = model.cfg
    cfg = hf_config({"context": c.context, "width": c.width, "heads": c.heads, "layers": c.layers, "vocab": c.vocab}, None)
    hf = transformers.GPT2LMHeadModel(transformers.GPT2Config(**cfg))
    missing, unexpected = hf.load_state_dict(hf_tensors(model.state_dict(), c.layers), strict=False)
    assert not unexpected and all(k == "lm_head.weight" for k in missing), (missing, unexpected)
    hf.tie_weights()
    return hf.eval()


@torch.no_grad()
def hf_generate(hf, prompt: list[int], new: int) -> list[int]:
    ids = torch.tensor([prompt])
    out = hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new, do_sample=False,
                      use_cache=True, pad_token_id=0, eos_token_id=None)
    return out[0, len(prompt):].tolist()


def token_flops(cfg: ModelConfig, position: int) -> int:
    """Multiply-adds ×2 of one new token at `position`: the 12·L·d² of the blocks' products,
    the V·d of the output layer, and attention's q·k and a·v over position + 1 keys."""
    d, n_layers = cfg.width, cfg.layers
    return 2 * (12 * n_layers * d * d + cfg.vocab * d) + 4 * n_layers * d * (position + 1)


def matmul_rates(cfg: ModelConfig, repeats: int = 20) -> dict:
    """This thread's matmul rates (FLOP per CPU-second): a square product (the compute peak) and
    one row times every block's weights in turn, 12·L·d² weights cycled as generation reads
    them (the memory-bound rate a single token's pass can reach at best)."""
    d = cfg.width
    a, b = torch.randn(d, d), torch.randn(d, d)
    shapes = [(d, 3 * d), (d, d), (d, 4 * d), (4 * d, d)] * cfg.layers
    ws = [torch.randn(i, o) for i, o in shapes]
    xs = [torch.randn(1, i) for i, _ in shapes]
    out = {}
    for name, fn, flop in (("square", lambda: a @ b, 2 * d ** 3),
                           ("one_row", lambda: [x @ w for x, w in zip(xs, ws, strict=True)],
                            sum(2 * i * o for i, o in shapes))):
        fn()
        began = time.process_time()
        for _ in range(repeats):
            fn()
        out[name] = flop * repeats / (time.process_time() - began)
    return out


def against_hf(model: GPT, prompt_len: int, cases: list[tuple[int, int]], series: int) -> dict:
    """Per case (prompts × new tokens): both sides generate every prompt greedily (batch 1), in
    alternating order per series; tokens per CPU-second of this process (time.process_time:
    other processes on a shared machine do not count), equal tokens checked each series."""
    hf = hf_peer(model)
    sides = {"lab": lambda p, n: cached_generate(model, p, n), "hf": lambda p, n: hf_generate(hf, p, n)}
    gen = torch.Generator().manual_seed(3)
    rates = matmul_rates(model.cfg)
    out = {"matmul_flop_per_s": rates, "cases": []}
    for prompts_n, new in cases:
        prompts = [torch.randint(model.cfg.vocab, (prompt_len,), generator=gen).tolist() for _ in range(prompts_n)]
        for f in sides.values():
            f(prompts[0], 4)  # warm-up
        speed: dict[str, list[float]] = {"lab": [], "hf": []}
        equal = []
        for s in range(series):
            got = {}
            for side in (["lab", "hf"] if s % 2 == 0 else ["hf", "lab"]):
                began = time.process_time()
                got[side] = [sides[side](p, new) for p in prompts]
                speed[side].append(prompts_n * new / (time.process_time() - began))
                print(f"{prompts_n}×{new} series {s + 1}/{series} {side:<3} {speed[side][-1]:7.1f} tokens/CPU-s "
                      f"(load {os.getloadavg()[0]:.1f})", flush=True)
            equal.append(got["lab"] == got["hf"])
        flop = sum(token_flops(model.cfg, prompt_len + i) for i in range(new)) / new
        case = {"prompts": prompts_n, "new": new, "prompt": prompt_len, **{k: spread(v) for k, v in speed.items()},
                "ratio_per_series": [a / b for a, b in zip(speed["lab"], speed["hf"], strict=True)],
                "equal_tokens": all(equal), "flop_per_token": flop}
        case["ratio"] = spread(case["ratio_per_series"])
        case["of_rate"] = {side: {k: case[side]["median"] * flop / r for k, r in rates.items()} for side in sides}
        out["cases"].append(case)
    return out


def print_against_hf(r: dict) -> None:
    rates = r["matmul_flop_per_s"]
    print(f"\nthis thread's matmul: square {rates['square'] / 1e9:.1f} GFLOP/s, one row over the blocks' weights "
          f"{rates['one_row'] / 1e9:.1f} GFLOP/s")
    print("| prompts × new | lab tokens/CPU-s | HF tokens/CPU-s | lab/HF median (range) | lab of square / one-row rate | equal |")
    print("|---|---|---|---|---|---|")
    for c in r["cases"]:
        lab, hf, q, f = c["lab"], c["hf"], c["ratio"], c["of_rate"]["lab"]
        print(f"| {c['prompts']} × {c['new']} | {lab['median']:.1f} ({lab['min']:.1f}–{lab['max']:.1f}) | "
              f"{hf['median']:.1f} ({hf['min']:.1f}–{hf['max']:.1f}) | {q['median']:.2f}× ({q['min']:.2f}–{q['max']:.2f}) | "
              f"{f['square']:.1%} / {f['one_row']:.1%} | {c['equal_tokens']} |")


def parse_cases(text: str) -> list[tuple[int, int]]:
    """"8x512,4x256" → [(8, 512), (4, 256)]."""
    out = []
    for part in text.replace("×", "x").split(","):
        p, _, n = part.strip().partition("x")
        out.append((int(p), int(n)))
    return out


def random_model(args: argparse.Namespace) -> GPT:
    """The bench's model at the arguments' shape, random weights seeded 0, in eval mode."""
    torch.manual_seed(0)
    model = GPT(ModelConfig(args.context, args.width, args.heads, args.layers, args.vocab))
    model.init_weights(0)
    return model.eval()


def bench_prompt(args: argparse.Namespace) -> list[int]:
    return torch.randint(args.vocab, (args.prompt,), generator=torch.Generator().manual_seed(2)).tolist()


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
    p.add_argument("--against-hf", type=parse_cases, metavar="PxN[,PxN]",
                   help="instead: against transformers' GPT2LMHeadModel.generate(use_cache=True) on one thread, "
                        "P prompts × N new tokens each (e.g. 8x512,4x256)")
    p.add_argument("--static", choices=("cpu", "cuda"),
                   help="instead: the fixed-shape decode step (a CUDA graph on a card) against the growing "
                        "cache's, on this device, --prompt then --new greedy tokens, --series each")
    p.add_argument("--precision", default="auto", help="with --static: fp32, bf16, fp16 or auto (the lab's pick)")
    args = p.parse_args(argv)
    if args.against_hf:
        return hf_main(args)
    if args.static:
        return static_main(args)
    if min(args.prompt, args.new, args.series, args.train_steps) < 1 or args.prompt + args.new > args.context:
        print("bench.sample: --prompt, --new, --series, --train-steps must be ≥ 1 and prompt + new ≤ context",
              file=sys.stderr)
        return 2
    model, prompt = random_model(args), bench_prompt(args)
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


def hf_main(args: argparse.Namespace) -> int:
    if min(args.prompt, args.series) < 1 or any(min(c) < 1 or args.prompt + c[1] > args.context for c in args.against_hf):
        print("bench.sample: --against-hf needs P, N ≥ 1 and prompt + N ≤ context", file=sys.stderr)
        return 2
    torch.set_num_threads(1)  # both sides on one thread: CPU time is then the work done
    model = random_model(args)
    import transformers

    print(f"model {model.cfg}, cpu (1 thread), torch {torch.__version__}, transformers {transformers.__version__}, "
          f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    r = against_hf(model, args.prompt, args.against_hf, args.series)
    r.update(torch=torch.__version__, transformers=transformers.__version__, cores=os.cpu_count(),
             load_end=os.getloadavg()[0])
    print_against_hf(r)
    if args.json:
        args.json.write_text(json.dumps(r, indent=2))
    return 0 if all(c["equal_tokens"] for c in r["cases"]) else 1


def static_main(args: argparse.Namespace) -> int:
    """The fixed-shape step against the growing cache's, alternating per series: tokens per
    wall second (the device synchronised by each token's read-back), whether the tokens agree
    (the two add the attention in different orders, so they may part where two logits tie
    within rounding: reported as the tokens before the first difference; tests/test_generate.py
    holds the logic in float64)."""
    from trainer.step.optim import pick_precision
    from trainer.text.generate import pack

    if min(args.prompt, args.new, args.series) < 1 or args.prompt + args.new > args.context:
        print("bench.sample: --prompt, --new, --series must be ≥ 1 and prompt + new ≤ context", file=sys.stderr)
        return 2
    device = torch.device(args.static)
    precision = pick_precision(args.precision, device)
    model, prompt = random_model(args).to(device), bench_prompt(args)
    w = pack(model)
    greedy = Sampling(temperature=0)

    def side(static: bool, new: int) -> list[int]:
        with torch.no_grad():
            return list(generate(model, prompt, new, greedy, 0, precision=precision, weights=w, static=static))

    side(True, 4), side(False, 4)  # warm-up: allocations, cuBLAS handles, the graph's first capture
    speed: dict[str, list[float]] = {"static": [], "dynamic": []}
    agree: list[int] = []
    for k in range(args.series):
        out = {}
        for name in (("static", "dynamic") if k % 2 == 0 else ("dynamic", "static")):
            began = time.perf_counter()
            out[name] = side(name == "static", args.new)
            speed[name].append(len(out[name]) / (time.perf_counter() - began))
            print(f"series {k + 1}/{args.series} {name:<7} {speed[name][-1]:9.1f} tokens/s", flush=True)
        pairs = list(zip(out["static"], out["dynamic"], strict=True))
        agree.append(next((i for i, (a, b) in enumerate(pairs) if a != b), len(pairs)))
    result = {"device": str(device), "precision": precision, "torch": torch.__version__,
              "shape": {k: getattr(args, k) for k in ("context", "width", "heads", "layers", "vocab", "prompt", "new")},
              "static": spread(speed["static"]), "dynamic": spread(speed["dynamic"]),
              "static_over_dynamic_per_series": [a / b for a, b in zip(speed["static"], speed["dynamic"], strict=True)],
              "tokens_agreeing_before_a_difference": agree, "new": args.new}
    if device.type == "cuda":
        result["card"] = torch.cuda.get_device_name(device)
    result["static_over_dynamic_median"] = result["static"]["median"] / result["dynamic"]["median"]
    print(f"static {result['static']['median']:.1f} against dynamic {result['dynamic']['median']:.1f} tokens/s: "
          f"{result['static_over_dynamic_median']:.2f}× ({precision} on {device}); tokens agreeing: {agree} of "
          f"{args.new}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    from trainer.base.streams import utf8_stdio

    utf8_stdio()  # a redirected stdout in UTF-8 on Windows too (trainer/base/streams.py)
    raise SystemExit(main())
