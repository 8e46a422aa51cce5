"""The estimate as typed objects: what `estimate()` returns and its users read (the form,
the window's panel, `ternit estimate`). `Estimate.as_json()` is `ternit estimate --json`'s
object, whose keys stay as they were (plus the new ones)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from trainer.plan.memory_model import counted_behind
from trainer.plan.planner import Plan

from .combos import Combination
from .speed import Speed


@dataclass(frozen=True)
class MemoryMb:
    """MiB per card of each part of the chosen combination's step, and of the whole."""

    weights: float
    gradients: float
    optimizer: float
    optimizer_host: float  # lean_state "offload": the moments in the host's memory
    ddp_buckets: float
    sharded_buffers: float
    autocast_copies: float
    activations: float
    loss_and_recompute: float
    cublas_workspace: float
    allocated_peak: float
    framework: float
    total: float


@dataclass(frozen=True)
class Option:
    """One combination's memory and speed, for `--economical auto` and the advice, with the
    plan that runs it (its step kind and sharding are what the memory is for)."""

    combination: Combination
    plan: Plan
    allocated_mb: float
    total_mb: float
    fits: bool | None
    tokens_per_s: float

    def as_json(self) -> dict[str, Any]:
        return {**self.combination.as_json(), "step": self.plan.step.value, "allocated_mb": self.allocated_mb,
                "total_mb": self.total_mb, "fits": self.fits, "tokens_per_s": self.tokens_per_s}


@dataclass(frozen=True)
class Advice:
    kind: str  # speed, time, limit, memory, data, passes
    text: str


@dataclass(frozen=True)
class Estimate:
    gpu: str
    gpu_label: str
    cards: int
    precision: str
    combination: Combination
    plan: Plan  # what the trainer runs for it on this machine, each choice with its reason
    auto: bool  # the combination was picked by `economical="auto"`
    params: int
    flops_per_token: int
    tokens_per_step: int
    speed: Speed
    tokens_per_s: float  # the speed's figure with the combination's own costs
    tokens_per_s_source: str
    steps: int
    seconds_to_steps: float  # training and its evaluations; not the start-up, checkpoints or samples
    eval_seconds: float
    evaluations: int  # held-out evaluations on the way (every eval_every steps and at the end)
    limit_stops_at_step: int | None
    memory: MemoryMb
    memory_peak_phase: str
    calibration_factor: float
    calibration_run: str | None
    card_memory_mb: float | None
    fits: bool | None
    max_batch: int | None
    fits_with: Combination | None  # the fastest combination at which this batch fits
    options: tuple[Option, ...]
    tokens_wanted: int
    tokens_read: int
    data_tokens: int | None
    tokens_per_weight: float | None
    passes: float | None
    advice: tuple[Advice, ...] = ()
    # What the speed counts of this combination beyond the normal step (trainer.plan.step_cost
    # .speed_basis): recomputation's extra forward and the fused step's second backward pass.
    step_basis: dict[str, float | None] = field(default_factory=dict)

    @property
    def is_measurement(self) -> bool:
        """The speed (and so the time) is this very shape's measurement, not an estimate."""
        return self.speed.kind == "measured"

    @property
    def memory_counted(self) -> bool:
        """A count of the trainer's own step stands behind the memory figure: this machine and
        sharding are ones tests/test_sizing_count.py holds within 5 % of the count
        (trainer.plan.memory_model.COUNTED); elsewhere the figure is the formula's estimate."""
        return counted_behind(self.gpu, self.plan.sharding.value)

    @property
    def level(self) -> str:
        return self.combination.level

    def advice_texts(self, leave_out: frozenset[str] = frozenset()) -> list[str]:
        return [a.text for a in self.advice if a.kind not in leave_out]

    def as_json(self) -> dict[str, Any]:
        sp = self.speed
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)
                               if f.name not in ("combination", "plan", "auto", "speed", "memory",
                                                 "calibration_factor", "calibration_run", "fits_with", "options",
                                                 "advice")}
        out.update(
            economical={**self.combination.as_json(), "auto": self.auto},
            lean_state=self.combination.lean_state,
            tokens_per_s_basis={"kind": sp.kind, "run": sp.run, "is_measurement": self.is_measurement},
            # For "fitted_measured": the runs fitted (nearest first), the fixed part of a
            # step and its share of this shape's step. None otherwise.
            tokens_per_s_fit=None if sp.fit is None else {
                "runs": list(sp.fit.runs),
                "fixed_ms_per_step": sp.fit.fixed_s * 1000,
                "fixed_share": sp.fit.fixed_s * self.tokens_per_s / self.tokens_per_step,
            },
            memory_mb=asdict(self.memory),
            memory_counted=self.memory_counted,
            memory_calibration={"factor": self.calibration_factor, "run": self.calibration_run},
            # The level of the combination that fits (as before the lean state), and the
            # whole combination.
            economical_fits_at=None if self.fits_with is None else self.fits_with.level,
            fits_with=None if self.fits_with is None else self.fits_with.as_json(),
            combinations=[o.as_json() for o in self.options],
            advice=[a.text for a in self.advice],
            # What each sentence is about, so a view that shows some of them as rows of its
            # own can leave those out of the advice.
            advice_kinds=[a.kind for a in self.advice],
            # What the trainer would run (`python -m trainer.config RUN.json --machine GPU
            # --json` prints the same): every choice with its reason.
            plan=self.plan.as_json(),
        )
        return out

    def __getitem__(self, key: str) -> Any:
        """The JSON object's value under `key` (for readers that think in its keys)."""
        return self.as_json()[key]
