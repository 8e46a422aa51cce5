"""Tokens per second for a model shape on a card: from a measured run when the lab has one,
else from the card's reference figure, scaled by compute per token (formulas.step_cost).

A measured run is a dict as the run history gives it (the trainer's `start` and `step`
events): {"run", "gpu", "params", "layers", "width", "context", "batch", "tokens_per_s",
"mem_peak_mb", "economical"}. The nearest size on the same card and in the same
economical level is used, and the result says which run it was.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .formulas import Shape, param_count, step_cost, vocab_from_params
from .gpus import DEFAULT_SHAPE, GPUS, GpuFacts, cpu_flops, known_card, small_rows, small_width
from .memory import economical_level


@dataclass(frozen=True)
class Speed:
    tokens_per_s: float
    kind: str  # "measured", "scaled_measured", "reference", "spec_estimate", "assumed_t4", "cpu_rate"
    run: str | None
    source: dict[str, str]  # the sentence shown next to the figure, ru and en


def economical_factor(s: Shape, level: str) -> float:
    """Extra compute of recomputation, as a multiple of the normal step's compute.

    trainer/economical.py recomputes, per block and token: selective, the MLP's
    up-projection (4·d² weights; the down-projection's output is never needed again) and
    the norms: 2·4·d² FLOPs; full, also the attention half (qkv 3·d², output projection
    d², the kernel's 4·n·d): 2·8·d² + 4·n·d. The chunked loss does no extra product.
    Not measured here (the economical mode's own benchmark times it)."""
    if level == "off":
        return 1.0
    L, d, n = s.layers, s.width, s.context
    base = 6 * param_count(L, d, n, s.vocab) + 12 * L * n * d
    extra = 2 * 4 * d * d * L if level == "selective" else (2 * 8 * d * d + 4 * n * d) * L
    return (base + extra) / base


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


def nearest_measured(
    s: Shape, gpu: str, level: str, measured: Iterable[dict[str, Any]] | None, key: str = "tokens_per_s"
) -> tuple[dict[str, Any], float] | None:
    """The measured run on `gpu` in the same economical level closest in size to `s`:
    distance = |ln(compute ratio)| + ½·|ln(tokens per card-step ratio)|."""
    best: tuple[dict[str, Any], float] | None = None
    facts = GPUS.get(gpu)
    if facts is None:
        return None
    for m in measured or ():
        try:
            if m.get("gpu") != gpu or economical_level(m.get("economical", False)) != level:
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
        if best is None or dist < best[1]:
            best = (m, dist)
    return best


def _shape_text(s: Shape) -> str:
    return f"{s.layers}×{s.width}, n {s.context}"


def estimate_speed(
    s: Shape,
    gpu: str,
    *,
    economical: bool | str = False,
    measured: Iterable[dict[str, Any]] | None = None,
    local_name: str | None = None,
) -> Speed:
    facts = GPUS[gpu]
    level = economical_level(economical)
    cost = _cost(s, facts, level)
    near = nearest_measured(s, gpu, level, measured)
    if near is not None:
        m, dist = near
        ms = measured_shape(m)
        tps = float(m["tokens_per_s"]) * _cost(ms, facts, level) / cost
        run = str(m.get("run", "?"))
        if dist < 1e-9 and ms == Shape(s.layers, s.width, ms.heads, s.context, s.vocab, s.batch):
            return Speed(tps, "measured", run, {"ru": f"замер в прогоне {run}", "en": f"measured in run {run}"})
        return Speed(tps, "scaled_measured", run, {
            "ru": f"пересчёт замера прогона {run} ({_shape_text(ms)}) по вычислениям на токен",
            "en": f"scaled from the measurement of run {run} ({_shape_text(ms)}) by compute per token",
        })
    if facts.kind == "cpu":
        tps = cpu_flops() / cost
        return Speed(tps, "cpu_rate", None, {
            "ru": "оценка по скорости процессора, эталонного замера нет",
            "en": "an estimate from the CPU's arithmetic rate, there is no reference measurement",
        })
    ref_facts = facts
    kind = "reference" if facts.measured else "spec_estimate"
    if gpu == "local":
        known = known_card(local_name) if local_name else None
        if known is not None:
            ref_facts, kind = known, ("reference" if known.measured else "spec_estimate")
        else:
            kind = "assumed_t4"
    # Economical level scales from the reference (measured in the normal mode).
    ref_cost = _cost(DEFAULT_SHAPE, facts, "off")
    assert ref_facts.tokens_per_s is not None
    tps = ref_facts.tokens_per_s * ref_cost / cost
    if kind == "reference":
        short = ref_facts.short or ref_facts.label
        src = {"ru": f"оценка по эталону {short['ru']}", "en": f"estimate from the {short['en']} reference"}
        if ref_facts is not facts:  # a local card recognised by name
            src = {k: f"{local_name}: {v}" for k, v in src.items()}
    elif kind == "spec_estimate":
        src = dict(ref_facts.basis)
        if ref_facts is not facts:
            src = {k: f"{local_name} ≈ {ref_facts.label[k]}: {v}" for k, v in src.items()}
    else:
        name = local_name or {"ru": "карта не найдена", "en": "no card found"}
        name_ru = name if isinstance(name, str) else name["ru"]
        name_en = name if isinstance(name, str) else name["en"]
        src = {
            "ru": f"{name_ru}: скорость неизвестна, принята как у одной T4 — короткий прогон даст замер",
            "en": f"{name_en}: speed unknown, assumed as one T4 — a short run will measure it",
        }
    return Speed(tps, kind, None, src)
