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
import mmap
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from trainer.config.run_config import ModelConfig
from trainer.model.gpt import GPT
from trainer.run.samples import PROMPT_TOKENS, PROMPTS
from trainer.text.generate import Packed, Sampling, generate, pack, training_samples


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


def product_flops(cfg: ModelConfig) -> int:
    """Of token_flops, the weights' products alone: what one pass over every weight costs."""
    return 2 * (12 * cfg.layers * cfg.width ** 2 + cfg.vocab * cfg.width)


def products_pass(model: GPT) -> Callable[[], None]:
    """One row times each of the lab's own packed weights (`pack`: the buffer, layout and order a
    token's pass reads) in turn, the output layer included: the products of one token's pass
    alone, memory-bound at batch 1, with nothing else of a step between them. Its time is the
    floor of a token's pass for anything that multiplies with this machine's BLAS, the lab's
    step and HF's alike."""
    mats = pack(model).matrices()
    rows = {n: torch.randn(1, n) for n in {m.size(0) for m in mats}}

    def one() -> None:
        for m in mats:
            torch.mm(rows[m.size(0)], m)

    return one


FLOOR_PASSES = 64  # products-alone passes timed per series (≈ 0.5 s at the default model)


def square_rate(d: int, repeats: int = 20) -> float:
    """This thread's compute peak: FLOP per CPU-second of a square d × d product."""
    a, b = torch.randn(d, d), torch.randn(d, d)
    a @ b
    began = time.process_time()
    for _ in range(repeats):
        a @ b
    return 2 * d ** 3 * repeats / (time.process_time() - began)


def against_hf(model: GPT, prompt_len: int, cases: list[tuple[int, int]], series: int) -> dict:
    """Per case (prompts × new tokens): both sides generate every prompt greedily (batch 1), in
    alternating order per series; tokens per CPU-second of this process (time.process_time:
    other processes on a shared machine do not count), equal tokens checked each series.
    The roofline, timed in every series beside the two sides: the products alone
    (`products_pass`, FLOOR_PASSES passes) take `floor_ms` a token; each side's time a token
    over it, and HF's time over it per series — the most any step multiplying with this BLAS
    could gain over HF (`ceiling`)."""
    hf = hf_peer(model)
    floor = products_pass(model)
    sides = {"lab": lambda p, n: cached_generate(model, p, n), "hf": lambda p, n: hf_generate(hf, p, n)}
    gen = torch.Generator().manual_seed(3)
    out = {"matmul_flop_per_s": {"square": square_rate(model.cfg.width)}, "cases": []}
    floor_all: list[float] = []
    for prompts_n, new in cases:
        prompts = [torch.randint(model.cfg.vocab, (prompt_len,), generator=gen).tolist() for _ in range(prompts_n)]
        for f in sides.values():
            f(prompts[0], 4)  # warm-up
        floor()
        ms: dict[str, list[float]] = {"lab": [], "hf": [], "floor": []}
        equal = []
        for s in range(series):
            got = {}
            for side in (["lab", "hf", "floor"] if s % 2 == 0 else ["floor", "hf", "lab"]):
                began = time.process_time()
                if side == "floor":
                    for _ in range(FLOOR_PASSES):
                        floor()
                    ms[side].append((time.process_time() - began) / FLOOR_PASSES * 1e3)
                    continue
                got[side] = [sides[side](p, new) for p in prompts]
                ms[side].append((time.process_time() - began) / (prompts_n * new) * 1e3)
                print(f"{prompts_n}×{new} series {s + 1}/{series} {side:<3} {1e3 / ms[side][-1]:7.1f} tokens/CPU-s "
                      f"(load {os.getloadavg()[0]:.1f})", flush=True)
            equal.append(got["lab"] == got["hf"])
        floor_all += ms["floor"]
        flop = sum(token_flops(model.cfg, prompt_len + i) for i in range(new)) / new
        case = {"prompts": prompts_n, "new": new, "prompt": prompt_len,
                **{k: spread([1e3 / x for x in ms[k]]) for k in sides},
                "ratio_per_series": [h / lab for lab, h in zip(ms["lab"], ms["hf"], strict=True)],
                "equal_tokens": all(equal), "flop_per_token": flop,
                "ms_per_token": {k: spread(v) for k, v in ms.items()}}
        case["ratio"] = spread(case["ratio_per_series"])
        case["over_floor"] = {k: spread([x / f for x, f in zip(ms[k], ms["floor"], strict=True)]) for k in sides}
        case["ceiling"] = case["over_floor"]["hf"]
        out["cases"].append(case)
    out["floor_ms"] = spread(floor_all)
    out["matmul_flop_per_s"]["one_row"] = product_flops(model.cfg) / (out["floor_ms"]["median"] / 1e3)
    for case in out["cases"]:
        case["of_rate"] = {side: {k: case[side]["median"] * case["flop_per_token"] / r
                                  for k, r in out["matmul_flop_per_s"].items()} for side in sides}
    return out


