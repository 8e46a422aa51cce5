"""torch.compile of the training step's model (run.json `training.compile`).

At the lab's sizes a step on a fast card waits mostly for kernel launches, which
compilation cuts by fusing the element-wise work between the matrix products. On the CPU
it measured no gain and costs a compilation, so `auto` means on for a CUDA card and off on
the CPU (the figures: docs/PERF.md, «Figures the code's docstrings carried»). Whether a
run compiles is the plan's choice (trainer/plan/planner.py: `auto` says why it chose, `on`
compiles or is refused); this module makes the compiled step.

What is compiled is a wrapper (`torch.compile(module)`) used only by the training step;
the model itself is untouched, so its state dict keeps its plain names (no `_orig_mod.`
prefix) and checkpoints cross between compiled and eager runs; evaluation and samples
run eagerly (their shapes vary, and each new shape would be a recompilation).

Compilation happens at the first step. The plan refuses `on` where the compiler it needs
is missing (no C++ compiler for inductor on the CPU, no Triton for a card); if it fails
all the same (a compiler that does not work, an operator it cannot take), the step is run again
eagerly and the run goes on without compilation, saying why (a `warning` event and a
trainer.log line). That is safe to repeat: a failure inside the compiled forward or
backward pass comes before the optimizer has touched anything.

Combinations (the plan's rules):
- the economical levels (custom autograd functions, activation checkpointing) compile;
- the fused steps (lean_state "fused", "offload") are refused with `on` (and `auto`
  leaves them eager): the compiled backward pass is one autograd node that produces every
  gradient at once, before the per-parameter hooks run, so their promise (no full set of
  gradients held) would not hold. The held step (lean_state true) holds the gradients
  anyway and steps after the backward pass: it compiles;
- FSDP sharding is refused with `on` (`auto` stays eager): its per-block hooks gather
  and free weights around each block, which whole-model compilation would trace through
  or break at; compiling each block separately is the way, not done in this version.
- DDP: the compiled wrapper goes around the DDP module (the order torch documents).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from trainer.plan.planner import compile_backend


def backend() -> str:
    """torch.compile's backend (trainer.plan.planner.compile_backend: the environment's choice)."""
    return compile_backend()


def wrap(module: nn.Module) -> nn.Module:
    """The compiled wrapper the training step calls (the module itself is unchanged)."""
    return torch.compile(module, backend=backend())


class CompiledStep:
    """The compiled module, made and first run at the first step with the eager fallback.

    `run(step, eager)` calls `step(compiled)`; if making or running it raises anything
    but an out-of-memory error, `on_failure(reason)` is told, `reset()` clears what the
    failed attempt left (gradients) and `step(eager)` is run instead (its own failure is
    the run's), and `failed` is set: the run goes on eagerly."""

    def __init__(self, module: nn.Module, on_failure: Callable[[str], None], reset: Callable[[], None]) -> None:
        self.module, self.on_failure, self.reset = module, on_failure, reset
        self.compiled: nn.Module | None = None
        self.failed = False

    def run(self, step: Callable[[nn.Module], Any]) -> Any:
        if self.failed:
            return step(self.module)
        if self.compiled is not None:
            return step(self.compiled)
        try:
            compiled = wrap(self.module)
            result = step(compiled)
        except torch.OutOfMemoryError:
            raise
        except Exception as e:  # noqa: BLE001 — any failure to compile: said, then eager
            self.failed = True
            self.on_failure(reason(e))
            self.reset()
            return step(self.module)
        self.compiled = compiled
        return result


def reason(error: BaseException) -> str:
    """One line for why compilation failed: the innermost cause's first line."""
    inner = error
    while inner.__cause__ is not None and inner.__cause__ is not inner:
        inner = inner.__cause__
    text = str(inner).strip().splitlines()
    first = next((line.strip() for line in text if line.strip()), "")
    return f"{type(inner).__name__}: {first[:240]}" if first else type(inner).__name__
