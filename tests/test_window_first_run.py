"""The window's first start on a PC without a card: a first run sized to it (≤ 30 min by
the lab's estimate), the guide's run one click away, and the sizing again when the CPU's
measured rate comes while the form is untouched."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from app.sizing.first_run import FIRST_RUN_MINUTES
from tests.test_window import window  # noqa: F401 (the fixture)

pytestmark = pytest.mark.usefixtures("russian", "first_start")


@pytest.fixture
def first_start(monkeypatch):
    """A first start as a user's is: sized to this PC (tests/conftest.py turns it off)."""
    monkeypatch.setenv("TERNIT_FIRST_RUN", "1")


def test_the_first_start_proposes_half_an_hour_and_the_guide_is_one_click_away(qtbot, window):  # noqa: F811
    view = window.form_view
    form = view.form
    assert form.values["gpu"] == "cpu" and form.sized_for_this_pc is not None
    est = form.estimate()
    assert est is not None and est.seconds_to_steps <= FIRST_RUN_MINUTES * 60
    assert view.sized_note.isVisibleTo(view) and view.sized_note.text().startswith("Размер для этого ПК")
    qtbot.mouseClick(view.guide_button, Qt.MouseButton.LeftButton)
    est = form.estimate()
    assert est is not None and est.params == 27_738_112 and form.values["gpu"] == "t4x2"
    assert not view.sized_note.isVisibleTo(view)
    qtbot.mouseClick(view.for_this_pc_button, Qt.MouseButton.LeftButton)
    assert form.values["gpu"] == "cpu" and form.values["limit_min"] == FIRST_RUN_MINUTES
    assert view.inputs["steps_to"].text() == view.inputs["steps_to"].text().strip() != ""


def test_a_pc_without_a_card_shows_what_applies_to_it(qtbot, window):  # noqa: F811
    """«В очередь» offers Kaggle as “wherever frees first” (the CPU takes only a run queued
    for it); the sizing speaks of the PC's memory, and the plan of no cards or CUDA."""
    view = window.form_view
    assert view.queue_buttons.anywhere.text() == (
        "Куда освободится раньше: аккаунты Kaggle (у этого ПК нет видеокарты NVIDIA)")
    rows = {r.key: r for r in view.form.size_rows()}
    assert rows["memory"].label == "Память ПК" and "ОЗУ" in rows["memory"].value
    assert "карт" not in rows["tokens_per_step"].note
    plan = rows["plan"].value + rows["plan"].note
    assert "делят состояние" not in plan and "lean_state" not in plan and "normal" not in plan
    assert "CUDA" not in " ".join(r.label + r.value + r.note for r in rows.values())
