"""`ternit bench sizing`: are the estimates right? Measured against the REAL trainer.

Runs `python -m trainer --run DIR --stop-at-step N` at several small sizes on this machine
(CPU by default, `--device cuda` on an NVIDIA card), two rounds in alternating order, and
reads tokens_per_s and mem_peak_mb from each run's events.jsonl. Then:
- speed: each size's tokens/s is predicted from each other size's measurement through
  `app.sizing.estimate(measured=[that run])` — the product's own path — and the error is
  reported (target: within 20 %); the plain compute-per-token scaling (no narrow-width
  term) is shown beside it, and the CPU's rate estimate with no measurement at all;
- speed, leave-one-out: each size predicted from all the others at once, again through
  `estimate(measured=others)` — with three or more sizes that is the fitted step time
  (fixed + compute, app.sizing.speed.fit_step_time) — next to the nearest other size's
  plain scaling (what the estimate did before the fit);
- memory: the predicted peak against the trainer's measured mem_peak_mb (on the CPU the
  trainer counts live tensor storages over its first step; on a GPU the allocator's peak
  every step), and the activation part alone (peak − weights, or − the static parts).

The training data is random token ids (speed and memory do not depend on their values).
This process never imports torch: the trainer runs as child processes.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from trainer.base.streams import UTF8_ENV
from trainer.config.run_config import ECONOMICAL_LEVELS
from trainer.plan.memory_model import MiB, estimate_memory

from .estimate import estimate
from .formulas import Shape, param_count
from .history import WARMUP_STEPS, measured_from_run_dir, read_events
from .speed import nearest_measured

REPO = Path(__file__).resolve().parents[2]

# (name, layers, width, heads, context, vocab, batch): compute per token spans ~12×.
# The CPU's constants (app.sizing.gpus) were fitted on shapes like A, B and C; D (narrow
# and deep, another vocabulary) and E (wide and shallow) were not part of that fit.
SIZES = [
    ("A", 2, 128, 4, 128, 512, 8),
    ("B", 4, 192, 4, 128, 512, 8),
    ("C", 4, 256, 4, 256, 512, 4),
    ("D", 8, 96, 4, 128, 1024, 8),
    ("E", 2, 448, 7, 128, 512, 2),
]
HELD_OUT = {"D", "E"}


def make_data(folder: Path, vocab: int, tokens: int = 400_000) -> Path:
    """A prepared-data folder the trainer accepts: random uint16 ids, meta, a tokenizer file."""
    import numpy as np  # numpy only (no torch in the lab's process)

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    ids = rng.integers(0, vocab, size=tokens, dtype=np.uint16)
    split = int(tokens * 0.9)
    ids[:split].tofile(folder / "train.bin")
    ids[split:].tofile(folder / "val.bin")
    (folder / "tokenizer.json").write_text('{"bench": "random ids, no tokenizer needed"}', encoding="utf-8")
    meta = {"format": 1, "vocab_size": vocab, "dtype": "uint16", "train_tokens": split,
            "val_tokens": tokens - split, "constellations": ["bench"], "data_id": "bench-random"}
    (folder / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    return folder


def run_once(root: Path, tag: str, size: tuple, data: Path, steps: int, device: str,
             economical: str = "off", threads: int | None = None) -> dict[str, Any]:
    name, layers, width, heads, context, vocab, batch = size
    d = root / tag
    d.mkdir(parents=True)
    cfg = {
        "name": tag,
        "model": {"layers": layers, "width": width, "heads": heads, "context": context, "vocab": vocab},
        "training": {"batch_per_card": batch, "steps_to": steps + 100, "limit_min": 120,
                     "warmup_steps": 5, "eval_every": 100_000, "checkpoint_every_min": 10_000,
                     "economical": economical},
        "data": {"dir": str(data)},
    }
    (d / "run.json").write_text(json.dumps(cfg), encoding="utf-8")
    env = {**os.environ, **UTF8_ENV}  # trainer.log in UTF-8 on Windows too
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    with open(d / "trainer.log", "w", encoding="utf-8") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "trainer", "--run", str(d), "--stop-at-step", str(steps), "--device", device],
            stdout=subprocess.DEVNULL, stderr=log, cwd=REPO, env=env)
        try:
            rc = proc.wait()
        except BaseException:  # Ctrl-C or a kill: never leave a trainer running behind
            proc.terminate()
            proc.wait()
            raise
    if rc != 0:
        tail = (d / "trainer.log").read_text(encoding="utf-8", errors="replace").strip().splitlines()[-3:]
        raise RuntimeError(f"the trainer failed on size {name} (exit {rc}): " + " / ".join(tail))
    m = measured_from_run_dir(d)
    if m is None:
        raise RuntimeError(f"no step events in {d / 'events.jsonl'}")
    steps_ms = [e["step_ms"] for e in read_events(d / "events.jsonl")
                if e.get("event") == "step" and isinstance(e.get("step_ms"), (int, float))][WARMUP_STEPS:]
    per_step = batch * context  # one process, one card
    m["tokens_per_s_median"] = m["tokens_per_s"]
    if steps_ms:
        # The fastest fifth of the steps: on a machine others are using, interference only
        # ever slows a step down, so the quick steps are the closest to the truth (timeit's
        # reasoning for taking the minimum). Both figures are reported.
        quick = sorted(steps_ms)[: max(1, len(steps_ms) // 5)]
        m["tokens_per_s_fast"] = per_step / (statistics.median(quick) / 1000)
    else:
        m["tokens_per_s_fast"] = m["tokens_per_s"]
    return m


def _terminated(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # unwinds through run_once, which stops its trainer


def pct(x: float) -> str:
    return f"{x * 100:+.1f} %"


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="ternit bench sizing", description=__doc__.splitlines()[0])
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--steps", type=int, default=12, help="steps per run (the first 2 are not timed)")
    p.add_argument("--rounds", type=int, default=2, help="rounds, alternating the order of sizes")
    p.add_argument("--threads", type=int, default=None,
                   help="CPU threads per trainer (default: PyTorch's choice; 1 is steadier on a busy machine)")
    p.add_argument("--economical", action="store_true", help="also measure memory in the economical levels")
    p.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    p.add_argument("--sizes", default=",".join(s[0] for s in SIZES),
                   help="which sizes, by name (default: all of " + ", ".join(s[0] for s in SIZES) + ")")
    args = p.parse_args(argv)
    names = [n.strip() for n in args.sizes.split(",") if n.strip()]
    sizes = [s for s in SIZES if s[0] in names]
    if len(sizes) != len(names) or not sizes:
        p.error(f"--sizes: names among {', '.join(s[0] for s in SIZES)}, got {args.sizes!r}")
    signal.signal(signal.SIGTERM, _terminated)
    gpu = "cpu" if args.device == "cpu" else "local"
    if args.threads:  # the estimate's CPU model reads the same setting as the trainers
        os.environ["OMP_NUM_THREADS"] = str(args.threads)
    started = time.time()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    with tempfile.TemporaryDirectory(prefix="ternit-bench-sizing-") as tmp:
        root = Path(tmp)
        # ids below the smallest vocabulary, so every size accepts the same data
        data = make_data(root / "data", min(s[5] for s in sizes))
        runs: dict[str, list[dict[str, Any]]] = {s[0]: [] for s in sizes}
        total = args.rounds * len(sizes)
        k = 0
        for r in range(args.rounds):
            order = sizes if r % 2 == 0 else list(reversed(sizes))
            for size in order:
                k += 1
                m = run_once(root, f"{size[0]}-r{r}", size, data, args.steps, args.device, threads=args.threads)
                runs[size[0]].append(m)
                print(f"[{k}/{total}] size {size[0]} round {r + 1}: {m['tokens_per_s']:.0f} tokens/s, "
                      f"peak {m['mem_peak_mb']} MiB", flush=True)
        econ: list[dict[str, Any]] = []
        if args.economical:
            for size in sizes:
                for level in ECONOMICAL_LEVELS[1:]:  # the levels that recompute
                    # 4× the batch: activations, not the optimizer's step, make the peak.
                    big = (*size[:6], size[6] * 4)
                    m = run_once(root, f"{size[0]}-{level}", big, data, 3, args.device, level, args.threads)
                    econ.append({"size": size[0], "level": level, "mem_peak_mb": m["mem_peak_mb"]})
                    print(f"[econ] size {size[0]} {level}: peak {m['mem_peak_mb']} MiB", flush=True)
    result = analyse(runs, econ, gpu, "fast")
    result["by_median_steps"] = analyse(runs, [], gpu, "median")
    result.update(device=args.device, steps=args.steps, rounds=args.rounds, threads=args.threads,
                  load_average_at_start=load, seconds=round(time.time() - started, 1))
    report(result)
    med = result["by_median_steps"]["speed"]
    if med:
        errs = [abs(x["error"]) for x in med]
        print(f"  (with each run's median step instead of its fastest fifth: median |error| "
              f"{statistics.median(errs) * 100:.1f} %, worst {max(errs) * 100:.1f} %)")
    med_loo = result["by_median_steps"]["leave_one_out"]
    if med_loo:
        print(f"  (leave-one-out with median steps: {_loo_summary(med_loo)})")
    if args.out:
        args.out.write_text(json.dumps(result, indent=2), encoding="utf-8")
    return 0


def _shape(size: tuple) -> Shape:
    _, layers, width, heads, context, vocab, batch = size
    return Shape(layers, width, heads, context, vocab, batch)


def analyse(runs: dict[str, list[dict[str, Any]]], econ: list[dict[str, Any]], gpu: str,
            stat: str = "fast") -> dict[str, Any]:
    """`stat`: which per-run figure stands for a size — "fast" (the fastest fifth of its
    steps) or "median" (the median step). Over the rounds the best run is taken for
    "fast" (the least disturbed one) and the median run for "median"."""
    by_name = {s[0]: s for s in SIZES}
    measured: dict[str, dict[str, Any]] = {}
    for name, ms in runs.items():
        tps = [m[f"tokens_per_s_{stat}"] for m in ms]
        med = max(tps) if stat == "fast" else statistics.median(tps)
        entry = dict(ms[0], tokens_per_s=med, run=f"bench-{name}")
        peaks = [m["mem_peak_mb"] for m in ms if m["mem_peak_mb"] is not None]
        entry["mem_peak_mb"] = statistics.median(peaks) if peaks else None
        measured[name] = {"entry": entry, "tokens_per_s_runs": tps,
                          "spread": (max(tps) - min(tps)) / med if med else None}
    speed_rows = []
    for src in measured:
        for dst in measured:
            if src == dst:
                continue
            kw = _estimate_kw(by_name[dst], gpu)
            pred = estimate(measured=[measured[src]["entry"]], **kw).tokens_per_s
            meas = measured[dst]["entry"]["tokens_per_s"]
            fl_src, fl_dst = (_flops(by_name[x]) for x in (src, dst))
            plain = measured[src]["entry"]["tokens_per_s"] * fl_src / fl_dst
            speed_rows.append({"from": src, "to": dst, "predicted": pred, "measured": meas,
                               "error": pred / meas - 1, "flops_only_error": plain / meas - 1})
    loo = []
    for dst in measured:
        others = [measured[o]["entry"] for o in measured if o != dst]
        kw = _estimate_kw(by_name[dst], gpu)
        got = estimate(measured=others, **kw).as_json()
        meas = measured[dst]["entry"]["tokens_per_s"]
        near = nearest_measured(_shape(by_name[dst]), gpu, "off", others)
        if near is None:
            continue
        near_pred = estimate(measured=[near[0]], **kw).tokens_per_s
        fit = got["tokens_per_s_fit"]
        loo.append({"size": dst, "measured": meas, "predicted": got["tokens_per_s"],
                    "error": got["tokens_per_s"] / meas - 1, "kind": got["tokens_per_s_basis"]["kind"],
                    "fixed_ms_per_step": fit["fixed_ms_per_step"] if fit else None,
                    "nearest": str(near[0]["run"]).removeprefix("bench-"),
                    "nearest_predicted": near_pred, "nearest_error": near_pred / meas - 1})
    no_measure = []
    for name in measured:
        s = _shape(by_name[name])
        pred = estimate(layers=s.layers, width=s.width, heads=s.heads, context=s.context, vocab=s.vocab,
                        batch=s.batch, gpu=gpu, steps_to=100, lang="en", card_memory_mb=1e9).tokens_per_s
        no_measure.append({"size": name, "predicted": pred, "measured": measured[name]["entry"]["tokens_per_s"],
                           "error": pred / measured[name]["entry"]["tokens_per_s"] - 1})
    mem_rows = []
    for name in measured:
        meas = measured[name]["entry"]["mem_peak_mb"]
        if meas is None:
            continue
        mem_rows.append(_mem_row(name, by_name[name], "off", meas, gpu))
    for e in econ:
        if e["mem_peak_mb"] is not None:
            big = (*by_name[e["size"]][:6], by_name[e["size"]][6] * 4)
            mem_rows.append(_mem_row(e["size"] + "×4", big, e["level"], e["mem_peak_mb"], gpu))
    return {"sizes": {n: {"shape": list(by_name[n][1:]), "params": param_count(*_lwnv(by_name[n])),
                          "tokens_per_s": measured[n]["entry"]["tokens_per_s"],
                          "tokens_per_s_runs": measured[n]["tokens_per_s_runs"],
                          "spread": measured[n]["spread"]} for n in measured},
            "speed": speed_rows, "leave_one_out": loo, "speed_without_measurement": no_measure,
            "memory": mem_rows}


def _estimate_kw(size: tuple, gpu: str) -> dict[str, Any]:
    s = _shape(size)
    return dict(layers=s.layers, width=s.width, heads=s.heads, context=s.context, vocab=s.vocab,
                batch=s.batch, gpu=gpu, steps_to=100, lang="en", card_memory_mb=1e9)


def _loo_summary(rows: list[dict[str, Any]]) -> str:
    fit = [abs(x["error"]) for x in rows]
    near = [abs(x["nearest_error"]) for x in rows]
    return (f"from all the others median |error| {statistics.median(fit) * 100:.1f} %, worst "
            f"{max(fit) * 100:.1f} %; the nearest run's scaling median {statistics.median(near) * 100:.1f} %, "
            f"worst {max(near) * 100:.1f} %")


def _lwnv(size: tuple) -> tuple[int, int, int, int]:
    _, layers, width, _, context, vocab, _ = size
    return layers, width, context, vocab


def _flops(size: tuple) -> float:
    layers, width, context, vocab = _lwnv(size)
    return 6 * param_count(layers, width, context, vocab) + 12 * layers * context * width


def _mem_row(name: str, size: tuple, level: str, measured_mb: float, gpu: str) -> dict[str, Any]:
    s = _shape(size)
    prec = "fp32" if gpu == "cpu" else "bf16"
    m = estimate_memory(s, prec, 1, level)
    # The trainer counts the CPU's first step (no AdamW state yet), a GPU's every step.
    pred = (m.first_step_peak if gpu == "cpu" else m.peak) / MiB
    static = (m.weights if gpu == "cpu" else m.weights + m.optimizer) / MiB
    phase = ("optimizer" if gpu == "cpu" and m.first_step_peak == m.weights + m.gradients + m.optimizer
             + m.ddp_buckets else m.peak_phase)
    act_ok = phase != "optimizer" and measured_mb > static
    return {"size": name, "level": level, "predicted_mb": pred, "measured_mb": measured_mb,
            "error": pred / measured_mb - 1, "phase": phase,
            "activations_predicted_mb": pred - static, "activations_measured_mb": measured_mb - static,
            # When the optimizer's step makes the peak, the peak says nothing about activations.
            "activations_error": (pred - static) / (measured_mb - static) - 1 if act_ok else None}


def report(r: dict[str, Any]) -> None:
    print(f"\nsizing bench on {r['device']} (threads: {r.get('threads') or 'default'}), {r['rounds']} rounds × {len(r['sizes'])} sizes, "
          f"{r['steps']} steps each; load average at start {r['load_average_at_start']:.1f}; {r['seconds']} s")
    print("size  shape (L, d, h, n, V, B)      params   tokens/s, fastest fifth of steps (best run; runs; spread)")
    for n, s in r["sizes"].items():
        runs = ", ".join(f"{x:.0f}" for x in s["tokens_per_s_runs"])
        print(f"{n:<5} {str(s['shape']):<28} {s['params']:>8,}  {s['tokens_per_s']:.0f}; {runs}; {pct(s['spread'])}")
    print("\nspeed predicted from another size's measurement (the estimate's own path):")
    for row in r["speed"]:
        print(f"  {row['from']} → {row['to']}: predicted {row['predicted']:.0f}, measured {row['measured']:.0f}: "
              f"error {pct(row['error'])} (compute-only scaling: {pct(row['flops_only_error'])})")
    errs = [abs(x["error"]) for x in r["speed"]]
    if errs:
        print(f"  median |error| {statistics.median(errs) * 100:.1f} %, worst {max(errs) * 100:.1f} %")
    held = [abs(x["error"]) for x in r["speed"] if x["to"] in HELD_OUT]
    if held:
        print(f"  predicting the sizes outside the CPU fit ({', '.join(sorted(HELD_OUT))}): median |error| "
              f"{statistics.median(held) * 100:.1f} %, worst {max(held) * 100:.1f} %")
    if r.get("leave_one_out"):
        print("speed, leave-one-out: each size from all the others (the fitted step time where it holds):")
        for row in r["leave_one_out"]:
            how = (f"fitted, {row['fixed_ms_per_step']:.2f} ms fixed" if row["fixed_ms_per_step"] is not None
                   else row["kind"])
            print(f"  {row['size']}: predicted {row['predicted']:.0f} ({how}), measured {row['measured']:.0f}: "
                  f"error {pct(row['error'])}; nearest run ({row['nearest']}) scaled: {pct(row['nearest_error'])}")
        print(f"  {_loo_summary(r['leave_one_out'])}")
    print("speed with no measurement (the CPU rate estimate):")
    for row in r["speed_without_measurement"]:
        print(f"  {row['size']}: predicted {row['predicted']:.0f}, measured {row['measured']:.0f}: {pct(row['error'])}")
    print("\nmemory peak, predicted vs the trainer's mem_peak_mb:")
    for row in r["memory"]:
        act = "n/a" if row["activations_error"] is None else pct(row["activations_error"])
        print(f"  {row['size']:<4} {row['level']:<9} ({row['phase']:<9}) predicted {row['predicted_mb']:.2f} MiB, measured "
              f"{row['measured_mb']:.2f} MiB: {pct(row['error'])}; activations {row['activations_predicted_mb']:.2f} "
              f"vs {row['activations_measured_mb']:.2f} MiB: {act}")


if __name__ == "__main__":
    from trainer.base.streams import utf8_stdio

    utf8_stdio()  # a redirected stdout in UTF-8 on Windows too (trainer/base/streams.py)
    sys.exit(main(sys.argv[1:]))
