"""The form's tooltips against the lab's field guide (GUIDE.md, «The run form: what each
field means»): every field has its tooltip in both languages and the form shows it; a field
the guide describes carries the guide's facts, and its numbers are the guide's (the
«Контекст n» tooltip once spoke of layers, «Ширина d» and «Слои» claimed memory grew as the
weights do); no tooltip names a run.json key.

The guide lives outside the repository (the project's shared notes), so its facts are
restated here, field by field, as the guide gives them: a change of the guide is a change
of this table."""

from __future__ import annotations

import re

import pytest

from app.base.i18n import set_language
from app.form import fields as F
from tests.test_words import KEYS

# field -> (guide's label ru, guide's label en, numbers the guide gives for it, facts ru, facts en)
GUIDE: dict[str, tuple[str, str, set[float], list[str], list[str]]] = {
    # «Прогон»: one training launch ... from scratch (random weights) or from the checkpoint of an earlier run.
    "start_from": ("Прогон", "Run", set(), ["с нуля", "случайные веса", "чекпоинта прошлого прогона"],
                   ["from scratch", "random weights", "an earlier run's checkpoint"]),
    # «Продолжить с чекпоинта»: the weights and the step number; another shape cannot be loaded: locked.
    "checkpoint": ("Продолжить с чекпоинта", "Continue from checkpoint", set(),
                   ["номер шага", "другой формы загрузить нельзя", "заблокированы"],
                   ["step number", "another shape cannot be", "locked"]),
    # «Созвездия в обучении»: new data, a new held-out (validation) sample, the curve anew.
    "constellations": ("Созвездия в обучении", "Constellations in training", set(),
                       ["отложенная (валидационная) выборка", "начинается заново"],
                       ["held-out (validation) sample", "starts anew"]),
    # «Контекст n», default 1024: tokens seen at once; attention dearer; memory and time grow with n.
    "context": ("Контекст n", "Context n", {1024}, ["видит за раз", "внимание дорожает", "память и время растут вместе с n"],
                ["sees at once", "attention gets more expensive", "memory and time grow with n"]),
    # «Ширина d», default 512: weights grow as d², doubling d about four times the weights.
    "width": ("Ширина d", "Width d", {512}, ["Веса растут как d²", "вчетверо больше весов"],
              ["Weights grow as d²", "four times the weights"]),
    # «Головы», default 8: d divides by heads, 512 / 8 = 64 per head, the usual value.
    "heads": ("Головы", "Heads", {8, 512, 64}, ["без остатка", "512 / 8 = 64"], ["no remainder", "512 / 8 = 64"]),
    # «Слои», default 8: weights and time almost linear, 12 layers about 1.5× of 8.
    "layers": ("Слои", "Layers", {8, 12, 1.5}, ["Веса и время растут почти линейно", "1,5 раза"],
               ["Weights and time grow almost linearly", "1.5×"]),
    # «Видеокарта»: 2×T4 about twice one T4, 102 000 against 49 000 tokens/s; RTX 3050 slower, runs hot.
    "gpu": ("Видеокарта", "GPU", {2, 102_000, 49_000, 3050}, ["вдвое быстрее", "102 000", "49 000", "RTX 3050"],
            ["twice as fast", "102,000", "49,000", "RTX 3050"]),
    # «Машина»: a Kaggle account with its own quota; «Авто»: quota for the whole run, then the checkpoint
    # and the data; a quota that runs out: continued on another free machine.
    "machine": ("Машина", "Machine", set(), ["своя квота", "«Авто»", "на весь прогон", "чекпоинт и данные",
                                             "на другой свободной машине"],
                ["its own GPU quota", "“Auto”", "the whole run", "the checkpoint and the data",
                 "another free machine"]),
    # «Батч на карту», default 6: 6 × 2 × 1024 = 12 288 tokens; more memory; CUDA out of memory.
    "batch_per_card": ("Батч на карту", "Batch per card", {6, 2, 1024, 12_288},
                       ["6 × 2 × 1024 = 12 288", "больше памяти", "CUDA out of memory"],
                       ["6 × 2 × 1024 = 12,288", "more memory", "CUDA out of memory"]),
    # «Шагов до»: the step training ends at; sets the learning-rate schedule; after adding data raise it.
    "steps_to": ("Шагов до", "Steps to", set(), ["расписание", "плавно спадает", "поднимите"],
                 ["schedule", "decays smoothly", "raise it"]),
    # «Лимит, мин»: minutes; stops by itself and saves a checkpoint; 630 leaves a margin under 12 hours.
    "limit_min": ("Лимит, мин", "Limit, min", {630, 12}, ["сохраняет чекпоинт", "630", "12 часов"],
                  ["saves a checkpoint", "630", "12 hours"]),
}
# Numbers a tooltip may add to its guide section, each with its reason.
EXTRA: dict[str, set[float]] = {
    # The first run on this PC takes 30 minutes (the lab's «Для этого ПК», README), and the
    # guide's button is named «Как в гайде: 2×T4».
    "limit_min": {30, 2},
}
# Words (word beginnings) a tooltip must not use: what the guide does not say of the field.
NOT_SAID: dict[str, tuple[str, ...]] = {
    "context": ("сло[йёи]", "layer"),  # the earlier «Контекст n» spoke of layers
    "width": ("памят", "времен", "memory", r"time\b"),  # the guide: weights grow as d², not memory and time
    "layers": ("памят", "memory"),  # the guide: weights and time grow almost linearly
}
NUMBER = {
    "ru": re.compile(r"(?<![\w.,])\d{1,3}(?:[ \u00a0]\d{3})+(?![\d])|(?<![\w.,])\d+(?:,\d+)?(?![\w])"),
    "en": re.compile(r"(?<![\w.,])\d{1,3}(?:,\d{3})+(?![\d])|(?<![\w.,])\d+(?:\.\d+)?(?![\w])"),
}


