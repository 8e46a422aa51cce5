"""The plan on a real card (trainer/plan/planner.py): the trainer fills its Machine from torch at its
start (trainer/run/hardware.py), the lab from NVML (app.sizing.gpus.machine_for("local", …)).
For the same card the two must plan every setting alike, or the lab would promise what the
trainer then runs differently. Over the grid (economical level × lean state × compile ×
sharding × precision: 432 settings) at the lab's three models (27.7 M, 604 M, 1.67 B), on
one process and as if on two (the same card twice): the settings planned differently
(should be none; the cards' memory as torch and NVML count it differ a little, which
matters only within a few MB of auto sharding's threshold), and the two machines.

    python scripts/gpu_check_plan.py OUT.json      # needs a card, nvidia-ml-py, platformdirs
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from app.sizing.gpus import local_card, machine_for  # noqa: E402
from trainer.config.run_config import (  # noqa: E402
    COMPILE_MODES,
    ECONOMICAL_LEVELS,
    LEAN_MODES,
    PRECISIONS,
    SHARDING_MODES,
    from_dict,
)
from trainer.parallel.distributed import World  # noqa: E402
from trainer.plan.planner import Plan, plan  # noqa: E402
from trainer.run.hardware import this_machine  # noqa: E402

MODELS = {"27.7M": (8, 512, 8, 6), "604M": (24, 1440, 12, 2), "1.67B": (26, 2304, 18, 1)}


def main(out: Path) -> int:
    trainers = this_machine(torch.device("cuda", 0), World())
    card = local_card()
    if card is None:
        print("NVML sees no card", file=sys.stderr)
        return 2
    labs = machine_for("local", card.memory_mb, card.compute_capability)
    differ, settings = [], 0
    for processes in (1, 2):
        t, lab = (dataclasses.replace(m, processes=processes, name="") for m in (trainers, labs))
        for model, (layers, width, heads, batch) in MODELS.items():
            for level, lean, compiled, sharding, precision in itertools.product(
                    ECONOMICAL_LEVELS, LEAN_MODES, COMPILE_MODES, SHARDING_MODES, PRECISIONS):
                cfg = from_dict({"model": {"layers": layers, "width": width, "heads": heads},
                                 "training": {"batch_per_card": batch, "economical": level, "lean_state": lean,
                                              "compile": compiled, "sharding": sharding, "precision": precision}})
                a, b = plan(cfg, t), plan(cfg, lab)
                settings += 1
                said = [x.values() if isinstance(x, Plan) else x.code for x in (a, b)]
                if said[0] != said[1]:
                    differ.append({"processes": processes, "model": model, "setting": [level, lean, compiled,
                                   sharding, precision], "trainer": said[0], "lab": said[1]})
    report = {"card": card.name, "trainer_machine": dataclasses.asdict(trainers),
              "lab_machine": dataclasses.asdict(labs), "settings": settings, "differ": differ[:50],
              "differ_count": len(differ)}
    out.write_text(json.dumps(report, indent=1), encoding="utf-8")
    print(f"plan: {settings} settings, {len(differ)} planned differently by the trainer's and the lab's machine")
    return 0 if not differ else 1


if __name__ == "__main__":
    raise SystemExit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "plan.json")))
