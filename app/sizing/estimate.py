"""The «Как выбрать размер» panel's numbers: one Estimate (result.py), whose as_json() is
what `ternit estimate --json` prints. Everything here is arithmetic on the form's fields
(no torch, no Qt), for what the plan (trainer/plan/planner.py) runs on the chosen machine: its
precision, sharding and step kind, or its refusal."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from trainer.config.run_config import (
    ECONOMICAL_LEVELS,
    ConfigError,
    RunConfig,
    economical_level,
    from_dict,
    lean_mode,
)
from trainer.plan.memory_model import Memory, MiB, cublas_workspace_bytes, estimate_memory
from trainer.plan.planner import Libraries, Machine, Plan, Refusal, plan, precision_choice
from trainer.plan.step_cost import speed_basis

from ..base.i18n import current_language
from ..base.numbers import format_value
from ..base.plan_texts import RefusalError
from .advice import advice
from .combos import Combination, extra_step_seconds, offered, with_choice
from .formulas import Shape, flops_per_token, param_count
from .formulas import tokens_per_step as micro_step_tokens
from .gpus import GPUS, GpuFacts, cpu_threads, local_card, machine_for, ram_mb
from .result import Estimate, MemoryMb, Option
from .speed import Speed, estimate_speed, measured_shape, nearest_measured

TOKENS_PER_WEIGHT = 20  # the guide: about 20 tokens of data per weight
MAX_BATCH_SEARCH = 65_536
# Speeds from runs in the asked lean state already include its costs.
MEASURED_KINDS = ("measured", "fitted_measured", "scaled_measured")


def _t(lang: str, ru: str, en: str) -> str:
    return en if lang == "en" else ru


def _card_memory(gpu: str, facts: GpuFacts, card_memory_mb: Any) -> tuple[float | None, str | None, Any]:
    """(MiB per card, the local card's name, its compute capability). For this computer's
    card the capability is NVML's even when the memory is given (the plan's precision and
    the cuBLAS workspace depend on it)."""
    value = card_memory_mb() if callable(card_memory_mb) else card_memory_mb
    if value is not None:
        card = local_card() if gpu == "local" else None
        return float(value), None, card.compute_capability if card else None
    if facts.memory_mb is not None:
        return facts.memory_mb, None, None
    if facts.kind == "cpu":
        return ram_mb(), None, None
    card = local_card()
    if card is None:
        return None, None, None
    return card.memory_mb, card.name, card.compute_capability


def _framework_mb(facts: GpuFacts, allocated_mb: float) -> float:
    return facts.context_mb + facts.cache_slack * allocated_mb


def _workspace(facts: GpuFacts, cc: tuple[int, int] | None) -> int:
    """cuBLAS's workspaces on a GPU (the local card's capability when NVML gave it, else the
    table's; an unknown card gets the non-Hopper size); none on the CPU."""
    if facts.kind == "cpu":
        return 0
    return cublas_workspace_bytes(cc or facts.compute_capability or (0, 0))


@dataclass(frozen=True)
class _Ctx:
    """What every combination's figures are computed from."""

    s: Shape
    gpu: str
    facts: GpuFacts
    machine: Machine  # what the plan decides from
    base: RunConfig  # the run's keys but the economical choice (combos.with_choice adds it)
    precision: str  # the plan's (the same for every combination)
    card_mb: float | None
    local_name: str | None
    workspace: int
    measured: list[dict[str, Any]]
    lang: str
    # Tokens per optimizer step (run.json's training.tokens_per_step, several micro-steps
    # of one micro-batch each; 0 there: one micro-step). Memory is one micro-batch's.
    step_tokens: int = 0

    @property
    def device(self) -> str:
        return "cpu" if self.facts.kind == "cpu" else "gpu"

    def memory(self, c: Combination, step: str, batch: int | None = None) -> Memory:
        """Combination `c` run by the plan's `step` kind (its sharding is the plan's too)."""
        s = self.s if batch is None else dataclasses.replace(self.s, batch=batch)
        return estimate_memory(s, self.precision, self.facts.cards, c.level, self.workspace,
                               step, c.sharding, self.device)

    def fits(self, allocated_mb: float) -> bool | None:
        if self.card_mb is None:
            return None
        return allocated_mb + _framework_mb(self.facts, allocated_mb) <= self.card_mb


