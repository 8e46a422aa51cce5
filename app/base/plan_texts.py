"""The plan (trainer/plan/planner.py) in the interface's language: its choices' names, and its
reasons and refusals (trainer/config/reasons.py: a code and its parameters). English is the
trainer's own sentence, Russian is this table, one sentence a code. The rule stays in the
contract; only its words are here (a test holds this table to the contract's codes)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainer.config.reasons import Reason, Refusal
from trainer.plan.planner import Plan

from .i18n import current_language
from .memory_saving import (
    ECONOMICAL_OPTIONS,
    LEAN_STATE_OPTIONS,
    economical_level,
    lean_state_level,
)
from .numbers import format_value, int_text, plural_ru


def _mib(value: float) -> str:
    """Whole MiB in the lab's format."""
    return int_text(round(value), "ru")


def _shown(value: Any, lang: str = "ru") -> Any:
    """A parameter as a sentence shows it: numbers in the lab's format (the language's group
    space and decimal mark), lists joined."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (list, tuple)):
        return ", ".join(str(_shown(v, lang)) for v in value)
    if isinstance(value, int):
        return int_text(value, lang)
    if isinstance(value, float):
        return format_value(value, lang)
    return value


def _en(value: Any) -> Any:
    return _shown(value, "en")


# The labels of the form's fields that the plan's sentences name, by run.json key: their one
# home (app/form/fields.py and texts.py label those fields from here), so a sentence shown in
# the form says «Облегчённое состояние», not training.lean_state, in the form's own words. A key
# without a field of the form is named as run.json's, saying so.
FIELD_LABELS: dict[str, dict[str, str]] = {
    "model.context": {"ru": "Контекст n", "en": "Context n"},
    "model.width": {"ru": "Ширина d", "en": "Width d"},
    "model.heads": {"ru": "Головы", "en": "Heads"},
    "model.layers": {"ru": "Слои", "en": "Layers"},
    "training.batch_per_card": {"ru": "Батч на карту", "en": "Batch per card"},
    "training.tokens_per_step": {"ru": "Токенов за шаг", "en": "Tokens per step"},
    "training.economical": {"ru": "Пересчёт активаций", "en": "Activation recompute"},
    "training.lean_state": {"ru": "Облегчённое состояние", "en": "Lean state"},
    "training.precision": {"ru": "Точность", "en": "Precision"},
    "training.steps_to": {"ru": "Шагов до", "en": "Steps to"},
    "training.limit_min": {"ru": "Лимит, мин", "en": "Limit, min"},
    "training.lr": {"ru": "Скорость обучения", "en": "Learning rate"},
    "training.checkpoint_every_min": {"ru": "Чекпоинт каждые", "en": "Checkpoint every"},
    "training.warmup_steps": {"ru": "Шаги разогрева", "en": "Warm-up steps"},
    "training.min_lr_ratio": {"ru": "Доля минимальной скорости", "en": "Minimum rate ratio"},
    "training.weight_decay": {"ru": "Затухание весов", "en": "Weight decay"},
    "training.grad_clip": {"ru": "Обрезка градиента", "en": "Gradient clipping"},
}
_VOCAB = {"ru": "словарь", "en": "the vocabulary"}  # «Данные…»'s choice, not a field of the form


def _f(key: str, lang: str = "ru") -> str:
    """A run.json key as the form names it: its field's label in quotes; a key the form has
    no field for, as run.json's own (the sentence saying so)."""
    if key == "model.vocab":
        return _VOCAB[lang]
    label = FIELD_LABELS.get(key)
    if label is None:
        return f"в run.json {key}" if lang == "ru" else f"run.json's {key}"
    return f"«{label['ru']}»" if lang == "ru" else f"“{label['en']}”"


def _lean(value: Any, lang: str = "ru") -> str:
    """A lean state's value (the form's option name, or run.json's false / true / "fused" /
    "offload") as the form's option."""
    level = value if isinstance(value, str) and value in LEAN_STATE_OPTIONS else lean_state_level(value)
    return LEAN_STATE_OPTIONS[level][lang] if level else str(value)


