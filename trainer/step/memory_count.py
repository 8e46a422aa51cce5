"""python -m trainer.step.memory_count RUN.json --machine NAME [--steps 2] [--json]: the memory of
the trainer's own step at full size, counted without allocating it.

The plan (trainer.plan.planner) of RUN.json on the catalogue's machine NAME decides the step: its
precision, kind (normal, held, fused, offload), economical level and sharding. That step —
the trainer's model, optimizer and train_step, unchanged — runs `--steps` times on fake
tensors (torch's FakeTensorMode: shapes, dtypes and storages, no memory, no arithmetic)
of the CPU, and StoragePeak (trainer.step.memory) counts every storage as the CUDA allocator
would, inside recomputed regions too. At small shapes the count equals StoragePeak of the
same step on real tensors (tests/test_memory_count.py).

Why fake *CPU* tensors with the card's dtypes: on torch's CPU build a fake `cuda` device
cannot run autograd (backward aborts in AccumulateGrad) and `torch.autocast("cuda")` is
off. The CUDA-only differences are made or named here, never taken from the estimate:
- autocast's op lists: CUDA runs layer_norm in fp32 (an fp32 copy of a 16-bit input, which
  it saves), CPU autocast on the input as it comes; cuda_autocast_rules casts as CUDA does.
  The matrix products and the attention are 16-bit on both.
- the attention kernel: the CPU's flash kernel saves the same tensors as CUDA's flash and
  memory-efficient kernels (q, k, v, the output, an fp32 log-sum-exp a row and head).
- bitsandbytes cannot be built on fake tensors: its state is the real library's, measured
  at a small size in this process (`measured_layout`: which tensors, of which dtype and
  length, for a parameter of n weights) and made at full size by FakeAdamW8bit, whose
  update is in place as the library's CUDA kernel is (its CPU path makes temporaries the
  card does not).
- DDP's gradient buckets (one flat copy of the gradients, alive through the step) are
  added as `ddp_buckets`; FSDP is not counted here (tests/test_fsdp_memory.py counts it on
  two real processes).
Not in the count, a named margin: the CUDA context, cuBLAS's workspaces
(trainer.plan.memory_model.cublas_workspace_bytes) and the caching allocator's slack (the note:
5,536 MB allocated, 6,149 MB observed).
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from trainer.config.reasons import Refusal
from trainer.config.run_config import ConfigError, RunConfig, lean_mode, load
from trainer.model.gpt import GPT
from trainer.plan.planner import Plan, known_machine, plan
from trainer.step import lean, one_pass
from trainer.step.memory import StoragePeak, model_tensors
from trainer.step.optim import make_optimizer, make_scaler
from trainer.step.step import train_step

# The card is the fake CPU; the host's memory, where "offload" keeps the moments between
# updates (trainer.step.lean.HOST), is the fake meta device, which the count leaves out.
HOST_STAND_IN = "meta"
CATEGORIES = ("weights", "gradients", "optimizer_state", "activations", "temporaries")
MB = 2**20


# lean and one_pass are imported above, outside any fake mode: the quantization map is made at import.

# ---- what the CPU does differently from a card ------------------------------------------


_layer_norm = F.layer_norm


def _cuda_layer_norm(x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
    """F.layer_norm as CUDA autocast runs it: layer_norm is on CUDA's fp32 list (a 16-bit
    input is cast to fp32, and the backward pass keeps that fp32 copy); CPU autocast runs it
    on the input as it comes."""
    if torch.is_autocast_enabled("cpu") and x.dtype in (torch.bfloat16, torch.float16):
        with torch.autocast("cpu", enabled=False):
            rest = [a.float() if torch.is_tensor(a) else a for a in args]
            return _layer_norm(x.float(), *rest, **kwargs)
    return _layer_norm(x, *args, **kwargs)


@contextmanager
def cuda_autocast_rules() -> Iterator[None]:
    """CUDA autocast's rules where the CPU's differ for the trainer's operators (only
    layer_norm: the matrix products and the attention are 16-bit on both). A patch of the
    function and not a TorchFunctionMode, so that a recomputation inside the backward
    pass follows it too."""
    with _patched(F, "layer_norm", _cuda_layer_norm):
        yield


@functools.cache
def measured_layout() -> dict[str, Any]:
    """bitsandbytes' AdamW8bit state for a parameter of n weights, measured on real tensors
    at two sizes above its 8-bit threshold and one below: each state tensor's dtype and
    length as a·n + b·⌈n/block⌉ + c (a, b, c read off the measurements)."""
    bnb = lean.import_library()
    sizes = (3 * lean.BLOCK * 16 + 5, 5 * lean.BLOCK * 16 + 7)

    def state_of(n: int) -> tuple[dict[str, Any], int]:
        p = nn.Parameter(torch.zeros(n))
        p.grad = torch.zeros(n)
        opt = bnb.optim.AdamW8bit([p], lr=1e-3)
        opt.step()
        return opt.state[p], opt.args.min_8bit_size

    small, threshold = state_of(64)
    big = [state_of(n)[0] for n in sizes]
    keys: dict[str, tuple[torch.dtype, tuple[int, int, int]]] = {}
    for k, v in big[0].items():
        if not torch.is_tensor(v):
            continue
        got = (v.numel(), big[1][k].numel())
        blocks = [math.ceil(n / lean.BLOCK) for n in sizes]
        if got == sizes:
            keys[k] = (v.dtype, (1, 0, 0))
        elif got == tuple(blocks):
            keys[k] = (v.dtype, (0, 1, 0))
        elif got[0] == got[1]:
            keys[k] = (v.dtype, (0, 0, got[0]))
        else:
            raise RuntimeError(f"bitsandbytes' state {k!r} has a length this count does not model: {got}")
    fp32 = {k: (v.dtype, (1, 0, 0)) for k, v in small.items() if torch.is_tensor(v)}
    return {"threshold": threshold, "block": lean.BLOCK, "large": keys, "small": fp32}


class FakeAdamW8bit(torch.optim.Optimizer):
    """bitsandbytes' AdamW8bit as far as memory goes: the measured state (measured_layout)
    made at the first update, the update in place (as the library's CUDA kernel)."""

    layout: dict[str, Any] = {}

    def __init__(self, params: Any, lr: float = 1e-3, **kw: Any) -> None:
        super().__init__(params, {"lr": lr, **kw})

    def init_state(self, group: dict[str, Any], p: torch.Tensor, gindex: int, pindex: int) -> None:  # noqa: ARG002
        lay, n = self.layout, p.numel()
        keys = lay["large"] if n >= lay["threshold"] else lay["small"]
        state = self.state[p]
        state["step"] = 0
        for k, (dtype, (a, b, c)) in keys.items():
            state[k] = torch.zeros(a * n + b * math.ceil(n / lay["block"]) + c, dtype=dtype, device=p.device)

    @torch.no_grad()
    def step(self, closure: Any = None) -> None:  # noqa: ARG002
        for g in self.param_groups:
            for p in g["params"]:
                if p.grad is None:
                    continue
                if not self.state[p]:
                    self.init_state(g, p, 0, 0)
                self.state[p]["step"] += 1
                p.sub_(p.grad, alpha=g["lr"])  # in place, as the kernel writes the weights


@contextmanager
def fake_library() -> Iterator[None]:
    """trainer.lean builds FakeAdamW8bit where it would build bitsandbytes' optimizer."""
    FakeAdamW8bit.layout = measured_layout()
    with _patched(lean, "import_library",
                  lambda: SimpleNamespace(optim=SimpleNamespace(AdamW8bit=FakeAdamW8bit))):
        yield


@contextmanager
def _patched(owner: Any, name: str, value: Any) -> Iterator[None]:
    real = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, real)