def _calibration(ctx: _Ctx, c: Combination, step: str) -> tuple[float, str | None]:
    """measured mem_peak_mb / this model's prediction for the nearest measured run in the
    same level and lean state."""
    near = nearest_measured(ctx.s, ctx.gpu, c.level, ctx.measured, key="mem_peak_mb", lean=c.lean_state)
    if near is None:
        return 1.0, None
    m, _ = near
    pred = estimate_memory(measured_shape(m), ctx.precision, ctx.facts.cards, c.level, ctx.workspace,
                           step, c.sharding, ctx.device)
    # The trainer measures every step on a GPU, only the first step on the CPU.
    pred_mb = (pred.first_step_peak if ctx.facts.kind == "cpu" else pred.peak) / MiB
    if pred_mb <= 0:
        return 1.0, None
    return float(m["mem_peak_mb"]) / pred_mb, str(m.get("run", "?"))


def _speed(ctx: _Ctx, c: Combination, step: str) -> tuple[Speed, float]:
    """The speed's basis and tokens/s in combination `c`, its own costs added where the
    basis is not a run in that lean state (combos.extra_step_seconds). With no run in that
    lean state, the normal mode's runs (plus the costs) beat the card's reference."""
    s, facts = ctx.s, ctx.facts
    kw = dict(economical=c.level, measured=ctx.measured, local_name=ctx.local_name)
    speed = estimate_speed(s, ctx.gpu, lean_state=c.lean_state, **kw)
    same_state = speed.kind in MEASURED_KINDS
    if not same_state and c.lean_state != "off":
        normal = estimate_speed(s, ctx.gpu, lean_state="off", **kw)
        if normal.kind in MEASURED_KINDS:
            speed = dataclasses.replace(normal, kind="scaled_measured", source={
                "ru": normal.source["ru"] + " (обычное состояние) + цена облегчённого состояния",
                "en": normal.source["en"] + " (the normal state) + the lean state's cost"})
    per_step = ctx.step_tokens  # the optimizer's extra cost comes once per step, not per micro-step
    threads = cpu_threads() if facts.kind == "cpu" else 1
    extra = extra_step_seconds("normal" if same_state else step, c.sharding,
                               param_count(s.layers, s.width, s.context, s.vocab), facts.kind, facts.pcie_gb_s,
                               threads, per_step / speed.tokens_per_s)
    return speed, per_step / (per_step / speed.tokens_per_s + extra)


def _option(ctx: _Ctx, c: Combination, p: Plan) -> Option:
    step = p.step.value
    factor, _ = _calibration(ctx, c, step)
    alloc = ctx.memory(c, step).peak / MiB * factor
    return Option(c, p, alloc, alloc + _framework_mb(ctx.facts, alloc), ctx.fits(alloc), _speed(ctx, c, step)[1])


def _fastest_fitting(options: Iterable[Option]) -> Option | None:
    fitting = [o for o in options if o.fits]
    return max(fitting, key=lambda o: o.tokens_per_s) if fitting else None




def _fits_with(options: list[Option], chosen: Option) -> Combination | None:
    """When the chosen combination does not fit: a higher level with the same state if one
    fits (the cheapest step), else the fastest combination that fits; None: none does."""
    if chosen.fits is not False:
        return None
    c = chosen.combination
    for o in options:
        oc = o.combination
        if (oc.lean_state, oc.sharding) == (c.lean_state, c.sharding) and ECONOMICAL_LEVELS.index(
                oc.level) > ECONOMICAL_LEVELS.index(c.level) and o.fits:
            return oc
    best = _fastest_fitting(options)
    return None if best is None else best.combination


def _max_batch(ctx: _Ctx, c: Combination, step: str, factor: float) -> int:
    """The largest batch per card whose total fits (0: not even batch 1). Memory grows
    with the batch, so a doubling search then a bisection finds it exactly."""

    def fits(b: int) -> bool:
        return bool(ctx.fits(ctx.memory(c, step, b).peak / MiB * factor))

    if not fits(1):
        return 0
    lo, hi = 1, 2
    while hi <= MAX_BATCH_SEARCH and fits(hi):
        lo, hi = hi, hi * 2
    if hi > MAX_BATCH_SEARCH:
        return lo
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def _memory_mb(mem: Memory, factor: float, facts: GpuFacts) -> MemoryMb:
    alloc = mem.peak / MiB * factor
    framework = _framework_mb(facts, alloc)
    return MemoryMb(
        weights=mem.weights / MiB, gradients=mem.gradients / MiB, optimizer=mem.optimizer / MiB,
        optimizer_host=mem.optimizer_host / MiB, ddp_buckets=mem.ddp_buckets / MiB,
        sharded_buffers=mem.sharded_buffers / MiB, autocast_copies=mem.autocast_copies / MiB,
        activations=mem.activations / MiB,
        loss_and_recompute=max(mem.loss_backward, mem.loss_forward, mem.recompute) / MiB,
        cublas_workspace=mem.cublas_workspace / MiB, allocated_peak=alloc, framework=framework,
        total=alloc + framework,
    )