def numbers(text: str, lang: str) -> set[float]:
    """The numbers a text writes, as the language writes them («12 288», «1,5»; "12,288", "1.5")."""
    out = set()
    for m in NUMBER[lang].finditer(text):
        raw = m.group(0).replace(" ", "").replace("\u00a0", "")
        raw = raw.replace(",", ".") if lang == "ru" else raw.replace(",", "")
        out.add(float(raw))
    return out


def test_the_number_reader_reads_both_languages():
    assert numbers("6 × 2 × 1024 = 12 288 токенов, в 1,5 раза; 2×T4, RTX 3050, d²", "ru") == {6, 2, 1024, 12288, 1.5, 3050}
    assert numbers("6 × 2 × 1024 = 12,288 tokens, 1.5×; 2×T4, fp16, end.", "en") == {6, 2, 1024, 12288, 1.5}


@pytest.mark.parametrize("lang", ["ru", "en"])
def test_every_field_has_a_tooltip_in_both_languages(lang):
    for spec in F.FIELDS:
        body = spec.tooltip_body(lang)
        assert len(body) > 40, (spec.name, lang)
        assert spec.tooltip_text(lang).endswith(F.HELP_HINT[lang]), spec.name
        for key in spec.options:
            if spec.option_tooltips:
                assert spec.option_tooltip(key, lang), (spec.name, key, lang)


def test_the_guide_s_fields_are_the_form_s_and_keep_its_labels():
    for name, (ru, en, *_rest) in GUIDE.items():
        spec = F.spec(name)
        assert (spec.label["ru"], spec.label["en"]) == (ru, en)


@pytest.mark.parametrize("lang", ["ru", "en"])
@pytest.mark.parametrize("name", sorted(GUIDE))
def test_a_guide_field_s_tooltip_says_what_the_guide_says(name, lang):
    _ru, _en, guide_numbers, facts_ru, facts_en = GUIDE[name]
    tip = " ".join(F.spec(name).tooltip[lang].split())  # as written, the {default} slot unfilled
    missing = [fact for fact in (facts_ru if lang == "ru" else facts_en) if fact not in tip]
    assert missing == [], f"{name} ({lang}) lacks the guide's {missing}: {tip}"
    foreign = numbers(tip, lang) - guide_numbers - EXTRA.get(name, set())
    assert foreign == set(), f"{name} ({lang}) says numbers the guide does not: {foreign}: {tip}"
    said = [w for w in NOT_SAID.get(name, ()) if re.search(r"\b" + w, tip, re.IGNORECASE)]
    assert said == [], f"{name} ({lang}) speaks of {said}, the guide does not: {tip}"


@pytest.mark.parametrize("lang", ["ru", "en"])
def test_no_tooltip_names_a_run_json_key(lang):
    for spec in F.FIELDS:
        texts = [spec.tooltip_body(lang), *(spec.option_tooltip(k, lang) for k in spec.options)]
        named = [m.group(0) for text in texts for m in KEYS.finditer(text)]
        assert named == [], (spec.name, named)


@pytest.mark.parametrize("lang", ["ru", "en"])
def test_the_form_shows_each_field_s_tooltip(qtbot, tiny_data, lang):
    """The built form: each field's control and label carry the field's tooltip (the text
    checked above), in the interface's language."""
    from app.data.prepared import Prepared
    from app.form.run_form import FormContext
    from ui.form.run_form import RunFormView

    set_language(lang)
    try:
        ctx = FormContext()
        ctx.add_prepared(Prepared.read(tiny_data))
        view = RunFormView(ctx)
        qtbot.addWidget(view)
        view.set_advanced_open(True)
        for spec in F.FIELDS:
            want = view.form.tooltip(spec.name)
            assert spec.tooltip_body(lang)[:20] in " ".join(want.split()), spec.name
            shown = [w for w in (view.inputs.get(spec.name), view.labels.get(spec.name)) if w is not None]
            assert shown, f"{spec.name}: no control in the form"
            assert all(w.toolTip() == want for w in shown), spec.name
    finally:
        set_language(None)
