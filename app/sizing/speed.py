"""Tokens per second for a model shape on a card: from measured runs when the lab has them,
else from the card's reference figure, scaled by compute per token (formulas.step_cost).

A measured run is a dict as the run history gives it (the trainer's `start` and `step`
events): {"run", "gpu", "params", "layers", "width", "context", "batch", "tokens_per_s",
"mem_peak_mb", "economical"}. Only runs on the same card and in the same economical level
count. In order:
- a run of exactly the asked shape: its figure ("measured");
- two or more runs whose step compute differs (by more than MIN_SPREAD): a fitted step
  time, seconds per step = fixed + per-compute × compute per card-step ("fitted_measured",
  see fit_step_time). A step has a part that does not grow with arithmetic (kernel
  launches, the optimizer's and the loop's fixed work), which compute scaling misses at a
  launch-bound size (measured on an H200: docs/PERF.md, «Estimates against measurements»).
  Used when that fixed part is at least MIN_FIXED_SHARE of the nearest run's step;
- else the nearest measured size, scaled by compute per token ("scaled_measured").
A nearest run further than MAX_SCALE_DISTANCE is not used at all (the card's reference
figure is). Every result says which it was.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from trainer.config.run_config import economical_level, lean_mode
from trainer.plan.step_cost import economical_factor

from ..base.numbers import decimal_mark, plural_ru
from .formulas import Shape, step_cost, vocab_from_params
from .gpus import DEFAULT_SHAPE, GPUS, GpuFacts, cpu_flops, known_card, small_rows, small_width

# Runs are fitted only when their step compute spans more than this ratio: closer sizes
# pin the fixed part down no better than their own noise (a few per cent run to run).
MIN_SPREAD = 1.1
# A fitted fixed part below this share of the nearest run's step is not told from noise
# (measured runs of one size spread by a few per cent, docs/PERF.md): the nearest run's
# scaling is then used, which on the CPU predicted as well with a smaller worst case.
MIN_FIXED_SHARE = 0.10
# A measured run further than this from the asked shape (_candidates' distance: e^3.5 ≈ 32×
# the compute per token, or tokens per step far apart) says little about it: a toy run's
# step is mostly fixed cost, so scaling it by compute made the default model on the CPU
# 3.6× slower than the CPU's own rate says. The card's reference (or rate) is used then.
MAX_SCALE_DISTANCE = 3.5


@dataclass(frozen=True)
class StepFit:
    """seconds per step = fixed_s + per_cost_s × compute per card-step (the `_cost` of the
    shape × batch × n), fitted to measured runs on one card (fit_step_time)."""

    fixed_s: float
    per_cost_s: float
    runs: tuple[str, ...]

    def step_seconds(self, compute: float) -> float:
        return self.fixed_s + self.per_cost_s * compute


@dataclass(frozen=True)
class Speed:
    tokens_per_s: float
    # "measured", "fitted_measured", "scaled_measured", "reference", "spec_estimate",
    # "assumed_t4", "cpu_rate"
    kind: str
    # The run used; for "fitted_measured" the nearest of the fitted runs (the one weighted most).
    run: str | None
    source: dict[str, str]  # the sentence shown next to the figure, ru and en
    fit: StepFit | None = None  # set for "fitted_measured"


def _cost(s: Shape, facts: GpuFacts, level: str) -> float:
    return step_cost(
        s.layers, s.width, s.context, s.vocab, small_width(facts), s.batch * s.context, small_rows(facts)
    ) * economical_factor(s, level)


def measured_shape(m: dict[str, Any]) -> Shape:
    layers, width, context = int(m["layers"]), int(m["width"]), int(m["context"])
    vocab = int(m["vocab"]) if m.get("vocab") else vocab_from_params(int(m["params"]), layers, width, context)
    heads = int(m.get("heads") or max(1, width // 64))
    if width % heads:
        heads = 1
    return Shape(layers, width, heads, context, vocab, int(m["batch"]))


def _same_lean(m: dict[str, Any], lean: str | None) -> bool:
    """A run in the asked lean state (`None`: any; a run from before the lean state: off)."""
    return lean is None or lean_mode(m.get("lean_state", False)) == lean


def _candidates(
    s: Shape, gpu: str, level: str, measured: Iterable[dict[str, Any]] | None, key: str = "tokens_per_s",
    lean: str | None = "off",
) -> list[tuple[dict[str, Any], Shape, float]]:
    """(run, its shape, its distance from `s`) for every usable run on `gpu` in `level`
    and lean state `lean`: distance = |ln(compute ratio)| + ½·|ln(tokens per card-step ratio)|.
    The CPU's short rate measurement (cpu_rate.py, "probe") is not a run: left out."""
    out: list[tuple[dict[str, Any], Shape, float]] = []
    facts = GPUS.get(gpu)
    if facts is None:
        return out
    for m in measured or ():
        try:
            if m.get("gpu") != gpu or economical_level(m.get("economical", False)) != level:
                continue
            if m.get("probe") or not _same_lean(m, lean):
                continue
            value = m.get(key)
            if value is None or not float(value) > 0:
                continue
            ms = measured_shape(m)
        except (KeyError, TypeError, ValueError):
            continue  # an incomplete history entry is skipped, never fatal
        dist = abs(math.log(_cost(ms, facts, level) / _cost(s, facts, level))) + 0.5 * abs(
            math.log((ms.batch * ms.context) / (s.batch * s.context))
        )
        out.append((m, ms, dist))
    return out