def _base_config(s: Shape, precision: str, compile_: str, sharding: str, tokens_per_step: int,
                 lang: str) -> RunConfig:
    """The run.json the estimate is for (its model and the training keys that shape a
    step), checked by the contract: a shape the trainer refuses is refused here, in `lang`."""
    raw = {"model": {"layers": s.layers, "width": s.width, "heads": s.heads, "context": s.context, "vocab": s.vocab},
           "training": {"batch_per_card": s.batch, "precision": precision, "compile": compile_,
                        "sharding": sharding, "tokens_per_step": tokens_per_step}}
    try:
        return from_dict(raw)
    except ConfigError as e:
        raise RefusalError(e.refusal, lang) from None


def _context(gpu: str, s: Shape, precision: str, measured: Iterable[dict[str, Any]] | None, lang: str,
             card_memory_mb: Any, local_name: str | None, step_tokens: int = 0, compile_: str = "auto",
             sharding: str = "auto", libraries: Libraries | None = None) -> _Ctx:
    if gpu not in GPUS:
        raise ValueError(f"unknown gpu {gpu!r} (known: {', '.join(GPUS)})")
    base = _base_config(s, precision, compile_, sharding, step_tokens, lang)
    facts = GPUS[gpu]
    card_mb, found_name, cc = _card_memory(gpu, facts, card_memory_mb)
    # The CPU's RAM is for the fit, not the plan (which weighs a card's memory only).
    machine = machine_for(gpu, card_mb if facts.kind != "cpu" else None, cc, libraries)
    return _Ctx(s, gpu, facts, machine, base, precision_choice(base.training.precision, machine).value, card_mb,
                local_name or found_name, _workspace(facts, cc), list(measured or []), lang,
                step_tokens or micro_step_tokens(s.batch, facts.cards, s.context))


def _timing(ctx: _Ctx, tps: float, steps_to: int, start_step: int, limit_min: float | None,
            eval_every: int, eval_segments: int) -> tuple[float, float, int, int | None]:
    """(seconds to steps_to, of which evaluation, the number of evaluations, the step the
    limit stops at or None)."""
    lang, s = ctx.lang, ctx.s
    if steps_to < 1 or start_step < 0 or steps_to <= start_step:
        raise ValueError(_t(lang, f"«Шагов до» должно быть больше начального шага ({start_step}), а не {steps_to}",
                            f"“Steps to” must be above the start step ({start_step}), not {steps_to}"))
    steps = steps_to - start_step
    train_s = steps * ctx.step_tokens / tps
    # Evaluation: eval_segments sequences of n tokens, forward only (≈ ⅓ of a training
    # token's cost), every eval_every steps and at the end.
    evals = steps // eval_every + (1 if steps_to % eval_every else 0)
    eval_s = evals * eval_segments * s.context / 3 / tps
    seconds = train_s + eval_s
    limit_step = None
    if limit_min is not None:
        if limit_min <= 0:
            raise ValueError(_t(lang, f"лимит должен быть больше 0 минут, а не {format_value(limit_min, 'ru')}",
                                f"the limit must be above 0 minutes, not {format_value(limit_min, 'en')}"))
        if limit_min * 60 < seconds:
            limit_step = start_step + int(limit_min * 60 / (seconds / steps))
    return seconds, eval_s, evals, limit_step


