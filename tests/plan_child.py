"""`python -m tests.plan_child DATA_DIR OUT_DIR` (one process, or each rank under torchrun):
every distinct plan the trainer accepts on this machine at a tiny shape — the grid of
economical level × lean state × compile × sharding × precision, and a few with micro-steps —
trained for two steps in this one process (or process group; there the compiled ones at
the economical level off only), through the trainer's own
set-up and loop (trainer.run.train._run_steps), one run folder each. For each, what ran is
written to OUT_DIR/report-RANK.json for tests/test_plan_trainer.py: the plan the `start`
event says, what the built parts are ("built"), the warnings, the steps and samples made,
and what the parts were after the steps (the compiled step used or not, gradients held or
not)."""

from __future__ import annotations

import itertools
import json
import sys
from dataclasses import asdict
from pathlib import Path

import torch

from trainer.config.run_config import (
    COMPILE_MODES,
    ECONOMICAL_LEVELS,
    LEAN_MODES,
    PRECISIONS,
    SHARDING_MODES,
    from_dict,
)
from trainer.parallel.distributed import init_world, shutdown
from trainer.plan.planner import Plan, plan
from trainer.run.control import Options
from trainer.run.hardware import this_machine
from trainer.run.train import EXIT_OK, Trainer, _run_steps

MODEL = {"context": 16, "width": 32, "heads": 2, "layers": 2, "vocab": 300}
STEPS = 2


def settings(data_dir: str) -> list[dict]:
    """The grid, then a few with two micro-steps (training.tokens_per_step)."""
    out = []
    for level, lean, compiled, sharding, precision in itertools.product(
            ECONOMICAL_LEVELS, LEAN_MODES, COMPILE_MODES, SHARDING_MODES, PRECISIONS):
        out.append({"economical": level, "lean_state": lean, "compile": compiled, "sharding": sharding,
                    "precision": precision})
    for lean, precision in itertools.product(("off", "on"), ("fp32", "fp16")):
        out.append({"lean_state": lean, "precision": precision, "compile": "off", "micro": 2})
    return out


def run_json(data_dir: str, world_size: int, setting: dict) -> dict:
    training = {k: v for k, v in setting.items() if k != "micro"}
    training.update(batch_per_card=2, steps_to=STEPS, eval_every=1000, eval_segments=2, sample_tokens=3,
                    warmup_steps=1, checkpoint_every_min=1000)
    if setting.get("micro"):
        training["tokens_per_step"] = setting["micro"] * world_size * 2 * MODEL["context"]
    return {"name": "plan", "model": MODEL, "training": training, "data": {"dir": data_dir}}


def main() -> int:
    data_dir, out = sys.argv[1], Path(sys.argv[2])
    device = torch.device("cpu")
    torch.set_num_threads(1)
    world = init_world("cpu")
    machine = this_machine(device, world)
    seen: set[str] = set()
    report = {"machine": asdict(machine), "runs": [], "refused": 0, "compiled_levels_left": 0}
    try:
        for i, setting in enumerate(settings(data_dir)):
            raw = run_json(data_dir, world.size, setting)
            decided = plan(from_dict(raw), machine)
            if not isinstance(decided, Plan):
                report["refused"] += 1
                continue
            key = json.dumps(decided.values(), sort_keys=True)
            if key in seen:  # the same plan from other words ("auto" resolving as asked): run once
                continue
            seen.add(key)
            if world.active and decided.compile.value == "on" and decided.economical.value != "off":
                # Compiling costs seconds a run; how an economical level compiles is the one
                # process's to show, DDP's compiled wrapper is shown at the level off.
                report["compiled_levels_left"] += 1
                continue
            report["runs"].append(run_one(out / f"run-{i:03d}", raw, world, device))
    finally:
        shutdown(world, together=True)
    (out / f"report-{world.rank}.json").write_text(json.dumps(report), encoding="utf-8")
    return 0


def graphs() -> int:
    """Graphs torch.compile has made in this process since its last reset."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


def run_one(run_dir: Path, raw: dict, world, device: torch.device) -> dict:
    import torch._dynamo

    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "run.json").write_text(json.dumps(raw), encoding="utf-8")
    cfg = from_dict(raw)
    opts = Options(run_dir)
    # Each run compiles afresh, as a trainer process does (one model a process): never
    # dynamo's cache of an earlier run's model, nor its recompile limit quietly going eager.
    torch._dynamo.reset()
    torch._dynamo.config.fail_on_recompile_limit_hit = True
    trainer = Trainer(cfg, opts, world, device)
    code = _run_steps(trainer, opts)
    if code != EXIT_OK:
        return {"code": code, "config": raw["training"], "run_dir": str(run_dir),
                "error": (run_dir / "events.jsonl").read_text(encoding="utf-8")[-2000:] if world.is_main else ""}
    compiled = trainer.compiled
    after = {"code": code, "compiled_used": bool(compiled is not None and compiled.compiled is not None
                                                 and not compiled.failed and graphs() > 0),
             "grads_left": sum(p.grad is not None for p in trainer.model.parameters()),
             "updates": getattr(trainer.optimizer, "updates", None), "run_dir": str(run_dir),
             "config": raw["training"]}
    return after


if __name__ == "__main__":
    raise SystemExit(main())
