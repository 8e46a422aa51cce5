"""The one-pass lean step (run.json `training.lean_state: "one_pass"`, the plan's step kind
"one_pass"): one forward and ONE backward pass a step, no set of gradients held, small
moments — the combination that trains the lab's full model (26 × 2304, 1.67 B weights) in
the note's memory (docs/LEAN.md, «One backward pass at the note's memory»).

- Each parameter is updated in its post-accumulate-grad hook and its gradient freed there,
  as in the "fused" step (trainer/step/lean.py), but without that step's first, norm-only
  backward pass. The global-norm clip uses the *progressive estimate* instead: when
  parameter i's hook fires, S = this step's squared gradient norms of the parameters done
  so far (i included), P = last step's squares of the same parameters, P_all = last step's
  whole square, and N² ≈ S + (P_all − P)·S/P = S·P_all/P — exact when the whole gradient is
  last step's times one factor (a spike), and exact at the last hook. The gradient is scaled
  by min(1, clip/(N + 1e-6)) before it enters the moments. Measured against exact clipping
  on real text (bench/clip_lag.py's arm `factored_progressive`; docs/LEAN.md): not worse.
  S, P and P_all are tensors on the device, so a hook never waits for the card (no
  `float()`); P (one fp32 scalar a parameter) is saved in the checkpoint, so a stopped and
  continued run makes the same steps bit for bit. The first step of a run — or after a
  checkpoint of another state, which has no P — is primed by one backward pass that only
  takes the squares (so that step is clipped exactly);
- the first moment 8-bit block-wise in bitsandbytes' dynamic map (blocks of 256), in pure
  torch (so the memory count's fake tensors and any device run it); the second moment
  factored as Adafactor's (Shazeer & Stern 2018): a row and a column mean of g², with
  AdamW's β₂ and bias correction, v ≈ r cᵀ / mean(r); a parameter that is not a matrix keeps
  a whole fp32 second moment (small), and one under MIN_8BIT weights an fp32 first moment;
- bf16 weights (under bf16) rounded stochastically by trainer/step/lean.py's rounding, seeded
  by (seed, update, parameter);
- the update's fp32 temporaries made in row slices of at most SLICE_WEIGHTS weights, so the
  largest matrix (4·d² weights) never gets a whole fp32 copy: at the full model that copy
  alone would be ≈ 200 MiB of the 5,500 MB.
Under fp16 (a GradScaler must see every gradient first), with several micro-steps (their
gradients would be held) and under DDP or FSDP the plan refuses it, as it refuses "fused".
A checkpoint continues in any other combination and back (trainer/step/lean.py's
`full_moments` and conversions; the map and the one-pass state's reader live there).
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from trainer.config.run_config import TrainingConfig
from trainer.step.lean import (
    BLOCK,
    MIN_8BIT,
    _dequantize,
    _square_norm,
    dynamic_map,
    param_groups,
    rounding_generator,
    stochastic_round_,
)
from trainer.step.lean import (
    full_moments as lean_full_moments,
)

FORMAT = 1
KIND = "one_pass"
BETAS = (0.9, 0.95)  # the lean state's (trainer/step/lean.py)
EPS = 1e-8
EPS_SQUARE = 1e-30  # Adafactor's ε₁: a zero row or column of g² would divide by zero
SLICE_WEIGHTS = 1 << 20  # the update's fp32 temporaries: at most 4 MiB each


def _nearest_table(code: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """What `nearest_code` looks up: the midpoints between the map's entries (+inf after the
    last), and for each of the 65,536 values of an fp32's upper 16 bits (sign, exponent, 7
    bits of mantissa: a range of floats 2⁻⁷ wide, relatively) how many midpoints lie below
    that range. The map's entries are further apart than 2⁻⁷ relatively (1.4 % at the
    closest), so a range holds at most one midpoint: one comparison finishes the search."""
    mids = torch.cat([(code[1:] + code[:-1]) / 2, torch.tensor([math.inf], device=code.device)])
    keys = torch.arange(1 << 16, dtype=torch.int32, device=code.device) << 16
    lo, hi = keys.view(torch.float32), (keys | 0xFFFF).view(torch.float32)
    low = torch.minimum(lo, hi).nan_to_num(nan=-math.inf)
    below = torch.bucketize(low, mids[:-1], out_int32=True)  # midpoints < the range's low end
    return mids, below


def nearest_code(x: torch.Tensor, mids: torch.Tensor, below: torch.Tensor) -> torch.Tensor:
    """The index of the map entry nearest to each value of `x` (fp32): the count of midpoints
    below it — torch.bucketize(x, mids), which on the CPU is a slow binary search, found by
    one table look-up and one comparison (`_nearest_table`; tests check it against bucketize)."""
    # int32 indices throughout (index_select takes them): int64 copies of the slice would
    # be 16 of the update's bytes a weight (trainer.plan.state_bytes.ONE_PASS_SLICE_BYTES).
    key = x.view(torch.int32) >> 16
    key &= 0xFFFF
    first = below.index_select(0, key.view(-1)).view(x.shape)
    del key
    above = mids.index_select(0, first.view(-1)).view(x.shape) < x
    return first.add_(above)


def quantize_into(x: torch.Tensor, codes: torch.Tensor, absmax: torch.Tensor, code: torch.Tensor,
                  table: tuple[torch.Tensor, torch.Tensor] | None = None) -> None:
    """fp32 values `x` (flat; a whole number of blocks but at the tensor's end) → their uint8
    codes (`codes`, flat, as long) and per-block absmax (`absmax`) in the map `code`, in place:
    each value to the nearest entry of the map after its block is divided by its absmax (as
    bitsandbytes' quantize_blockwise). trainer/step/lean.py's _dequantize reads them back.
    `table`: _nearest_table(code), made once by the caller."""
    n = x.numel()
    blocks = F.pad(x, (0, (-n) % BLOCK)).view(-1, BLOCK)
    amax = blocks.abs().amax(dim=1)
    absmax.copy_(amax)
    normed = blocks.div_(amax.clamp_min(1e-30).unsqueeze(1))  # a zero block stays zero
    mids, below = table if table is not None else _nearest_table(code)
    codes.copy_(nearest_code(normed, mids, below).view(-1)[:n])


def progressive_square(done: torch.Tensor, done_prev: torch.Tensor, prev_all: torch.Tensor) -> torch.Tensor:
    """N² estimated in the middle of the backward pass (the module's rule): the parameters not
    yet done grew as those done did. Where last step's squares of those done are zero
    (nothing known of the growth), last step's whole square, at least what is done."""
    rest = (prev_all - done_prev).clamp_min(0)
    grown = done + rest * done / done_prev.clamp_min(1e-30)
    return torch.where(done_prev > 0, grown, torch.maximum(done, prev_all))


def _slices(rows: int, cols: int, eight_bit: bool) -> list[tuple[int, int]]:
    """Row ranges of at most SLICE_WEIGHTS weights; with an 8-bit moment each starts on a
    block boundary (a whole number of BLOCK weights before it)."""
    per = max(1, SLICE_WEIGHTS // max(cols, 1))
    if eight_bit:
        step = BLOCK // math.gcd(cols, BLOCK)
        per = max(step, per - per % step)
    return [(r, min(r + per, rows)) for r in range(0, rows, per)]


class OnePassOptimizer(torch.optim.Optimizer):
    """The one-pass step's optimizer (see the module's docstring). trainer/step/step.py's
    "one_pass" runs it: `begin("prime")` and a backward pass that keeps its graph where
    `needs_priming`, then `begin("update", clip)`, the backward pass, `end()`.
    `step_held(clip)` is the same update after a backward pass that held the gradients,
    clipped by the exact norm (the reference the tests and benchmarks compare with).
    `state[p]`: "step", "m" (uint8 codes, or fp32 under MIN_8BIT weights) with "absmax",
    and "r", "c" (a matrix's row and column means of g²) or "v" (a whole second moment)."""

    step_kind = KIND

    def __init__(self, model: nn.Module, t: TrainingConfig, device: torch.device, precision: str) -> None:
        if precision == "fp16":  # the plan refuses it: the GradScaler must see every gradient first
            raise ValueError("no one-pass step under fp16")
        self.bf16 = precision == "bf16"
        if self.bf16:  # no fp32 master copy: the weights themselves are bf16
            model.to(torch.bfloat16)
        groups = param_groups(model, t.weight_decay)
        super().__init__(groups, {"lr": t.lr})
        self.order = [p for g in self.param_groups for p in g["params"]]
        self.decay = [g["weight_decay"] for g in self.param_groups for _ in g["params"]]
        self.device, self.seed = device, t.seed
        self.updates = 0  # updates made (the stochastic rounding's seed)
        self.squares: torch.Tensor | None = None  # P: last step's ‖g_i‖², fp32, on the device
        self.code = dynamic_map(device)
        self.table = _nearest_table(self.code)
        self._phase: str | None = None  # the hooks' job: None (idle), "prime" or "update"
        self._clip = 0.0
        self._next = self._done = self._done_prev = self._all = self._norm = None
        self._hooks = [p.register_post_accumulate_grad_hook(self._hook(i)) for i, p in enumerate(self.order)]

    # ---- one step ------------------------------------------------------------------------
    def needs_priming(self, clip: float) -> bool:
        """Whether this step needs a squares-only backward pass first (no P to estimate with)."""
        return clip > 0 and self.squares is None

    def begin(self, phase: str, clip: float = 0.0) -> None:
        """Before a backward pass whose hooks "prime" (take the squares, free the gradients)
        or "update" (clip by the estimate, update, free)."""
        zero = torch.zeros((), device=self.device)
        self._phase, self._clip = phase, clip
        self._next = torch.zeros(len(self.order), device=self.device)
        self._done, self._done_prev = zero.clone(), zero.clone()
        self._all = None if self.squares is None else self.squares.sum()

    def end(self) -> None:
        """After the backward pass: its squares are the next step's P."""
        self.squares = self._next
        if self._phase == "update":
            self._norm = self._done.sqrt()  # the step's exact norm (its last hook's)
            self.updates += 1
        self._phase = None

    @property
    def last_norm(self) -> float | None:
        """The last step's global gradient norm (a host sync: read it once a step at most)."""
        return None if self._norm is None else float(self._norm)

    def _hook(self, index: int):  # noqa: ANN202
        def hook(p: nn.Parameter) -> None:
            if self._phase is None:  # outside a one-pass step (a held step's backward pass)
                return
            sq = _square_norm(p.grad)
            self._next[index] = sq
            if self._phase == "update":
                self._update(index, p, self._coefficient(index, sq))
            p.grad = None  # freed now: no full set of gradients

        return hook

    def _coefficient(self, index: int, sq: torch.Tensor) -> torch.Tensor | None:
        """min(1, clip / (N + 1e-6)) with N the progressive estimate, a device scalar; None
        with clipping off."""
        self._done += sq
        if self._clip <= 0:
            return None
        self._done_prev += self.squares[index]
        est = progressive_square(self._done, self._done_prev, self._all).sqrt()
        return (self._clip / (est + 1e-6)).clamp(max=1.0)

    @torch.no_grad()
    def step_held(self, clip: float) -> None:
        """The update after a backward pass that held every gradient, clipped exactly (the
        squares summed in the parameters' order)."""
        squares = torch.stack([_square_norm(p.grad) for p in self.order])
        norm = squares.sum().sqrt()
        coef = (clip / (norm + 1e-6)).clamp(max=1.0) if clip > 0 else None
        for i, p in enumerate(self.order):
            self._update(i, p, coef)
            p.grad = None
        self.squares, self._norm = squares, norm
        self.updates += 1

    @torch.no_grad()
    def step(self, closure: Any = None) -> None:  # noqa: ARG002 — the Optimizer interface
        raise RuntimeError("the one-pass optimizer updates inside the backward pass (trainer.step.step)")

    def _init_state(self, p: nn.Parameter) -> dict[str, Any]:
        n, dev = p.numel(), p.device
        st: dict[str, Any] = {"step": 0}
        if n >= MIN_8BIT:
            st["m"] = torch.zeros(p.shape, dtype=torch.uint8, device=dev)
            st["absmax"] = torch.zeros(-(-n // BLOCK), device=dev)  # zero scales: m = 0 whatever the codes
        else:
            st["m"] = torch.zeros(p.shape, dtype=torch.float32, device=dev)
        if p.dim() == 2:
            st["r"] = torch.zeros(p.shape[0], device=dev)
            st["c"] = torch.zeros(p.shape[1], device=dev)
        else:
            st["v"] = torch.zeros(p.shape, dtype=torch.float32, device=dev)
        self.state[p] = st
        return st

    @torch.no_grad()
    def _update(self, index: int, p: nn.Parameter, coef: torch.Tensor | None) -> None:
        """AdamW's step from the small moments, in row slices (the module's docstring)."""
        st = self.state[p] or self._init_state(p)
        st["step"] += 1
        t = st["step"]
        b1, b2 = BETAS
        lr, wd = self.param_groups[0]["lr"], self.decay[index]
        rows = p.shape[0] if p.dim() == 2 else 1
        g2d, w2d = p.grad.view(rows, -1), p.data.view(rows, -1)
        cols = g2d.shape[1]
        eight_bit = st["m"].dtype == torch.uint8
        m2d = st["m"].view(rows, cols)
        parts = _slices(rows, cols, eight_bit)

        def grad(r0: int, r1: int) -> torch.Tensor:
            g = g2d[r0:r1].float()
            if g.dtype == p.grad.dtype:  # fp32 weights: .float() is the gradient itself
                g = g.clone()
            return g if coef is None else g.mul_(coef)

        factored = "r" in st
        if factored:  # the row and column means of g² of this step, slice by slice
            row_mean = torch.empty(rows, device=p.device)
            col_sum = torch.zeros(cols, device=p.device)
            for r0, r1 in parts:
                g2 = grad(r0, r1).square_().add_(EPS_SQUARE)
                row_mean[r0:r1] = g2.mean(dim=1)
                col_sum.add_(g2.sum(dim=0))
                del g2  # else the last slice's square lives on through the update below
            st["r"].mul_(b2).add_(row_mean, alpha=1 - b2)
            st["c"].mul_(b2).add_(col_sum.div_(rows), alpha=1 - b2)
            del row_mean, col_sum
            scale = st["r"].mean() * (1 - b2**t)  # v = r cᵀ / mean(r), bias-corrected
        bc1 = 1 - b1**t
        gen = rounding_generator(p.device, self.seed, self.updates, index) if self.bf16 else None
        for r0, r1 in parts:
            g = grad(r0, r1)
            if eight_bit:
                lo, hi = r0 * cols, r1 * cols
                codes = st["m"].view(-1)[lo:hi]
                absmax = st["absmax"][lo // BLOCK: -(-hi // BLOCK)]
                m = _dequantize(codes, absmax, self.code).view(r1 - r0, cols)
            else:
                m = m2d[r0:r1]
            m.mul_(b1).add_(g, alpha=1 - b1)
            if not factored:
                v = st["v"].view(rows, cols)[r0:r1]
                v.mul_(b2).addcmul_(g, g, value=1 - b2)
            del g  # before the quantization's copies: the slice's peak is one fp32 copy lower
            if eight_bit:
                quantize_into(m.view(-1), codes, absmax, self.code, self.table)
            if factored:
                denom = torch.outer(st["r"][r0:r1], st["c"]).div_(scale).sqrt_().add_(EPS)
            else:
                denom = (v / (1 - b2**t)).sqrt_().add_(EPS)
            if self.bf16:
                w = w2d[r0:r1].float()
                w.mul_(1 - lr * wd).addcdiv_(m, denom, value=-lr / bc1)
                del m, denom
                stochastic_round_(w2d[r0:r1], w, gen)
            else:  # fp32 weights: their own master copy, updated in place
                w2d[r0:r1].mul_(1 - lr * wd).addcdiv_(m, denom, value=-lr / bc1)
                del m, denom

    # ---- checkpoints -----------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        state = {}
        for i, p in enumerate(self.order):
            s = self.state.get(p)
            if s:
                state[i] = {k: (v.detach().cpu().clone() if torch.is_tensor(v) else v) for k, v in s.items()}
        squares = None if self.squares is None else self.squares.detach().cpu().clone()
        return {"state": state, "lean": {"format": FORMAT, "kind": KIND, "updates": self.updates,
                                         "last_norm": self.last_norm, "squares": squares}}

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        """A one-pass state as saved, the 8-bit lean state or a normal AdamW state (converted:
        m quantized, v → its row and column means). A converted state has no P: the next
        step is primed."""
        lean = sd.get("lean")
        if lean is not None and lean.get("kind") == KIND:
            self.updates = int(lean["updates"])
            sq = lean.get("squares")
            self.squares = None if sq is None else sq.to(self.device, torch.float32).clone()
            self._norm = None if lean.get("last_norm") is None else torch.tensor(float(lean["last_norm"]))
            for i, p in enumerate(self.order):
                saved = sd["state"].get(i) or sd["state"].get(str(i))
                if saved:
                    self.state[p] = {k: (v.to(self.device).clone() if torch.is_tensor(v) else int(v))
                                     for k, v in saved.items()}
            return
        if lean is not None:  # the 8-bit lean state
            moments = lean_full_moments(sd)
            self.updates = int(lean.get("updates", 0))
        else:  # torch AdamW's
            moments = {int(i): (s["exp_avg"], s["exp_avg_sq"], int(s["step"])) for i, s in sd["state"].items() if s}
        self.squares, self._norm = None, None
        for i, p in enumerate(self.order):
            if i in moments:
                m, v, step = moments[i]
                self.state[p] = self._from_moments(p, m.float().to(self.device), v.float().to(self.device), step)

    def _from_moments(self, p: nn.Parameter, m: torch.Tensor, v: torch.Tensor, step: int) -> dict[str, Any]:
        st = self._init_state(p)
        st["step"] = step
        if st["m"].dtype == torch.uint8:
            quantize_into(m.reshape(-1).clone(), st["m"].view(-1), st["absmax"], self.code, self.table)
        else:
            st["m"].copy_(m.view(p.shape))
        if "r" in st:
            v2 = v.view(p.shape)
            st["r"].copy_(v2.mean(dim=1))
            st["c"].copy_(v2.mean(dim=0))
        else:
            st["v"].copy_(v.view(p.shape))
        return st
