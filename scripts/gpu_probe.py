"""Where a training step's time goes on a GPU, by mode and by size (a diagnostic probe).

    python scripts/gpu_probe.py OUT.json [--smoke]

For each case it builds the trainer's own model, optimizer and step (trainer.step.step), feeds
random batches, and reports per step, as medians over the timed steps:
  wall_ms     synchronised wall time of a whole step (CUDA events),
  enqueue_ms  host time until train_step returns, started on an idle GPU: the cost of
              issuing the step's kernels (when it is close to wall_ms the step is
              launch-bound: the GPU waits for Python),
  busy_ms     the sum of the step's kernel times (torch.profiler, one step),
  kernels     how many kernels that step launched,
  peak_mb     torch.cuda.max_memory_allocated over the timed steps.
Cases: the economical levels at the lab's default model (context 1024, width 512, 8
layers, batch 6, vocabulary 4000), the same with torch.compile where it compiles, and
a ladder of sizes in the normal mode (for app/sizing's speed model).
--smoke runs two tiny cases on whatever device there is, to check the script itself.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
import traceback
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trainer.config.run_config import ModelConfig, TrainingConfig  # noqa: E402
from trainer.model.gpt import GPT  # noqa: E402
from trainer.step.optim import make_optimizer, make_scaler, pick_precision  # noqa: E402
from trainer.step.step import train_step  # noqa: E402


def case(
    device: torch.device,
    m: ModelConfig,
    batch: int,
    level: str = "off",
    compile_model: bool = False,
    steps: int = 30,
    warmup: int = 6,
) -> dict:
    torch.manual_seed(0)
    model = GPT(m, level)
    model.init_weights(0)
    model.to(device)
    t = TrainingConfig(batch_per_card=batch)
    precision = pick_precision("auto", device)
    optimizer = make_optimizer(model, t, device)
    scaler = make_scaler(precision, device)
    runner = model
    began = time.perf_counter()
    if compile_model:
        runner = torch.compile(model)
    g = torch.Generator().manual_seed(1)
    batches = [
        tuple(x.to(device) for x in torch.randint(0, m.vocab, (2, batch, m.context), generator=g))
        for _ in range(4)
    ]

    def one(i: int) -> torch.Tensor:
        return train_step(runner, optimizer, scaler, batches[i % 4], 1e-4, precision, device, 1.0)

    cuda = device.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    for i in range(warmup):
        one(i)
    sync()
    warm_s = time.perf_counter() - began
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    wall, enqueue = [], []
    for i in range(steps):
        sync()
        t0 = time.perf_counter()
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
        one(i)
        t1 = time.perf_counter()
        if cuda:
            end.record()
            end.synchronize()
            wall.append(start.elapsed_time(end))
        else:
            wall.append((time.perf_counter() - t0) * 1000)
        enqueue.append((t1 - t0) * 1000)
    peak = torch.cuda.max_memory_allocated(device) / 2**20 if cuda else None
    busy, kernels, top, profile_error = None, None, [], None
    if cuda:
        try:  # the timings above stand even if the profiler fails on this machine
            busy, kernels, top = profile_step(lambda: one(0), sync)
        except Exception as e:  # noqa: BLE001
            profile_error = repr(e)[:300]
    tokens = batch * m.context
    med = statistics.median(wall)
    return {
        "layers": m.layers, "width": m.width, "heads": m.heads, "context": m.context,
        "vocab": m.vocab, "batch": batch, "level": level, "compiled": compile_model,
        "params": sum(p.numel() for p in model.parameters()),
        "wall_ms": round(med, 3),
        "wall_iqr_ms": [round(q, 3) for q in statistics.quantiles(wall, n=4)[::2]],
        "enqueue_ms": round(statistics.median(enqueue), 3),
        "busy_ms": None if busy is None else round(busy, 3),
        "kernels": kernels,
        "peak_mb": None if peak is None else round(peak, 1),
        "tokens_per_s": round(tokens / (med / 1000)),
        "warmup_s": round(warm_s, 1),
        "top_kernels": top,
        "profile_error": profile_error,
    }


def profile_step(step, sync) -> tuple[float, int, list[dict]]:  # noqa: ANN001
    """(kernel-busy ms, kernels launched, the top kernels by time) of one step."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
        step()
        sync()
    evs = [e for e in prof.events() if e.device_type == DeviceType.CUDA]
    by_name: dict[str, list[float]] = {}
    for e in evs:
        by_name.setdefault(e.name[:90], []).append(e.device_time_total / 1000)
    top = sorted(
        ({"kernel": k, "ms": round(sum(v), 3), "n": len(v)} for k, v in by_name.items()),
        key=lambda r: -r["ms"],
    )[:14]
    return sum(e.device_time_total for e in evs) / 1000, len(evs), top


def main() -> int:
    out = Path(sys.argv[1])
    smoke = "--smoke" in sys.argv
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    results: dict = {"device": torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu",
                     "torch": torch.__version__, "cases": []}
    default = ModelConfig(context=1024, width=512, heads=8, layers=8, vocab=4000)
    if smoke:
        tiny = ModelConfig(context=64, width=64, heads=2, layers=2, vocab=256)
        plan = [(tiny, 4, "off", False), (tiny, 4, "selective", False)]
    else:
        plan = [(default, 6, lvl, False) for lvl in ("off", "selective", "full", "off", "selective")]
        for L, d, h, n, b in [(4, 256, 4, 256, 16), (8, 256, 4, 256, 16), (16, 256, 4, 256, 16),
                              (16, 512, 8, 1024, 6), (24, 512, 8, 1024, 6), (8, 768, 12, 1024, 6),
                              (8, 1024, 16, 1024, 4), (12, 768, 12, 1024, 12), (8, 512, 8, 1024, 24)]:
            plan.append((ModelConfig(context=n, width=d, heads=h, layers=L, vocab=4000), b, "off", False))
        plan += [(default, 6, "off", True), (default, 6, "selective", True)]
    for m, b, lvl, comp in plan:
        label = f"L{m.layers} d{m.width} n{m.context} b{b} {lvl}{' compiled' if comp else ''}"
        try:
            r = case(device, m, b, lvl, comp, steps=8 if smoke else 30, warmup=2 if smoke else 6)
            results["cases"].append(r)
            print(f"{label}: wall {r['wall_ms']} ms, enqueue {r['enqueue_ms']} ms, busy {r['busy_ms']} ms, "
                  f"kernels {r['kernels']}, peak {r['peak_mb']} MB, {r['tokens_per_s']:,} tok/s", flush=True)
        except Exception as e:  # noqa: BLE001 — one failing case must not lose the others
            results["cases"].append({"label": label, "error": repr(e)[:500]})
            print(f"{label}: FAILED {e!r}"[:300], flush=True)
            traceback.print_exc(limit=3)
        out.write_text(json.dumps(results, indent=1))
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
