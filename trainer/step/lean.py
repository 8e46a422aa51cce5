"""The lean training state (run.json `training.lean_state`): the weights, gradients and
optimizer state shrunk, where the economical levels shrink only the activations.

Normal training keeps 16 bytes a weight: fp32 weights, fp32 gradients, AdamW's two fp32
moments. At the lab's full model (1.67 B weights) that is 25 GB, and no activation
saving makes it fit a 16 GB card. The lean state keeps:
- the moments in 8 bits, block-wise quantized (bitsandbytes' AdamW8bit, a maintained
  library; ≈ 2.03 bytes a weight for both moments with their block scales);
- the weights in bf16 where the precision is bf16 (cards of compute capability ≥ 8, or
  `precision: "bf16"` asked for), with no fp32 master copy: each update is made in fp32
  on a temporary copy of one parameter and rounded back stochastically (an unbiased
  rounding, so updates smaller than a bf16 step still move the weight on average). The
  random bits come from a generator seeded by (seed, update, parameter), so a resumed
  run rounds exactly as an uninterrupted one. Under fp32 or fp16 (a T4) the weights stay
  fp32: they are their own master copy;
- the optimizer step, clipped exactly by the step's global gradient norm (as the normal
  mode's clip_grad_norm_ does), in one of two ways:
  - `lean_state: true` ("on"): the gradients are held in the weights' precision (bf16: 2
    bytes a weight) until the backward pass ends; then the norm is taken and each
    parameter is updated and its gradient freed, one after another. The fast way;
  - `lean_state: "fused"`: no set of gradients is held at all. The step runs two backward
    passes over the same graph: the first only takes each parameter's gradient norm (its
    post-accumulate-grad hook squares and frees the gradient at once), the second updates
    each parameter from its hook with the exact coefficient and frees its gradient (the
    scheme of LOMO, Lv et al. 2023). Its price is one more backward pass (≈ ⅔ of a step's
    arithmetic). With several micro-steps a step would hold the first ones' gradients anyway,
    so the plan refuses that combination (trainer/plan/planner.py), as it refuses a fused step under
    fp16.
  A step clipped by the previous step's norm instead (one backward pass, no gradients
  held) was measured and rejected: a spike of the norm passes unclipped, and the held-out
  loss ended 0.15–0.27 worse than exact clipping on real text (docs/LEAN.md). The norm is
  summed over the parameters in one fixed order either way, so "on" and "fused" make the
  same steps bit for bit. Under fp16 (a T4) the GradScaler must see every gradient for
  infinities before any weight moves, so the gradients are held in fp32 and clipped as
  in the normal mode; the moments are still 8-bit;
- with `lean_state: "offload"`, the step is "fused" and the 8-bit moments live in the
  host's memory between steps and visit the card one parameter at a time (copied in,
  updated, copied back): the card holds the weights, the activations and one parameter's
  moments and gradient. The price is the
  copies, ≈ 4 bytes a weight over PCIe each way and step (at the full model more than the
  step itself: docs/PERF.md, «Figures the code's docstrings carried»); on the CPU it changes nothing.

The parameters keep their names and shapes: a checkpoint from one combination continues
in any other (weights cast on load, moments quantized or dequantized: `convert_in`,
`adamw_state_from_lean`), and the trainer says so in its log.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import torch
from torch import nn

from trainer.config.run_config import ConfigError, TrainingConfig
from trainer.plan.planner import FUSED_STEPS

# The step kinds the lean state makes (trainer.plan.planner.STEP_KINDS less "normal").
LEAN_STEPS = ("held", "fused", "offload")

BLOCK = 256  # bitsandbytes' block size for its 8-bit optimizer state
MIN_8BIT = 4096  # bitsandbytes' min_8bit_size: smaller parameters keep fp32 moments
FORMAT = 1
STATE_KEYS = ("state1", "state2", "absmax1", "absmax2")
# Where "offload" keeps the moments between updates: the host's memory. A name of its own so
# that the memory count (trainer.step.memory_count) can tell the host's tensors from the card's.
HOST = "cpu"


def import_library() -> Any:
    """bitsandbytes, or a ConfigError that says how to get it (one line)."""
    # Its import logs about optional kernels it did not find (4-bit matrix products the lab
    # does not use); those lines would read like failures in trainer.log.
    logging.getLogger("bitsandbytes").setLevel(logging.ERROR)
    try:
        import bitsandbytes
    except ImportError as e:
        raise ConfigError(
            f"training.lean_state needs the bitsandbytes library, which is not installed ({e}): "
            "pip install 'ternit-lab[lean]' (or pip install bitsandbytes), or set lean_state to false"
        ) from None
    return bitsandbytes


def check_device(device: torch.device) -> None:
    """One 8-bit update on `device`, so a library built without this device's kernels fails
    here, before the run starts, and not at the first step."""
    bnb = import_library()
    p = nn.Parameter(torch.zeros(BLOCK * 16, device=device))
    p.grad = torch.ones_like(p)
    try:
        bnb.optim.AdamW8bit([p], lr=1e-3).step()
    except Exception as e:  # noqa: BLE001 — any failure means: this device is not served
        first = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
        raise ConfigError(
            f"training.lean_state: bitsandbytes cannot update weights on {device.type} ({first}): "
            "install a bitsandbytes build for this device, or set lean_state to false"
        ) from None


def param_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """The two groups trainer.step.optim.make_optimizer makes (decay on matrices, not on the
    embeddings), in its order: an AdamW checkpoint's state indices follow it."""
    decay, rest = [], []
    for name, p in model.named_parameters():
        (decay if p.dim() >= 2 and not name.startswith(("tok.", "pos.")) else rest).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


