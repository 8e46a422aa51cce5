"""The run form's fields: ONE table that drives the form, its validation and its tooltips.

Each FieldSpec says where the value lives in run.json, its label and tooltip in Russian and
English (the facts come from the lab's field guide, shared/GUIDE.md, in the lab's own
words), its range, default and unit, and whether it is locked when a run continues from a
checkpoint (the checkpoint's weights fix the architecture). The window builds its widgets
from this table; app/form/run_form.py validates against it. Tooltips carry a `{default}` slot that
is filled with the current default, so the text and the number can never disagree.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import trainer.config.run_config as contract

from ..base.i18n import current_language
from ..base.memory_saving import (
    _ECONOMICAL_NOT_MEASURED,
    ECONOMICAL_OPTION_TOOLTIPS,
    ECONOMICAL_OPTIONS,
    LEAN_STATE_OPTION_TOOLTIPS,
    LEAN_STATE_OPTIONS,
    economical_level,
    economical_run_value,
    lean_state_level,
    lean_state_run_value,
)
from ..base.numbers import format_value
from ..base.plan_texts import FIELD_LABELS
from .texts import ADVANCED_FIELDS, MODEL_HELP, SCHEDULE_HELP
from .tooltips import wrap_tip

# The last line of every field's tooltip: where the whole story is (ui/form/help_page.py).
HELP_HINT = {"ru": "Подробнее: кнопка «?» у поля или F1.", "en": "More: the “?” button by the field, or F1."}
# A FieldSpec with a run.json `path` and no `default` of its own starts at the trainer's
# default for that key (trainer.config.run_config, the one contract), in the form's terms.
_FROM_CONTRACT: Any = object()

# The form's sections in the order they are shown.
SECTIONS: dict[str, dict[str, str]] = {
    "run": {"ru": "Прогон и чекпоинт", "en": "Run and checkpoint"},
    "data": {"ru": "Созвездия в обучении", "en": "Constellations in training"},
    "model": {"ru": "Модель", "en": "Model"},
    "training": {"ru": "Обучение", "en": "Training"},
    "advanced": {"ru": "Дополнительно", "en": "Advanced"},
    "sizing": {"ru": "Как выбрать размер", "en": "How to choose a size"},
}
# Sections the form shows folded until the user opens them.
COLLAPSED_SECTIONS: tuple[str, ...] = ("advanced",)


@dataclass(frozen=True)
class FieldSpec:
    name: str
    section: str
    kind: str  # "int", "float", "bool", "text", "choice", "multi"
    label: dict[str, str]
    tooltip: dict[str, str]
    default: Any = _FROM_CONTRACT
    minimum: float | None = None
    maximum: float | None = None
    unit: dict[str, str] = field(default_factory=lambda: {"ru": "", "en": ""})
    locked_on_continue: bool = False
    # Where the value goes in run.json ("model.width"); None: the form's own field.
    path: str | None = None
    # A "choice" field with fixed options: key -> label per language, in display order
    # (choices that depend on the lab's state, like «Машина», are the form's to list).
    options: dict[str, dict[str, str]] = field(default_factory=dict)
    # What each fixed option means and costs, for the option's own tooltip.
    option_tooltips: dict[str, dict[str, str]] = field(default_factory=dict)
    # Shorter names for `ternit run start`'s flag (--batch besides --batch-per-card).
    flags: tuple[str, ...] = ()
    # The long story for the field's help page («Подробнее»), after the tooltip's text:
    # measurements, trade-offs, what the guide says beyond the one-screen tooltip.
    help: dict[str, str] = field(default_factory=dict)
    # Where the form's value and run.json's differ (the economical level "off" is written
    # false): the value run.json gets, and the form's value read back (None: one the form
    # cannot show). None: the value as it is (see to_run_value / from_run_value).
    to_run: Callable[[Any], Any] | None = field(default=None, compare=False)
    from_run: Callable[[Any], Any] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.default is _FROM_CONTRACT:
            value = from_run_value(self, contract.default(self.path)) if self.path else None
            object.__setattr__(self, "default", tuple(value) if self.kind == "multi" else value)

    def label_text(self, lang: str | None = None) -> str:
        return self.label[lang or current_language()]

    def unit_text(self, lang: str | None = None) -> str:
        return self.unit[lang or current_language()]

    def tooltip_text(self, lang: str | None = None, default: Any = None) -> str:
        """The tooltip with the current default filled in (a fixed option by its label),
        wrapped by the one tooltip rule (app.form.tooltips), its last line saying where the
        field's help page is."""
        lang = lang or current_language()
        return wrap_tip(self.tooltip_body(lang, default) + "\n" + HELP_HINT[lang])

    def tooltip_body(self, lang: str | None = None, default: Any = None) -> str:
        """The tooltip's text as written, unwrapped, without the help line."""
        lang = lang or current_language()
        value = self.default if default is None else default
        shown = self.option_label(value, lang) if value in self.options else format_value(value, lang)
        return self.tooltip[lang].replace("{default}", shown)

    def help_text(self, lang: str | None = None, default: Any = None) -> str:
        """The field's help page: the tooltip's text, then the long story (paragraphs)."""
        lang = lang or current_language()
        more = self.help.get(lang, "")
        return self.tooltip_body(lang, default) + (f"\n\n{more}" if more else "")

    def option_label(self, key: str, lang: str | None = None) -> str:
        return self.options[key][lang or current_language()]

    def option_tooltip(self, key: str, lang: str | None = None) -> str:
        tips = self.option_tooltips.get(key)
        return tips[lang or current_language()] if tips else ""

    def option_tooltip_text(self, key: str, lang: str | None = None) -> str:
        """An option's tooltip as the list shows it: «Label: what it costs», wrapped."""
        tip = self.option_tooltip(key, lang)
        return wrap_tip(f"{self.option_label(key, lang)}: {tip}") if tip else ""

    def option_choices(self, lang: str | None = None) -> list[tuple[str, str]]:
        """(key, label) of the fixed options in display order."""
        return [(key, self.option_label(key, lang)) for key in self.options]


