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
    base = 6 * param_count(L, d, n, s.vocab) + 12 * L * n * d
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