def stochastic_round_(dest: torch.Tensor, value: torch.Tensor, generator: torch.Generator) -> None:
    """dest (bf16) ← value (fp32) rounded up or down at random, in proportion to the
    distance: the 16 bits bf16 drops are compared with 16 random bits. Unbiased."""
    # In place on the noise: one temporary of the parameter's size, not three (the update's
    # copies are the lean state's step peak at the largest matrix).
    noise = torch.randint(0, 1 << 16, value.shape, dtype=torch.int32, device=value.device, generator=generator)
    noise.add_(value.view(torch.int32)).bitwise_and_(-65536)  # 0xFFFF0000 as a signed 32-bit mask
    dest.copy_(noise.view(torch.float32))  # exact: the low 16 bits are zero


def rounding_generator(device: torch.device, seed: int, updates: int, index: int) -> torch.Generator:
    """The stochastic rounding's random bits for parameter `index` at update `updates` of a
    run seeded `seed`: a resumed run rounds exactly as an uninterrupted one."""
    g = torch.Generator(device=device)
    g.manual_seed((seed * 1_000_003 + updates * 10_007 + index) % (2**63))
    return g


class LeanOptimizer(torch.optim.Optimizer):
    """8-bit AdamW, one bitsandbytes optimizer per parameter, for the plan's step kind
    (trainer/plan/planner.py): "held" — `step_held()` after a backward pass that kept the gradients,
    or under fp16 the trainer's GradScaler path calling `step()` as for any optimizer;
    "fused" and "offload" — `norm_pass()` and `update_pass()` around two backward passes
    (trainer/step/step.py runs each kind).

    It is a torch Optimizer over the model's parameters so that the trainer's code
    (GradScaler, learning-rate setting, checkpoints, the memory count) treats it as any
    other: `state[p]` is bitsandbytes' state of `p`."""

    def __init__(self, model: nn.Module, t: TrainingConfig, device: torch.device, precision: str,
                 step: str) -> None:
        if step not in LEAN_STEPS or (step in FUSED_STEPS and precision == "fp16"):
            # The plan never asks it (trainer.plan.planner refuses a fused step under fp16, whose
            # GradScaler must see every gradient before any weight moves).
            raise ValueError(f"no lean {step!r} step under {precision}")
        bnb = import_library()
        self.step_kind = step
        self.bf16 = precision == "bf16"
        if self.bf16:  # no fp32 master copy: the weights themselves are bf16
            model.to(torch.bfloat16)
        self.offload = step == "offload" and device.type == "cuda"
        self.device, self.seed = device, t.seed
        self.updates = 0  # updates made (the stochastic rounding's seed)
        self.last_norm: float | None = None  # the last step's global gradient norm (the benchmarks read it)
        self._phase: str | None = None  # the hooks' job: None (idle), "norm" or "update"
        self._sq: list[torch.Tensor | None] = []  # each parameter's squared gradient norm
        self._coef = 1.0
        groups = param_groups(model, t.weight_decay)
        super().__init__([{"params": g["params"], "weight_decay": g["weight_decay"]} for g in groups],
                         {"lr": t.lr})
        self.order = [p for g in self.param_groups for p in g["params"]]
        self.inner: dict[nn.Parameter, tuple[Any, nn.Parameter]] = {}
        for g in self.param_groups:
            for p in g["params"]:
                # Under bf16 the library updates an fp32 copy made just for the update.
                target = nn.Parameter(torch.empty(0, device=device)) if self.bf16 else p
                opt = bnb.optim.AdamW8bit([target], lr=t.lr, betas=(0.9, 0.95), eps=1e-8,
                                          weight_decay=g["weight_decay"])
                self.inner[p] = (opt, target)
                self.state[p] = opt.state[target]  # the same dict, filled at the first update
        self._hooks = []
        if step in FUSED_STEPS:
            for i, p in enumerate(self.order):
                self._hooks.append(p.register_post_accumulate_grad_hook(self._hook(i)))

    # ---- one step ------------------------------------------------------------------------
    def norm_pass(self) -> None:
        """Before the fused step's first backward pass: its hooks take each gradient's
        norm and free the gradient."""
        self._sq = [None] * len(self.order)
        self._phase = "norm"

    def update_pass(self, clip: float) -> None:
        """Between the fused step's passes: the exact coefficient from the first pass's
        norms; the second pass's hooks update each parameter with it."""
        self._coef = self._coefficient(clip)
        self._phase = "update"

    def end_pass(self) -> None:
        """After the fused step's second backward pass."""
        self._phase = None
        self.updates += 1

    @torch.no_grad()
    def step_held(self, clip: float) -> None:
        """The step after a backward pass that kept every gradient (the "held" step): the exact norm, then each parameter updated and its
        gradient freed in turn (the peak is the gradients plus one update's temporaries)."""
        self._sq = [None if p.grad is None else _square_norm(p.grad) for p in self.order]
        coef = self._coefficient(clip)
        for i, p in enumerate(self.order):
            if p.grad is not None:
                self._update(i, p, coef)
                p.grad = None
        self.updates += 1

    def _coefficient(self, clip: float) -> float:
        """clip_grad_norm_'s scale, min(1, clip / (norm + 1e-6)), from the squared norms
        summed in the parameters' order (the same order for "on" and "fused")."""
        squares = [q for q in self._sq if q is not None]
        norm = float(torch.stack(squares).sum().sqrt()) if squares else 0.0
        self.last_norm, self._sq = norm, []
        return min(1.0, clip / (norm + 1e-6)) if clip > 0 else 1.0

    def _hook(self, index: int):  # noqa: ANN202
        def hook(p: nn.Parameter) -> None:
            if self._phase is None:  # a micro-step before the last, or outside a step
                return
            if self._phase == "norm":
                self._sq[index] = _square_norm(p.grad)
            else:
                self._update(index, p, self._coef)
            p.grad = None  # freed now: no full set of gradients

        return hook

    @torch.no_grad()
    def step(self, closure: Any = None) -> None:  # noqa: ARG002 — the Optimizer interface
        """The GradScaler's path (fp16): every parameter with a gradient, after the
        backward pass; the trainer has unscaled and clipped them already."""
        for i, p in enumerate(self.order):
            if p.grad is not None:
                self._update(i, p, 1.0)
        self.updates += 1

    @torch.no_grad()
    def _update(self, index: int, p: nn.Parameter, coef: float) -> None:
        opt, target = self.inner[p]
        group = opt.param_groups[0]
        group["lr"] = self.param_groups[0]["lr"]
        state = opt.state[target]
        if self.offload:
            for k in STATE_KEYS:
                if k in state:
                    state[k] = state[k].to(self.device, non_blocking=True)
        if self.bf16:
            target.data = p.detach().float()
            target.grad = p.grad.detach().float()
            if coef != 1.0:
                target.grad.mul_(coef)
        elif coef != 1.0:
            p.grad.mul_(coef)
        opt.step()
        if self.bf16:
            target.grad = None  # the fp32 gradient copy is spent: freed before the rounding's temporary
            stochastic_round_(p.data, target.data, rounding_generator(p.device, self.seed, self.updates, index))
            target.data, target.grad = torch.empty(0, device=self.device), None
        self.state[p] = opt.state[target]
        if self.offload:
            for k in STATE_KEYS:
                if k in state:
                    state[k] = state[k].to(HOST)

    # ---- checkpoints -----------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        state = {}
        for i, p in enumerate(self.order):
            s = self.state.get(p)
            if s:
                state[i] = {k: (v.detach().cpu().clone() if torch.is_tensor(v) else v)
                            for k, v in s.items() if k in (*STATE_KEYS, "qmap1", "qmap2", "step")}
        return {"state": state, "lean": {"format": FORMAT, "updates": self.updates,
                                         "last_norm": self.last_norm}}

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        """A lean state as saved, or a normal AdamW state (quantized here)."""
        if "lean" not in sd:
            sd = lean_state_from_adamw(sd, self.order)
        elif sd["lean"].get("kind") == "one_pass":  # the one-pass state: through AdamW's fp32 moments
            sd = lean_state_from_adamw({"state": {i: {"exp_avg": m, "exp_avg_sq": v, "step": step}
                                                  for i, (m, v, step) in full_moments(sd).items()}}, self.order)
        lean = sd["lean"]
        # A checkpoint of the earlier lean step also kept "prev_norm" (its next step's
        # clipping); exact clipping needs nothing from the step before.
        self.updates, self.last_norm = int(lean["updates"]), lean.get("last_norm")
        for i, p in enumerate(self.order):
            saved = sd["state"].get(i) or sd["state"].get(str(i))
            if saved is None:
                continue
            opt, target = self.inner[p]
            if self.bf16:  # the library sizes its state by the parameter it updates
                target.data = torch.empty(p.shape, device=self.device)
            opt.init_state(opt.param_groups[0], target, 0, 0)
            if self.bf16:
                target.data = torch.empty(0, device=self.device)
            state = opt.state[target]
            home = HOST if self.offload else self.device
            for k in STATE_KEYS:
                if k in saved:
                    state[k] = saved[k].to(home).clone()
            state["step"] = int(saved["step"])
            self.state[p] = state