# Where the step reads a number off a tensor (which a fake tensor has not), the count takes
# one that makes the step do all its work: a clipped step (the coefficient below 1 scales
# every gradient) and a GradScaler that found no infinity (the update is not skipped).
CLIP_COEFFICIENT = 0.5


def _fake_coefficient(self: lean.LeanOptimizer, clip: float) -> float:  # noqa: ARG001
    squares = [q for q in self._sq if q is not None]
    if squares:
        torch.stack(squares).sum().sqrt()  # the norm's own tensors, as the real step makes them
    self._sq = []
    return CLIP_COEFFICIENT


def _fake_opt_step(self: torch.amp.GradScaler, optimizer: torch.optim.Optimizer, optimizer_state: Any,  # noqa: ARG001
                   *args: Any, **kwargs: Any) -> Any:
    return optimizer.step(*args, **kwargs)


@contextmanager
def fake_numbers() -> Iterator[None]:
    with _patched(lean.LeanOptimizer, "_coefficient", _fake_coefficient), \
            _patched(torch.amp.GradScaler, "_maybe_opt_step", _fake_opt_step), _patched(lean, "HOST", HOST_STAND_IN):
        yield


# ---- the count ----------------------------------------------------------------------------


class CategoryPeak(StoragePeak):
    """StoragePeak that also knows, at one chosen operator (`at`: (step, op)), what each
    live storage is: a weight, a gradient, optimizer state, made by the forward pass
    (activations, the batch) or after it (temporaries)."""

    def __init__(self, alive: list[torch.Tensor], model: nn.Module, optimizer: torch.optim.Optimizer,
                 at: int | None) -> None:
        self.phase = "before"
        self._born: dict[int, str] = {}
        super().__init__(alive)
        self.model, self.optimizer, self.at = model, optimizer, at
        self.peak_op = 0
        self.breakdown: dict[str, int] | None = None

    @contextmanager
    def watching(self) -> Iterator[None]:
        """The model's forward pass sets the phase new storages are born in."""
        hooks = [self.model.register_forward_pre_hook(lambda *_: self._phase("forward")),
                 self.model.register_forward_hook(lambda *_: self._phase("after_forward"))]
        try:
            yield
        finally:
            for h in hooks:
                h.remove()

    def _phase(self, name: str) -> None:
        self.phase = name

    def _track(self, t: torch.Tensor) -> bool:
        if t.device.type == HOST_STAND_IN:  # the host's memory ("offload"'s moments): not the card's
            return False
        new = super()._track(t)
        if new:
            self._born[getattr(t, "_local_tensor", t).untyped_storage()._cdata] = self.phase
        return new

    def _free(self, key: int) -> None:
        super()._free(key)
        self._born.pop(key, None)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        before = self.peak_bytes
        out = super().__torch_dispatch__(func, types, args, kwargs)
        if self.peak_bytes > before:
            self.peak_op = self.ops
        if self.ops == self.at:
            self.breakdown = self.categories()
        return out

    def categories(self) -> dict[str, int]:
        def keys(ts: Any) -> set[int]:
            return {t.untyped_storage()._cdata for t in ts if torch.is_tensor(t)}

        params = list(self.model.parameters())
        kinds = [("weights", keys([*params, *self.model.buffers()])),
                 ("gradients", keys(p.grad for p in params)),
                 ("optimizer_state", keys(v for s in self.optimizer.state.values() for v in s.values()))]
        out = dict.fromkeys(CATEGORIES, 0)
        for key, (nbytes, _) in self._live.items():
            kind = next((k for k, ks in kinds if key in ks), None)
            if kind is None:
                kind = "temporaries" if self._born.get(key) == "after_forward" else "activations"
            out[kind] += nbytes
        return out