def print_against_hf(r: dict) -> None:
    rates, fl = r["matmul_flop_per_s"], r["floor_ms"]
    print(f"\nthis thread's matmul: square {rates['square'] / 1e9:.1f} GFLOP/s, one row over the lab's packed weights "
          f"{rates['one_row'] / 1e9:.1f} GFLOP/s: the products alone {fl['median']:.2f} ms a token "
          f"({fl['min']:.2f}–{fl['max']:.2f})")
    print("| prompts × new | lab tokens/CPU-s | HF tokens/CPU-s | lab/HF median (range) | ms a token lab / HF / products alone "
          "| lab, HF over the products | ceiling (HF / products) range | equal |")
    print("|---|---|---|---|---|---|---|---|")
    for c in r["cases"]:
        lab, hf, q, ms, over = c["lab"], c["hf"], c["ratio"], c["ms_per_token"], c["over_floor"]
        print(f"| {c['prompts']} × {c['new']} | {lab['median']:.1f} ({lab['min']:.1f}–{lab['max']:.1f}) | "
              f"{hf['median']:.1f} ({hf['min']:.1f}–{hf['max']:.1f}) | {q['median']:.2f}× ({q['min']:.2f}–{q['max']:.2f}) | "
              f"{ms['lab']['median']:.2f} / {ms['hf']['median']:.2f} / {ms['floor']['median']:.2f} | "
              f"{over['lab']['median']:.2f}×, {over['hf']['median']:.2f}× | "
              f"{c['ceiling']['min']:.2f}–{c['ceiling']['max']:.2f}× | {c['equal_tokens']} |")


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
    p.add_argument("--layouts", action="store_true",
                   help="instead: the packed weights' memory layouts side by side (one thread, --prompt then --new "
                        "greedy tokens, --series rounds)")
    p.add_argument("--precision", default="auto", help="with --static: fp32, bf16, fp16 or auto (the lab's pick)")
    args = p.parse_args(argv)
    if args.against_hf:
        return hf_main(args)
    if args.static:
        return static_main(args)
    if args.layouts:
        return layouts_main(args)
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


def sizes_refused(args: argparse.Namespace) -> bool:
    """Says so on stderr when --prompt, --new or --series is below 1 or prompt + new passes the
    context (the single-prompt modes' one check)."""
    if min(args.prompt, args.new, args.series) < 1 or args.prompt + args.new > args.context:
        print("bench.sample: --prompt, --new, --series must be ≥ 1 and prompt + new ≤ context", file=sys.stderr)
        return True
    return False


def layouts_main(args: argparse.Namespace) -> int:
    """The packed weights' memory layout, side by side: `separate` (each weight its own (in, out)
    tensor, as before issue 34's fifth session), `one buffer` (all in one allocation in the order a
    token's pass reads them) and `pack` (the lab's own: that buffer, on Linux a private mapping
    advised for transparent huge pages; elsewhere the same as `one buffer`). Greedy from the
    same prompt on one thread, --series rounds with the arms' order rotated each round; tokens
    per CPU-second, the tokens checked equal across the arms each round."""
    if sizes_refused(args):
        return 2
    torch.set_num_threads(1)
    model, prompt = random_model(args), bench_prompt(args)
    greedy = Sampling(temperature=0)
    w = pack(model)
    separate = Packed([tuple(m.clone() for m in layer) for layer in w.layers], w.head.clone())  # an allocation each
    arms = {"separate": separate, "one buffer": pack(model, lambda n, dtype: torch.empty(n, dtype=dtype)),
            "pack": w}
    for weights in arms.values():
        list(generate(model, prompt, 4, greedy, 0, weights=weights))  # warm-up
    speed: dict[str, list[float]] = {name: [] for name in arms}
    equal = []
    names = list(arms)
    for k in range(args.series):
        got = {}
        for name in names[k % len(names):] + names[:k % len(names)]:
            began = time.process_time()
            got[name] = list(generate(model, prompt, args.new, greedy, 0, weights=arms[name]))
            speed[name].append(args.new / (time.process_time() - began))
            print(f"round {k + 1}/{args.series} {name:<10} {speed[name][-1]:7.1f} tokens/CPU-s", flush=True)
        equal.append(len({tuple(t) for t in got.values()}) == 1)
    result = {"shape": {k: getattr(args, k) for k in ("context", "width", "heads", "layers", "vocab", "prompt", "new")},
              "torch": torch.__version__, "huge_page_advice": hasattr(mmap, "MADV_HUGEPAGE"),
              **{name: spread(v) for name, v in speed.items()}, "equal_tokens": all(equal)}
    result["over_separate"] = {name: spread([a / b for a, b in zip(v, speed["separate"], strict=True)])
                               for name, v in speed.items() if name != "separate"}
    for name, r in result["over_separate"].items():
        print(f"{name} / separate: {r['median']:.3f}× per round (range {r['min']:.3f}–{r['max']:.3f})", flush=True)
    print(f"tokens equal across the arms in every round: {result['equal_tokens']}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0 if result["equal_tokens"] else 1


def static_main(args: argparse.Namespace) -> int:
    """The fixed-shape step against the growing cache's, alternating per series: tokens per
    wall second (the device synchronised by each token's read-back), whether the tokens agree
    (the two add the attention in different orders, so they may part where two logits tie
    within rounding: reported as the tokens before the first difference; tests/test_generate.py
    holds the logic in float64)."""
    from trainer.step.optim import pick_precision

    if sizes_refused(args):
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
