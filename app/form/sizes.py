"""The «Как выбрать размер» panel's rows and Start's memory check, from app.sizing's
Estimate (the form's own rows: RunForm.size_rows puts them in order)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..base.i18n import current_language, t
from ..base.numbers import (
    bytes_decimal_text,
    count_text,
    counted,
    duration_text,
    sig_text,
)
from ..base.plan_texts import plan_rows
from ..sizing.advice import fix_phrase, time_parts
from ..sizing.result import Estimate
from .fields import format_value


@dataclass(frozen=True)
class SizeRow:
    """One line of the «Как выбрать размер» panel."""

    key: str
    label: str
    value: str
    note: str = ""
    level: str = "ok"  # ok, warning, error


def mb(x: Any) -> str:
    return format_value(int(round(float(x)))) if isinstance(x, (int, float)) else "?"


TOKENS = (("токен", "токена", "токенов"), ("token", "tokens"))


def data_row(est: Estimate | None, params: int, data: int | None, what: str = "") -> SizeRow:
    """«Данные»: tokens per weight against the guide's ~20; `what` says what was counted."""
    want = 20 * params
    if not data:
        return SizeRow("data", t("Данные", "Data"), "—",
                       t(f"нужно ≈{counted(want, *TOKENS, 'ru', sig=2)} (~20 на вес)",
                         f"wants ≈{counted(want, *TOKENS, 'en', sig=2)} (~20 per weight)"), "warning")
    per_weight = (est.tokens_per_weight if est else None) or data / params
    level = "ok" if per_weight >= 20 else "warning"
    # A decimal takes the genitive singular whatever its digits: «27,7 токена на вес».
    return SizeRow("data", t("Данные", "Data"), counted(data, *TOKENS, sig=3),
                   what + t(f"{sig_text(per_weight, 3, 'ru')} токена на вес (совет: ~20, то есть "
                            f"≈{count_text(want, sig=2)})",
                            f"{sig_text(per_weight, 3, 'en')} tokens per weight (the guide: ~20, i.e. "
                            f"≈{count_text(want, sig=2)})"), level)


def time_row(est: Estimate, steps_to: int) -> SizeRow:
    """The time to «Шагов до»; an estimate, and said so, until this shape is measured."""
    source = est.tokens_per_s_source
    speed_t = t(f"{format_value(int(est.tokens_per_s))} ток/с", f"{format_value(int(est.tokens_per_s))} tok/s")
    note = ", ".join(x for x in (time_parts(est, current_language()), source, speed_t, _counted_passes(est)) if x)
    if not est.is_measurement and not any(w in source.lower() for w in ("оценк", "estimat")):
        note += t(" — оценка, не замер", " — an estimate, not a measurement")
    return SizeRow("time", t(f"Время до шага {format_value(steps_to)}", f"Time to step {format_value(steps_to)}"),
                   "≈ " + duration_text(est.seconds_to_steps), note)


def _counted_passes(est: Estimate) -> str:
    """What the speed counts beyond the normal step: recomputation's extra forward and the
    fused step's second backward pass (the plan's same figures, trainer.plan.step_cost)."""
    b = est.step_basis
    parts = []
    if b.get("recompute"):
        parts.append(t(f"пересчёт +{sig_text(100 * b['recompute'], 2, 'ru')} %",
                       f"recompute +{sig_text(100 * b['recompute'], 2, 'en')} %"))
    if b.get("second_backward"):
        parts.append(t(f"второй обратный проход +{sig_text(100 * b['second_backward'], 2, 'ru')} %",
                       f"a second backward pass +{sig_text(100 * b['second_backward'], 2, 'en')} %"))
    return t(f"учтены: {' и '.join(parts)}", f"counted: {' and '.join(parts)}") if parts else ""


def limit_row(est: Estimate, limit_min: Any) -> SizeRow:
    label = t(f"Лимит {format_value(limit_min)} мин", f"Limit {format_value(limit_min)} min")
    if est.limit_stops_at_step is None:
        return SizeRow("limit", label, t("не обрежет", "leaves the run whole"),
                       t("прогон успеет дойти до «Шагов до»", "the run reaches “Steps to” in time"))
    at = int(est.limit_stops_at_step)  # a step number on the run's own scale (a continuation's included)
    return SizeRow("limit", label, t(f"остановит на шаге ≈{format_value(at)}", f"stops it at step ≈{format_value(at)}"),
                   t("чекпоинт сохранится; продолжите одной кнопкой",
                     "a checkpoint is saved; continue with one click"), "warning")


