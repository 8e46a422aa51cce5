"""What a run executes on a machine: `plan(config, machine) -> Plan | Refusal`.

One function decides, for a run.json and the machine it will run on, everything one step
does — the precision, how the processes share the work (none / DDP / FSDP), whether the
model is compiled, the step's kind (normal, gradients held, fused into the backward pass,
fused with the moments offloaded), its micro-steps, the economical level and whether
samples are written — each with its reason; or it refuses the combination with one
`Refusal`. Nothing is changed silently: an "auto" says what it chose and why, and
anything asked for explicitly runs as asked or is refused.

Everyone asks it: the trainer builds its parts from the plan (trainer/run/train.py) after
filling the `Machine` from torch (trainer/run/hardware.py); the lab fills it from its card
catalogue (`known_machine` here, the cards' facts that `ternit estimate --gpu` uses too) or
NVML, and asks before anything is created or uploaded; the sizing offers exactly the
combinations it accepts. Pure and torch-free (standard library only), so the lab reads it
without torch; `python -m trainer.config RUN.json --machine NAME` prints it.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from dataclasses import asdict, dataclass
from typing import Any

from trainer.config.reasons import Reason, Refusal
from trainer.config.run_config import (
    FUSED_LEAN_MODES,
    STATE_BYTES_PER_WEIGHT,
    ConfigError,
    RunConfig,
    accumulation,
    compile_mode,
    economical_level,
    lean_mode,
    parameter_count,
    sharding_mode,
)

# auto shards (FSDP) when the whole normal state would take more than this share of a card.
AUTO_SHARE = 0.5
# The step's kinds: AdamW after a backward pass; the lean state's update after a backward
# pass that held the gradients; inside a second backward pass (none held); the same with
# the moments in the host's memory. trainer/step/step.py runs each.
# The one-pass step (trainer/step/one_pass.py): inside the one backward pass, clipped by the
# progressive estimate of the global norm, small moments (8-bit m, factored v).
STEP_KINDS = ("normal", "held", "fused", "offload", "one_pass")
FUSED_STEPS = ("fused", "offload")  # two backward passes a step
IN_BACKWARD_STEPS = (*FUSED_STEPS, "one_pass")  # each weight updated from its gradient hook
SHARDINGS = ("none", "ddp", "fsdp")


@dataclass(frozen=True)
class Machine:
    """What the plan's choices depend on. The trainer fills it from torch at its start
    (trainer/run/hardware.py); the lab from its card catalogue (`known_machine`) and NVML."""

    processes: int = 1  # the world size: one process per card (torchrun), or one on the CPU
    device: str = "cpu"  # "cpu" or "cuda"
    card_memory_mb: float | None = None  # per card; None where unknown (the CPU)
    capability: tuple[int, int] | None = None  # CUDA compute capability
    bf16: bool = False  # the card computes bf16 natively (compute capability ≥ 8)
    bitsandbytes: bool = False  # the lean state's library is installed
    triton: bool = False  # torch.compile's code generator for CUDA cards
    compiler: bool = False  # a C++ compiler (torch.compile's inductor on the CPU)
    name: str = ""  # the catalogue's name, or "" for the machine the trainer runs on

    def describe(self) -> str:
        """One English line: "2 processes, cuda, 15,360 MiB a card, compute capability 7.5"."""
        parts = [f"{self.processes} process{'es' if self.processes != 1 else ''}", self.device]
        if self.card_memory_mb is not None:
            parts.append(f"{self.card_memory_mb:,.0f} MiB a card")
        if self.capability is not None:
            parts.append(f"compute capability {capability_text(self.capability)}")
        have = [n for n, ok in (("bitsandbytes", self.bitsandbytes), ("Triton", self.triton),
                                ("a C++ compiler", self.compiler)) if ok]
        parts.append("with " + ", ".join(have) if have else "no bitsandbytes, Triton or C++ compiler")
        return ", ".join(parts)


def native_bf16(device: str, capability: tuple[int, int] | None) -> bool:
    """A CUDA card computes bf16 natively from compute capability 8 (torch's
    is_bf16_supported() answers yes on a T4, 7.5, where it is emulated and slow)."""
    return device == "cuda" and capability is not None and capability[0] >= 8


def capability_text(capability: tuple[int, int] | None) -> str:
    return "unknown" if capability is None else f"{capability[0]}.{capability[1]}"


@dataclass(frozen=True)
class Choice:
    """One resolved choice: its value, what run.json asked for, and why."""

    value: Any
    asked: Any
    reason: Reason

    def as_json(self) -> dict[str, Any]:
        return {"value": self.value, "asked": self.asked, "reason": self.reason.as_json()}


@dataclass(frozen=True)
class Plan:
    """Everything one run executes on its machine, each choice with its reason."""

    machine: Machine
    precision: Choice  # "fp32", "bf16", "fp16"
    sharding: Choice  # "none", "ddp", "fsdp"
    compile: Choice  # "on", "off"
    step: Choice  # STEP_KINDS
    micro_steps: Choice  # optimizer step = this many forward/backward passes (int)
    economical: Choice  # "off", "selective", "full"
    samples: Choice  # "on", "off"

    CHOICES = ("precision", "sharding", "compile", "step", "micro_steps", "economical", "samples")

    @property
    def loss_scaling(self) -> bool:
        """fp16 trains with a loss scaler (GradScaler) that checks every gradient."""
        return self.precision.value == "fp16"

    @property
    def lean(self) -> bool:
        """The lean training state (8-bit moments; trainer/step/lean.py) makes the step."""
        return self.step.value != "normal"

    def values(self) -> dict[str, Any]:
        """Every choice's value by name (what a run's `start` event reports it ran)."""
        return {name: getattr(self, name).value for name in self.CHOICES}

    def as_json(self) -> dict[str, Any]:
        return {"machine": asdict(self.machine), **{n: getattr(self, n).as_json() for n in self.CHOICES}}

    def lines(self) -> list[str]:
        """The plan in English, a choice a line (the trainer's log, `python -m trainer.config`)."""
        name = self.machine.name or "this machine"
        out = [f"machine: {name} ({self.machine.describe()})"]
        for n in self.CHOICES:
            c = getattr(self, n)
            out.append(f"  {n.replace('_', '-'):<12} {c.value!s:<10} {c.reason.text()}")
        return out


# ---- the machines the lab knows by name ----------------------------------------------------


@dataclass(frozen=True)
class Card:
    """A machine of the lab's catalogue: what the plan needs of it (app.sizing.gpus adds
    its speed and words). `kaggle`: the machine is a Kaggle kernel, whose libraries are
    Kaggle's image's and the lab's (not this computer's)."""

    processes: int
    device: str
    memory_mb: float | None  # per card, as NVML reports its total; None: the CPU's RAM
    capability: tuple[int, int] | None
    kaggle: bool = False


KNOWN_CARDS: dict[str, Card] = {
    # Kaggle's "GPU T4 ×2" (its only GPU shape): two processes under torchrun.
    "t4x2": Card(2, "cuda", 15_360.0, (7, 5), kaggle=True),
    "t4": Card(1, "cuda", 15_360.0, (7, 5)),
    "rtx3050": Card(1, "cuda", 8_192.0, (8, 6)),  # the 8 GB desktop card
    "rtx5070ti": Card(1, "cuda", 16_384.0, (12, 0)),
    "cpu": Card(1, "cpu", None, None),
}


@dataclass(frozen=True)
class Libraries:
    """What the choices need besides torch: the lean state's library, the compilers."""

    bitsandbytes: bool
    triton: bool
    compiler: bool


# A Kaggle kernel: its image's torch comes with Triton and g++; the lab uploads bitsandbytes
# as a wheel with a lean run's code (app.kaggle.datasets) and installs it at the start.
KAGGLE_LIBRARIES = Libraries(bitsandbytes=True, triton=True, compiler=True)


# The compiler's backend; "inductor" unless this says otherwise. The tests set
# "aot_eager" (the same graph capture and autograd split, without inductor's C++ build,
# which takes ≈ 45 s cold on the CPU); a user may set it to work around a broken backend.
BACKEND_ENV = "TERNIT_COMPILE_BACKEND"


def compile_backend() -> str:
    """torch.compile's backend: "inductor", unless BACKEND_ENV names another."""
    return os.environ.get(BACKEND_ENV, "").strip() or "inductor"


def cpp_compiler() -> str:
    """The C++ compiler torch.compile's inductor calls: $CXX, else its platform's default."""
    default = "cl" if os.name == "nt" else ("clang++" if sys.platform == "darwin" else "g++")
    return os.environ.get("CXX", "").strip() or default


def installed_libraries() -> Libraries:
    """What this Python environment has (found, not imported: no torch here). A backend
    other than inductor (BACKEND_ENV: the tests' aot_eager) generates no code, so it needs
    neither Triton nor a C++ compiler."""
    builds = compile_backend() == "inductor"
    return Libraries(
        bitsandbytes=importlib.util.find_spec("bitsandbytes") is not None,
        triton=not builds or importlib.util.find_spec("triton") is not None,
        compiler=not builds or shutil.which(cpp_compiler()) is not None,
    )


def machine_of(card: Card, libraries: Libraries, name: str = "", memory_mb: float | None = None,
               capability: tuple[int, int] | None = None) -> Machine:
    """A Machine from a card's facts (`memory_mb`, `capability`: measured ones, e.g. NVML's,
    over the catalogue's) and the libraries it has."""
    cc = capability or card.capability
    return Machine(
        processes=card.processes, device=card.device,
        card_memory_mb=memory_mb if memory_mb is not None else card.memory_mb,
        capability=cc, bf16=native_bf16(card.device, cc),
        bitsandbytes=libraries.bitsandbytes, triton=libraries.triton, compiler=libraries.compiler, name=name,
    )


def known_machine(name: str, libraries: Libraries | None = None) -> Machine:
    """The catalogue's machine `name` (KNOWN_CARDS): a Kaggle one with Kaggle's libraries,
    any other with `libraries` (default: this Python environment's). KeyError: unknown."""
    card = KNOWN_CARDS[name]
    if libraries is None:
        libraries = KAGGLE_LIBRARIES if card.kaggle else installed_libraries()
    return machine_of(card, libraries, name)


# ---- the plan ---------------------------------------------------------------------------------


def plan(cfg: RunConfig, machine: Machine) -> Plan | Refusal:
    """Every choice of a run of `cfg` on `machine`, or the one refusal. `cfg` is a
    validated RunConfig (trainer.config.run_config.from_dict / load)."""
    t = cfg.training
    try:
        level = economical_level(t.economical)
        lean = lean_mode(t.lean_state)
        compiling = compile_mode(t.compile)
        sharding_asked = sharding_mode(t.sharding)
        micro = accumulation(cfg, machine.processes)
    except ConfigError as e:
        return e.refusal
    precision = precision_choice(t.precision, machine)
    if lean not in ("off", "one_pass") and not machine.bitsandbytes:  # one_pass: plain torch
        return Refusal("lean_no_library")
    sharding = _sharding(sharding_asked, lean, parameter_count(cfg.model), machine)
    if isinstance(sharding, Refusal):
        return sharding
    step = _step(lean, precision, micro, machine)
    if isinstance(step, Refusal):
        return step
    compiled = _compile(compiling, lean, step.value, sharding.value, machine)
    if isinstance(compiled, Refusal):
        return compiled
    per_step = machine.processes * t.batch_per_card * cfg.model.context
    micro_reason = (
        Reason("micro_one", {"processes": machine.processes, "batch": t.batch_per_card,
                             "context": cfg.model.context, "tokens": per_step})
        if micro == 1 else
        Reason("micro_many", {"micro": micro, "processes": machine.processes, "batch": t.batch_per_card,
                              "context": cfg.model.context, "wanted": t.tokens_per_step}))
    return Plan(
        machine=machine, precision=precision, sharding=sharding, compile=compiled, step=step,
        micro_steps=Choice(micro, t.tokens_per_step, micro_reason),
        economical=Choice(level, level, Reason("asked", {"key": "economical", "value": level})),
        samples=_samples(t.sample_tokens, t.sample_every or t.eval_every, sharding.value),
    )


def precision_choice(asked: str, m: Machine) -> Choice:
    """training.precision on `m`: as asked, or auto's pick (bf16 where the card has it
    natively, fp16 with loss scaling on an older card, fp32 on the CPU)."""
    cc = capability_text(m.capability)
    if asked != "auto":
        if asked == "bf16" and m.device == "cuda" and not m.bf16:
            return Choice(asked, asked, Reason("precision_emulated", {"capability": cc}))
        return Choice(asked, asked, Reason("asked", {"key": "precision", "value": asked}))
    if m.device != "cuda":
        return Choice("fp32", asked, Reason("precision_cpu"))
    if m.bf16:
        return Choice("bf16", asked, Reason("precision_bf16", {"capability": cc}))
    return Choice("fp16", asked, Reason("precision_fp16", {"capability": cc}))


def _sharding(asked: str, lean: str, params: int, m: Machine) -> Choice | Refusal:
    if m.processes < 2:
        return Choice("none", asked, Reason("one_process", {"asked": asked}))
    if asked != "auto":
        chosen, reason = asked, Reason("asked", {"key": "sharding", "value": asked})
    elif lean != "off":  # FSDP does not take the lean state; DDP takes lean_state true
        chosen, reason = "ddp", Reason("sharding_ddp_lean")
    elif m.card_memory_mb is None:
        chosen, reason = "ddp", Reason("sharding_ddp_unknown", {"device": m.device})
    else:
        state, half = params * STATE_BYTES_PER_WEIGHT, AUTO_SHARE * m.card_memory_mb * 2**20
        figures = {"state_gb": state / 1e9, "half_gb": half / 1e9, "processes": m.processes}
        chosen, reason = ("fsdp", Reason("sharding_fsdp", figures)) if state > half else (
            "ddp", Reason("sharding_ddp_fits", figures))
    if chosen == "fsdp" and lean != "off":
        # FSDP hands each process shards (DTensors) of every weight, which the per-parameter
        # 8-bit optimizer does not take.
        return Refusal("lean_under_fsdp")
    if chosen == "ddp" and lean in FUSED_LEAN_MODES:
        # DDP averages the gradients at the end of the backward pass, after a fused step's
        # hooks have updated the weights.
        return Refusal("lean_under_ddp", {"lean": lean})
    return Choice(chosen, asked, reason)


def _step(lean: str, precision: Choice, micro: int, m: Machine) -> Choice | Refusal:
    if lean == "off":
        return Choice("normal", lean, Reason("step_normal"))
    if lean == "on":
        return Choice("held", lean, Reason("step_held_fp16" if precision.value == "fp16" else "step_held"))
    if precision.value == "fp16":
        # Under fp16 the GradScaler must see every gradient for infinities before any
        # weight moves: a step inside the backward pass cannot wait for that.
        return Refusal("fused_fp16", {"lean": lean, "auto": precision.asked == "auto"})
    if micro > 1:
        # The first micro-steps' gradients add up in the weights until the last one's
        # backward pass: a set of gradients held, which the fused step exists to avoid.
        return Refusal("fused_micro_steps", {"lean": lean, "micro": micro})
    if lean == "fused":
        return Choice("fused", lean, Reason("step_fused"))
    if lean == "one_pass":
        return Choice("one_pass", lean, Reason("step_one_pass"))
    return Choice("offload", lean, Reason("step_offload" if m.device == "cuda" else "step_offload_cpu"))


def _compile(asked: str, lean: str, step: str, sharding: str, m: Machine) -> Choice | Refusal:
    """torch.compile of the training step's model (trainer/step/compiling.py says why each)."""
    # What keeps a combination from compiling: the fused step updates each weight from its
    # gradient hook, and a compiled backward pass makes every gradient at once before those
    # hooks run; FSDP's per-block hooks gather and free weights around each block, which
    # whole-model compilation traces through or breaks at.
    blocker = "compile_lean" if step in IN_BACKWARD_STEPS else "compile_fsdp" if sharding == "fsdp" else None
    if asked == "off":
        return Choice("off", asked, Reason("asked", {"key": "compile", "value": "off"}))
    if asked == "on":
        if blocker == "compile_lean":
            return Refusal("compile_on_lean", {"lean": lean})
        if blocker == "compile_fsdp":
            return Refusal("compile_on_fsdp")
        if not (m.triton if m.device == "cuda" else m.compiler):
            needs = "Triton (for a CUDA card)" if m.device == "cuda" else f"a C++ compiler ({cpp_compiler()})"
            return Refusal("compile_no_compiler", {"needs": needs})
        return Choice("on", asked, Reason("asked", {"key": "compile", "value": "on"}))
    if m.device != "cuda":
        return Choice("off", asked, Reason("compile_cpu"))
    if blocker:
        return Choice("off", asked, Reason(blocker, {"lean": lean}))
    if not m.triton:
        return Choice("off", asked, Reason("compile_no_triton"))
    return Choice("on", asked, Reason("compile_cuda"))


def _samples(tokens: int, every: int, sharding: str) -> Choice:
    if tokens == 0:
        return Choice("off", tokens, Reason("samples_zero"))
    if sharding == "fsdp":
        # Rank 0 alone would call a model whose weights all the ranks hold between them.
        return Choice("off", tokens, Reason("samples_fsdp"))
    return Choice("on", tokens, Reason("samples_on", {"every": every, "tokens": tokens}))