def nearest_measured(
    s: Shape, gpu: str, level: str, measured: Iterable[dict[str, Any]] | None, key: str = "tokens_per_s",
    lean: str | None = "off",
) -> tuple[dict[str, Any], float] | None:
    """The measured run on `gpu` in the same economical level and lean state closest in
    size to `s` (the distance of _candidates; the first of equals)."""
    best: tuple[dict[str, Any], float] | None = None
    for m, _, dist in _candidates(s, gpu, level, measured, key, lean):
        if best is None or dist < best[1]:
            best = (m, dist)
    return best


def step_compute(s: Shape, facts: GpuFacts, level: str) -> float:
    """Compute per card-step in step_cost's units: the shape's cost per token × batch × n.
    Every card of a multi-card target does this much in one step, side by side."""
    return _cost(s, facts, level) * s.batch * s.context


def fit_step_time(
    s: Shape, gpu: str, level: str, measured: Iterable[dict[str, Any]] | None, lean: str = "off"
) -> StepFit | None:
    """Fit seconds per step = a + b × compute per card-step to the measured runs on `gpu`
    in `level`, for predicting `s`; None when the fit cannot be trusted.

    A run's seconds per step are its tokens per step over its tokens/s: batch × cards × n
    / tokens_per_s, the trainer's tokens_per_s being for all cards together (2×T4: both
    cards' tokens, while each card does one card-step of compute) — the same reading the
    nearest-run scaling makes, so with a = 0 the two agree exactly.

    Weighted least squares on relative residuals ((a + b·x)/y − 1, so a long step does not
    outweigh a short one), each run weighted exp(−distance) with _candidates' distance: a
    run with twice or half the asked shape's compute counts half as much as one of its
    size. Two runs are met exactly whatever the weights. None (the caller falls back to
    the nearest run) when fewer than two runs, when their step compute spans no more than
    MIN_SPREAD (one size, in effect), or when the fit says a < 0 or b ≤ 0 (a step cannot
    take less than no time, nor get faster with more arithmetic: noise, not a law), or
    when the fixed part is under MIN_FIXED_SHARE of the nearest run's step.
    """
    facts = GPUS.get(gpu)
    if facts is None:
        return None
    cands = _candidates(s, gpu, level, measured, lean=lean)
    if len(cands) < 2:
        return None
    x0 = step_compute(s, facts, level)  # compute is scaled by the asked shape's: b·1 is its part
    xs = [step_compute(ms, facts, level) / x0 for _, ms, _ in cands]
    if max(xs) <= MIN_SPREAD * min(xs):
        return None
    ys = [ms.batch * facts.cards * ms.context / float(m["tokens_per_s"]) for m, ms, _ in cands]
    ws = [math.exp(-dist) for _, _, dist in cands]
    # Normal equations of Σ w·(a·u + b·v − 1)², u = 1/y, v = x/y.
    suu = sum(w / y / y for w, y in zip(ws, ys, strict=True))
    svv = sum(w * (x / y) ** 2 for w, x, y in zip(ws, xs, ys, strict=True))
    suv = sum(w * x / y / y for w, x, y in zip(ws, xs, ys, strict=True))
    su = sum(w / y for w, y in zip(ws, ys, strict=True))
    sv = sum(w * x / y for w, x, y in zip(ws, xs, ys, strict=True))
    det = suu * svv - suv * suv
    if not det > 1e-12 * suu * svv:
        return None
    a = (su * svv - sv * suv) / det
    b = (sv * suu - su * suv) / det
    if not (a >= 0 and b > 0):
        return None
    order = sorted(range(len(cands)), key=lambda i: cands[i][2])  # nearest first
    if a < MIN_FIXED_SHARE * ys[order[0]]:
        return None
    return StepFit(a, b / x0, tuple(str(cands[i][0].get("run", "?")) for i in order))


