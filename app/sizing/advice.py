"""The advice sentences of an Estimate, in the interface language: speed (and which
reference it comes from), time, the limit, memory (and the combination of «Экономный режим»
that fits when the chosen one does not), data and passes."""

from __future__ import annotations

from ..base.memory_saving import LEAN_STATE_OPTIONS, economical_step_up
from ..base.numbers import (
    count_text,
    counted,
    decimal_text,
    duration_text,
    format_value,
    int_text,
    mb_text,
    percent_text,
    plural_ru,
)
from .combos import SHARDED, Combination
from .gpus import GpuFacts
from .result import Advice, Estimate

TOKENS_PER_WEIGHT = 20


def _t(lang: str, ru: str, en: str) -> str:
    return en if lang == "en" else ru


def advice(e: Estimate, facts: GpuFacts, lang: str, limit_min: float | None, local_name: str | None) -> list[Advice]:
    return [*_speed_and_time(e, facts, lang, limit_min, local_name), _memory(e, lang), *_data(e, lang)]


# The advice sentences a view that shows speed, time and the limit as rows of its own leaves
# out (the form's panel, `ternit estimate`'s table): said once.
ROW_KINDS = frozenset({"speed", "time", "limit"})


def time_parts(e: Estimate, lang: str) -> str:
    """What the time is made of: the training steps and the held-out evaluations (each
    reads eval_segments × n tokens forward); the start, checkpoint saves and text samples
    are not in it."""
    train = duration_text(e.seconds_to_steps - e.eval_seconds, lang)
    if not e.evaluations:
        return _t(lang, f"обучение ≈ {train}", f"training ≈ {train}")
    evals = duration_text(e.eval_seconds, lang)
    n = int_text(e.evaluations, lang)
    return _t(lang,
              f"обучение ≈ {train} + {n} {plural_ru(e.evaluations, 'проверка', 'проверки', 'проверок')} на "
              f"отложенной выборке ≈ {evals}; запуск и сохранение чекпоинтов сверх того",
              f"training ≈ {train} + {n} held-out evaluation{'s' if e.evaluations != 1 else ''} ≈ {evals}; "
              "start-up and checkpoint saves on top")


TOKENS = (("токен", "токена", "токенов"), ("token", "tokens"))


def _speed_and_time(e: Estimate, facts: GpuFacts, lang: str, limit_min: float | None,
                    local_name: str | None) -> list[Advice]:
    card = facts.on[lang] if facts.name != "local" or not local_name else _t(lang, "на ", "on ") + local_name
    speed = int_text(int(round(e.tokens_per_s, -2 if e.tokens_per_s >= 1000 else 0)), lang)
    note = "" if e.is_measurement else _t(lang, " — оценка, не замер", " — an estimate, not a measurement")
    costs = ""
    if e.tokens_per_s < 0.995 * e.speed.tokens_per_s:  # offload's copies, sharding, the CPU's 8-bit update
        costs = _t(lang, ", с ценой копирований и обновления выбранного состояния",
                  ", with the copies and updates of the chosen state")
    out = [Advice("speed", _t(lang,
        f"Скорость ≈ {speed} токенов/с {card} ({e.tokens_per_s_source}{costs}){note}.",
        f"Speed ≈ {speed} tokens/s {card} ({e.tokens_per_s_source}{costs}){note}."))]
    steps, per = e.steps, e.tokens_per_step
    out.append(Advice("time", _t(lang,
        f"{int_text(steps, lang)} {plural_ru(steps, 'шаг', 'шага', 'шагов')} по {int_text(per, lang)} "
        f"{plural_ru(per, 'токену', 'токена', 'токенов')} займут ≈ {duration_text(e.seconds_to_steps, lang)} "
        f"({time_parts(e, lang)}){note}.",
        f"{int_text(steps, lang)} steps of {int_text(per, lang)} tokens take ≈ "
        f"{duration_text(e.seconds_to_steps, lang)} ({time_parts(e, lang)}){note}.")))
    if e.limit_stops_at_step is not None and limit_min is not None:
        at = int_text(e.limit_stops_at_step, lang)
        out.append(Advice("limit", _t(lang,
            f"Лимит {format_value(limit_min, lang)} мин остановит обучение около шага {at}: продолжите с чекпоинта "
            "или уменьшите «Шагов до».",
            f"The {format_value(limit_min, lang)}-min limit stops training near step {at}: continue from the "
            "checkpoint or lower “Steps to”.")))
    return out


def fix_phrase(current: Combination, fix: Combination, lang: str) -> str:
    """What to choose in «Экономный режим» so the batch fits: the next level alone in the
    words the form has always used, else the whole combination."""
    if (fix.lean_state, fix.sharded) == (current.lean_state, current.sharded):
        return economical_step_up(current.level, lang, to=fix.level)
    if fix.level == current.level:
        lean = LEAN_STATE_OPTIONS[fix.lean_state][lang]
        shard = SHARDED[lang] if fix.sharded else ""
        return _t(lang, f"выберите облегчённое состояние «{lean}»{shard}", f"choose the lean state “{lean}”{shard}")
    return _t(lang, "выберите ", "choose ") + fix.text(lang)


