"""Honest memory accounting of a training step: the peak of live tensor storages.

On a GPU the number is `torch.cuda.max_memory_allocated` over the step (its peak reset
first). The CPU has no such counter (the allocator's cache and the process's resident
size measure something else), so `StoragePeak` counts it the same way the CUDA
allocator does: every storage an operator creates adds its bytes, and a weak-reference
callback on the storage takes them away when the storage is freed. Views and in-place
results share a storage already counted, so nothing is counted twice.

Why not saved-tensor hooks: inside non-reentrant checkpointing the tensors a selective
policy keeps never pass through an outer hook, so such a count flatters the economical
mode several times over (docs/PERF.md, «Figures the code's docstrings carried»). A dispatch mode sees every operator, including
those inside checkpointed regions and their recomputation in the backward pass.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_iter

R = TypeVar("R")


class StoragePeak(TorchDispatchMode):
    """Counts the bytes of live tensor storages while active; keeps the peak.

    `alive` seeds the count with storages that exist before the step (parameters,
    gradients, optimizer state, the batch), so `peak_bytes` is the whole working set.
    Tensors created before entering and not named in `alive` are not counted.

        with StoragePeak(alive=[*model.parameters(), *opt_state]) as sp:
            loss = model(x, y); sp.mark("after_forward"); loss.backward(); opt.step()
        sp.peak_bytes, sp.marks["after_forward"]
    """

    def __init__(self, alive: Iterable[torch.Tensor] = ()) -> None:
        super().__init__()
        # StorageImpl address -> (nbytes, weak reference whose callback removes it).
        self._live: dict[int, tuple[int, weakref.ref]] = {}
        self.live_bytes = 0
        for t in alive:
            if isinstance(t, torch.Tensor):
                self._track(t)
        self.baseline_bytes = self.live_bytes
        self.peak_bytes = self.live_bytes
        self.marks: dict[str, int] = {}
        self.ops = 0

    def _track(self, t: torch.Tensor) -> bool:
        """Count `t`'s storage if it is new; returns True when it was."""
        # A DTensor (FSDP's shards) has no storage of its own: its local shard's counts.
        # The operators DTensor runs on the shards happen below this mode, unseen, so
        # its results are counted here, through the DTensor the operator returns.
        t = getattr(t, "_local_tensor", t)
        try:
            st = t.untyped_storage()
        except (RuntimeError, NotImplementedError):  # sparse or storage-less tensors
            return False
        key = st._cdata
        known = self._live.get(key)
        nbytes = st.nbytes()
        if known is not None:
            if known[0] != nbytes:  # resized in place (e.g. an `out=` result)
                self.live_bytes += nbytes - known[0]
                self._live[key] = (nbytes, known[1])
            return False
        # The storage's Python object lives exactly as long as the storage itself
        # (PyTorch preserves it while C++ holds references), so this callback fires
        # when the memory is released.
        ref = weakref.ref(st, lambda _r, key=key: self._free(key))
        self._live[key] = (nbytes, ref)
        self.live_bytes += nbytes
        return True

    def resized(self, t: torch.Tensor) -> None:
        """`t`'s storage was resized in place where no operator shows it (FSDP frees a
        block's gathered weights with storage.resize_(0) and refills them later)."""
        st = t.untyped_storage()
        known = self._live.get(st._cdata)
        if known is None:
            self._track(t)
        else:
            self.live_bytes += st.nbytes() - known[0]
            self._live[st._cdata] = (st.nbytes(), known[1])
        self.peak_bytes = max(self.peak_bytes, self.live_bytes)

    def _free(self, key: int) -> None:
        entry = self._live.pop(key, None)
        if entry is not None:
            self.live_bytes -= entry[0]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        out = func(*args, **(kwargs or {}))
        self.ops += 1
        grown = False
        for t in tree_iter(out):
            if isinstance(t, torch.Tensor) and self._track(t):
                grown = True
        if grown and self.live_bytes > self.peak_bytes:
            self.peak_bytes = self.live_bytes
        return out

    def mark(self, name: str) -> int:
        """Record (and return) the bytes live at this moment under `name`."""
        self.marks[name] = self.live_bytes
        return self.live_bytes

    def report(self) -> dict[str, Any]:
        return {
            "method": "storages",
            "baseline_bytes": self.baseline_bytes,
            "peak_bytes": self.peak_bytes,
            "end_bytes": self.live_bytes,
            "marks": dict(self.marks),
        }


