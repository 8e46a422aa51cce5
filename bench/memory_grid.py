"""python -m bench.memory_grid — every combination the plan offers, counted against the estimate.

For each machine of the catalogue named (default: rtx5070ti and t4x2) and each combination of
economical level × lean state × sharding that the plan accepts there (app.sizing.combos.offered),
the trainer's own step at the shape given (default: the lab's full model, 26 × 2304, 18 heads,
V 4000, n 1024, batch 1) is counted on fake tensors (trainer.step.memory_count) and the
estimate (trainer.plan.memory_model.estimate_memory, without cuBLAS's workspaces, which the count
leaves to the margin) is set beside it. FSDP is not counted (the count does not shard): its
rows carry the estimate alone. Prints a Markdown table (docs/PERF.md keeps one).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path
from typing import Any

from app.sizing.combos import offered
from app.sizing.formulas import Shape
from trainer.config.run_config import ModelConfig, RunConfig, TrainingConfig
from trainer.plan.memory_model import MiB, estimate_memory
from trainer.plan.planner import known_machine
from trainer.step import memory_count as mc


def rows_for(machine: str, shape: Shape, sharding: str) -> list[dict[str, Any]]:
    m = known_machine(machine)
    cfg = RunConfig()
    cfg.model = ModelConfig(context=shape.context, width=shape.width, heads=shape.heads, layers=shape.layers,
                            vocab=shape.vocab)
    cfg.training = TrainingConfig(batch_per_card=shape.batch, sharding=sharding)
    out = []
    for combo, p in offered(cfg, m):
        run = dataclasses.replace(cfg, training=dataclasses.replace(
            cfg.training, economical=combo.level, lean_state=combo.lean_state, sharding=p.sharding.value))
        est = estimate_memory(shape, p.precision.value, cards=m.processes, economical=combo.level,
                              step=p.step.value, sharding=p.sharding.value, device="gpu").peak / MiB
        row: dict[str, Any] = {"machine": machine, **combo.as_json(), "step": p.step.value,
                               "precision": p.precision.value, "estimate_mib": round(est, 1)}
        if p.sharding.value != "fsdp":
            began = time.perf_counter()
            row |= mc.count(run, p)
            row["count_seconds"] = round(time.perf_counter() - began, 1)
            row["error"] = est / row["peak_mb"] - 1
        out.append(row)
    return out


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| machine | level | lean state | sharding | step | precision | counted, MiB | passes | weights | "
             "gradients | optimizer state | activations | temporaries | estimate, MiB | estimate − count |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "peak_mb" not in r:
            lines.append(f"| {r['machine']} | {r['level']} | {r['lean_state']} | {r['sharding']} | {r['step']} | "
                         f"{r['precision']} | not counted (FSDP) | | | | | | | {r['estimate_mib']:,.1f} | |")
            continue
        b = r["by_category"]
        lines.append(f"| {r['machine']} | {r['level']} | {r['lean_state']} | {r['sharding']} | {r['step']} | "
                     f"{r['precision']} | **{r['peak_mb']:,.1f}** | {r['backward_passes']} | {b['weights']:,.1f} | "
                     f"{b['gradients']:,.1f} | {b['optimizer_state']:,.1f} | {b['activations']:,.1f} | "
                     f"{b['temporaries']:,.1f} | {r['estimate_mib']:,.1f} | {r['error'] * 100:+.1f} % |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.memory_grid", description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=26)
    ap.add_argument("--width", type=int, default=2304)
    ap.add_argument("--heads", type=int, default=18)
    ap.add_argument("--context", type=int, default=1024)
    ap.add_argument("--vocab", type=int, default=4000)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--machines", default="rtx5070ti,t4x2")
    ap.add_argument("--sharding", default="auto", help="training.sharding on several cards (auto offers ddp and fsdp)")
    ap.add_argument("--json", type=Path, help="also write the rows here")
    args = ap.parse_args(argv)
    shape = Shape(args.layers, args.width, args.heads, args.context, args.vocab, args.batch)
    rows = [r for name in args.machines.split(",") for r in rows_for(name.strip(), shape, args.sharding)]
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    from trainer.base.streams import utf8_stdio

    utf8_stdio()
    raise SystemExit(main())
