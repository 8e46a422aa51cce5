"""The lab's full model on a card (issue 13), and compiled against eager steps.

    python scripts/gpu_check_large.py OUT.jsonl [--part large|compile|count|all] [--smoke]

Each case runs in a process of its own (a clean CUDA context, so its peak and its memory
cap are its own) and appends one JSON line to OUT.jsonl as soon as it ends, so a part
cut off by its time box keeps the cases it finished. A case builds the trainer's own
pieces (trainer.model.gpt.GPT, trainer.model.economical, trainer.step.lean.LeanOptimizer or the normal
AdamW, trainer.step.step.train_step: the step the trainer runs) on random tokens, and reports:
- peak allocated (torch.cuda.max_memory_allocated over all steps, the optimizer state's
  creation at step 1 included) and peak reserved;
- observed: the card's used memory by NVML (the whole card, the CUDA context included),
  sampled after every step, the largest;
- step times: CUDA-synchronised wall time of each step; the median and spread of the
  steps after the first `WARM` (compilation and the optimizer state's first allocation);
- compile: the first step's time, which is the compilation's.

Parts:
- large: the seed's full shape (26 layers, width 2304, 18 heads, context 1024, vocab
  4000 = 1,667,801,088 weights), batch 1, bf16, ~30 steps: the normal mode uncapped;
  the lean state the estimate picks (true, level off) and "fused" with selective
  recompute, the card capped to 16 GB (`torch.cuda.set_per_process_memory_fraction`:
  an allocation past the cap fails as on a 16 GB card, though the card's other 123 GB
  stay free for the driver); "offload" capped to 6.2 GB (the note's observed use);
- compile: the default model (27.7 M, batch 6) and the full one (normal mode), each eager
  and compiled (inductor; TERNIT_COMPILE_BACKEND changes it);
- count (issue 34): `counted_mb` (trainer.step.memory_count at this case's run.json and the
  rtx5070ti's plan) beside `peak_allocated_mb`, which also holds cuBLAS's workspaces (2 × 32 MiB
  on compute capability 9.0, the count's named margin): "fused" at full recompute capped to
  16 GB, "offload" and "one_pass" (one backward pass) at full recompute capped to 6.2 GB; and
  the fused and the one-pass step against the normal step at half depth (13 layers),
  alternating, three runs of each.

--smoke: the same plumbing on the CPU at a tiny size (no cap, no NVML, backend
aot_eager, 4 steps): what `bash scripts/gpu_checks.sh OUT SMOKE=1` runs, and what was
run in the session that wrote this (no GPU there). The lean cases need bitsandbytes with
its CUDA kernels on the GPU machine; without it they are reported as skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FULL = {"context": 1024, "width": 2304, "heads": 18, "layers": 26, "vocab": 4000}
DEFAULT = {"context": 1024, "width": 512, "heads": 8, "layers": 8, "vocab": 4000}
TINY = {"context": 64, "width": 64, "heads": 4, "layers": 2, "vocab": 512}
CAP_GB = 16
WARM = 3


def cases(part: str, smoke: bool) -> list[dict]:
    big, small = (TINY, TINY) if smoke else (FULL, DEFAULT)
    steps = 4 if smoke else 30
    cap = None if smoke else CAP_GB
    # The lean cases: what `ternit estimate ... --gpu rtx5070ti --economical auto` picks
    # for this shape (lean_state true at level off, held bf16 gradients: tests/
    # test_sizing_lean.py asserts the pick), capped to 16 GB; the fused step without
    # gradients at level selective, 16 GB; and offload capped to the note's observed
    # ≈ 6.2 GB (its estimate: 5,519 MB allocated).
    large = [
        {"name": "full-normal-uncapped", "model": big, "batch": 1, "steps": steps, "lean": "off", "economical": "off"},
        {"name": "full-lean-on-16GB", "model": big, "batch": 1, "steps": steps, "lean": "on",
         "economical": "off", "cap_gb": cap},
        {"name": "full-lean-fused-selective-16GB", "model": big, "batch": 1, "steps": steps, "lean": "fused",
         "economical": "selective", "cap_gb": cap},
        {"name": "full-lean-offload-6.2GB", "model": big, "batch": 1, "steps": steps, "lean": "offload",
         "economical": "off", "cap_gb": None if smoke else 6.2},
    ]
    compiled = [
        {"name": f"{label}-{mode}", "model": shape, "batch": batch, "steps": (4 if smoke else n),
         "lean": "off", "economical": "off", "compile": mode == "compiled"}
        for label, shape, batch, n in (("default", small, 6, 60), ("full", big, 1, 20))
        for mode in ("eager", "compiled")
    ]
    # count (issue 34): the counted peak (trainer.step.memory_count, on fake tensors, before
    # the case touches the card) beside the card's max_memory_allocated, for the smallest
    # combinations at the full model under their caps; and the fused step at full
    # recompute against the normal step at half depth (13 layers: its normal state fits),
    # alternating, three runs each.
    half = dict(big, layers=1 if smoke else 13)
    counted = []
    for r in range(1 if smoke else 3):
        counted += [
            {"name": f"half-normal-r{r}", "model": half, "batch": 1, "steps": 4 if smoke else 12, "lean": "off",
             "economical": "off", "count": True},
            {"name": f"full-lean-fused-full-16GB-r{r}", "model": big, "batch": 1, "steps": 4 if smoke else 12,
             "lean": "fused", "economical": "full", "cap_gb": cap, "count": True},
            # The one-pass step (issue 34): at half depth against the normal step (its time), and
            # at the full model at full recompute under the note's observed 6.2 GB (its memory).
            # (Counted once: the count at the full model takes ≈ 50 s of the part's box on a CPU.)
            {"name": f"half-lean-one_pass-r{r}", "model": half, "batch": 1, "steps": 4 if smoke else 12,
             "lean": "one_pass", "economical": "off"},
            {"name": f"full-lean-one_pass-full-6.2GB-r{r}", "model": big, "batch": 1, "steps": 4 if smoke else 12,
             "lean": "one_pass", "economical": "full", "cap_gb": None if smoke else 6.2, "count": r == 0},
        ]
    counted.append({"name": "full-lean-offload-full-6.2GB", "model": big, "batch": 1, "steps": 4 if smoke else 8,
                    "lean": "offload", "economical": "full", "cap_gb": None if smoke else 6.2, "count": True})
    return {"large": large, "compile": compiled, "count": counted, "all": large + compiled + counted}[part]


def run_case(case: dict, smoke: bool) -> dict:
    """One case, in this process (called in a child by main)."""
    import torch

    from trainer.config.run_config import ConfigError, ModelConfig, RunConfig, TrainingConfig
    from trainer.model.gpt import GPT, count_parameters
    from trainer.run.hardware import plan_here
    from trainer.step.optim import make_optimizer, make_scaler
    from trainer.step.step import train_step

    device = torch.device("cpu" if smoke else "cuda")
    precision = "bf16"
    out = {"case": case["name"], **{k: case.get(k) for k in ("batch", "steps", "lean", "economical", "cap_gb", "compile")}}
    nvml = _nvml() if device.type == "cuda" else None
    if device.type == "cuda":
        total = torch.cuda.get_device_properties(device).total_memory
        out["card"] = torch.cuda.get_device_name(device)
        if case.get("cap_gb"):
            torch.cuda.set_per_process_memory_fraction(min(1.0, case["cap_gb"] * 1e9 / total), device)
    cfg = ModelConfig(**case["model"])
    t = TrainingConfig(batch_per_card=case["batch"], lean_state=case["lean"], economical=case["economical"],
                       precision=precision, seed=1)
    try:  # the trainer's own plan for the case on this card: its step kind, or why not
        step_kind = plan_here(RunConfig(model=cfg, training=t), device).step.value
    except ConfigError as e:
        return {**out, "skipped": str(e)[:300]}
    if case.get("count"):  # on fake CPU tensors, as the rtx5070ti's plan runs it (bf16)
        from trainer.plan.planner import known_machine, plan
        from trainer.step import memory_count

        run = RunConfig(model=cfg, training=t)
        began = time.perf_counter()
        c = memory_count.count(run, plan(run, known_machine("rtx5070ti")), categories=False)
        out.update(counted_mb=c["peak_mb"], counted_passes=c["backward_passes"],
                   count_s=round(time.perf_counter() - began, 1))
    with torch.device(device):
        model = GPT(cfg, case["economical"])
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.02)
    out["params"] = count_parameters(model)
    if case["lean"] == "one_pass":  # plain torch: no library to check
        from trainer.step.one_pass import OnePassOptimizer

        optimizer = OnePassOptimizer(model, t, device, precision)
    elif case["lean"] != "off":
        try:
            from trainer.step.lean import LeanOptimizer, check_device

            check_device(device)
        except Exception as e:  # noqa: BLE001 — a missing or CPU-only bitsandbytes: said, skipped
            return {**out, "skipped": str(e)[:300]}
        optimizer = LeanOptimizer(model, t, device, precision, step_kind)
    else:
        optimizer = make_optimizer(model, t, device)
    scaler = make_scaler(precision, device)
    module = model
    if case.get("compile"):
        from trainer.step.compiling import wrap

        module = wrap(model)
    g = torch.Generator(device=device).manual_seed(0)
    x = torch.randint(0, cfg.vocab, (case["batch"], cfg.context), device=device, generator=g)
    y = torch.randint(0, cfg.vocab, (case["batch"], cfg.context), device=device, generator=g)
    times, observed, losses = [], 0, []
    try:
        for _ in range(case["steps"]):
            _sync(device)
            began = time.perf_counter()
            loss = train_step(module, optimizer, scaler, (x, y), 1e-4, precision, device, 1.0, step_kind)
            _sync(device)
            times.append(time.perf_counter() - began)
            losses.append(float(loss))
            if nvml is not None:
                observed = max(observed, nvml())
    except torch.OutOfMemoryError as e:
        out["oom"] = str(e).splitlines()[0][:300]
    if device.type == "cuda":
        out["peak_allocated_mb"] = round(torch.cuda.max_memory_allocated(device) / 2**20, 1)
        out["peak_reserved_mb"] = round(torch.cuda.max_memory_reserved(device) / 2**20, 1)
        out["observed_nvml_mb"] = round(observed / 2**20, 1) if observed else None
    timed = times[WARM:] if len(times) > WARM else times
    out.update(steps_done=len(times), first_step_s=round(times[0], 3) if times else None,
               median_step_ms=round(statistics.median(timed) * 1000, 3) if timed else None,
               spread_ms=[round(min(timed) * 1000, 3), round(max(timed) * 1000, 3)] if timed else None,
               tokens_per_s=round(case["batch"] * cfg.context / statistics.median(timed), 1) if timed else None,
               loss_first_last=[round(losses[0], 4), round(losses[-1], 4)] if losses else None)
    return out


def _sync(device) -> None:  # noqa: ANN001
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _nvml():  # noqa: ANN202
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(int(os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0] or 0))
        return lambda: pynvml.nvmlDeviceGetMemoryInfo(handle).used
    except Exception:  # noqa: BLE001 — no NVML: the observed figure is left out
        return None


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--part", default="all", choices=("large", "compile", "count", "all"))
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--case", help=argparse.SUPPRESS)  # a child: one case as JSON
    a = ap.parse_args()
    if a.case:
        print(json.dumps(run_case(json.loads(a.case), a.smoke)), flush=True)
        return 0
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if a.smoke:
        env.setdefault("TERNIT_COMPILE_BACKEND", "aot_eager")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    failed = 0
    for case in cases(a.part, a.smoke):
        began = time.monotonic()
        p = subprocess.run([sys.executable, __file__, str(a.out), "--case", json.dumps(case), *(["--smoke"] if a.smoke else [])],
                           capture_output=True, text=True, env=env, cwd=ROOT)
        lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
        row = json.loads(lines[-1]) if p.returncode == 0 and lines else {"case": case["name"], "error": p.stderr[-1500:]}
        row["case_s"] = round(time.monotonic() - began, 1)
        failed += "error" in row
        with open(a.out, "a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")
        print(json.dumps(row), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