def _quantize(x: torch.Tensor, signed: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """fp32 → (uint8 codes, per-block absmax, the map) in bitsandbytes' dynamic map."""
    bnb = import_library()
    code = bnb.functional.create_dynamic_map(signed=signed).to(x.device)
    q, qs = bnb.functional.quantize_blockwise(x.float().contiguous(), code=code, blocksize=BLOCK)
    return q, qs.absmax.float(), code


def _dequantize(q: torch.Tensor, absmax: torch.Tensor, code: torch.Tensor) -> torch.Tensor:
    """uint8 codes → fp32 by the map saved with them and the block scales (no library
    needed, so a normal run continues from a lean checkpoint without bitsandbytes)."""
    flat = code.float()[q.reshape(-1).long()]
    pad = (-flat.numel()) % BLOCK
    blocks = torch.nn.functional.pad(flat, (0, pad)).view(-1, BLOCK) * absmax.view(-1, 1).float()
    return blocks.reshape(-1)[: flat.numel()].view(q.shape)


def lean_state_from_adamw(sd: dict[str, Any], order: list[nn.Parameter]) -> dict[str, Any]:
    """A torch AdamW state dict (params in param_groups' order) → the lean format."""
    state = {}
    for i, _ in enumerate(order):
        s = sd["state"].get(i)
        if not s:
            continue
        if s["exp_avg"].numel() < MIN_8BIT:  # bitsandbytes keeps these in fp32
            state[i] = {"state1": s["exp_avg"].float().clone(), "state2": s["exp_avg_sq"].float().clone(),
                        "step": int(s["step"])}
            continue
        q1, a1, c1 = _quantize(s["exp_avg"], signed=True)
        q2, a2, c2 = _quantize(s["exp_avg_sq"], signed=False)
        state[i] = {"state1": q1, "state2": q2, "absmax1": a1, "absmax2": a2, "qmap1": c1, "qmap2": c2,
                    "step": int(s["step"])}
    return {"state": state, "lean": {"format": FORMAT, "updates": 0, "last_norm": None}}


def adamw_state_from_lean(sd: dict[str, Any], adamw: torch.optim.Optimizer) -> dict[str, Any]:
    """The lean format → a state dict `adamw` (a torch AdamW over the same model) loads."""
    out = adamw.state_dict()
    out["state"] = {i: {"step": torch.tensor(float(step)), "exp_avg": m, "exp_avg_sq": v}
                    for i, (m, v, step) in full_moments(sd).items()}
    return out


def full_moments(sd: dict[str, Any]) -> dict[int, tuple[torch.Tensor, torch.Tensor, int]]:
    """Each parameter's fp32 moments (m, v) and step count from a lean state of either kind:
    the 8-bit one here, or the one-pass state (trainer/step/one_pass.py: its first moment
    dequantized, its factored second one made whole)."""
    if sd["lean"].get("kind") == "one_pass":
        return one_pass_moments(sd)
    out = {}
    for i, s in sd["state"].items():
        if s["state1"].dtype == torch.uint8:
            m = _dequantize(s["state1"], s["absmax1"], s["qmap1"])
            v = _dequantize(s["state2"], s["absmax2"], s["qmap2"])
        else:  # a parameter small enough that bitsandbytes kept it in fp32
            m, v = s["state1"].float(), s["state2"].float()
        out[int(i)] = (m, v, int(s["step"]))
    return out


def _square_norm(grad: torch.Tensor) -> torch.Tensor:
    """‖grad‖², accumulated in fp32 whatever the gradient's precision (no fp32 copy)."""
    return torch.linalg.vector_norm(grad, dtype=torch.float32).square()


def is_lean_state(sd: dict[str, Any]) -> bool:
    return isinstance(sd, dict) and "lean" in sd


def lean_tensors(optimizer: torch.optim.Optimizer) -> Iterable[torch.Tensor]:
    """Every tensor of the lean state (for the memory count)."""
    for s in optimizer.state.values():
        for v in s.values():
            if torch.is_tensor(v):
                yield v


# ---- the one-pass state's map and moments (trainer/step/one_pass.py; here, where the
# conversions between the states live) ----


def _dynamic_map_values() -> list[float]:
    """bitsandbytes' signed dynamic quantization map (functional.create_dynamic_map with its
    defaults: 7 exponent bits, 8 bits in all), the same 256 values, in plain torch: the
    state is then readable and writable without the library (tests check it against it)."""
    data: list[float] = []
    exponent_bits, non_sign = 7, 7
    for i in range(exponent_bits):
        items = 2 ** (i + non_sign - exponent_bits) + 1
        bounds = torch.linspace(0.1, 1, items, dtype=torch.float32)
        means = (bounds[:-1] + bounds[1:]) / 2.0
        data += ((10 ** (-(exponent_bits - 1) + i)) * means).tolist()
        data += (-(10 ** (-(exponent_bits - 1) + i)) * means).tolist()
    data += [0.0, 1.0]
    data += [0.0] * (256 - len(data))
    return sorted(data)


# Made at import, outside any fake-tensor mode (the memory count builds the optimizer inside one).
DYNAMIC_SIGNED = _dynamic_map_values()


def dynamic_map(device: torch.device | str = "cpu") -> torch.Tensor:
    return torch.tensor(DYNAMIC_SIGNED, dtype=torch.float32, device=device)


def one_pass_moments(sd: dict[str, Any]) -> dict[int, tuple[torch.Tensor, torch.Tensor, int]]:
    """A saved one-pass state's (trainer/step/one_pass.py) fp32 moments (m, v) and step counts, by parameter index: m
    dequantized, v = r cᵀ / mean(r) (what AdamW and the 8-bit lean state take)."""
    code = dynamic_map()
    out = {}
    for i, s in sd["state"].items():
        m = s["m"]
        m = _dequantize(m.reshape(-1), s["absmax"], code).view(m.shape) if m.dtype == torch.uint8 else m.float()
        if "r" in s:
            r, c = s["r"].float(), s["c"].float()
            v = torch.outer(r, c).div_(r.mean().clamp_min(1e-30))
        else:
            v = s["v"].float()
        out[int(i)] = (m.clone(), v, int(s["step"]))
    return out
