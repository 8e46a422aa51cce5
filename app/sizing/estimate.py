"""The «Как выбрать размер» panel's numbers: one dict, the same the `ternit estimate --json`
prints. Everything here is arithmetic on the form's fields (no torch, no Qt)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..fields import economical_step_up
from ..i18n import current_language
from ..numbers import count_text, duration_text, int_text, mb_text, plural_ru
from .formulas import Shape, flops_per_token, param_count
from .formulas import tokens_per_step as micro_step_tokens
from .gpus import GPUS, GpuFacts, local_card, ram_mb
from .memory import ECONOMICAL, MiB, cublas_workspace_bytes, economical_level, estimate_memory
from .speed import Speed, estimate_speed, measured_shape, nearest_measured

TOKENS_PER_WEIGHT = 20  # the guide: about 20 tokens of data per weight
MAX_BATCH_SEARCH = 65_536


def _t(lang: str, ru: str, en: str) -> str:
    return en if lang == "en" else ru


def _precision(requested: str, facts: GpuFacts, cc: tuple[int, int] | None) -> str:
    if requested != "auto":
        if requested not in ("fp32", "bf16", "fp16"):
            raise ValueError(f"precision must be auto, fp32, bf16 or fp16, not {requested!r}")
        return requested
    if facts.kind == "cpu":
        return "fp32"
    if cc is not None:  # the local card: as trainer.optim.pick_precision decides
        return "bf16" if cc[0] >= 8 else "fp16"
    return facts.precision


def _card_memory(gpu: str, facts: GpuFacts, card_memory_mb: Any) -> tuple[float | None, str | None, Any]:
    """(MiB per card, the local card's name, its compute capability)."""
    value = card_memory_mb() if callable(card_memory_mb) else card_memory_mb
    if value is not None:
        return float(value), None, None
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


def _calibration(s: Shape, gpu: str, level: str, precision: str, cards: int,
                 measured: Iterable[dict[str, Any]] | None, workspace: int = 0) -> tuple[float, str | None]:
    """measured mem_peak_mb / this model's prediction for the nearest measured run."""
    near = nearest_measured(s, gpu, level, measured, key="mem_peak_mb")
    if near is None:
        return 1.0, None
    m, _ = near
    pred = estimate_memory(measured_shape(m), precision, cards, level, workspace)
    # The trainer measures every step on a GPU, only the first step on the CPU.
    pred_mb = (pred.first_step_peak if GPUS[gpu].kind == "cpu" else pred.peak) / MiB
    if pred_mb <= 0:
        return 1.0, None
    return float(m["mem_peak_mb"]) / pred_mb, str(m.get("run", "?"))


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
    precision: str = "auto",
    measured: Iterable[dict[str, Any]] | None = None,
    lang: str | None = None,
    card_memory_mb: float | Callable[[], float | None] | None = None,
    local_name: str | None = None,
    start_step: int = 0,
    eval_every: int = 200,
    eval_segments: int = 96,
    tokens_per_step: int = 0,
) -> dict[str, Any]:
    """Weights, compute, speed, time, memory and data for a run, with advice sentences.

    `steps_to` is the step the run ends at; `start_step` the step it starts from (a
    continued run), so the time is for steps_to − start_step steps and
    `limit_stops_at_step` is a step number on the same scale. `card_memory_mb` (MiB, or a
    callable giving it) overrides the card's memory: the window passes the local card's
    total from NVML. Raises ValueError for a shape the trainer would refuse."""
    lang = lang or current_language()
    if gpu not in GPUS:
        raise ValueError(f"unknown gpu {gpu!r} (known: {', '.join(GPUS)})")
    s = Shape(layers, width, heads, context, vocab, batch)
    s.check(lang)
    if steps_to < 1 or start_step < 0 or steps_to <= start_step:
        raise ValueError(_t(lang, f"«Шагов до» должно быть больше начального шага ({start_step}), а не {steps_to}",
                            f"steps_to must be above the start step ({start_step}), not {steps_to}"))
    measured = list(measured or [])
    facts = GPUS[gpu]
    level = economical_level(economical)
    card_mb, found_name, cc = _card_memory(gpu, facts, card_memory_mb)
    local_name = local_name or found_name
    prec = _precision(precision, facts, cc)
    cards = facts.cards

    params = param_count(layers, width, context, vocab)
    fpt = flops_per_token(layers, width, context, vocab)
    # run.json's training.tokens_per_step (0: one micro-step): the memory stays that of
    # one micro-batch, the time per step grows with the micro-steps.
    tps_step = tokens_per_step or micro_step_tokens(batch, cards, context)

    speed: Speed = estimate_speed(s, gpu, economical=level, measured=measured, local_name=local_name)
    tps = speed.tokens_per_s
    steps = steps_to - start_step
    train_s = steps * tps_step / tps
    # Evaluation: eval_segments sequences of n tokens, forward only (≈ ⅓ of a training
    # token's cost), every eval_every steps and at the end.
    evals = steps // eval_every + (1 if steps_to % eval_every else 0)
    eval_s = evals * eval_segments * context / 3 / tps
    seconds = train_s + eval_s
    per_step_s = seconds / steps
    limit_step = None
    if limit_min is not None:
        if limit_min <= 0:
            raise ValueError(_t(lang, f"лимит должен быть больше 0 минут, а не {limit_min:g}",
                                f"limit_min must be above 0, not {limit_min:g}"))
        if limit_min * 60 < seconds:
            limit_step = start_step + int(limit_min * 60 / per_step_s)

    ws = _workspace(facts, cc)
    mem = estimate_memory(s, prec, cards, level, ws)
    factor, calib_run = _calibration(s, gpu, level, prec, cards, measured, ws)
    alloc_mb = mem.peak / MiB * factor
    framework_mb = _framework_mb(facts, alloc_mb)
    total_mb = alloc_mb + framework_mb
    memory_mb = {
        "weights": mem.weights / MiB,
        "gradients": mem.gradients / MiB,
        "optimizer": mem.optimizer / MiB,
        "ddp_buckets": mem.ddp_buckets / MiB,
        "autocast_copies": mem.autocast_copies / MiB,
        "activations": mem.activations / MiB,
        "loss_and_recompute": max(mem.loss_backward, mem.loss_forward, mem.recompute) / MiB,
        "cublas_workspace": mem.cublas_workspace / MiB,
        "allocated_peak": alloc_mb,
        "framework": framework_mb,
        "total": total_mb,
    }
    fits = None if card_mb is None else total_mb <= card_mb
    max_batch = None if card_mb is None else _max_batch(s, prec, cards, level, facts, factor, card_mb, ws)
    # The lowest economical level above the chosen one at which this batch would fit, so
    # the advice names a level that helps (none at "full": the mode has no more to give).
    econ_fix = None
    if fits is False:
        for higher in ECONOMICAL[ECONOMICAL.index(level) + 1:]:
            e = estimate_memory(s, prec, cards, higher, ws).peak / MiB * factor
            if e + _framework_mb(facts, e) <= card_mb:  # type: ignore[operator]
                econ_fix = higher
                break

    out: dict[str, Any] = {
        "gpu": gpu,
        "gpu_label": facts.label[lang],
        "cards": cards,
        "precision": prec,
        "economical": level,
        "params": params,
        "flops_per_token": fpt,
        "tokens_per_step": tps_step,
        "tokens_per_s": tps,
        "tokens_per_s_source": speed.source[lang],
        "tokens_per_s_basis": {"kind": speed.kind, "run": speed.run, "is_measurement": speed.kind == "measured"},
        # For "fitted_measured": the runs fitted (nearest first), the fixed part of a step
        # and its share of this shape's step. None otherwise.
        "tokens_per_s_fit": None if speed.fit is None else {
            "runs": list(speed.fit.runs),
            "fixed_ms_per_step": speed.fit.fixed_s * 1000,
            "fixed_share": speed.fit.fixed_s * tps / tps_step,
        },
        "steps": steps,
        "seconds_to_steps": seconds,
        "eval_seconds": eval_s,
        "limit_stops_at_step": limit_step,
        "memory_mb": memory_mb,
        "memory_peak_phase": mem.peak_phase,
        "memory_calibration": {"factor": factor, "run": calib_run},
        "card_memory_mb": card_mb,
        "fits": fits,
        "max_batch": max_batch,
        "economical_fits_at": econ_fix,
        "tokens_wanted": TOKENS_PER_WEIGHT * params,
        "tokens_read": steps * tps_step,
        "data_tokens": data_tokens,
        "tokens_per_weight": None,
        "passes": None,
    }
    if data_tokens:
        out["tokens_per_weight"] = data_tokens / params
        out["passes"] = steps * tps_step / data_tokens
    advice = _advice(out, s, facts, lang, limit_min, econ_fix, local_name)
    out["advice"] = [text for _, text in advice]
    # What each sentence is about (speed, time, limit, memory, data, passes), so a view
    # that shows some of them as rows of its own can leave those out of the advice.
    out["advice_kinds"] = [kind for kind, _ in advice]
    return out


