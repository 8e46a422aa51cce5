"""The «Новый прогон» form's widgets alone, offscreen (no main window, no trainer): the
economical mode is a combo of its three levels, each saying what it costs."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox

from app.base.i18n import set_language
from app.data.prepared import Prepared
from app.form.run_form import ContinueFrom, FormContext
from tests.ui_actions import choose

pytestmark = pytest.mark.usefixtures("russian")  # conftest: the interface in Russian


@pytest.fixture
def view(qtbot, tiny_data):
    from ui.form.run_form import RunFormView

    ctx = FormContext()
    ctx.add_prepared(Prepared.read(tiny_data))
    v = RunFormView(ctx)
    qtbot.addWidget(v)
    return v


def flat(text: str) -> str:
    """A tooltip's words with its line breaks taken out (the wrap rule breaks lines)."""
    return " ".join(text.split())


def items(combo: QComboBox) -> list[tuple[str, str]]:
    return [(combo.itemData(i), combo.itemText(i)) for i in range(combo.count())]


def test_economical_is_a_combo_of_three_levels_with_their_costs(view):
    combo = view.inputs["economical"]
    assert isinstance(combo, QComboBox)
    assert items(combo) == [("off", "Выкл"), ("selective", "Выборочный"), ("full", "Полный")]
    assert combo.currentData() == "off" and combo.isEnabled()
    assert view.labels["economical"].text() == "Пересчёт активаций"
    # The field's tooltip: every level's cost in short; each option its own; the lab's
    # note on its «Подробнее» page (the «?» beside the field).
    tip = flat(combo.toolTip())
    assert "0,39×" in tip and "0,22×" in tip and "Подробнее" in tip
    tips = [flat(combo.itemData(i, Qt.ItemDataRole.ToolTipRole)) for i in range(combo.count())]
    assert tips[0].startswith("Выкл:")
    assert "0,39×" in tips[1] and "+25 %" in tips[1]
    assert "1,13×" in tips[2] and "+32 %" in tips[2]
    view.help_buttons["economical"].click()
    page = flat(view.help_page.plain_text())
    assert "5 536" in page and "12 004" in page and "не измерено" in page and "0,39×" in page


def test_choosing_a_level_reaches_the_form_and_run_json(view):
    choose(view, "economical", "full")
    assert view.form.values["economical"] == "full"
    assert view.form.run_config()["training"]["economical"] == "full"
    choose(view, "economical", "off")
    assert view.form.run_config()["training"]["economical"] is False
    # A run.json read back (a retry) sets the combo; true was the old checkbox: selective.
    view.load_config({"training": {"economical": True}})
    assert view.inputs["economical"].currentData() == "selective"
    view.load_config({"training": {"economical": "full"}})
    assert view.inputs["economical"].currentData() == "full"


def test_continuing_leaves_the_level_editable(view):
    view.form.set("economical", "selective")
    parent = dict(view.form.run_config(), resume_from="/runs/parent/checkpoints/step-00000040.pt")
    view.continue_from(ContinueFrom(run_id="parent", config=parent, step=40, label="parent · 40"))
    combo = view.inputs["economical"]
    assert combo.currentData() == "selective" and combo.isEnabled()
    assert not view.inputs["width"].isEnabled() or view.inputs["width"].isReadOnly()  # the model is locked
    choose(view, "economical", "full")
    assert view.form.run_config()["training"]["economical"] == "full"


def test_english_labels(qtbot, tiny_data):
    from ui.form.run_form import RunFormView

    set_language("en")
    v = RunFormView(FormContext())
    qtbot.addWidget(v)
    assert items(v.inputs["economical"]) == [("off", "Off"), ("selective", "Selective"), ("full", "Full")]
    assert v.labels["economical"].text() == "Activation recompute"
    assert "0.39×" in flat(v.inputs["economical"].toolTip())
    page = flat(v.show_help("economical").plain_text())
    assert "12,004" in page and "not measured" in page