def _level(value: Any, lang: str = "ru") -> str:
    level = value if isinstance(value, str) and value in ECONOMICAL_OPTIONS else economical_level(value)
    return ECONOMICAL_OPTIONS[level][lang] if level else str(value)


def _q(text: str, lang: str = "ru") -> str:
    return f"«{text}»" if lang == "ru" else f"“{text}”"


def _fit(p: dict[str, Any], lang: str) -> str:
    """The fastest combination that fits, in the form's words."""
    share = {"ru": ", карты делят состояние (FSDP)", "en": ", the cards sharing the state (FSDP)"}[lang]
    return (f"{_f('training.economical', lang)} {_q(_level(p['level'], lang), lang)}, "
            f"{_f('training.lean_state', lang)} {_q(_lean(p['lean'], lang), lang)}"
            + (share if p["sharding"] != "none" else ""))


def _gb(value: float) -> str:
    return format_value(round(value, 1), "ru")


RU: dict[str, str | Callable[[dict[str, Any]], str]] = {
    # ---- reasons ----------------------------------------------------------------------------
    "asked": "как просит run.json (training.{key}: {value})",
    "precision_cpu": "авто: fp32 на процессоре",
    "precision_bf16": "авто: bf16 — карта считает его сама (вычислительная способность {capability})",
    "precision_fp16": "авто: fp16 с масштабированием потерь — у карты нет своего bf16 (вычислительная "
                      "способность {capability})",
    "precision_emulated": "как просит run.json (training.precision: bf16); своего bf16 у карты нет "
                          "(вычислительная способность {capability}): он эмулируется и медленнее fp16",
    "one_process": "один процесс: делить нечего (это для двух карт и более)",
    "sharding_ddp_fits": lambda p: (
        f"авто: состояние обучения ({_gb(p['state_gb'])} ГБ, 16 байт на вес) помещается в половину карты "
        f"({_gb(p['half_gb'])} ГБ): каждый процесс держит его целиком (DDP)"),
    "sharding_fsdp": lambda p: (
        f"авто: состояние обучения ({_gb(p['state_gb'])} ГБ, 16 байт на вес) больше половины карты "
        f"({_gb(p['half_gb'])} ГБ): оно разделено между {p['processes']} процессами (FSDP2)"),
    "sharding_ddp_lean": "авто: облегчённое состояние работает, только когда каждый процесс держит его целиком (DDP)",
    "sharding_ddp_unknown": "авто: DDP ({device}: нет памяти карты, с которой сравнить состояние)",
    "step_normal": "градиенты fp32 хранятся, затем шаг AdamW (облегчённое состояние «Обычное»)",
    "step_held": "градиенты хранятся до конца обратного прохода, затем каждый вес обновляется по очереди "
                 "с точной обрезкой, моменты в 8 битах (облегчённое состояние «8 бит»)",
    "step_held_fp16": "градиенты хранятся в fp32 для проверки масштабировщиком fp16, затем 8-битное "
                      "обновление (облегчённое состояние «8 бит»)",
    "step_fused": "набор градиентов не хранится: каждый вес обновляется во втором обратном проходе, "
                  "моменты в 8 битах (облегчённое состояние «8 бит, без градиентов»)",
    "step_one_pass": "набор градиентов не хранится: каждый вес обновляется в единственном обратном проходе "
                     "с обрезкой по норме, оцениваемой по ходу прохода (точной к его концу), первый момент в 8 "
                     "битах, второй — средние по строкам и столбцам (облегчённое состояние «малые моменты, один "
                     "проход»)",
    "step_offload": "как без градиентов, моменты в 8 битах ждут в памяти ПК между шагами (облегчённое "
                    "состояние «8 бит в памяти ПК»)",
    "step_offload_cpu": "как без градиентов; на процессоре моменты и так в памяти ПК (облегчённое состояние "
                        "«8 бит в памяти ПК»)",
    "micro_one": "один микрошаг: процессов {processes} × батч {batch} × контекст {context} = "
                 "{tokens} токенов за шаг («Токенов за шаг» 0 — автоматически)",
    "micro_many": lambda p: (
        f"{p['micro']} {plural_ru(p['micro'], 'микрошаг', 'микрошага', 'микрошагов')} по процессов "
        f"{p['processes']} × батч {p['batch']} × контекст {_shown(p['context'])} дают «Токенов за шаг» "
        f"{_shown(p['wanted'])}"),
    "compile_cuda": "авто: включена для видеокарты (меньше запусков ядер)",
    "compile_cpu": "авто: выключена на процессоре (выигрыша там не замерено)",
    "compile_lean": lambda p: (
        f"авто: выключена: облегчённое состояние «{_lean(p['lean'])}» обновляет каждый вес из его "
        "градиентного хука, а скомпилированный обратный проход запустил бы их лишь после всех градиентов"),
    "compile_fsdp": "авто: выключена: FSDP собирает и освобождает веса каждого блока в хуках, за которыми "
                    "компиляция всей модели не следит",
    "compile_no_triton": "авто: выключена: для видеокарты torch.compile нужен Triton, а он не установлен (в "
                         "Windows это пакет triton-windows: установка лабы ставит его только к torch, чью версию "
                         "Triton она знает)",
    "samples_on": lambda p: (
        f"каждые {_shown(p['every'])} {plural_ru(p['every'], 'шаг', 'шага', 'шагов')}, {p['tokens']} "
        f"{plural_ru(p['tokens'], 'новый токен', 'новых токена', 'новых токенов')} на затравку"),
    "samples_zero": "выключены: длина образцов в настройках прогона — 0",
    "samples_fsdp": "выключены под FSDP: веса разделены между процессами (ternit sample работает с "
                    "чекпоинтами)",
    "memory_fits": lambda p: (
        f"{_mib(p['allocated'])} МиБ выделит программа по оценке + {_mib(p['framework'])} МиБ фреймворку = "
        f"{_mib(p['needed'])} МиБ из {_mib(p['card'])} МиБ карты: помещается"),
    "speed_basis": lambda p: (
        (f"≈ {_shown(round(p['ms']))} мс на шаг: {_shown(round(p['note_ms']))} мс на шаг из заметки (1,67 млрд "
         "весов, 1024 токена, RTX 5070 Ti; GUIDE.md «Экономный режим»), пересчитанные на эту форму по арифметике"
         if p["ms"] is not None else "замеренного времени шага этой карты нет")
        + f"; арифметика шага ×{_shown(round(p['arithmetic'], 2))} обычного: лишний прямой проход пересчёта "
        f"+{_shown(round(p['recompute'], 2))}, второй обратный проход +{_shown(round(p['second_backward'], 2))} "
        f"(обратных проходов за шаг: {_shown(round(p['backward_passes']))}) учтены"),
    # ---- refusals ---------------------------------------------------------------------------
    "does_not_fit": lambda p: (
        f"не помещается: {_mib(p['allocated'])} МиБ выделит программа по оценке + {_mib(p['framework'])} МиБ "
        f"фреймворку = {_mib(p['needed'])} МиБ, больше {_mib(p['card'])} МиБ карты; "
        + (f"быстрейшее сочетание, которое помещается: {_fit(p, 'ru')}"
           + f" ({_mib(p['fit_needed'])} МиБ; арифметика шага ×{_shown(round(p['arithmetic'], 2))} обычного)"
           if p["fits"] else "не помещается ни одно сочетание «Пересчёта активаций» и «Облегчённого состояния»: "
           "уменьшите «Слои», «Ширину d» или «Батч на карту»")),
    "lean_under_ddp": lambda p: (
        f"«Облегчённое состояние» «{_lean(p['lean'])}» обновляет каждый вес внутри обратного прохода, а "
        f"усреднение градиентов DDP между процессами пришло бы после: выберите «{_lean(True)}» "
        "(градиенты хранятся) или обучайте в одном процессе"),
    "lean_under_fsdp": f"«Облегчённое состояние» не сочетается с разделением FSDP: FSDP даёт каждому процессу "
                       f"части каждого веса, а 8-битный оптимизатор их не обновляет; выберите «{_lean(False)}» "
                       "(FSDP разделит обычное состояние между процессами) или обучайте в одном процессе",
    "lean_no_library": "для «Облегчённого состояния» нужна библиотека bitsandbytes, а она не установлена: "
                       f"pip install 'ternit-lab[lean]' (или pip install bitsandbytes), либо выберите «{_lean(False)}»",
    "fused_fp16": lambda p: (
        f"«Облегчённое состояние» «{_lean(p['lean'])}» обновляет каждый вес внутри обратного прохода, а под fp16"
        + (" (его выбрала для этой карты точность «авто»)" if p["auto"] else "")
        + " масштабировщик потерь должен увидеть все градиенты раньше, чем сдвинется хоть один вес: "
        f"выберите «{_lean(True)}» (под fp16 памяти столько же) или «Точность» fp32"),
    "fused_micro_steps": lambda p: (
        f"«Облегчённое состояние» «{_lean(p['lean'])}» не хранит градиенты, а {p['micro']} "
        f"{plural_ru(p['micro'], 'микрошаг складывает', 'микрошага складывают', 'микрошагов складывают')} "
        f"свои до шага: выберите «{_lean(True)}» или «Токенов за шаг» 0 (один микрошаг)"),
    "compile_on_lean": lambda p: (
        f"компиляция, которую просит run.json (training.compile \"on\"), здесь невозможна: «Облегчённое "
        f"состояние» «{_lean(p['lean'])}» обновляет каждый вес из его градиентного хука, а скомпилированный "
        "обратный проход делает все градиенты сразу, до этих хуков (тот самый полный набор градиентов, которого "
        f"это состояние избегает; «{_lean(True)}» компилируется); уберите её из run.json или поставьте \"auto\""),
    "compile_on_fsdp": "компиляция, которую просит run.json (training.compile \"on\"), здесь невозможна: FSDP "
                       "собирает и освобождает веса каждого блока в хуках, за которыми компиляция всей модели не "
                       "следит; уберите её из run.json или поставьте \"auto\"",
    "compile_no_compiler": "компиляции, которую просит run.json (training.compile \"on\"), здесь нужен {needs}, а "
                           "его не нашлось; установите его или уберите её из run.json",
    "tokens_per_step": lambda p: (
        f"«Токенов за шаг» {_shown(p['wanted'])} — не целое число микрошагов по карт {p['cards']} × батч "
        f"{p['batch']} × контекст {p['context']} = {_shown(p['micro'])} токенов: поставьте "
        + " или ".join(str(_shown(v)) for v in p["near"])
        + (f" (или «Батч на карту» {', '.join(map(str, p['batches']))})" if p["batches"] else "")
        + ", либо 0 — автоматически"),
    "tokens_per_step_negative": "«Токенов за шаг»: 0 (автоматически) или больше, а не {wanted}",
    "at_least_one": lambda p: f"{_f(p['key'])}: нужно не меньше 1, а не {p['value']}",
    "heads_divide": "ширина {width} не делится на число голов {heads}: подойдут {choices}",
    "vocab_over": "словарь {vocab} больше {most}: номера токенов хранятся в uint16",
    "state_too_big": lambda p: (
        f"у модели {_shown(p['params'])} весов: одно их состояние обучения (веса, градиенты, оптимизатор) "
        f"заняло бы около {_shown(round(p['gib']))} ГиБ — больше любой машины лаборатории; уменьшите "
        "«Ширину d» или «Слои»"),
    "target_kind": "в run.json target.kind: local или kaggle, а не {kind!r}",
    "target_gpu": "в run.json target.gpu: auto, cpu или номера карт, например 0 или 0,1, а не {value!r}",
    # A value out of the contract's range is a run.json's (the form keeps its fields in range):
    # it names the key the file holds.
    "out_of_range": lambda p: (
        f"{p['key']}: нужно {'больше' if p['above'] else 'не меньше'} {_shown(p['low'])}, а не {_shown(p['value'])}"
        if p["value"] <= p["low"] else f"{p['key']}: нужно не больше {_shown(p['high'])}, а не {_shown(p['value'])}"),
    "duplicate_key": "в {where} ключ {key!r} указан дважды в одном объекте: оставьте один",
    "file_missing": "файла {path} нет: сначала запишите туда run.json",
    "file_not_json": "{path}: не JSON (строка {line}: {msg})",
    "file_not_utf8": "{path}: не текст UTF-8 (байт {byte}); сохраните его в UTF-8",
    "file_unreadable": "{path} не читается ({error})",
    "not_an_object": "в run.json должен быть один JSON-объект",
    "section_kind": "{where}: {key} должен быть объектом, а не {value}",
    "file_too_big": lambda p: f"{p['path']}: {_shown(p['size'])} символов, больше {_shown(p['most'])} допустимых в run.json",
    "file_too_deep": "{path}: JSON вложен слишком глубоко для run.json (объекты в объектах; в run.json два уровня)",
    "prompts_many": lambda p: (f"в run.json training.sample_prompts: {_shown(p['count'])} затравок, больше {p['most']}: "
                               "каждая пишется при каждом образце"),
    "prompt_long": lambda p: (f"в run.json training.sample_prompts[{p['index']}]: {_shown(p['length'])} символов, "
                              f"больше {_shown(p['most'])}"),
    "name_one_line": "имя должно быть одной строкой, без переводов строки и управляющих символов: {name!r}",
    # ---- sampling from a checkpoint ------------------------------------------------------
    "temperature": "температура {value} не подходит: нужно от 0 (всегда самый вероятный токен) до {most}",
    "top_k": "top-k {value} не подходит: 0 (без ограничения) или больше",
    "top_p": "top-p {value} не подходит: нужно больше 0 и не больше 1",
    "sample_tokens": "длина {value} не подходит: нужно от {least} до {most} токенов",
    "sample_num": "число образцов {value} не подходит: от {least} до {most}",
    # A rule the contract has not given a code yet: its English words as they are.
    "invalid": "{message}",
}


