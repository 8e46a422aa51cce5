"""The field table: every field has labels and tooltips in both languages, sane ranges and
defaults, and the tooltips carry the guide's facts and the current default."""

from __future__ import annotations

import re

import pytest

from app.base import memory_saving as MS
from app.form import fields as F


@pytest.mark.parametrize("lang", ["ru", "en"])
def test_every_field_has_a_label_and_a_real_tooltip(lang):
    for spec in F.FIELDS:
        assert spec.label_text(lang).strip(), spec.name
        tip = spec.tooltip_text(lang)
        assert len(tip) > 60, (spec.name, tip)  # says what it means and what it costs
        assert "{default}" not in tip
    for section in F.SECTIONS:
        assert F.section_title(section, lang)


def test_labels_are_the_guides_russian_labels():
    want = {"context": "Контекст n", "width": "Ширина d", "heads": "Головы", "layers": "Слои",
            "gpu": "Видеокарта", "machine": "Машина", "batch_per_card": "Батч на карту",
            "steps_to": "Шагов до", "limit_min": "Лимит, мин", "economical": "Пересчёт активаций",
            "constellations": "Созвездия в обучении", "checkpoint": "Продолжить с чекпоинта"}
    for name, label in want.items():
        assert F.spec(name).label["ru"] == label


@pytest.mark.parametrize("lang", ["ru", "en"])
def test_tooltips_name_their_current_default(lang):
    for spec in F.FIELDS:
        if spec.kind in ("int", "float"):
            shown = F.format_value(spec.default, lang)
            assert shown in spec.tooltip_text(lang), spec.name
    # A changed default shows up in the text: the number and the text cannot disagree.
    assert "2\u00a0048" in F.spec("context").tooltip_text("ru", default=2048)
    assert "2,048" in F.spec("context").tooltip_text("en", default=2048)


def test_tooltips_carry_the_guides_facts():
    # The tooltip with its help page («Подробнее»): the long story moved there.
    ru = {n: F.spec(n).help_text("ru") for n in F.BY_NAME}
    en = {n: F.spec(n).help_text("en") for n in F.BY_NAME}
    assert "d²" in ru["width"] and "d²" in en["width"]
    assert "512 / 8 = 64" in ru["heads"] and "512 / 8 = 64" in en["heads"]
    assert "1,5" in ru["layers"] and "1.5×" in en["layers"]
    assert "12 288" in ru["batch_per_card"] and "12,288" in en["batch_per_card"]
    assert "out of memory" in ru["batch_per_card"] and "out of memory" in en["batch_per_card"]
    assert "102 000" in ru["gpu"] and "102,000" in en["gpu"]
    assert "12 часов" in ru["limit_min"] and "12 hours" in en["limit_min"]
    assert "5 536" in ru["economical"] and "12,004" in en["economical"]
    assert "заново" in ru["constellations"] and "anew" in en["constellations"]


def test_defaults_ranges_and_locking():
    for spec in F.FIELDS:
        if spec.kind in ("int", "float"):
            assert spec.minimum is not None and spec.maximum is not None
            assert spec.minimum <= spec.default <= spec.maximum, spec.name
    assert set(F.LOCKED_ON_CONTINUE) == {"context", "width", "heads", "layers"}
    d = F.defaults()
    assert (d["context"], d["width"], d["heads"], d["layers"], d["batch_per_card"]) == (1024, 512, 8, 8, 6)
    assert d["steps_to"] == 20000 and d["limit_min"] == 630 and d["economical"] == "off"
    # Every field that lands in run.json names a real place in it.
    for spec in F.FIELDS:
        if spec.path:
            assert re.fullmatch(r"(name|(model|training|data|target)\.[a-z_]+)", spec.path), spec.path


def test_economical_is_a_choice_of_three_levels_with_their_labels():
    spec = F.spec("economical")
    assert spec.kind == "choice" and spec.path == "training.economical" and not spec.locked_on_continue
    assert spec.option_choices("ru") == [("off", "Выкл"), ("selective", "Выборочный"), ("full", "Полный")]
    assert spec.option_choices("en") == [("off", "Off"), ("selective", "Selective"), ("full", "Full")]
    # One name for saving memory (docs/ARCHITECTURE.md): this field is the recompute part of
    # «Экономный режим», the lean state its other part; neither is called the whole.
    assert spec.label["ru"] == "Пересчёт активаций" and spec.label["en"] == "Activation recompute"
    lean = F.spec("lean_state")
    assert lean.label["ru"] == "Облегчённое состояние" and lean.label["en"] == "Lean state"
    for field_spec in (spec, lean):
        assert "«Экономного режима»" in field_spec.tooltip_body("ru")
        assert "«Economical mode»" in field_spec.tooltip_body("en")
    # The default is named by its label, not by its key.
    assert spec.tooltip_body("ru").endswith("По умолчанию: Выкл.")
    assert spec.tooltip_body("en").endswith("Default: Off.")


