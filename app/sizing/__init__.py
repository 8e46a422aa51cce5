"""Sizing: honest estimates of weights, time, memory and data before a run starts.

Pure Python (no torch, no Qt): the window's «Как выбрать размер» panel and
`ternit estimate` show the same Estimate (result.py; its as_json() is the --json object).
See estimate.py (the numbers), formulas.py (weights and compute), memory.py (memory by
part), state.py (weights, gradients and moments per lean state and sharding), combos.py
(the economical combinations and `auto`), speed.py (tokens/s), gpus.py (the cards),
advice.py (the sentences), plateau.py (when to grow), history.py (measured runs),
cpu_rate.py (the CPU's rate, measured once when nothing is known).
"""

from __future__ import annotations

from trainer.plan.memory_model import estimate_memory

from .combos import Combination
from .estimate import estimate
from .formulas import flops_per_token, param_count, tokens_per_step
from .gpus import GPUS, GpuFacts, local_card
from .history import measured_from_run_dir, measured_runs
from .plateau import plateau
from .result import Estimate

__all__ = [
    "GPUS", "Combination", "Estimate", "GpuFacts", "estimate", "estimate_memory", "flops_per_token", "local_card",
    "measured_from_run_dir", "measured_runs", "param_count", "plateau", "tokens_per_step",
]