# The trainer's English reasons name run.json's keys (right for `python -m trainer.config`);
# where the window and `ternit estimate` say them, these codes read in the form's words.
EN_FORM: dict[str, str | Callable[[dict[str, Any]], str]] = {
    "one_process": "one process: nothing to share (that is for two cards or more)",
    "step_normal": "fp32 gradients held, then AdamW's step (lean state “Normal”)",
    "step_held": "gradients held until the backward pass ends, then each weight updated in turn with an "
                 "exact clip, 8-bit moments (lean state “8-bit”)",
    "step_held_fp16": "gradients held in fp32 for fp16's loss scaler to check, then the 8-bit update "
                      "(lean state “8-bit”)",
    "step_fused": "no set of gradients held: each weight updated inside a second backward pass, 8-bit "
                  "moments (lean state “8-bit, no gradients”)",
    "step_one_pass": "no set of gradients held: each weight updated inside the one backward pass, clipped by "
                     "the norm estimated as the pass goes (exact at its end), 8-bit first moment, the second as "
                     "row and column means (lean state “small moments, one pass”)",
    "step_offload": "as without gradients, the 8-bit moments in the PC's memory between steps (lean state "
                    "“8-bit in PC memory”)",
    "step_offload_cpu": "as without gradients; on the CPU the moments are in the PC's memory anyway (lean "
                        "state “8-bit in PC memory”)",
    "samples_zero": "off: the run's sample length is 0",
    "micro_one": "one micro-step: {processes} processes × batch {batch} × context {context} = {tokens} tokens a "
                 "step (“Tokens per step” 0: automatic)",
    "micro_many": "{micro} micro-steps of {processes} processes × batch {batch} × context {context} make "
                  "“Tokens per step” {wanted}",
    "compile_lean": lambda p: (
        f"auto: off: the lean state “{_lean(p['lean'], 'en')}” updates each weight from its gradient hook, "
        "which a compiled backward pass would run only after every gradient is made"),
    "does_not_fit": lambda p: (
        f"does not fit: {_mib_en(p['allocated'])} MiB allocated by the estimate + {_mib_en(p['framework'])} MiB "
        f"for the framework = {_mib_en(p['needed'])} MiB, over the card's {_mib_en(p['card'])} MiB; "
        + (f"the fastest combination that fits: {_fit(p, 'en')} ({_mib_en(p['fit_needed'])} MiB; a step's "
           f"arithmetic ×{_en(round(p['arithmetic'], 2))} the normal step's)"
           if p["fits"] else "no combination of “Activation recompute” and “Lean state” fits: lower “Layers”, "
           "“Width d” or “Batch per card”")),
    "lean_under_ddp": lambda p: (
        f"“Lean state” “{_lean(p['lean'], 'en')}” updates each weight inside the backward pass, which DDP's "
        f"gradient averaging over the processes would come after: choose “{_lean(True, 'en')}” (the gradients "
        "held), or run on one process"),
    "lean_under_fsdp": "“Lean state” cannot be combined with FSDP sharding: FSDP gives each process shards of every "
                       "weight, which the lean state's 8-bit optimizer does not update; choose "
                       f"“{_lean(False, 'en')}” (FSDP shards the normal state over the processes instead) or run "
                       "on one process",
    "lean_no_library": "“Lean state” needs the bitsandbytes library, which is not installed: pip install "
                       "'ternit-lab[lean]' (or pip install bitsandbytes), or choose "
                       f"“{_lean(False, 'en')}”",
    "fused_fp16": lambda p: (
        f"“Lean state” “{_lean(p['lean'], 'en')}” updates each weight inside the backward pass, but under fp16"
        + (" (what the “Auto” precision chose for this card)" if p["auto"] else "")
        + " the loss scaler must see every gradient before any weight moves: choose "
        f"“{_lean(True, 'en')}” (the same memory under fp16) or “Precision” fp32"),
    "fused_micro_steps": lambda p: (
        f"“Lean state” “{_lean(p['lean'], 'en')}” holds no gradients, but {p['micro']} micro-steps add theirs "
        f"up before the step: choose “{_lean(True, 'en')}”, or “Tokens per step” 0 (one micro-step)"),
    "compile_on_lean": lambda p: (
        "the compilation run.json asks for (training.compile \"on\") cannot be combined here: “Lean state” "
        f"“{_lean(p['lean'], 'en')}” steps each weight from its gradient hook, and a compiled backward pass "
        "makes every gradient at once before those hooks run (the full set of gradients that lean state exists "
        f"to avoid; “{_lean(True, 'en')}” compiles); take it out of run.json or set it to \"auto\""),
    "compile_on_fsdp": "the compilation run.json asks for (training.compile \"on\") cannot be combined here: FSDP "
                       "sharding gathers and frees each block's weights in hooks that whole-model compilation "
                       "does not follow; take it out of run.json or set it to \"auto\"",
    "compile_no_compiler": "the compilation run.json asks for (training.compile \"on\") needs {needs} here, and "
                           "none was found; install it, or take it out of run.json",
    "tokens_per_step": lambda p: (
        f"“Tokens per step” {_en(p['wanted'])} is not a whole number of micro-steps of {p['cards']} cards × "
        f"batch {p['batch']} × context {p['context']} = {_en(p['micro'])} tokens: set "
        + " or ".join(str(_en(v)) for v in p["near"])
        + (f" (or “Batch per card” {', '.join(map(str, p['batches']))})" if p["batches"] else "")
        + ", or 0 for automatic"),
    "tokens_per_step_negative": "“Tokens per step” must be 0 (automatic) or more, not {wanted}",
    "at_least_one": lambda p: f"{_f(p['key'], 'en')} must be at least 1, not {p['value']}",
    "heads_divide": "the width {width} does not divide by the number of heads {heads}: choose heads from {choices}",
    "vocab_over": "the vocabulary {vocab} is over {most}: token ids are stored as uint16",
    "state_too_big": "the model has {params} weights: their training state alone (weights, gradients, "
                     "optimizer) needs about {gib} GiB, beyond any machine the lab trains on; lower “Width d” "
                     "or “Layers”",
    "target_kind": "run.json's target.kind must be local or kaggle, not {kind!r}",
    "target_gpu": "run.json's target.gpu must be auto, cpu or card numbers such as 0 or 0,1, not {value!r}",
    "prompts_many": "run.json's training.sample_prompts has {count} prompts, more than {most}: each is written out "
                    "at every sample",
    "prompt_long": "run.json's training.sample_prompts[{index}] is {length} characters, over {most}",
}