@pytest.mark.parametrize("lang", ["ru", "en"])
def test_economical_tooltip_keeps_the_note_and_says_what_each_level_costs(lang):
    spec = F.spec("economical")
    tip = spec.help_text(lang)  # the tooltip and its «Подробнее» page
    comma = "," if lang == "ru" else "."
    # The lab's note (GUIDE.md) stays.
    assert ("5 536" in tip and "12 004" in tip) if lang == "ru" else ("5,536" in tip and "12,004" in tip)
    # Every level by its label, with the trainer's figures (trainer.model.economical.ABOUT).
    for _key, label in spec.option_choices(lang):
        assert f"«{label}»" in tip
    for figure in (f"0{comma}39×", f"7{comma}9 %", "25 %", f"0{comma}22×", f"1{comma}13×", "22 %", "32 %"):
        assert figure in tip, figure
    # Honest about what was measured: the GPU step time was not; arithmetic and launches are counted.
    if lang == "ru":
        assert "не измерено" in tip and "посчитаны" in tip
    else:
        assert "not measured" in tip and "counted, not timed" in tip
    # Each option carries its own cost for the combo's per-item tooltip.
    assert f"0{comma}39×" in spec.option_tooltip("selective", lang)
    assert f"1{comma}13×" in spec.option_tooltip("full", lang)
    assert spec.option_tooltip("off", lang)


def test_economical_values_in_run_json():
    # Reading accepts what trainer.config.run_config accepts; true was the old checkbox: selective.
    assert [MS.economical_level(v) for v in (False, None, True, "off", "selective", "full")] == [
        "off", "off", "selective", "off", "selective", "full"]
    assert MS.economical_level("half") is None and MS.economical_level(1) is None
    # Writing keeps false for off, so readers that know only true/false still work.
    assert [MS.economical_run_value(lv) for lv in MS.ECONOMICAL_LEVELS] == [False, "selective", "full"]


@pytest.mark.parametrize("lang", ["ru", "en"])
def test_economical_advice_depends_on_the_level(lang):
    on = MS.economical_step_up("off", lang)
    more = MS.economical_step_up("selective", lang)
    assert on == ("включите пересчёт активаций" if lang == "ru" else "turn on activation recompute")
    assert more == ("выберите полный пересчёт активаций" if lang == "ru" else "choose the full activation recompute")
    assert MS.economical_step_up("full", lang) == ""  # nothing more to give
    # From off straight to full when only full would help.
    assert ("Полный" if lang == "ru" else "Full") in MS.economical_step_up("off", lang, to="full")
    assert MS.economical_step_up("full", lang, to="selective") == ""


def test_economical_levels_and_figures_match_the_trainer():
    """The form's levels are the trainer's and the sizing's; its figures are the trainer's
    own ABOUT (a stale tooltip fails here when the trainer's measured costs change)."""
    from trainer.config.run_config import ECONOMICAL_LEVELS

    assert MS.ECONOMICAL_LEVELS == tuple(ECONOMICAL_LEVELS)
    pytest.importorskip("torch")
    from trainer.model.economical import ABOUT

    assert set(ABOUT) == set(MS.ECONOMICAL_LEVELS)
    en = F.spec("economical").option_tooltips
    for level, figures in (("selective", ("0.39x", "7.9%", "25%")), ("full", ("0.22x", "1.13x", "22%", "32%"))):
        for figure in figures:
            assert figure in ABOUT[level], (level, figure)
            assert figure.replace("x", "×").replace("%", " %") in en[level]["en"], (level, figure)


