"""The field table: every field has labels and tooltips in both languages, sane ranges and
defaults, and the tooltips carry the guide's facts and the current default."""

from __future__ import annotations

import re

import pytest

from app import fields as F


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
            "steps_to": "Шагов до", "limit_min": "Лимит, мин", "economical": "Экономный режим",
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
    ru = {n: F.spec(n).tooltip_text("ru") for n in F.BY_NAME}
    en = {n: F.spec(n).tooltip_text("en") for n in F.BY_NAME}
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
    assert d["steps_to"] == 20000 and d["limit_min"] == 630 and d["economical"] is False
    # Every field that lands in run.json names a real place in it.
    for spec in F.FIELDS:
        if spec.path:
            assert re.fullmatch(r"(name|(model|training|data|target)\.[a-z_]+)", spec.path), spec.path