class CudaPeak:
    """The same interface on a GPU, from the caching allocator's own counters."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.marks: dict[str, int] = {}

    def __enter__(self) -> CudaPeak:
        torch.cuda.synchronize(self.device)
        torch.cuda.reset_peak_memory_stats(self.device)
        self.baseline_bytes = torch.cuda.memory_allocated(self.device)
        return self

    def __exit__(self, *exc: object) -> None:
        torch.cuda.synchronize(self.device)
        self.peak_bytes = torch.cuda.max_memory_allocated(self.device)
        self.live_bytes = torch.cuda.memory_allocated(self.device)

    def mark(self, name: str) -> int:
        # memory_allocated is host-side bookkeeping, exact without a synchronisation.
        self.marks[name] = torch.cuda.memory_allocated(self.device)
        return self.marks[name]

    def report(self) -> dict[str, Any]:
        return {
            "method": "cuda_max_memory_allocated",
            "baseline_bytes": self.baseline_bytes,
            "peak_bytes": self.peak_bytes,
            "end_bytes": self.live_bytes,
            "marks": dict(self.marks),
        }


def optimizer_tensors(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    """The optimizer's state tensors (moments, steps), for `alive`."""
    return [
        v
        for state in optimizer.state.values()
        for v in state.values()
        if isinstance(v, torch.Tensor)
    ]


def model_tensors(model: torch.nn.Module) -> list[torch.Tensor]:
    """Parameters, their gradients where present, and buffers, for `alive`."""
    out: list[torch.Tensor] = []
    for p in model.parameters():
        out.append(p)
        if p.grad is not None:
            out.append(p.grad)
    out.extend(model.buffers())
    return out


def measure_step(
    fn: Callable[[], R],
    *,
    alive: Iterable[torch.Tensor],
    device: torch.device | None = None,
    forward_of: torch.nn.Module | None = None,
) -> tuple[R, dict[str, Any]]:
    """Run `fn` (one training step) and return its result and its memory figures.

    The dict has `method`, `baseline_bytes` (alive before the step), `peak_bytes` (the
    step's peak, everything live counted), `end_bytes` and `marks`. With `forward_of`,
    the mark `after_forward` is taken when that module's forward returns, and
    `activation_bytes` is what the forward left alive for the backward pass (the loss's
    graph), i.e. that mark minus the baseline.
    """
    alive = list(alive)
    if device is None:
        device = next((t.device for t in alive if isinstance(t, torch.Tensor)), torch.device("cpu"))
    tracker: StoragePeak | CudaPeak = (
        CudaPeak(device) if device.type == "cuda" else StoragePeak(alive)
    )
    handle = None
    if forward_of is not None:

        def after_forward(*_: object) -> None:
            tracker.mark("after_forward")

        handle = forward_of.register_forward_hook(after_forward)
    try:
        with tracker:
            result = fn()
    finally:
        if handle is not None:
            handle.remove()
    info = tracker.report()
    if "after_forward" in info["marks"]:
        info["activation_bytes"] = info["marks"]["after_forward"] - info["baseline_bytes"]
    return result, info


class StepMemory:
    """The memory figures of a run's step events: what is live after the latest step and the
    peak over every step so far — not the latest step's alone, nor the first's: the first
    step creates the optimizer's state, so later steps start with more live and peak higher.

    On a GPU every step, from the allocator's counters. On the CPU StoragePeak counts a step
    at about 20-25 ms of Python per step whatever the model (docs/PERF.md, «mem_peak_mb over
    every step»): a tiny model's step a third slower. So steps are counted until one peaks
    exactly as the one before (the step's shapes and state no longer change: the steady
    state), then one step in RECOUNT_EVERY, to see a change; a change counts every step again."""

    RECOUNT_EVERY = 100

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.alloc_mb: float | None = None
        self.peak_mb: float | None = None
        self.steps = 0  # steps run through `step`
        self.counted = 0  # of them, counted on the CPU
        self._last_peak: int | None = None  # the last counted step's own peak, in bytes
        self._steady = False

    def step(self, fn: Callable[[], R], alive: Callable[[], Iterable[torch.Tensor]], measure: bool = True) -> R:
        """Run one training step `fn`, its figures taken; `alive()` names what lives before
        it (the CPU's count); `measure` False: not counted on the CPU (FSDP's shards, a
        compiled step: dynamo never compiles a function first called under the counting mode)."""
        self.steps += 1
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
            result = fn()
            self._seen(torch.cuda.memory_allocated(self.device), torch.cuda.max_memory_allocated(self.device))
            return result
        if not measure or (self._steady and self.steps % self.RECOUNT_EVERY):
            return fn()
        result, report = measure_step(fn, alive=alive(), device=self.device)
        self.counted += 1
        self._steady = report["peak_bytes"] == self._last_peak
        self._last_peak = report["peak_bytes"]
        self._seen(report["end_bytes"], report["peak_bytes"])
        return result

    def _seen(self, end_bytes: int, peak_bytes: int) -> None:
        self.alloc_mb = end_bytes / 2**20
        self.peak_mb = max(self.peak_mb or 0.0, peak_bytes / 2**20)
