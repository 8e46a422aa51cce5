"""python -m bench.mem_peak_cost — what counting every CPU step's memory costs per step.

The trainer's `mem_peak_mb` on the CPU comes from StoragePeak (trainer/step/memory.py), a
dispatch mode that sees every operator of the step; since issue 24 every step is counted,
so the events say the peak over all steps so far. This runs the real loop
(bench.step.trainer_series: memmapped data, events, clipping) with every other step
counted, so the counted and the uncounted steps share the same moments of a loaded
machine (series one after the other drift with the load by more than the cost), and
prints the medians of each and the difference per step. (The trainer counts steps until
the peak repeats, then one in StepMemory.RECOUNT_EVERY: its cost per step on average is the
difference here over that.)
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import torch

import trainer.step.memory as memory
from bench.step import summarize, trainer_series, write_random_data
from trainer.config.run_config import from_dict

RECOUNT_EVERY = memory.StepMemory.RECOUNT_EVERY  # the trainer's, before this tool sets it to 1


def every_other_step() -> list[bool]:
    """StepMemory counting every other step (the first always: the events need a figure);
    returns the list that records, step by step, whether it was counted."""
    real = memory.StepMemory.step
    memory.StepMemory.RECOUNT_EVERY = 1  # no steady-state skipping: this measures a counted step
    counted: list[bool] = []

    def step(self, fn, alive, measure=True):  # noqa: ANN001, ANN202 — the same signature
        on = measure and (len(counted) % 2 == 0 or self.peak_mb is None)
        counted.append(on)
        return real(self, fn, alive, measure=on)

    memory.StepMemory.step = step
    return counted


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.mem_peak_cost", description=__doc__.splitlines()[0])
    p.add_argument("--context", type=int, default=256)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--economical", default="off")
    p.add_argument("--steps", type=int, default=60, help="measured steps (half of them counted)")
    p.add_argument("--warmup", type=int, default=4)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    cfg = from_dict({"model": {"context": args.context, "width": args.width, "heads": args.heads,
                               "layers": args.layers, "vocab": 4000},
                     "training": {"batch_per_card": args.batch, "eval_every": 10**9, "checkpoint_every_min": 10_000,
                                  "economical": args.economical, "sample_tokens": 0}})
    import tempfile
    from pathlib import Path

    counted = every_other_step()
    with tempfile.TemporaryDirectory() as tmp:
        data = write_random_data(Path(tmp), 4000, 2_000_000)
        gaps = trainer_series(cfg, data, args.steps, args.warmup, torch.device("cpu"))
    # gaps[i] is step warmup + i + 1, run as call warmup + i (0-based) of StepMemory.step
    marks = np.array(counted[args.warmup:args.warmup + len(gaps)])
    gaps = np.array(gaps)
    out = {"counted": summarize(list(gaps[marks])), "not counted": summarize(list(gaps[~marks]))}
    on, off = out["counted"]["median_ms"], out["not counted"]["median_ms"]
    out["cost_per_step_ms"] = on - off
    out["cost_fraction"] = on / off - 1
    out["amortized_after_steady_ms"] = (on - off) / RECOUNT_EVERY  # one step in RECOUNT_EVERY counted
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
