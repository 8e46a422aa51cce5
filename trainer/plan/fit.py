"""Whether a plan fits its machine's card, and the fastest combination that does.

The plan (trainer/plan/planner.py) decides what a run executes; this weighs what one step of
it needs (the memory model, trainer/plan/memory_model.py, with cuBLAS's workspaces and the
framework's share: trainer/plan/step_cost.py) against the card, and where it does not fit,
tries the plan's own grid — every economical level × lean state (× DDP or FSDP on several
cards) the plan accepts with the run's other keys — for the one that fits with the least
arithmetic a step (recomputation and a second backward pass counted; offload's copies over
PCIe and FSDP's gathers are not arithmetic: among equals, the plan without them first).
`python -m trainer.config RUN.json --machine NAME` says it; the lab's sizing
(`ternit estimate --economical auto`) ranks the same combinations by its speed estimate.
Plain Python."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from trainer.config.reasons import Reason, Refusal
from trainer.config.run_config import ECONOMICAL_LEVELS, LEAN_MODES, RunConfig
from trainer.plan.memory_model import MiB, cublas_workspace_bytes, estimate_memory
from trainer.plan.planner import Machine, Plan, plan
from trainer.plan.shape import Shape
from trainer.plan.step_cost import arithmetic_factor, framework_mb, speed_basis


@dataclass(frozen=True)
class Fit:
    """One plan's memory on its machine's card (MiB): allocated, with the framework's share,
    the card; `fits` None where the machine has no card memory (the CPU)."""

    plan: Plan
    allocated_mb: float
    needed_mb: float
    card_mb: float | None
    arithmetic: float  # the step's arithmetic against the normal step's (step_cost)

    @property
    def fits(self) -> bool | None:
        return None if self.card_mb is None else self.needed_mb <= self.card_mb


def with_choice(cfg: RunConfig, level: str, lean: str, sharding: str | None = None) -> RunConfig:
    """`cfg` with the economical level, the lean state and (given) the sharding asked for."""
    t = dataclasses.replace(cfg.training, economical=level, lean_state=lean,
                            sharding=cfg.training.sharding if sharding is None else sharding)
    return dataclasses.replace(cfg, training=t)


def fit_of(cfg: RunConfig, p: Plan) -> Fit:
    """What one step of `p` needs on its machine's card (one micro-batch's activations)."""
    m, t, mach = cfg.model, cfg.training, p.machine
    s = Shape(m.layers, m.width, m.heads, m.context, m.vocab, t.batch_per_card)
    cuda = mach.device == "cuda"
    workspace = cublas_workspace_bytes(mach.capability or (0, 0)) if cuda else 0
    mem = estimate_memory(s, p.precision.value, mach.processes, p.economical.value, workspace, p.step.value,
                          p.sharding.value, "gpu" if cuda else "cpu")
    alloc = mem.peak / MiB
    return Fit(p, alloc, alloc + framework_mb(alloc, mach.device), mach.card_memory_mb if cuda else None,
               arithmetic_factor(s, p.economical.value, p.step.value))


def fastest_fitting(cfg: RunConfig, machine: Machine) -> Fit | None:
    """The plan of the grid that fits `machine` with the least arithmetic a step; None: none."""
    shardings = ("ddp", "fsdp") if machine.processes > 1 else (cfg.training.sharding,)
    fitting = []
    for sharding in shardings:
        for lean in LEAN_MODES:
            for level in ECONOMICAL_LEVELS:
                p = plan(with_choice(cfg, level, lean, sharding), machine)
                if isinstance(p, Refusal):
                    continue
                f = fit_of(cfg, p)
                if f.fits:
                    fitting.append(f)
    slow = ("offload",)  # copies over PCIe a step beyond its arithmetic
    return min(fitting, key=lambda f: (f.arithmetic, f.plan.step.value in slow, f.plan.sharding.value == "fsdp"),
               default=None)


def verdict(cfg: RunConfig, p: Plan) -> Reason | Refusal | None:
    """The plan's memory against its card: a Reason when it fits, a Refusal naming the
    fastest combination that fits (or none) when it does not; None without card memory."""
    f = fit_of(cfg, p)
    figures = {"allocated": f.allocated_mb, "framework": f.needed_mb - f.allocated_mb, "needed": f.needed_mb,
               "card": f.card_mb}
    if f.fits is None:
        return None
    if f.fits:
        return Reason("memory_fits", figures)
    best = fastest_fitting(cfg, p.machine)
    if best is None:
        return Refusal("does_not_fit", {**figures, "fits": False})
    bp = best.plan
    return Refusal("does_not_fit", {**figures, "fits": True, "level": bp.economical.value,
                                    "lean": bp.step.asked, "sharding": bp.sharding.value,
                                    "fit_needed": best.needed_mb, "arithmetic": best.arithmetic})


def speed_reason(cfg: RunConfig, p: Plan) -> Reason:
    """What the plan's speed for `p` rests on (step_cost.speed_basis): the note's measured
    step and this combination's recompute and backward passes, counted in its arithmetic."""
    m = cfg.model
    s = Shape(m.layers, m.width, m.heads, m.context, m.vocab, cfg.training.batch_per_card)
    return Reason("speed_basis", speed_basis(s, p.economical.value, p.step.value, p.machine.name))