def _max_batch(s: Shape, prec: str, cards: int, level: str, facts: GpuFacts, factor: float, card_mb: float,
               workspace: int = 0) -> int:
    """The largest batch per card whose total fits (0: not even batch 1). Memory grows
    with the batch, so a doubling search then a bisection finds it exactly."""

    def fits(b: int) -> bool:
        sb = Shape(s.layers, s.width, s.heads, s.context, s.vocab, b)
        alloc = estimate_memory(sb, prec, cards, level, workspace).peak / MiB * factor
        return alloc + _framework_mb(facts, alloc) <= card_mb

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


def _advice(e: dict[str, Any], s: Shape, facts: GpuFacts, lang: str, limit_min: float | None,
            econ_fix: str | None, local_name: str | None) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    card = facts.on[lang] if facts.name != "local" or not local_name else _t(lang, "на ", "on ") + local_name
    # Speed and time.
    kind = e["tokens_per_s_basis"]["kind"]
    speed = int_text(int(round(e["tokens_per_s"], -2 if e["tokens_per_s"] >= 1000 else 0)), lang)
    note = "" if kind == "measured" else _t(lang, " — оценка, не замер", " — an estimate, not a measurement")
    out.append(("speed", _t(lang,
        f"Скорость ≈ {speed} токенов/с {card} ({e['tokens_per_s_source']}){note}.",
        f"Speed ≈ {speed} tokens/s {card} ({e['tokens_per_s_source']}){note}.")))
    out.append(("time", _t(lang,
        f"{int_text(e['steps'], lang)} {plural_ru(e['steps'], 'шаг', 'шага', 'шагов')} по {int_text(e['tokens_per_step'], lang)} "
        f"{plural_ru(e['tokens_per_step'], 'токену', 'токена', 'токенов')} займут ≈ {duration_text(e['seconds_to_steps'], lang)}.",
        f"{int_text(e['steps'], lang)} steps of {int_text(e['tokens_per_step'], lang)} tokens take ≈ {duration_text(e['seconds_to_steps'], lang)}.")))
    if e["limit_stops_at_step"] is not None and limit_min is not None:
        out.append(("limit", _t(lang,
            f"Лимит {limit_min:g} мин остановит обучение около шага {int_text(e['limit_stops_at_step'], lang)}: "
            "продолжите с чекпоинта или уменьшите «Шагов до».",
            f"The {limit_min:g}-min limit stops training near step {int_text(e['limit_stops_at_step'], lang)}: "
            "continue from the checkpoint or lower «Steps to».")))
    # Memory.
    mem, have = e["memory_mb"], e["card_memory_mb"]
    calib = e["memory_calibration"]
    cal = "" if calib["run"] is None else _t(lang,
        f" (поправлено по замеру прогона {calib['run']}, ×{calib['factor']:.2f})".replace(".", ","),
        f" (corrected by run {calib['run']}'s measurement, ×{calib['factor']:.2f})")
    parts = _t(lang,
        f"выделит программа {mb_text(mem['allocated_peak'], lang)}{cal}, ещё {mb_text(mem['framework'], lang)} — сам фреймворк",
        f"the program allocates {mb_text(mem['allocated_peak'], lang)}{cal}, the framework itself {mb_text(mem['framework'], lang)} more")
    if have is None:
        out.append(("memory", _t(lang,
            f"Память: ≈ {mb_text(mem['total'], lang)} ({parts}); объём карты неизвестен — проверьте, что она видна системе.",
            f"Memory: ≈ {mb_text(mem['total'], lang)} ({parts}); the card's memory is unknown — check that the system sees it.")))
    elif e["fits"]:
        out.append(("memory", _t(lang,
            f"Память: ≈ {mb_text(mem['total'], lang)} из {mb_text(have, lang)} ({parts}) — помещается; наибольший батч на карту ≈ {e['max_batch']}.",
            f"Memory: ≈ {mb_text(mem['total'], lang)} of {mb_text(have, lang)} ({parts}) — fits; the largest batch per card ≈ {e['max_batch']}.")))
    else:
        fix = (_t(lang, f"уменьшите батч до {e['max_batch']}", f"lower the batch to {e['max_batch']}")
               if e["max_batch"] else _t(lang, "уменьшите модель или контекст", "shrink the model or the context"))
        more = economical_step_up(e["economical"], lang, to=econ_fix) if econ_fix else ""
        if more:
            fix += _t(lang, f" или {more}", f" or {more}")
        out.append(("memory", _t(lang,
            f"Память: ≈ {mb_text(mem['total'], lang)} при {mb_text(have, lang)} на карте ({parts}) — не поместится: {fix}.",
            f"Memory: ≈ {mb_text(mem['total'], lang)} with {mb_text(have, lang)} on the card ({parts}) — does not fit: {fix}.")))
    # Data.
    params_t, want_t = count_text(e["params"], lang), count_text(e["tokens_wanted"], lang, 2)
    data = e["data_tokens"]
    if not data:
        out.append(("data", _t(lang,
            f"{params_t} весов хотят около {want_t} токенов данных (~20 на вес).",
            f"{params_t} weights want about {want_t} tokens of data (~20 per weight).")))
    else:
        have_t = count_text(data, lang)
        if e["tokens_per_weight"] < TOKENS_PER_WEIGHT * 0.75:
            out.append(("data", _t(lang,
                f"{params_t} весов хотят около {want_t} токенов, у вас {have_t} — модель поменьше или больше данных.",
                f"{params_t} weights want about {want_t} tokens: you have {have_t} — a smaller model or more data.")))
        else:
            out.append(("data", _t(lang,
                f"{params_t} весов хотят около {want_t} токенов, у вас {have_t} ({e['tokens_per_weight']:.0f} на вес) — данных хватает.",
                f"{params_t} weights want about {want_t} tokens: you have {have_t} ({e['tokens_per_weight']:.0f} per weight) — enough data.")))
        passes = e["passes"]
        read_t = count_text(e["tokens_read"], lang)
        if passes > 1.0:
            # 1.5 passes; 45 260 passes (a tiny dataset), not "45259.7"
            p = count_text(passes, lang) if passes >= 1000 else (
                f"{passes:.1f}".replace(".", ",") if lang == "ru" else f"{passes:.1f}")
            out.append(("passes", _t(lang,
                f"Прогон прочтёт {read_t} токенов — это {p} {'проходов' if passes >= 1000 else 'прохода'} по данным; "
                "после нескольких проходов валидация перестаёт падать.",
                f"The run reads {read_t} tokens — {p} passes over the data; after a few passes validation stops improving.")))
        else:
            out.append(("passes", _t(lang,
                f"Прогон прочтёт {read_t} токенов — {passes:.0%} данных.".replace("%", " %"),
                f"The run reads {read_t} tokens — {passes:.0%} of the data.")))
    return out