def _memory(e: Estimate, lang: str) -> Advice:
    mem, have = e.memory, e.card_memory_mb
    cal = "" if e.calibration_run is None else _t(lang,
        f" (поправлено по замеру прогона {e.calibration_run}, ×{decimal_text(e.calibration_factor, 2, 'ru')})",
        f" (corrected by run {e.calibration_run}'s measurement, ×{decimal_text(e.calibration_factor, 2, 'en')})")
    parts = _t(lang,
        f"выделит программа {mb_text(mem.allocated_peak, lang)}{cal}, ещё {mb_text(mem.framework, lang)} — сам фреймворк",
        f"the program allocates {mb_text(mem.allocated_peak, lang)}{cal}, the framework itself "
        f"{mb_text(mem.framework, lang)} more")
    total = mb_text(mem.total, lang)
    chosen = ""
    if e.auto:
        chosen = _t(lang, f"; подобрано самое быстрое, что помещается: {e.combination.text(lang)}",
                    f"; the fastest that fits was picked: {e.combination.text(lang)}")
    if have is None:
        return Advice("memory", _t(lang,
            f"Память: ≈ {total} ({parts}); объём карты неизвестен — проверьте, что она видна системе.",
            f"Memory: ≈ {total} ({parts}); the card's memory is unknown — check that the system sees it."))
    if e.fits:
        return Advice("memory", _t(lang,
            f"Память: ≈ {total} из {mb_text(have, lang)} ({parts}) — помещается{chosen}; наибольший батч на карту ≈ {e.max_batch}.",
            f"Memory: ≈ {total} of {mb_text(have, lang)} ({parts}) — fits{chosen}; the largest batch per card ≈ {e.max_batch}."))
    fix = (_t(lang, f"уменьшите батч до {e.max_batch}", f"lower the batch to {e.max_batch}")
           if e.max_batch else _t(lang, "уменьшите модель или контекст", "shrink the model or the context"))
    more = fix_phrase(e.combination, e.fits_with, lang) if e.fits_with else ""
    if more:
        fix += _t(lang, f" или {more}", f" or {more}")
    return Advice("memory", _t(lang,
        f"Память: ≈ {total} при {mb_text(have, lang)} на карте ({parts}) — не поместится: {fix}.",
        f"Memory: ≈ {total} with {mb_text(have, lang)} on the card ({parts}) — does not fit: {fix}."))


def _data(e: Estimate, lang: str) -> list[Advice]:
    params_t = counted(e.params, ("вес", "веса", "весов"), ("weight", "weights"), lang, sig=3)
    want_t = counted(e.tokens_wanted, *TOKENS, lang, sig=2)
    data = e.data_tokens
    if not data or e.tokens_per_weight is None or e.passes is None:
        return [Advice("data", _t(lang,
            f"{params_t} хотят около {want_t} данных (~20 на вес).",
            f"{params_t} want about {want_t} of data (~20 per weight)."))]
    have_t = count_text(data, lang)
    per_weight = decimal_text(e.tokens_per_weight, 0, lang)
    if e.tokens_per_weight < TOKENS_PER_WEIGHT * 0.75:
        out = [Advice("data", _t(lang,
            f"{params_t} хотят около {want_t}, у вас {have_t} — модель поменьше или больше данных.",
            f"{params_t} want about {want_t}: you have {have_t} — a smaller model or more data."))]
    else:
        out = [Advice("data", _t(lang,
            f"{params_t} хотят около {want_t}, у вас {have_t} ({per_weight} на вес) — данных хватает.",
            f"{params_t} want about {want_t}: you have {have_t} ({per_weight} per weight) — enough data."))]
    passes, read_t = e.passes, counted(e.tokens_read, *TOKENS, lang, sig=3)
    if passes > 1.0:
        # 1.5 passes; 45 260 passes (a tiny dataset), not "45259.7"
        p = count_text(passes, lang) if passes >= 1000 else (
            decimal_text(passes, 1, lang))
        out.append(Advice("passes", _t(lang,
            f"Прогон прочтёт {read_t} — это {p} {'проходов' if passes >= 1000 else 'прохода'} по данным; "
            "после нескольких проходов валидация перестаёт падать.",
            f"The run reads {read_t} — {p} passes over the data; after a few passes validation stops improving.")))
    else:
        out.append(Advice("passes", _t(lang,
            f"Прогон прочтёт {read_t} — {percent_text(passes, 'ru')} данных.",
            f"The run reads {read_t} — {percent_text(passes, 'en')} of the data.")))
    return out
