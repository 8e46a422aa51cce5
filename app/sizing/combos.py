"""The economical combinations: an activation level (off / selective / full) × a lean state
(off / on / fused / offload) × how the target's cards share the state (DDP, or sharded by
FSDP); exactly those the plan (trainer/plan/planner.py) accepts on the machine, each with the plan
that runs it; what each costs in step time beyond the normal step, and which is the
fastest that fits (`--economical auto`).

Costs that are not measured here are said as such where they are shown:
- the recomputation of the economical levels: its arithmetic (trainer.plan.step_cost.economical_factor);
- the lean state on a GPU: no extra time (the lab's note); on the CPU bitsandbytes'
  update is slow: LEAN_CPU_S_PER_WEIGHT a weight and step per thread (issue 13's
  measurement);
- the plan's "fused" step (and "offload", which is fused): a second backward pass, FUSED_EXTRA of
  the step's own time (the backward pass is ≈ 2 of a step's 3 units of arithmetic; the
  GPU's figure is this arithmetic share, not measured);
- offload: both 8-bit moments (≈ 2 bytes a weight) copied to the card and back every step
  at the card's PCIe rate (GpuFacts.pcie_gb_s); nothing on the CPU;
- sharding (FSDP2): each card receives half of the weights gathered twice (forward and
  backward, 2 bytes a weight each) and half of the fp32 gradients reduced (4 bytes), over
  the link between the cards (modelled at the PCIe rate; not measured).
The figures behind these: docs/PERF.md, «Figures the code's docstrings carried».
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainer.config.run_config import ECONOMICAL_LEVELS, LEAN_MODES, RunConfig
from trainer.plan.fit import with_choice
from trainer.plan.planner import FUSED_STEPS, Machine, Plan, Refusal, plan
from trainer.plan.step_cost import FUSED_EXTRA

from ..base.memory_saving import ECONOMICAL_OPTIONS, LEAN_STATE_OPTIONS

LEAN_CPU_S_PER_WEIGHT = 0.8 / 17e6  # seconds a weight and step, one thread
# The form has no field for sharding (the trainer's run.json key): the advice names the key.
SHARDED = {"ru": ", разделённое между картами (run.json: training.sharding)",
           "en": ", sharded over the cards (run.json: training.sharding)"}


@dataclass(frozen=True)
class Combination:
    """What «Экономный режим» sets: run.json's training.economical, training.lean_state, and
    how the processes share the state (the plan's sharding: "none" on one process, "ddp",
    or "fsdp": run.json's training.sharding)."""

    level: str = "off"
    lean_state: str = "off"
    sharding: str = "none"

    @property
    def sharded(self) -> bool:
        """The state sharded over the cards (FSDP2)."""
        return self.sharding == "fsdp"

    def as_json(self) -> dict[str, Any]:
        return {"level": self.level, "lean_state": self.lean_state, "sharding": self.sharding}

    def is_normal(self) -> bool:
        return self.level == "off" and self.lean_state == "off" and not self.sharded

    def text(self, lang: str) -> str:
        """«Выборочный» + «8 бит» (+ на обе карты), for the advice."""
        level = ECONOMICAL_OPTIONS[self.level][lang]
        lean = LEAN_STATE_OPTIONS[self.lean_state][lang]
        if lang == "ru":
            out = f"пересчёт активаций «{level}», облегчённое состояние «{lean}»"
            return out + SHARDED["ru"] if self.sharded else out
        out = f"activation recompute “{level}”, lean state “{lean}”"
        return out + SHARDED["en"] if self.sharded else out


def shardings_to_try(cfg: RunConfig, machine: Machine) -> tuple[str, ...]:
    """The training.sharding values the offer covers: the one asked when it is ddp or fsdp;
    for "auto" on several cards both (auto resolves to one of them, and `--economical auto`
    may pick the other, writing it into run.json)."""
    asked = cfg.training.sharding
    if machine.processes > 1 and asked == "auto":
        return ("ddp", "fsdp")
    return (asked,)


def offered(cfg: RunConfig, machine: Machine) -> list[tuple[Combination, Plan]]:
    """Every combination of level × lean state × sharding that the plan accepts for `cfg`
    (its other training keys: precision, compile, tokens per step …) on `machine`, with
    that plan; the normal mode first. Exactly the plan's: none it refuses, none it would
    run otherwise (the same sharding and step kind)."""
    out: list[tuple[Combination, Plan]] = []
    for sharding in shardings_to_try(cfg, machine):
        for lean in LEAN_MODES:
            for level in ECONOMICAL_LEVELS:
                p = plan(with_choice(cfg, level, lean, sharding), machine)
                if isinstance(p, Refusal):
                    continue
                c = Combination(level, lean, p.sharding.value)
                if all(c != have for have, _ in out):
                    out.append((c, p))
    return out


def extra_step_seconds(step: str, sharding: str, params: int, kind: str, pcie_gb_s: float, threads: int = 1,
                       step_s: float = 0.0) -> float:
    """Seconds a step of the plan's `step` kind under its `sharding` costs beyond its
    arithmetic (`step_s`, the step's own time), on a device of `kind` ("cpu"/"gpu")."""
    extra = FUSED_EXTRA * step_s if step in FUSED_STEPS else 0.0
    if step != "normal" and kind == "cpu":
        extra += LEAN_CPU_S_PER_WEIGHT * params / max(1, threads)
    if kind != "cpu" and pcie_gb_s > 0:
        if step == "offload":
            extra += 2 * 2.03 * params / (pcie_gb_s * 1e9)
        if sharding == "fsdp":
            extra += (2 + 2 + 4) * params / 2 / (pcie_gb_s * 1e9)
    return extra