def checkpoint_row(room: Any) -> SizeRow:
    """On Kaggle: one checkpoint's size against the session's outputs (app.kaggle.room)."""
    level = "error" if not room.fits else ("warning" if room.keep < room.wanted else "ok")
    return SizeRow("checkpoint", t("Чекпоинт на Kaggle", "Checkpoint on Kaggle"),
                   "≈ " + bytes_decimal_text(room.checkpoint_bytes), room.text(), level)


def memory_rows(est: Estimate) -> list[SizeRow]:
    """The memory per card in the chosen combination, and what it is made of; on the CPU the
    PC's memory, in words that name no card."""
    mem, have, fits = est.memory, est.card_memory_mb, est.fits
    cpu = est.gpu == "cpu"
    of = t(f" из {mb(have)} МБ", f" of {mb(have)} MB") if have else ""
    note = (t("помещается", "fits") if fits else t("не помещается", "does not fit")) if fits is not None else ""
    # What the figure rests on: the count of the trainer's own step, or the formula alone.
    basis = t("подсчитано", "counted") if est.memory_counted else t("оценка", "an estimate")
    note = f"{basis}; {note}" if note else basis
    if est.max_batch:
        note += t(f"; наибольший батч ≈{est.max_batch}", f"; largest batch ≈{est.max_batch}")
    if cpu:  # the framework's share on the CPU is no CUDA context: only the four parts
        of = t(f" из {mb(have)} МБ ОЗУ", f" of {mb(have)} MB of RAM") if have else ""
    parts = [(t("веса", "weights"), mem.weights), (t("градиенты", "gradients"), mem.gradients),
             (t("оптимизатор", "optimizer"), mem.optimizer), (t("активации", "activations"), mem.activations)]
    split = ", ".join(f"{name} {mb(x)}" for name, x in parts)
    if mem.optimizer_host:
        split += t(f"; в памяти ПК {mb(mem.optimizer_host)}", f"; in host memory {mb(mem.optimizer_host)}")
    return [
        SizeRow("memory", t("Память ПК", "PC memory") if cpu else t("Память на карту", "Memory per card"),
                t(f"≈{mb(mem.total)} МБ", f"≈{mb(mem.total)} MB") + of, note, "ok" if fits is not False else "error"),
        SizeRow("memory_parts", t("Из них, МБ", "Of which, MB"), split, est.combination.text(current_language())),
    ]


def batch_issue(est: Estimate, batch: Any, card: str) -> str:
    """Start's reason when the batch does not fit the card in the chosen combination: the
    largest batch that does, and the combination of «Экономный режим» at which this one would."""
    more = fix_phrase(est.combination, est.fits_with, current_language()) if est.fits_with else ""
    if est.max_batch:
        hint = t(f"наибольший, что поместится, — {est.max_batch}", f"the largest that fits is {est.max_batch}")
        hint += t(f", или {more} и оставьте батч", f", or {more} and keep the batch") if more else ""
    else:
        hint = t("не поместится даже батч 1: уменьшите модель", "not even batch 1 fits: shrink the model")
        hint += t(f" или {more}", f" or {more}") if more else ""
    need, have = est.memory.total, est.card_memory_mb
    return t(f"Батч {batch} не помещается в {card} (нужно ≈{mb(need)} из {mb(have)} МБ): {hint}",
             f"Batch {batch} does not fit {card} (needs ≈{mb(need)} of {mb(have)} MB): {hint}")


# The plan's choices the panel names (the micro-steps are in «Токенов за шаг», the recompute
# level and the samples are fields of the form).
PLAN_SHOWN = ("precision", "sharding", "compile", "step")


def plan_row(est: Estimate) -> SizeRow:
    """How the trainer will run these settings on the chosen machine: the plan's choices
    (trainer/plan/planner.py, the same the trainer prints at its start) and why each."""
    rows = plan_rows(est.plan, leave_out=tuple(c for c in est.plan.CHOICES if c not in PLAN_SHOWN))
    value = " · ".join(f"{label.lower()} {value}" for label, value, _ in rows)
    note = "; ".join(f"{label}: {why}" for label, _, why in rows)
    return SizeRow("plan", t("Как пойдёт обучение", "How it will run"), value, note)
