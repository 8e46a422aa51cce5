"""The economical combinations: an activation level (off / selective / full) × a lean state
(off / on / offload) × the state sharded over the target's cards or not; what each costs
in step time beyond the normal step, and which is the fastest that fits (`--economical auto`).

Costs that are not measured here are said as such where they are shown:
- the recomputation of the economical levels: its arithmetic (speed.economical_factor);
- the lean state on a GPU: no extra time (the lab's note); on the CPU bitsandbytes'
  update is slow: LEAN_CPU_S_PER_WEIGHT a weight and step per thread (issue 13's
  measurement);
- the "fused" step (and "offload", which is fused): a second backward pass, FUSED_EXTRA of
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

from trainer.config import ECONOMICAL_LEVELS as ECONOMICAL
from trainer.config import sharding_refusal

from ..base.memory_saving import ECONOMICAL_OPTIONS, LEAN_STATE_OPTIONS
from .state import LEAN_STATES, steps_in_backward

LEAN_CPU_S_PER_WEIGHT = 0.8 / 17e6  # seconds a weight and step, one thread
FUSED_EXTRA = 2 / 3  # the fused step's second backward pass, a share of the step's time
# The form has no field for sharding (the trainer's run.json key): the advice names the key.
SHARDED = {"ru": ", разделённое между картами (run.json: training.sharding)",
           "en": ", sharded over the cards (run.json: training.sharding)"}


@dataclass(frozen=True)
class Combination:
    """What «Экономный режим» sets: run.json's training.economical, training.lean_state and
    training.sharding (FSDP2 over the cards)."""

    level: str = "off"
    lean_state: str = "off"
    sharded: bool = False

    def as_json(self) -> dict[str, Any]:
        return {"level": self.level, "lean_state": self.lean_state, "sharding": self.sharded}

    def is_normal(self) -> bool:
        return self == Combination()

    def text(self, lang: str) -> str:
        """«Выборочный» + «8 бит» (+ на обе карты), for the advice."""
        level = ECONOMICAL_OPTIONS[self.level][lang]
        lean = LEAN_STATE_OPTIONS[self.lean_state][lang]
        if lang == "ru":
            out = f"пересчёт активаций «{level}», облегчённое состояние «{lean}»"
            return out + SHARDED["ru"] if self.sharded else out
        out = f"activation recompute «{level}», lean state «{lean}»"
        return out + SHARDED["en"] if self.sharded else out


def combinations(cards: int) -> list[Combination]:
    """Every combination a target offers, the normal mode first (sharding: 2+ cards), but
    none the trainer refuses (trainer.config.sharding_refusal: the one rule for both)."""
    shard = (False, True) if cards > 1 else (False,)
    return [Combination(level, lean, sh) for sh in shard for lean in LEAN_STATES for level in ECONOMICAL
            if sharding_refusal(running(sh, cards), lean) is None]


def running(sharded: bool, cards: int) -> str:
    """How the trainer runs a combination on `cards` cards: "fsdp", "ddp" or "none"."""
    return "fsdp" if sharded else ("ddp" if cards > 1 else "none")


def extra_step_seconds(c: Combination, params: int, kind: str, pcie_gb_s: float, threads: int = 1,
                       step_s: float = 0.0, precision: str = "bf16") -> float:
    """Seconds a step costs beyond its arithmetic (`step_s`, the step's own time), on a
    device of `kind` ("cpu"/"gpu") in `precision` (under fp16 no step is fused: no
    second backward pass)."""
    extra = FUSED_EXTRA * step_s if steps_in_backward(c.lean_state, precision) else 0.0
    if c.lean_state != "off" and kind == "cpu":
        extra += LEAN_CPU_S_PER_WEIGHT * params / max(1, threads)
    if kind != "cpu" and pcie_gb_s > 0:
        if c.lean_state == "offload":
            extra += 2 * 2.03 * params / (pcie_gb_s * 1e9)
        if c.sharded:
            extra += (2 + 2 + 4) * params / 2 / (pcie_gb_s * 1e9)
    return extra