def estimate(
    *,
    layers: int = 8,
    width: int = 512,
    heads: int = 8,
    context: int = 1024,
    vocab: int = 4000,
    batch: int = 6,
    gpu: str = "t4x2",
    steps_to: int = 20_000,
    limit_min: float | None = None,
    data_tokens: int | None = None,
    economical: bool | str = False,
    lean_state: bool | str = "off",
    sharding: str = "auto",
    precision: str = "auto",
    compile: str = "auto",  # noqa: A002 — run.json's training.compile
    measured: Iterable[dict[str, Any]] | None = None,
    lang: str | None = None,
    card_memory_mb: float | Callable[[], float | None] | None = None,
    local_name: str | None = None,
    start_step: int = 0,
    eval_every: int = 200,
    eval_segments: int = 96,
    tokens_per_step: int = 0,
    libraries: Libraries | None = None,
) -> Estimate:
    """Weights, compute, speed, time, memory and data for a run, with advice sentences, as
    the plan (trainer/plan/planner.py) runs it on `gpu`.

    `economical` is a level (or true/false), or "auto": the fastest combination of level ×
    lean state × sharding (FSDP2 over a multi-card target's cards) the plan accepts that fits
    the card, the lightest when none does. `sharding`, `precision`, `compile` are run.json's
    training keys. `steps_to` is the step the run ends at; `start_step` the step
    it starts from (a continued run), so the time is for steps_to − start_step steps and
    `limit_stops_at_step` is a step number on the same scale. `card_memory_mb` (MiB, or a
    callable giving it) overrides the card's memory: the window passes the local card's
    total from NVML; `libraries`, what the machine has (default: Kaggle's image for Kaggle,
    this computer's otherwise). Raises RefusalError (a ValueError, in `lang`) for what the
    trainer would refuse: a shape, or the asked combination on this machine."""
    lang = lang or current_language()
    s = Shape(layers, width, heads, context, vocab, batch)
    ctx = _context(gpu, s, precision, measured, lang, card_memory_mb, local_name, tokens_per_step, compile,
                   sharding, libraries)
    options = [_option(ctx, c, p) for c, p in offered(ctx.base, ctx.machine)]
    if economical == "auto":
        if not options:  # nothing runs here: say why the run as asked does not
            refused = plan(ctx.base, ctx.machine)
            raise RefusalError(refused if isinstance(refused, Refusal) else Refusal("invalid", {"message": "?"}), lang)
        chosen = _fastest_fitting(options) or min(options, key=lambda o: o.total_mb)
    else:
        level, lean = economical_level(economical), lean_mode(lean_state)
        asked = plan(with_choice(ctx.base, level, lean), ctx.machine)
        if isinstance(asked, Refusal):
            raise RefusalError(asked, lang)
        chosen = _option(ctx, Combination(level, lean, asked.sharding.value), asked)
    c, step = chosen.combination, chosen.plan.step.value
    speed, tps = _speed(ctx, c, step)
    seconds, eval_s, evals, limit_step = _timing(ctx, tps, steps_to, start_step, limit_min, eval_every,
                                                 eval_segments)
    factor, calib_run = _calibration(ctx, c, step)
    mem = ctx.memory(c, step)
    params = param_count(layers, width, context, vocab)
    per_step, steps = ctx.step_tokens, steps_to - start_step
    e = Estimate(
        gpu=gpu, gpu_label=ctx.facts.label[lang], cards=ctx.facts.cards, precision=ctx.precision,
        combination=c, plan=chosen.plan, auto=economical == "auto", params=params,
        flops_per_token=flops_per_token(layers, width, context, vocab), tokens_per_step=per_step,
        speed=speed, tokens_per_s=tps, tokens_per_s_source=speed.source[lang], steps=steps,
        seconds_to_steps=seconds, eval_seconds=eval_s, evaluations=evals, limit_stops_at_step=limit_step,
        memory=_memory_mb(mem, factor, ctx.facts), memory_peak_phase=mem.peak_phase,
        calibration_factor=factor, calibration_run=calib_run, card_memory_mb=ctx.card_mb, fits=chosen.fits,
        max_batch=None if ctx.card_mb is None else _max_batch(ctx, c, step, factor),
        fits_with=_fits_with(options, chosen), options=tuple(options),
        tokens_wanted=TOKENS_PER_WEIGHT * params, tokens_read=steps * per_step, data_tokens=data_tokens,
        tokens_per_weight=data_tokens / params if data_tokens else None,
        passes=steps * per_step / data_tokens if data_tokens else None,
        step_basis=speed_basis(s, c.level, step, None),
    )
    return dataclasses.replace(e, advice=tuple(advice(e, ctx.facts, lang, limit_min, ctx.local_name)))