def _mib_en(value: float) -> str:
    return int_text(round(value), "en")


def text(reason: Reason, lang: str | None = None) -> str:
    """`reason` (a plan's reason or a refusal) in `lang` (default: the interface's)."""
    if (lang or current_language()) == "en":
        if reason.code not in EN_FORM:
            return reason.text()
        english = EN_FORM[reason.code]
        if callable(english):
            return english(reason.params)
        return english.format(**{k: _en(v) for k, v in reason.params.items()})
    template = RU[reason.code]
    if callable(template):
        return template(reason.params)
    return template.format(**{k: _shown(v) for k, v in reason.params.items()})


class RefusalError(ValueError):
    """A refusal of the contract or the plan, raised by the lab in the interface's language
    (its `refusal` keeps the code and parameters)."""

    def __init__(self, refusal: Refusal, lang: str | None = None) -> None:
        self.refusal = refusal
        super().__init__(text(refusal, lang))


# The plan's choices by name (trainer.plan.planner.Plan.CHOICES), as rows of a table.
CHOICE_LABELS: dict[str, dict[str, str]] = {
    "precision": {"ru": "Точность", "en": "Precision"},
    "sharding": {"ru": "Карты делят состояние", "en": "Cards share the state"},
    "compile": {"ru": "Компиляция", "en": "Compilation"},
    "step": {"ru": "Шаг", "en": "Step"},
    "micro_steps": {"ru": "Микрошагов", "en": "Micro-steps"},
    "economical": {"ru": "Пересчёт активаций", "en": "Activation recompute"},
    "samples": {"ru": "Образцы текста", "en": "Text samples"},
}


