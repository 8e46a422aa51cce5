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
from .numbers import format_value, int_text, plural_ru


def _mib(value: float) -> str:
    """Whole MiB in the lab's format."""
    return int_text(round(value), "ru")


def _shown(value: Any) -> Any:
    """A parameter as a Russian sentence shows it: numbers in the lab's format (a thin space
    between thousands, a decimal comma), lists joined."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (list, tuple)):
        return ", ".join(str(_shown(v)) for v in value)
    if isinstance(value, int):
        return int_text(value, "ru")
    if isinstance(value, float):
        return format_value(value, "ru")
    return value


# run.json's keys as the form names them, where a sentence names a key.
KEY_WORDS = {"model.context": "контекст", "model.width": "ширина", "model.heads": "головы",
             "model.layers": "слои", "model.vocab": "словарь", "training.batch_per_card": "батч"}


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
    "step_offload": "как без градиентов, моменты в 8 битах ждут в памяти ПК между шагами (облегчённое "
                    "состояние «8 бит в памяти ПК»)",
    "step_offload_cpu": "как без градиентов; на процессоре моменты и так в памяти ПК (облегчённое состояние "
                        "«8 бит в памяти ПК»)",
    "micro_one": "один микрошаг: процессов {processes} × батч {batch} × контекст {context} = "
                 "{tokens} токенов за шаг («Токенов за шаг» 0 — автоматически)",
    "micro_many": lambda p: (
        f"{p['micro']} {plural_ru(p['micro'], 'микрошаг', 'микрошага', 'микрошагов')} по процессов "
        f"{p['processes']} × батч {p['batch']} × контекст {_shown(p['context'])} дают training.tokens_per_step "
        f"{_shown(p['wanted'])}"),
    "compile_cuda": "авто: включена для видеокарты (меньше запусков ядер)",
    "compile_cpu": "авто: выключена на процессоре (выигрыша там не замерено)",
    "compile_lean": "авто: выключена: lean_state \"{lean}\" обновляет каждый вес из его градиентного хука, "
                    "а скомпилированный обратный проход запустил бы их лишь после всех градиентов",
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
        + (f"быстрейшее сочетание, которое помещается: training.economical \"{p['level']}\", "
           f"training.lean_state \"{p['lean']}\""
           + (f", training.sharding \"{p['sharding']}\"" if p["sharding"] != "none" else "")
           + f" ({_mib(p['fit_needed'])} МиБ; арифметика шага ×{_shown(round(p['arithmetic'], 2))} обычного)"
           if p["fits"] else "не помещается ни одно сочетание training.economical и training.lean_state: "
           "уменьшите model.layers, model.width или training.batch_per_card")),
    "lean_under_ddp": "training.lean_state \"{lean}\" обновляет каждый вес внутри обратного прохода, а "
                      "усреднение градиентов DDP между процессами пришло бы после: выберите lean_state true "
                      "(градиенты хранятся) или обучайте в одном процессе",
    "lean_under_fsdp": "облегчённое состояние (training.lean_state) не сочетается с разделением FSDP: FSDP даёт "
                       "каждому процессу части каждого веса, а 8-битный оптимизатор их не обновляет; выключите "
                       "lean_state (FSDP разделит обычное состояние между процессами) или обучайте в одном процессе",
    "lean_no_library": "для training.lean_state нужна библиотека bitsandbytes, а она не установлена: "
                       "pip install 'ternit-lab[lean]' (или pip install bitsandbytes), либо выключите lean_state",
    "fused_fp16": lambda p: (
        f"training.lean_state \"{p['lean']}\" обновляет каждый вес внутри обратного прохода, а под fp16"
        + (" (его выбрала для этой карты точность «авто»)" if p["auto"] else "")
        + " масштабировщик потерь должен увидеть все градиенты раньше, чем сдвинется хоть один вес: "
        "выберите lean_state true (под fp16 памяти столько же) или training.precision \"fp32\""),
    "fused_micro_steps": lambda p: (
        f"training.lean_state \"{p['lean']}\" не хранит градиенты, а {p['micro']} "
        f"{plural_ru(p['micro'], 'микрошаг складывает', 'микрошага складывают', 'микрошагов складывают')} "
        "свои до шага: выберите lean_state true или training.tokens_per_step 0 (один микрошаг)"),
    "compile_on_lean": "training.compile \"on\" здесь невозможна: training.lean_state \"{lean}\" обновляет "
                       "каждый вес из его градиентного хука, а скомпилированный обратный проход делает все "
                       "градиенты сразу, до этих хуков (тот самый полный набор градиентов, которого это "
                       "состояние избегает; lean_state true компилируется); выберите compile \"off\" или \"auto\"",
    "compile_on_fsdp": "training.compile \"on\" здесь невозможна: FSDP собирает и освобождает веса каждого "
                       "блока в хуках, за которыми компиляция всей модели не следит; выберите compile "
                       "\"off\" или \"auto\"",
    "compile_no_compiler": "training.compile \"on\": torch.compile здесь нужен {needs}, а его не нашлось; "
                           "установите его или выберите compile \"off\" или \"auto\"",
    "tokens_per_step": lambda p: (
        f"«Токенов за шаг» {_shown(p['wanted'])} — не целое число микрошагов по карт {p['cards']} × батч "
        f"{p['batch']} × контекст {p['context']} = {_shown(p['micro'])} токенов: поставьте "
        + " или ".join(str(_shown(v)) for v in p["near"])
        + (f" (или батч на карту {', '.join(map(str, p['batches']))})" if p["batches"] else "")
        + ", либо 0 — автоматически"),
    "tokens_per_step_negative": "«Токенов за шаг»: 0 (автоматически) или больше, а не {wanted}",
    "at_least_one": lambda p: f"{KEY_WORDS.get(p['key'], p['key'])}: нужно не меньше 1, а не {p['value']}",
    "heads_divide": "ширина {width} не делится на число голов {heads}: подойдут {choices}",
    "vocab_over": "словарь {vocab} больше {most}: номера токенов хранятся в uint16",
    "state_too_big": lambda p: (
        f"у модели {_shown(p['params'])} весов: одно их состояние обучения (веса, градиенты, оптимизатор) "
        f"заняло бы около {_shown(round(p['gib']))} ГиБ — больше любой машины лаборатории; уменьшите "
        "ширину или число слоёв"),
    "target_kind": "target.kind: local или kaggle, а не {kind!r}",
    "target_gpu": "target.gpu: auto, cpu или номера карт, например 0 или 0,1, а не {value!r}",
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
    "prompts_many": lambda p: (f"training.sample_prompts: {_shown(p['count'])} затравок, больше {p['most']}: "
                               "каждая пишется при каждом образце"),
    "prompt_long": lambda p: (f"training.sample_prompts[{p['index']}]: {_shown(p['length'])} символов, "
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
EN_FORM: dict[str, str] = {
    "one_process": "one process: nothing to share (that is for two cards or more)",
    "step_normal": "fp32 gradients held, then AdamW's step (lean state “Normal”)",
    "step_held": "gradients held until the backward pass ends, then each weight updated in turn with an "
                 "exact clip, 8-bit moments (lean state “8-bit”)",
    "step_held_fp16": "gradients held in fp32 for fp16's loss scaler to check, then the 8-bit update "
                      "(lean state “8-bit”)",
    "step_fused": "no set of gradients held: each weight updated inside a second backward pass, 8-bit "
                  "moments (lean state “8-bit, no gradients”)",
    "step_offload": "as without gradients, the 8-bit moments in the PC's memory between steps (lean state "
                    "“8-bit in PC memory”)",
    "step_offload_cpu": "as without gradients; on the CPU the moments are in the PC's memory anyway (lean "
                        "state “8-bit in PC memory”)",
    "samples_zero": "off: the run's sample length is 0",
}


def text(reason: Reason, lang: str | None = None) -> str:
    """`reason` (a plan's reason or a refusal) in `lang` (default: the interface's)."""
    if (lang or current_language()) == "en":
        return EN_FORM[reason.code] if reason.code in EN_FORM else reason.text()
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
             "offload": {"ru": "моменты в памяти ПК", "en": "moments in PC memory"}},
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
