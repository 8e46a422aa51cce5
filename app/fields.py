"""The run form's fields: ONE table that drives the form, its validation and its tooltips.

Each FieldSpec says where the value lives in run.json, its label and tooltip in Russian and
English (the facts come from the lab's field guide, shared/GUIDE.md, in the lab's own
words), its range, default and unit, and whether it is locked when a run continues from a
checkpoint (the checkpoint's weights fix the architecture). The window builds its widgets
from this table; app/form.py validates against it. Tooltips carry a `{default}` slot that
is filled with the current default, so the text and the number can never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .i18n import current_language

# The form's sections in the order they are shown.
SECTIONS: dict[str, dict[str, str]] = {
    "run": {"ru": "Прогон и чекпоинт", "en": "Run and checkpoint"},
    "data": {"ru": "Созвездия в обучении", "en": "Constellations in training"},
    "model": {"ru": "Модель", "en": "Model"},
    "training": {"ru": "Обучение", "en": "Training"},
    "sizing": {"ru": "Как выбрать размер", "en": "How to choose a size"},
}


@dataclass(frozen=True)
class FieldSpec:
    name: str
    section: str
    kind: str  # "int", "float", "bool", "text", "choice", "multi"
    label: dict[str, str]
    tooltip: dict[str, str]
    default: Any = None
    minimum: float | None = None
    maximum: float | None = None
    unit: dict[str, str] = field(default_factory=lambda: {"ru": "", "en": ""})
    locked_on_continue: bool = False
    # Where the value goes in run.json ("model.width"); None: the form's own field.
    path: str | None = None

    def label_text(self, lang: str | None = None) -> str:
        return self.label[lang or current_language()]

    def unit_text(self, lang: str | None = None) -> str:
        return self.unit[lang or current_language()]

    def tooltip_text(self, lang: str | None = None, default: Any = None) -> str:
        """The tooltip with the current default filled in."""
        lang = lang or current_language()
        value = self.default if default is None else default
        return self.tooltip[lang].replace("{default}", format_value(value, lang))


def format_value(value: Any, lang: str | None = None) -> str:
    """Numbers the way a reader of that language expects them (1 024 / 1,024)."""
    lang = lang or current_language()
    if isinstance(value, bool):
        return ("вкл." if value else "выкл.") if lang == "ru" else ("on" if value else "off")
    if isinstance(value, int):
        text = f"{value:,}"
        return text.replace(",", "\u00a0") if lang == "ru" else text
    if isinstance(value, float):
        text = f"{value:g}"
        return text.replace(".", ",") if lang == "ru" else text
    if value is None:
        return "—"
    return str(value)


_TOKENS = {"ru": "токенов", "en": "tokens"}
_MIN = {"ru": "мин", "en": "min"}

FIELDS: tuple[FieldSpec, ...] = (
    FieldSpec(
        name="name",
        section="run",
        kind="text",
        path="name",
        default="run",
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
        default=(),
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
        kind="int",
        path="model.context",
        default=1024,
        minimum=8,
        maximum=16384,
        unit=_TOKENS,
        locked_on_continue=True,
        label={"ru": "Контекст n", "en": "Context n"},
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
        kind="int",
        path="model.width",
        default=512,
        minimum=8,
        maximum=8192,
        locked_on_continue=True,
        label={"ru": "Ширина d", "en": "Width d"},
        tooltip={
            "ru": "Длина вектора, которым описан каждый токен. Веса растут как d²: вдвое "
            "большая d — примерно вчетверо больше весов, памяти и времени на шаг. d должна "
            "делиться на число голов без остатка. По умолчанию: {default}.",
            "en": "The length of the vector that describes each token. Weights grow as d²: "
            "doubling d gives about four times the weights, memory and time per step. d must "
            "divide by the number of heads with no remainder. Default: {default}.",
        },
    ),
    FieldSpec(
        name="heads",
        section="model",
        kind="int",
        path="model.heads",
        default=8,
        minimum=1,
        maximum=128,
        locked_on_continue=True,
        label={"ru": "Головы", "en": "Heads"},
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
        kind="int",
        path="model.layers",
        default=8,
        minimum=1,
        maximum=256,
        locked_on_continue=True,
        label={"ru": "Слои", "en": "Layers"},
        tooltip={
            "ru": "Глубина: сколько раз подряд модель перерабатывает текст. Веса, память и "
            "время растут почти линейно: 12 слоёв — примерно в 1,5 раза больше и дольше, "
            "чем 8. По умолчанию: {default}.",
            "en": "Depth: how many times in a row the model reworks the text. Weights, memory "
            "and time grow almost linearly: 12 layers is about 1.5× the size and time of 8. "
            "Default: {default}.",
        },
    ),
    FieldSpec(
        name="gpu",
        section="training",
        kind="choice",
        path="target.gpu",
        default="t4x2",
        label={"ru": "Видеокарта", "en": "GPU"},
        tooltip={
            "ru": "На чём считать. Kaggle 2×T4 примерно вдвое быстрее одной T4: около "
            "102 000 токенов/с против 49 000 для модели по умолчанию. Домашняя RTX 3050 "
            "медленнее одной T4 и сильно греется. От карты зависят время до «Шагов до» и "
            "какой батч поместится в память. Сейчас по умолчанию: {default}.",
            "en": "What computes. Kaggle's 2×T4 is about twice as fast as one T4: about "
            "102,000 tokens/s against 49,000 for the default model. A home RTX 3050 is slower "
            "than one T4 and runs hot. The card decides the time to «Steps to» and which batch "
            "fits its memory. Default now: {default}.",
        },
    ),
    FieldSpec(
        name="machine",
        section="training",
        kind="choice",
        path="target.account",
        default="auto",
        label={"ru": "Машина", "en": "Machine"},
        tooltip={
            "ru": "Где идёт прогон: этот компьютер или аккаунт Kaggle — у каждого своя квота "
            "GPU. «Авто» выбирает свободную машину: сначала ту, чьей квоты хватит на весь "
            "прогон, затем ту, где уже лежат чекпоинт и данные. Если квота кончится раньше, "
            "лаборатория продолжит обучение на другой свободной машине. Сейчас по умолчанию: {default}.",
            "en": "Where the run goes: this computer or a Kaggle account, each with its own GPU "
            "quota. «Auto» picks a free machine: first one whose quota covers the whole run, "
            "then one that already holds the checkpoint and the data. If the quota runs out "
            "early, the lab continues the training on another free machine. Default now: {default}.",
        },
    ),
    FieldSpec(
        name="batch_per_card",
        section="training",
        kind="int",
        path="training.batch_per_card",
        default=6,
        minimum=1,
        maximum=4096,
        unit={"ru": "× n токенов", "en": "× n tokens"},
        label={"ru": "Батч на карту", "en": "Batch per card"},
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
        kind="int",
        path="training.steps_to",
        default=20000,
        minimum=1,
        maximum=100_000_000,
        unit={"ru": "шаг", "en": "step"},
        label={"ru": "Шагов до", "en": "Steps to"},
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
        default=630,
        minimum=1,
        maximum=100_000,
        unit=_MIN,
        label={"ru": "Лимит, мин", "en": "Limit, min"},
        tooltip={
            "ru": "Сколько минут отведено. На лимите обучение само останавливается и "
            "сохраняет чекпоинт, даже если «Шагов до» не достигнут; продолжить можно одной "
            "кнопкой. 630 минут оставляют запас до предела сессии Kaggle (12 часов). "
            "По умолчанию: {default}.",
            "en": "Minutes allotted. At the limit the training stops by itself and saves a "
            "checkpoint, even if «Steps to» was not reached; one click continues it. 630 "
            "minutes leaves a margin under Kaggle's session limit (12 hours). "
            "Default: {default}.",
        },
    ),
    FieldSpec(
        name="lr",
        section="training",
        kind="float",
        path="training.lr",
        default=0.001,
        minimum=1e-6,
        maximum=1.0,
        label={"ru": "Скорость обучения", "en": "Learning rate"},
        tooltip={
            "ru": "Наибольший шаг весов (AdamW); после разогрева плавно спадает к «Шагов до». "
            "Слишком большая — потери скачут или становятся NaN: тогда её уменьшают. "
            "На память и время шага не влияет. По умолчанию: {default}.",
            "en": "The largest weight update (AdamW); after the warm-up it decays smoothly to "
            "«Steps to». Too high and the loss jumps about or turns NaN: then lower it. It does "
            "not change memory or step time. Default: {default}.",
        },
    ),
    FieldSpec(
        name="economical",
        section="training",
        kind="bool",
        path="training.economical",
        default=False,
        label={"ru": "Экономный режим", "en": "Economical mode"},
        tooltip={
            "ru": "Экономия памяти: меньше промежуточных результатов хранится для обратного "
            "прохода, остальное пересчитывается. На модели в 1,67 млрд весов рабочие буферы "
            "заняли 5 536 МБ вместо 12 004 МБ — меньше половины — почти при той же скорости "
            "(шаг около 149 мс на RTX 5070 Ti); карта с собственными накладными показала "
            "около 6 149 МБ. Качество на 96 отложенных сегментах не изменилось в пределах "
            "доверительных интервалов. По умолчанию: {default}.",
            "en": "Saves memory: fewer intermediate results are kept for the backward pass and "
            "the rest is recomputed. On a 1.67-billion-weight model the working buffers took "
            "5,536 MB instead of 12,004 MB — less than half — at practically the normal speed "
            "(a step about 149 ms on an RTX 5070 Ti); with the card's own overhead it showed "
            "about 6,149 MB. Quality on 96 held-out segments did not change beyond the "
            "confidence intervals. Default: {default}.",
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