# The plan's values in words (its own are run.json's and the trainer's: none, off, normal).
VALUE_WORDS: dict[str, dict[str, dict[str, str]]] = {
    "sharding": {"none": {"ru": "нет", "en": "no"}, "ddp": {"ru": "нет, у каждой всё (DDP)", "en": "no, each holds all (DDP)"},
                 "fsdp": {"ru": "да (FSDP2)", "en": "yes (FSDP2)"}},
    "compile": {"on": {"ru": "вкл.", "en": "on"}, "off": {"ru": "выкл.", "en": "off"}},
    "step": {"normal": {"ru": "обычный", "en": "normal"}, "held": {"ru": "градиенты хранятся", "en": "gradients held"},
             "fused": {"ru": "без градиентов", "en": "no gradients"},
             "offload": {"ru": "моменты в памяти ПК", "en": "moments in PC memory"},
             "one_pass": {"ru": "один проход, без градиентов", "en": "one pass, no gradients"}},
}


def value_text(choice: str, value: object, lang: str | None = None) -> str:
    """A plan's value as the form says it («выкл.», «обычный»); other values as they are (fp32)."""
    words = VALUE_WORDS.get(choice, {}).get(str(value))
    return words[lang or current_language()] if words else str(value)


def plan_rows(p: Plan, lang: str | None = None, leave_out: tuple[str, ...] = ()) -> list[tuple[str, str, str]]:
    """(label, value, reason) for each of the plan's choices but `leave_out`, in `lang`; the
    sharding of a single process (nothing to share: a CPU, one card) is left out too."""
    lang = lang or current_language()
    return [(CHOICE_LABELS[name][lang], value_text(name, getattr(p, name).value, lang),
             text(getattr(p, name).reason, lang))
            for name in Plan.CHOICES
            if name not in leave_out and not (name == "sharding" and str(p.sharding.value) == "none")]
