"""What a combination costs in step time beyond the normal step, as far as its arithmetic
goes, and the framework's memory beyond what the allocator hands out: the parts of the
sizing the plan needs to say whether a plan fits a card and which combination that fits is
the fastest (`python -m trainer.config RUN.json --machine NAME`). Plain Python; the lab's
sizing (app.sizing.speed, app.sizing.combos, app.sizing.gpus) reads them from here."""

from __future__ import annotations

from trainer.plan.planner import FUSED_STEPS
from trainer.plan.shape import Shape, param_count

# The fused step's second backward pass, a share of the step's time (the backward pass is
# ≈ 2 of a step's 3 units of arithmetic; not measured on a GPU).
FUSED_EXTRA = 2 / 3
# Framework memory on a card that the allocator does not count (the CUDA context and its
# kernels, MiB per card), and the caching allocator's slack, a share of the allocated peak
# (docs/PERF.md, «Estimates against measurements»; the note: 5,536 MB allocated, 6,149 MB
# observed).
CONTEXT_MB = 400.0
CACHE_SLACK = 0.04


# The lab's note (shared/GUIDE.md, «Экономный режим»): its full model — 1.67 B weights, read
# as 26 layers × 2304, 18 heads, V 4000 — took ≈ 149 ms a step of 1,024 tokens on an
# RTX 5070 Ti. The one measured step time of a card the plan knows by name: the plan's and
# the sizing's speed there rest on it (app.sizing.gpus.NOTE_5070TI reads these).
NOTE_SHAPE = Shape(26, 2304, 18, 1024, 4000, 1)
NOTE_MS_PER_STEP = 149.0
NOTE_MACHINE = "rtx5070ti"


def normal_flops_per_token(s: Shape) -> int:
    """The normal step's arithmetic a token: 6 a weight, and attention's 12·L·n·d."""
    return 6 * param_count(s.layers, s.width, s.context, s.vocab) + 12 * s.layers * s.context * s.width


def economical_factor(s: Shape, level: str) -> float:
    """Extra compute of recomputation, as a multiple of the normal step's compute.

    trainer/model/economical.py recomputes, per block and token: selective, the MLP's
    up-projection (4·d² weights; the down-projection's output is never needed again) and
    the norms: 2·4·d² FLOPs; full, also the attention up to what its backward needs
    (qkv 3·d² and the kernel's 4·n·d; the checkpoint stops before the output projection):
    2·7·d² + 4·n·d. The chunked loss does no extra product. Counted in the real trainer
    by bench.opcount (tests/test_opcount.py); the time it costs is not measured here."""
    if level == "off":
        return 1.0
    L, d, n = s.layers, s.width, s.context
    base = normal_flops_per_token(s)
    extra = 2 * 4 * d * d * L if level == "selective" else (2 * 7 * d * d + 4 * n * d) * L
    return (base + extra) / base


def arithmetic_factor(s: Shape, level: str, step: str) -> float:
    """A step's arithmetic against the normal step's: the recomputation and, for a step
    fused into the backward pass, its second backward pass. Not in it: the lean state's
    update on the CPU, offload's copies over PCIe, FSDP's gathers (app.sizing.combos adds
    those in seconds)."""
    return economical_factor(s, level) + (FUSED_EXTRA if step in FUSED_STEPS else 0.0)


def framework_mb(allocated_mb: float, device: str = "cuda") -> float:
    """What the process needs on a card beyond the allocated peak (none counted on the CPU)."""
    return CONTEXT_MB + CACHE_SLACK * allocated_mb if device == "cuda" else 0.0


def speed_basis(s: Shape, level: str, step: str, machine: str | None) -> dict[str, float | None]:
    """What the plan's speed for a combination rests on: the step's arithmetic against the
    normal step's, split into recomputation's extra forward and the fused step's second
    backward pass, and on the note's card (NOTE_MACHINE) the note's 149 ms a step scaled to
    this shape by arithmetic (`ms`; None elsewhere: no measured step time to scale)."""
    recompute = economical_factor(s, level) - 1.0
    second = FUSED_EXTRA if step in FUSED_STEPS else 0.0
    arithmetic = 1.0 + recompute + second
    ms = None
    if machine == NOTE_MACHINE:
        scale = (normal_flops_per_token(s) * s.batch * s.context) / (
            normal_flops_per_token(NOTE_SHAPE) * NOTE_SHAPE.batch * NOTE_SHAPE.context)
        ms = NOTE_MS_PER_STEP * scale * arithmetic
    return {"ms": ms, "note_ms": NOTE_MS_PER_STEP, "arithmetic": arithmetic, "recompute": recompute,
            "second_backward": second, "backward_passes": 2.0 if second else 1.0}