def _ms_text(seconds: float, lang: str) -> str:
    ms = seconds * 1000
    text = f"{ms:.0f}" if ms >= 10 else f"{ms:.1f}" if ms >= 1 else f"{ms:.2f}"
    return decimal_mark(text, lang)


def _fit_source(fit: StepFit, facts: GpuFacts) -> dict[str, str]:
    k = len(fit.runs)
    cpu = facts.kind == "cpu"
    return {
        "ru": f"по {k} {plural_ru(k, 'замеру', 'замерам', 'замерам')} "
              f"{'на этом процессоре' if cpu else 'на этой карте'}: "
              f"{_ms_text(fit.fixed_s, 'ru')} мс на шаг постоянно + вычисления",
        "en": f"fitted to {k} measured runs on this {'CPU' if cpu else 'card'}: "
              f"{_ms_text(fit.fixed_s, 'en')} ms per step fixed + compute",
    }


def _shape_text(s: Shape) -> str:
    return f"{s.layers}×{s.width}, n {s.context}"


def estimate_speed(
    s: Shape,
    gpu: str,
    *,
    economical: bool | str = False,
    measured: Iterable[dict[str, Any]] | None = None,
    local_name: str | None = None,
    lean_state: bool | str = "off",
) -> Speed:
    """Tokens/s of shape `s` on `gpu` in an economical level, from measured runs in the
    same level and lean state when there are, else from the card's reference (or the CPU's
    rate). The lean state's and offload's own costs are added by the caller
    (combos.extra_step_seconds) when the figure is not from a run in that lean state."""
    facts = GPUS[gpu]
    level = economical_level(economical)
    lean = lean_mode(lean_state)
    measured = list(measured or ())  # read twice below: a generator would be spent
    near = nearest_measured(s, gpu, level, measured, lean=lean)
    if near is not None and near[1] > MAX_SCALE_DISTANCE:
        near = None  # too far to scale from: the reference below says so
    if near is not None:
        return _from_measured(s, gpu, level, lean, measured, near)
    if facts.kind == "cpu":
        return _cpu_speed(s, facts, level, measured)
    return _from_reference(s, gpu, facts, level, local_name)


def _from_measured(s: Shape, gpu: str, level: str, lean: str, measured: list[dict[str, Any]],
                   near: tuple[dict[str, Any], float]) -> Speed:
    facts = GPUS[gpu]
    m, dist = near
    ms = measured_shape(m)
    tps = float(m["tokens_per_s"]) * _cost(ms, facts, level) / _cost(s, facts, level)
    run = str(m.get("run", "?"))
    if dist < 1e-9 and ms == Shape(s.layers, s.width, ms.heads, s.context, s.vocab, s.batch):
        return Speed(tps, "measured", run, {"ru": f"замер в прогоне {run}", "en": f"measured in run {run}"})
    fit = fit_step_time(s, gpu, level, measured, lean)
    if fit is not None:
        tps = s.batch * facts.cards * s.context / fit.step_seconds(step_compute(s, facts, level))
        return Speed(tps, "fitted_measured", run, _fit_source(fit, facts), fit)
    return Speed(tps, "scaled_measured", run, {
        "ru": f"пересчёт замера прогона {run} ({_shape_text(ms)}) по вычислениям на токен",
        "en": f"scaled from the measurement of run {run} ({_shape_text(ms)}) by compute per token",
    })