@pytest.mark.parametrize("lang", ["ru", "en"])
def test_every_tooltip_of_the_table_fits_60_by_12(lang):
    """Issue 16: «Экономный режим» was a 26-line wall, «Контекст n» one 1,100-px line."""
    from app.form.tooltips import fits

    for spec in F.FIELDS:
        tips = [spec.tooltip_text(lang)] + [spec.option_tooltip_text(k, lang) for k in spec.options]
        for tip in tips:
            assert fits(tip), (spec.name, tip)
            assert not tip.endswith("…"), (spec.name, "cut: too long for 12 lines")
        # The last line says where the whole story is; the help page has more than the tip.
        assert spec.tooltip_text(lang).endswith(F.HELP_HINT[lang]), spec.name
        assert spec.help_text(lang).startswith(spec.tooltip_body(lang)), spec.name
    assert len(F.spec("economical").help_text(lang)) > 3 * len(F.spec("economical").tooltip_body(lang))


def test_the_wrap_rule():
    from app.form.tooltips import fits, wrap_tip

    long = "слово " * 200
    wrapped = wrap_tip(long)
    assert fits(wrapped) and wrapped.endswith("…") and len(wrapped.split("\n")) == 12
    assert wrap_tip(wrapped) == wrapped  # idempotent: the window may wrap twice
    # A number with space-separated thousands is never split across lines.
    text = "x" * 55 + " 12 288 tokens"
    assert "12 288" in wrap_tip(text)
    assert wrap_tip("<b>rich</b> " * 30) == "<b>rich</b> " * 30  # Qt wraps rich text itself
    assert fits("a" * 90)  # one unbreakable token may exceed


def test_advanced_fields_follow_the_trainer():
    """«Дополнительно»: the trainer's own knobs, with its defaults and run.json keys."""
    from trainer.config.run_config import PRECISIONS, TrainingConfig

    trainer = TrainingConfig()
    advanced = [f for f in F.FIELDS if f.section == "advanced"]
    names = {f.name for f in advanced}
    assert {"warmup_steps", "min_lr_ratio", "weight_decay", "grad_clip", "precision"} <= names
    assert "advanced" in F.SECTIONS and "advanced" in F.COLLAPSED_SECTIONS
    for f in advanced:
        assert f.path == f"training.{f.name}"
        assert f.default == getattr(trainer, f.name), f.name
    assert tuple(F.spec("precision").options) == PRECISIONS


def contract_mismatches(specs) -> list[str]:
    """Fields whose run.json key the trainer lacks, or whose default is not the trainer's."""
    from trainer.config.run_config import default

    out = []
    for spec in specs:
        if not spec.path:
            continue
        try:
            want = default(spec.path)
        except KeyError:
            out.append(f"{spec.name}: the trainer's RunConfig has no key {spec.path}")
            continue
        got = F.to_run_value(spec, spec.default)
        if got != want or isinstance(got, bool) != isinstance(want, bool):
            out.append(f"{spec.name}: the form starts at {got!r}, the trainer at {want!r} ({spec.path})")
    return out


def test_every_field_with_a_run_json_key_is_the_trainers_key_with_its_default():
    """One contract: a field's run.json key exists in trainer.config.run_config's RunConfig and the
    form starts where the trainer does (a field another change adds is checked here too)."""
    assert [f.name for f in F.FIELDS if f.path] != []
    assert contract_mismatches(F.FIELDS) == []


def test_a_field_without_its_trainer_key_fails_the_contract():
    def spec(**kw):
        return F.FieldSpec(name="x", section="training", kind="int", label={"ru": "", "en": ""},
                           tooltip={"ru": "", "en": ""}, **kw)

    # Without a default of its own the field takes the trainer's: a missing key fails at once.
    with pytest.raises(KeyError, match="training.no_such_key"):
        spec(path="training.no_such_key")
    # With one, the check names it; a default other than the trainer's is named as well.
    assert contract_mismatches([spec(path="training.no_such_key", default=1)]) == [
        "x: the trainer's RunConfig has no key training.no_such_key"]
    assert contract_mismatches([spec(path="training.steps_to", default=1)]) == [
        "x: the form starts at 1, the trainer at 20000 (training.steps_to)"]
    assert contract_mismatches([spec(path="training.steps_to")]) == []
    assert spec(path="training.steps_to").default == 20000


def test_defaults_come_in_the_forms_terms():
    # run.json's false is the level «Выкл»; 630.0 minutes show as a whole number.
    assert F.spec("economical").default == "off" and F.to_run_value(F.spec("economical"), "off") is False
    assert F.spec("limit_min").default == 630 and isinstance(F.spec("limit_min").default, int)
    assert F.spec("constellations").default == () and F.defaults()["constellations"] == []
    assert F.from_run_value(F.spec("economical"), "half") is None  # one the form cannot show
