"""The «Экономный режим» (economical mode) choices — its two parts, «Пересчёт активаций»
(activation recompute: run.json training.economical, its levels) and «Облегчённое
состояние» (the lean state: training.lean_state) — what each option says and costs, and how
run.json writes them (trainer.config.run_config's words). The words are docs/ARCHITECTURE.md's
«One name for saving memory».

The form's field table (app/form/fields.py) uses these for its two fields; the sizing's advice
names a level through `economical_step_up`.
"""

from __future__ import annotations

from typing import Any

import trainer.config.run_config as contract

from ..base.i18n import current_language

# The activation recompute levels (trainer/model/economical.py; trainer.config.run_config accepts false, true,
# "off", "selective" and "full"). One level cannot serve both a card with memory to spare
# and a small home card, so the form offers all three and says what each costs.
ECONOMICAL_LEVELS: tuple[str, ...] = contract.ECONOMICAL_LEVELS
ECONOMICAL_OPTIONS: dict[str, dict[str, str]] = {
    "off": {"ru": "Выкл", "en": "Off"},
    "selective": {"ru": "Выборочный", "en": "Selective"},
    "full": {"ru": "Полный", "en": "Full"},
}
# The figures are trainer.model.economical.ABOUT's and docs/PERF.md's (issue 8): memory and step
# time measured on the CPU at the issue's configuration; arithmetic and kernel launches
# counted (bench.opcount) at the lab's default model, not timed.
ECONOMICAL_OPTION_TOOLTIPS: dict[str, dict[str, str]] = {
    "off": {
        "ru": "все промежуточные результаты хранятся: больше всего памяти, обычная скорость.",
        "en": "every intermediate result is kept: the most memory, the normal speed.",
    },
    "selective": {
        "ru": "MLP и нормировки пересчитываются, внимание хранится: пик памяти 0,39× от "
        "обычного при обычном времени шага (на процессоре); на модели по умолчанию +7,9 % "
        "арифметики и +25 % запусков ядер за шаг.",
        "en": "the MLP and the norms are recomputed, attention is kept: 0.39× the normal peak "
        "memory at the normal step time (on the CPU); at the default model +7.9 % arithmetic "
        "and +25 % kernel launches per step.",
    },
    "full": {
        "ru": "пересчитывается и внимание: пик памяти 0,22× от обычного при 1,13× времени шага "
        "(на процессоре); на модели по умолчанию +22 % арифметики и +32 % запусков ядер за шаг.",
        "en": "attention is recomputed as well: 0.22× the normal peak memory at 1.13× the step "
        "time (on the CPU); at the default model +22 % arithmetic and +32 % kernel launches "
        "per step.",
    },
}
_ECONOMICAL_NOT_MEASURED = {
    "ru": "Время шага на видеокарте для этих уровней ещё не измерено: доли арифметики и "
    "запусков ядер посчитаны, а не замерены (на быстрой карте шаг малой модели упирается "
    "как раз в запуски ядер).",
    "en": "The GPU step time of these levels is not measured yet: the arithmetic and "
    "kernel-launch shares are counted, not timed (on a fast card a small model's step is "
    "bound by the kernel launches).",
}


