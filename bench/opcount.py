"""How much work one training step asks of the device: operator calls and FLOPs.

Counted at the dispatcher, so the same figures come out on the CPU and on a GPU. Operator
calls that run a kernel (views, empty allocations and profiler markers excluded) stand for
kernel launches: at the lab's sizes an H200 spends a step mostly waiting for launches
(docs/PERF.md), so the economical mode's extra calls show there in full, while a card
that is busy with arithmetic (a T4) feels the extra FLOPs instead. Both are reported by
the economical-mode benchmark, and the tests hold the mode to them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# Operators that only make a new view of a storage, allocate without filling, or mark the
# profiler: no kernel runs.
_NO_KERNEL = frozenset(
    {
        "view", "_unsafe_view", "reshape", "_reshape_alias", "as_strided", "t", "transpose",
        "permute", "expand", "unsqueeze", "squeeze", "select", "slice", "split",
        "split_with_sizes", "unbind", "alias", "detach", "empty", "empty_like",
        "empty_strided", "_record_function_enter_new", "_record_function_exit",
        "lift_fresh",
    }
)


_MATRIX_PRODUCTS = frozenset({"mm", "addmm", "addmm_", "bmm", "baddbmm", "baddbmm_"})


def matmul_flops(name: str, args: tuple) -> int:
    """2·m·k·n for a matrix product, whatever its overload (out=, in place, dtype)."""
    a, b = (args[1], args[2]) if name.startswith(("addmm", "baddbmm")) else (args[0], args[1])
    batch = a.shape[0] if a.dim() == 3 else 1
    return 2 * batch * a.shape[-2] * a.shape[-1] * b.shape[-1]


def attention_flops(name: str, args: tuple) -> int:
    """The attention kernel's products over the full square, the convention of
    app/sizing/formulas: 4·b·h·t²·e forward (q·kᵀ and weights·v), twice that backward."""
    q, k = (args[1], args[2]) if name.endswith("_backward") else (args[0], args[1])
    b, h, t, e = q.shape
    forward = 4 * b * h * t * k.shape[-2] * e
    return 2 * forward if name.endswith("_backward") else forward


class OpCounter(TorchDispatchMode):
    """Counts the operator calls that run a kernel, by name, and the FLOPs of the matrix
    products and the attention kernel (torch.utils.flop_counter misses the out= and
    in-place products the economical mode uses, and the CPU's attention kernel)."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter[str] = Counter()
        self.flops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        name = func.overloadpacket.__name__
        if name not in _NO_KERNEL:
            self.counts[name] += 1
        if name in _MATRIX_PRODUCTS:
            self.flops += matmul_flops(name, args)
        elif name.startswith("_scaled_dot_product") or name.startswith("_efficient_attention"):
            self.flops += attention_flops(name, args)
        return func(*args, **(kwargs or {}))

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def count_step(step: Callable[[], Any]) -> tuple[Any, dict[str, Any]]:
    """Run `step()` once, counting its kernel-running operator calls and its FLOPs."""
    ops = OpCounter()
    with ops:
        result = step()
    if isinstance(result, torch.Tensor) and result.device.type == "cuda":
        torch.cuda.synchronize(result.device)
    return result, {
        "ops": ops.total,
        "flops": ops.flops,
        "top_ops": dict(ops.counts.most_common(12)),
    }