def cpu_probe(measured: Iterable[dict[str, Any]] | None) -> dict[str, Any] | None:
    """The CPU's short rate measurement among the measured entries (cpu_rate.py), if any."""
    return next((m for m in measured or () if m.get("probe") and m.get("gpu") == "cpu"), None)


def _cpu_speed(s: Shape, facts: GpuFacts, level: str, measured: list[dict[str, Any]]) -> Speed:
    """The CPU's arithmetic rate, corrected by this machine's short measurement when there
    is one (the table's rate assumes an idle machine: issue 16 saw it 17× too optimistic)."""
    rate = cpu_flops()
    probe = cpu_probe(measured)
    if probe is not None:
        try:
            ps = measured_shape(probe)
            predicted = cpu_flops() / _cost(ps, facts, "off")
            factor = float(probe["tokens_per_s"]) / predicted
        except (KeyError, TypeError, ValueError, ZeroDivisionError):
            factor = 0.0
        if factor > 0:
            return Speed(rate * factor / _cost(s, facts, level), "cpu_probe", None, {
                "ru": "оценка по короткому замеру этого процессора (пересчёт по вычислениям)",
                "en": "an estimate from a short measurement of this CPU (scaled by compute)",
            })
    return Speed(rate / _cost(s, facts, level), "cpu_rate", None, {
        "ru": "оценка по скорости процессора, замера на этой машине ещё нет",
        "en": "an estimate from the CPU's arithmetic rate, not measured on this machine yet",
    })


def _nearer_large(s: Shape, facts: GpuFacts, level: str) -> bool:
    """Is `s` nearer (in _candidates' distance) to the card's large-model reference than to
    the default model its small-model figure is for?"""
    if facts.large is None:
        return False

    def dist(ref: Shape) -> float:
        return abs(math.log(_cost(ref, facts, "off") / _cost(s, facts, level))) + 0.5 * abs(
            math.log((ref.batch * ref.context) / (s.batch * s.context)))

    return dist(facts.large.shape) < dist(DEFAULT_SHAPE)


def _from_reference(s: Shape, gpu: str, facts: GpuFacts, level: str, local_name: str | None) -> Speed:
    ref_facts = facts
    kind = "reference" if facts.measured else "spec_estimate"
    if gpu == "local":
        known = known_card(local_name) if local_name else None
        if known is not None:
            ref_facts, kind = known, ("reference" if known.measured else "spec_estimate")
        else:
            kind = "assumed_t4"
    cost = _cost(s, facts, level)
    if ref_facts.large is not None and _nearer_large(s, ref_facts, level):
        large = ref_facts.large
        tps = large.tokens_per_s * _cost(large.shape, facts, "off") / cost
        src = dict(large.basis)
        if ref_facts is not facts:
            src = {k: f"{local_name}: {v}" for k, v in src.items()}
        return Speed(tps, "reference_large", None, src)
    # Economical level scales from the reference (measured in the normal mode).
    assert ref_facts.tokens_per_s is not None
    tps = ref_facts.tokens_per_s * _cost(DEFAULT_SHAPE, facts, "off") / cost
    return Speed(tps, kind, None, _reference_source(kind, facts, ref_facts, local_name))


def _reference_source(kind: str, facts: GpuFacts, ref_facts: GpuFacts, local_name: str | None) -> dict[str, str]:
    if kind == "reference":
        on = ref_facts.on
        src = {"ru": f"оценка по замеру лаборатории {on['ru']}", "en": f"an estimate from the lab's measurement {on['en']}"}
        if ref_facts is not facts:  # a local card recognised by name
            src = {k: f"{local_name}: {v}" for k, v in src.items()}
        return src
    if kind == "spec_estimate":
        src = dict(ref_facts.basis)
        if ref_facts is not facts:
            src = {k: f"{local_name} ≈ {ref_facts.label[k]}: {v}" for k, v in src.items()}
        return src
    name_ru = local_name or "карта не найдена"
    name_en = local_name or "no card found"
    return {
        "ru": f"{name_ru}: скорость неизвестна, принята как у одной T4 — короткий прогон даст замер",
        "en": f"{name_en}: speed unknown, assumed as one T4 — a short run will measure it",
    }