# The lean training state (trainer/step/lean.py; run.json training.lean_state: false, true,
# "fused" or "offload"). Figures: trainer.plan.state_bytes's model at the lab's full model (1.67 B
# weights) and issue 13's measurements; tooltips kept to ≤ 60 characters a line, ≤ 12 lines.
LEAN_STATES: tuple[str, ...] = contract.LEAN_MODES
LEAN_STATE_OPTIONS: dict[str, dict[str, str]] = {
    "off": {"ru": "Обычное", "en": "Normal"},
    "on": {"ru": "8 бит", "en": "8-bit"},
    "fused": {"ru": "8 бит, без градиентов", "en": "8-bit, no gradients"},
    "offload": {"ru": "8 бит в памяти ПК", "en": "8-bit in host memory"},
    "one_pass": {"ru": "малые моменты, один проход", "en": "small moments, one pass"},
}
LEAN_STATE_OPTION_TOOLTIPS: dict[str, dict[str, str]] = {
    "off": {
        "ru": "Веса, градиенты и моменты AdamW в fp32:\n16 байт на вес (1,67 млрд весов — 25 ГБ).\n"
        "Обычная скорость.",
        "en": "fp32 weights, gradients and AdamW moments:\n16 bytes a weight (1.67 B weights: 25 GB).\n"
        "The normal speed.",
    },
    "on": {
        "ru": "Моменты в 8 битах (bitsandbytes), веса и\nградиенты в bf16 без fp32-копии:\n"
        "≈ 6 байт на вес (1,67 млрд — 9,4 ГБ).\nОбрезка градиента точная.\n"
        "На видеокарте почти обычная скорость;\nна процессоре шаг заметно медленнее.",
        "en": "8-bit moments (bitsandbytes), bf16 weights\nand gradients without an fp32 copy:\n"
        "≈ 6 bytes a weight (1.67 B: 9.4 GB).\nClipping is exact.\n"
        "Nearly the normal speed on a GPU;\nmuch slower steps on the CPU.",
    },
    "fused": {
        "ru": "Как «8 бит», но градиенты не хранятся:\nкаждый вес обновляется в обратном проходе.\n"
        "≈ 4 байта на вес (1,67 млрд — 6,3 ГБ).\nДля точной обрезки — два обратных прохода:\n"
        "шаг ≈ в 1,7 раза дольше (оценка).",
        "en": "As “8-bit”, no gradients kept: each weight\nis updated inside the backward pass.\n"
        "≈ 4 bytes a weight (1.67 B: 6.3 GB).\nFor an exact clip, two backward passes:\n"
        "a step ≈ 1.7× as long (an estimate).",
    },
    "offload": {
        "ru": "Как «без градиентов», но моменты ждут\nв памяти ПК: на карте ≈ 2 байта на вес\n"
        "(1,67 млрд — 3,1 ГБ). Цена — ещё и\nкопирование по PCIe каждый шаг:\n"
        "≈ 0,27 с на шаг при 1,67 млрд весов.",
        "en": "As “no gradients”, the moments wait in\nhost memory: ≈ 2 bytes a weight on the card\n"
        "(1.67 B: 3.1 GB). The price adds PCIe\ncopies every step,\n"
        "≈ 0.27 s a step at 1.67 B weights.",
    },
    "one_pass": {
        "ru": "Градиенты не хранятся, один обратный\nпроход: обрезка по норме, оцениваемой\n"
        "по ходу прохода (точной к его концу).\nПервый момент в 8 битах, второй —\n"
        "средние по строкам и столбцам:\n≈ 3 байта на вес (1,67 млрд — 5,2 ГБ).",
        "en": "No gradients kept, one backward pass:\nclipped by the norm estimated as the\n"
        "pass goes (exact at its end). First\nmoment in 8 bits, the second as row\n"
        "and column means:\n≈ 3 bytes a weight (1.67 B: 5.2 GB).",
    },
}


def lean_state_level(value: Any) -> str | None:
    """run.json's `training.lean_state` as the form's name, read by the contract's one
    reader (false → "off", true → "on", "fused", "offload"); None where the trainer would refuse it."""
    try:
        return contract.lean_mode(value)
    except contract.ConfigError:
        return None


def lean_state_run_value(name: str) -> bool | str:
    """What run.json gets: false / true / "fused" / "offload" / "one_pass" (trainer.config.run_config.lean_mode's words)."""
    return {"off": False, "on": True}.get(name, name)


def economical_level(value: Any) -> str | None:
    """run.json's `training.economical` as a level, read by the contract's one reader
    (false → "off", true → "selective", what a checkbox meant before the levels); None
    where the trainer would refuse the value."""
    try:
        return contract.economical_level(value)
    except contract.ConfigError:
        return None


def economical_run_value(level: str) -> bool | str:
    """What run.json gets: false for off, so readers that know only true/false still work."""
    return False if level == "off" else level


def economical_step_up(level: str, lang: str | None = None, to: str | None = None) -> str:
    """The advice phrase that saves memory by recomputing activations, for a run now at
    `level` ("" at the full level: recompute has nothing more to give). `to` names the level
    that would help when the caller knows it (off → full skips the selective level)."""
    lang = lang or current_language()
    to = to or {"off": "selective", "selective": "full"}.get(level)
    if to is None or ECONOMICAL_LEVELS.index(to) <= ECONOMICAL_LEVELS.index(level):
        return ""
    if level == "off" and to == "selective":
        return "включите пересчёт активаций" if lang == "ru" else "turn on activation recompute"
    if level == "off":
        return ("включите пересчёт активаций, уровень «Полный»" if lang == "ru"
                else "turn on activation recompute at the “Full” level")
    return ("выберите полный пересчёт активаций" if lang == "ru"
            else "choose the full activation recompute")