def _parts(cfg: RunConfig, p: Plan) -> tuple[nn.Module, torch.optim.Optimizer, torch.amp.GradScaler]:
    dev = torch.device("cpu")
    bf16 = p.lean and p.precision.value == "bf16"
    # The lean state's bf16 weights are made bf16 here: module.to() cannot convert fake
    # parameters in place (it swaps them, and the fake mode holds a weak reference to
    # each), and LeanOptimizer's model.to(bf16) is then nothing to do, as for real tensors.
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16 if bf16 else default)
    try:
        model = GPT(cfg.model, p.economical.value)
    finally:
        torch.set_default_dtype(default)
    if p.step.value == "one_pass":  # plain torch: its own state, built on the fake tensors as it is
        with _patched(nn.Module, "to", _to_unless_there):
            optimizer: torch.optim.Optimizer = one_pass.OnePassOptimizer(model, cfg.training, dev, p.precision.value)
    elif p.lean:
        with _patched(nn.Module, "to", _to_unless_there):
            optimizer = lean.LeanOptimizer(model, cfg.training, dev, p.precision.value, p.step.value)
        # On the card "offload" moves each parameter's moments in for its update and out after.
        optimizer.offload = p.step.value == "offload"
    else:
        optimizer = make_optimizer(model, cfg.training, dev)
    return model, optimizer, make_scaler(p.precision.value, dev)


_module_to = nn.Module.to


def _to_unless_there(self: nn.Module, *args: Any, **kwargs: Any) -> nn.Module:
    """module.to(dtype) that leaves a module already of that dtype as it is (what it does
    to real tensors, without the swap fake parameters refuse)."""
    dtype = next((a for a in (*args, *kwargs.values()) if isinstance(a, torch.dtype)), None)
    if dtype is not None and all(q.dtype == dtype for q in self.parameters()):
        return self
    return _module_to(self, *args, **kwargs)


def _alive(model: nn.Module, optimizer: torch.optim.Optimizer, batch: tuple[torch.Tensor, ...]) -> list[torch.Tensor]:
    state = [v for s in optimizer.state.values() for v in s.values() if torch.is_tensor(v)]
    return [*model_tensors(model), *state, *batch]


@contextmanager
def _counting_backward(passes: list[int]) -> Iterator[None]:
    """torch.autograd.backward (which Tensor.backward calls) counts its calls in passes[0]."""
    real = torch.autograd.backward

    def counted(*a: Any, **kw: Any) -> Any:
        passes[0] += 1
        return real(*a, **kw)

    with _patched(torch.autograd, "backward", counted):
        yield