def to_run_value(spec: FieldSpec, value: Any) -> Any:
    """The run.json value of a field's form value (for `spec.path`)."""
    if spec.to_run is not None:
        return spec.to_run(value)
    if spec.kind == "int":
        return int(value)
    if spec.kind == "float":
        return float(value)
    if spec.kind == "multi":
        return list(value)
    if spec.kind == "text":
        return str(value).strip()
    return value


def from_run_value(spec: FieldSpec, value: Any) -> Any:
    """The form's value of a run.json value (None: one the form cannot show); a whole
    number written as 630.0 shows as 630 in a whole-number field."""
    if spec.from_run is not None:
        return spec.from_run(value)
    if spec.kind == "multi":
        return list(value)
    if spec.kind == "int" and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


_TOKENS = {"ru": "токенов", "en": "tokens"}
_MIN = {"ru": "мин", "en": "min"}

FIELDS: tuple[FieldSpec, ...] = (
    FieldSpec(
        name="name",
        section="run",
        kind="text",
        path="name",
        label={"ru": "Название", "en": "Name"},
        tooltip={
            "ru": "Как прогон будет называться в истории и в имени его папки. "
            "Только для вас: на обучение не влияет. По умолчанию: {default}.",
            "en": "What the run is called in the history and in its folder's name. "
            "For you only: it does not change training. Default: {default}.",
        },
    ),
    FieldSpec(
        name="start_from",
        section="run",
        kind="choice",
        default="scratch",
        label={"ru": "Прогон", "en": "Run"},
        tooltip={
            "ru": "Прогон — один запуск обучения, на Kaggle или на вашей карте. Он начинается "
            "либо с нуля (случайные веса), либо с чекпоинта прошлого прогона: тогда обучение "
            "продолжает его веса и номер шага, а архитектура берётся из чекпоинта. "
            "По умолчанию: с нуля.",
            "en": "A run is one training launch, on Kaggle or on your own card. It starts either "
            "from scratch (random weights) or from an earlier run's checkpoint: then training "
            "carries on with its weights and step number, and the architecture is the "
            "checkpoint's. Default: from scratch.",
        },
    ),
    FieldSpec(
        name="checkpoint",
        section="run",
        kind="choice",
        default=None,
        label={"ru": "Продолжить с чекпоинта", "en": "Continue from checkpoint"},
        tooltip={
            "ru": "Прогон из истории, чей последний чекпоинт станет началом: веса и номер шага "
            "берутся из него. Веса другой формы загрузить нельзя, поэтому поля модели "
            "показывают значения чекпоинта и заблокированы.",
            "en": "The run from the history whose latest checkpoint is the starting point: the "
            "weights and the step number come from it. Weights of another shape cannot be "
            "loaded, so the model fields show the checkpoint's values and are locked.",
        },
    ),
    FieldSpec(
        name="constellations",
        section="data",
        kind="multi",
        path="data.constellations",
        label={"ru": "Созвездия в обучении", "en": "Constellations in training"},
        tooltip={
            "ru": "Из каких групп наборов данных берётся текст. Рядом — сколько в каждой "
            "токенов. Новые данные — новая отложенная (валидационная) выборка: при смене "
            "созвездий кривая валидации начинается заново.",
            "en": "Which groups of datasets the text comes from, with each one's token count. "
            "New data means a new held-out (validation) sample: when the constellations "
            "change, the validation curve starts anew.",
        },
    ),
    FieldSpec(
        name="context",
        section="model",
        help=MODEL_HELP,
        kind="int",
        path="model.context",
        minimum=8,
        maximum=16384,
        unit=_TOKENS,
        locked_on_continue=True,
        label=FIELD_LABELS["model.context"],
        tooltip={
            "ru": "Сколько токенов модель видит за раз. Длиннее — модель удерживает более "
            "длинную мысль, но внимание дорожает: память и время растут вместе с n. "
            "По умолчанию: {default}.",
            "en": "How many tokens the model sees at once. Longer holds a longer thought, but "
            "attention gets more expensive: memory and time grow with n. Default: {default}.",
        },
    ),
    FieldSpec(
        name="width",
        section="model",
        help=MODEL_HELP,
        kind="int",
        path="model.width",
        minimum=8,
        maximum=8192,
        locked_on_continue=True,
        label=FIELD_LABELS["model.width"],
        tooltip={
            "ru": "Длина вектора, которым описан каждый токен. Веса растут как d²: вдвое "
            "большая d — примерно вчетверо больше весов. d должна "
            "делиться на число голов без остатка. По умолчанию: {default}.",
            "en": "The length of the vector that describes each token. Weights grow as d²: "
            "doubling d gives about four times the weights. d must "
            "divide by the number of heads with no remainder. Default: {default}.",
        },
    ),
    FieldSpec(
        name="heads",
        section="model",
        help=MODEL_HELP,
        kind="int",
        path="model.heads",
        minimum=1,
        maximum=128,
        locked_on_continue=True,
        label=FIELD_LABELS["model.heads"],
        tooltip={
            "ru": "На сколько параллельных «взглядов» делится внимание. Число весов не меняет, "
            "но d должна делиться на головы без остатка: 512 / 8 = 64 на голову — обычное "
            "значение. По умолчанию: {default}.",
            "en": "How many parallel \"views\" attention is split into. It does not change the "
            "weight count, but d must divide by heads with no remainder: 512 / 8 = 64 per "
            "head, the usual value. Default: {default}.",
        },
    ),
    FieldSpec(
        name="layers",
        section="model",
        help=MODEL_HELP,
        kind="int",
        path="model.layers",
        minimum=1,
        maximum=256,
        locked_on_continue=True,
        label=FIELD_LABELS["model.layers"],
        tooltip={
            "ru": "Глубина: сколько раз подряд модель перерабатывает текст. Веса и "
            "время растут почти линейно: 12 слоёв — примерно в 1,5 раза больше и дольше, "
            "чем 8. По умолчанию: {default}.",
            "en": "Depth: how many times in a row the model reworks the text. Weights "
            "and time grow almost linearly: 12 layers is about 1.5× the size and time of 8. "
            "Default: {default}.",
        },
    ),
    FieldSpec(
        name="gpu",
        section="training",
        kind="choice",
        default="t4x2",  # the form's own choice: with «Машина» it makes run.json's target (run_config)
        label={"ru": "Видеокарта", "en": "GPU"},
        tooltip={
            "ru": "На чём считать. Kaggle 2×T4 примерно вдвое быстрее одной T4: около "
            "102 000 токенов/с против 49 000 для модели по умолчанию. Домашняя RTX 3050 "
            "медленнее одной T4 и сильно греется. От карты зависят время до «Шагов до» и "
            "какой батч поместится в память. Сейчас по умолчанию: {default}.",
            "en": "What computes. Kaggle's 2×T4 is about twice as fast as one T4: about "
            "102,000 tokens/s against 49,000 for the default model. A home RTX 3050 is slower "
            "than one T4 and runs hot. The card decides the time to “Steps to” and which batch "
            "fits its memory. Default now: {default}.",
        },
    ),
    FieldSpec(
        name="machine",
        section="training",
        kind="choice",
        default="auto",  # the form's own choice: with «Видеокарта» it makes run.json's target
        label={"ru": "Машина", "en": "Machine"},
        tooltip={
            "ru": "Где идёт прогон: этот компьютер или аккаунт Kaggle — у каждого своя квота "
            "GPU. «Авто» выбирает свободную машину: сначала ту, чьей квоты хватит на весь "
            "прогон, затем ту, где уже лежат чекпоинт и данные. Если квота кончится раньше, "
            "лаборатория продолжит обучение на другой свободной машине. Сейчас по умолчанию: {default}.",
            "en": "Where the run goes: this computer or a Kaggle account, each with its own GPU "
            "quota. “Auto” picks a free machine: first one whose quota covers the whole run, "
            "then one that already holds the checkpoint and the data. If the quota runs out "
            "early, the lab continues the training on another free machine. Default now: {default}.",
        },
    ),
    FieldSpec(
        name="batch_per_card",
        section="training",
        kind="int",
        path="training.batch_per_card",
        flags=("--batch",),
        minimum=1,
        maximum=4096,
        unit={"ru": "× n токенов", "en": "× n tokens"},
        label=FIELD_LABELS["training.batch_per_card"],
        tooltip={
            "ru": "Сколько кусков по n токенов одна карта обрабатывает за шаг. Шаг на 2×T4 с "
            "батчем 6 — это 6 × 2 × 1024 = 12 288 токенов. Больший батч учит ровнее, но "
            "требует больше памяти; если прогон упал с «CUDA out of memory», батч надо "
            "уменьшить. По умолчанию: {default}.",
            "en": "How many chunks of n tokens one card processes per step. One step on 2×T4 "
            "with batch 6 is 6 × 2 × 1024 = 12,288 tokens. A larger batch trains more smoothly "
            "but needs more memory; if a run fails with \"CUDA out of memory\", the batch must "
            "come down. Default: {default}.",
        },
    ),
    FieldSpec(
        name="steps_to",
        section="training",
        help=SCHEDULE_HELP,
        kind="int",
        path="training.steps_to",
        flags=("--steps",),
        minimum=1,
        maximum=100_000_000,
        unit={"ru": "шаг", "en": "step"},
        label=FIELD_LABELS["training.steps_to"],
        tooltip={
            "ru": "Номер шага, на котором обучение закончится. Он же задаёт расписание "
            "скорости обучения: она плавно спадает к этому шагу. Больше шагов — дольше и "
            "обычно лучше, пока хватает данных. Добавили данные — поднимите его. "
            "По умолчанию: {default}.",
            "en": "The step number at which training ends. It also sets the learning-rate "
            "schedule: the rate decays smoothly to this step. More steps take longer and "
            "usually train better while the data lasts. After adding data, raise it. "
            "Default: {default}.",
        },
    ),
    FieldSpec(
        name="limit_min",
        section="training",
        kind="int",
        path="training.limit_min",
        minimum=1,
        maximum=contract.RANGES["training.limit_min"].high,  # a week
        unit=_MIN,
        label=FIELD_LABELS["training.limit_min"],
        tooltip={
            "ru": "Сколько минут отведено. На лимите обучение само останавливается и "
            "сохраняет чекпоинт, даже если «Шагов до» не достигнут; продолжить можно одной "
            "кнопкой. 630 минут гайда («Как в гайде: 2×T4») оставляют запас до предела "
            "сессии Kaggle (12 часов); первый прогон на этом ПК («Для этого ПК») — 30 минут. "
            "По умолчанию: {default}.",
            "en": "Minutes allotted. At the limit the training stops by itself and saves a "
            "checkpoint, even if “Steps to” was not reached; one click continues it. The "
            "guide's 630 minutes (“As in the guide: 2×T4”) leave a margin under Kaggle's "
            "session limit (12 hours); a first run on this PC (“For this PC”) takes 30. "
            "Default: {default}.",
        },
    ),
    FieldSpec(
        name="checkpoint_every_min",
        section="training",
        kind="int",
        path="training.checkpoint_every_min",
        minimum=1,
        maximum=1_440,
        unit=_MIN,
        label=FIELD_LABELS["training.checkpoint_every_min"],
        tooltip={
            "ru": "Как часто сохранять чекпоинт во время обучения. При остановке, на лимите и "
            "в конце он сохраняется всегда; промежуточные нужны, если компьютер выключится или "
            "процесс убьют: тогда пропадёт не больше этих минут. Чаще — меньше потерь, но каждая "
            "запись на несколько секунд останавливает обучение (хранятся три последних). "
            "По умолчанию: {default}.",
            "en": "How often a checkpoint is saved while training. One is always saved on a stop, "
            "at the limit and at the end; these in between are for a computer that goes down or a "
            "killed process: no more than these minutes are lost. More often loses less, but "
            "every save holds training for a few seconds (the last three are kept). "
            "Default: {default}.",
        },
    ),
    FieldSpec(
        name="lr",
        section="training",
        help=SCHEDULE_HELP,
        kind="float",
        path="training.lr",
        minimum=1e-6,
        maximum=1.0,
        label=FIELD_LABELS["training.lr"],
        tooltip={
            "ru": "Наибольший шаг весов (AdamW); после разогрева плавно спадает к «Шагов до». "
            "Слишком большая — потери скачут или становятся NaN: тогда её уменьшают. "
            "На память и время шага не влияет. По умолчанию: {default}.",
            "en": "The largest weight update (AdamW); after the warm-up it decays smoothly to "
            "“Steps to”. Too high and the loss jumps about or turns NaN: then lower it. It does "
            "not change memory or step time. Default: {default}.",
        },
    ),
    FieldSpec(
        name="economical",
        section="training",
        kind="choice",
        path="training.economical",
        label=FIELD_LABELS["training.economical"],
        options=ECONOMICAL_OPTIONS,
        option_tooltips=ECONOMICAL_OPTION_TOOLTIPS,
        to_run=economical_run_value,
        from_run=economical_level,
        tooltip={
            "ru": "Часть «Экономного режима»: меньше промежуточных результатов хранится для "
            "обратного прохода, остальное пересчитывается. "
            f"«{ECONOMICAL_OPTIONS['selective']['ru']}» — пик памяти 0,39× при обычном шаге, "
            f"«{ECONOMICAL_OPTIONS['full']['ru']}» — 0,22× при шаге 1,13× (на процессоре). "
            "Маленькой домашней карте может подойти только «Полный»; панель «Как выбрать размер» "
            "показывает память при выбранном уровне. Чекпоинт продолжается в любом уровне. "
            "По умолчанию: {default}.",
            "en": "Part of the “Economical mode”: fewer intermediate results are kept for the "
            "backward pass, the rest is recomputed. "
            f"“{ECONOMICAL_OPTIONS['selective']['en']}”: 0.39× the peak memory "
            f"at the normal step, “{ECONOMICAL_OPTIONS['full']['en']}”: 0.22× at 1.13× the step "
            "time (on the CPU). A small home card may fit only “Full”; the “How to choose a size” "
            "panel shows the memory at the chosen level. A checkpoint continues at any level. "
            "Default: {default}.",
        },
        help={
            "ru": "Заметка лаборатории: на модели в 1,67 млрд весов рабочие буферы заняли "
            "5 536 МБ вместо 12 004 МБ — меньше половины — почти при той же скорости (шаг около "
            "149 мс на RTX 5070 Ti); карта с собственными накладными показала около 6 149 МБ: "
            "сколько выделяет программа и сколько показывает карта — разные числа. Качество на 96 "
            "отложенных сегментах не изменилось в пределах доверительных интервалов.\n\n"
            "Уровни и их цена:\n"
            f"• «{ECONOMICAL_OPTIONS['off']['ru']}» — {ECONOMICAL_OPTION_TOOLTIPS['off']['ru']}\n"
            f"• «{ECONOMICAL_OPTIONS['selective']['ru']}» — {ECONOMICAL_OPTION_TOOLTIPS['selective']['ru']}\n"
            f"• «{ECONOMICAL_OPTIONS['full']['ru']}» — {ECONOMICAL_OPTION_TOOLTIPS['full']['ru']}\n\n"
            f"{_ECONOMICAL_NOT_MEASURED['ru']}\n\n"
            "Одна настройка не подходит всем картам: карте с запасом памяти (T4, 15 ГБ) хватит "
            "уровня подешевле, на маленькую домашнюю может поместиться только «Полный». Чекпоинт, "
            "сохранённый в одном уровне, продолжается в любом другом.",
            "en": "The lab's note: on a 1.67-billion-weight model the working buffers took "
            "5,536 MB instead of 12,004 MB — less than half — at practically the normal speed (a "
            "step about 149 ms on an RTX 5070 Ti); with the card's own overhead it showed about "
            "6,149 MB: what the program allocates and what the card shows are different numbers. "
            "Quality on 96 held-out segments did not change beyond the confidence intervals.\n\n"
            "The levels and what they cost:\n"
            f"• “{ECONOMICAL_OPTIONS['off']['en']}” — {ECONOMICAL_OPTION_TOOLTIPS['off']['en']}\n"
            f"• “{ECONOMICAL_OPTIONS['selective']['en']}” — {ECONOMICAL_OPTION_TOOLTIPS['selective']['en']}\n"
            f"• “{ECONOMICAL_OPTIONS['full']['en']}” — {ECONOMICAL_OPTION_TOOLTIPS['full']['en']}\n\n"
            f"{_ECONOMICAL_NOT_MEASURED['en']}\n\n"
            "One setting does not suit every card: a card with memory to spare (a T4's 15 GB) "
            "does with a cheaper level, a small home card may fit only “Full”. A checkpoint saved "
            "at one level continues at any other.",
        },
    ),
    FieldSpec(
        name="lean_state",
        section="training",
        kind="choice",
        path="training.lean_state",
        label=FIELD_LABELS["training.lean_state"],
        options=LEAN_STATE_OPTIONS,
        option_tooltips=LEAN_STATE_OPTION_TOOLTIPS,
        to_run=lean_state_run_value,
        from_run=lean_state_level,
        tooltip={
            "ru": "Часть «Экономного режима»: сжимает веса,\nградиенты и моменты оптимизатора, а\n"
            "«Пересчёт активаций» — только промежуточные\nрезультаты. Большой модели память нужна\n"
            "именно на это. Сочетается с любым уровнем\nпересчёта; чекпоинт продолжается в любом\nсочетании.\n"
            "«Как выбрать размер» назовёт сочетание,\nкоторое помещается. По умолчанию: {default}.",
            "en": "Part of the “Economical mode”: shrinks the\nweights, gradients and optimizer moments;\n"
            "“Activation recompute” shrinks only the\nintermediate results. A large model needs\n"
            "memory for exactly this. Combines with any\nrecompute level; a checkpoint continues in\nany combination.\n"
            "“How to choose a size” names the combination\nthat fits. Default: {default}.",
        },
    ),
    *(FieldSpec(**kw) for kw in ADVANCED_FIELDS),  # «Дополнительно» (app/form/texts.py)
    FieldSpec(
        name="tokens_per_step",
        section="advanced",
        kind="int",
        path="training.tokens_per_step",
        minimum=0,
        maximum=100_000_000,
        unit={"ru": "токенов", "en": "tokens"},
        label=FIELD_LABELS["training.tokens_per_step"],
        # Lines of at most 60 characters (the tooltip rule of issue 16).
        tooltip={
            "ru": "Сколько токенов учит один шаг — на любой машине.\n"
            "Батч делится на микрошаги, их градиенты складываются:\n"
            "микрошагов = это число / (карт × батч на карту × n),\n"
            "нацело. Тогда продолжение на другой машине и меньший\n"
            "батч после нехватки памяти учат так же, как раньше.\n"
            "0 — автоматически: карт × батч на карту × n.\n"
            "По умолчанию: {default}.",
            "en": "How many tokens one step trains on, on any machine.\n"
            "The batch is split into micro-steps whose gradients\n"
            "add up: micro-steps = this / (cards × batch per card\n"
            "× n), a whole number. A continuation on another\n"
            "machine, or a smaller batch after running out of\n"
            "memory, then trains as before.\n"
            "0: automatic, cards × batch per card × n.\n"
            "Default: {default}.",
        },
    ),
)

BY_NAME: dict[str, FieldSpec] = {f.name: f for f in FIELDS}
MODEL_FIELDS: tuple[str, ...] = tuple(f.name for f in FIELDS if f.section == "model")
LOCKED_ON_CONTINUE: tuple[str, ...] = tuple(f.name for f in FIELDS if f.locked_on_continue)


def spec(name: str) -> FieldSpec:
    return BY_NAME[name]


def defaults() -> dict[str, Any]:
    """The form's starting values."""
    return {f.name: (list(f.default) if f.kind == "multi" else f.default) for f in FIELDS}


def section_title(section: str, lang: str | None = None) -> str:
    return SECTIONS[section][lang or current_language()]