def _run(cfg: RunConfig, p: Plan, steps: int, at: tuple[int, int] | None = None, fake: bool = True,
         cuda_rules: bool = True) -> dict[str, Any]:
    """The plan's step `steps` times, on fake tensors (or, `fake` False, real ones: the
    tests' reference); each step's peak, the operator it came at and its backward passes,
    and at `at` (step, operator) the categories. `cuda_rules`: cuda_autocast_rules."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    t, m = cfg.training, cfg.model
    passes = [0]
    out: dict[str, Any] = {"steps": []}
    # The library's layout is measured on real tensors, before the fake mode starts.
    with (fake_library() if p.lean and p.step.value != "one_pass" and fake else _nothing()), (fake_numbers() if fake else _nothing()), \
            (FakeTensorMode() if fake else _nothing()), (cuda_autocast_rules() if cuda_rules else _nothing()), \
            _counting_backward(passes):
        model, optimizer, scaler = _parts(cfg, p)
        for s in range(steps):
            x = torch.randint(0, m.vocab, (t.batch_per_card, m.context))
            y = torch.randint(0, m.vocab, (t.batch_per_card, m.context))
            sp = CategoryPeak(_alive(model, optimizer, (x, y)), model, optimizer,
                              at[1] if at is not None and at[0] == s else None)
            passes[0] = 0
            with sp, sp.watching():
                train_step(model, optimizer, scaler, (x, y), t.lr, p.precision.value, torch.device("cpu"),
                           t.grad_clip, p.step.value)
            out["steps"].append({"peak_bytes": sp.peak_bytes, "peak_op": sp.peak_op, "backward_passes": passes[0]})
            if sp.breakdown is not None:
                out["breakdown"] = sp.breakdown
        out["gradient_bytes"] = sum(q.numel() * q.element_size() for q in model.parameters())
    return out


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def count(cfg: RunConfig, p: Plan, steps: int = 2, categories: bool = True) -> dict[str, Any]:
    """The counted memory of `steps` steps of `p` for `cfg` (see the module's docstring);
    `categories` False: the peak alone (one run of the steps instead of two)."""
    if p.sharding.value == "fsdp":
        raise ConfigError("the count does not shard: FSDP's memory is counted on real processes "
                          "(tests/test_fsdp_memory.py); set training.sharding to ddp or none")
    first = _run(cfg, p, steps)
    peaks = [s["peak_bytes"] for s in first["steps"]]
    worst = peaks.index(max(peaks))
    # DDP's buckets: a flat copy of every gradient, alive from the wrapper's start on.
    buckets = first["gradient_bytes"] if p.sharding.value == "ddp" else 0
    peak = max(peaks) + buckets
    t = cfg.training
    out: dict[str, Any] = {"peak_mb": round(peak / MB, 1)}
    if categories:  # the same steps again, the storages sorted at the peak's operator
        by = dict(_run(cfg, p, steps, (worst, first["steps"][worst]["peak_op"]))["breakdown"])
        by["gradients"] += buckets
        assert sum(by.values()) == peak, (by, peak)
        out["by_category"] = {k: round(v / MB, 1) for k, v in by.items()}
    lean_state = lean_mode(t.lean_state)
    return out | {
        "step_of_peak": worst + 1,
        "steps": [{"peak_mb": round((s["peak_bytes"] + buckets) / MB, 1), "backward_passes": s["backward_passes"]}
                  for s in first["steps"]],
        "backward_passes": first["steps"][worst]["backward_passes"],
        "combination": {"level": p.economical.value, "lean_state": lean_state, "step": p.step.value,
                        "precision": p.precision.value, "sharding": p.sharding.value},
        "modelled": {"ddp_buckets_mb": round(buckets / MB, 1)},
        "method": "FakeTensorMode on the CPU, StoragePeak; CUDA's layer_norm autocast rule; bitsandbytes' "
                  "state as measured; not counted: the CUDA context, cuBLAS workspaces, the allocator's slack",
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m trainer.step.memory_count", description=__doc__.splitlines()[0])
    ap.add_argument("run_json")
    ap.add_argument("--machine", required=True, help="a machine of the catalogue (trainer.plan.planner.KNOWN_CARDS)")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    try:
        cfg = load(args.run_json)
        decided = plan(cfg, known_machine(args.machine))
        if isinstance(decided, Refusal):
            raise ConfigError(decided)
        result = count(cfg, decided, args.steps)
    except (ConfigError, KeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        c = result["combination"]
        print(f"{c['step']} step, {c['precision']}, economical {c['level']}, sharding {c['sharding']}: "
              f"peak {result['peak_mb']:,.1f} MiB at step {result['step_of_peak']}, "
              f"{result['backward_passes']} backward pass(es)")
        for k, v in result["by_category"].items():
            print(f"  {k:<16} {v:>10,.1f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
