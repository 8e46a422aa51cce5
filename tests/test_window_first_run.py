"""The window's first start on a PC without a card: a first run sized to it (≤ 30 min by
the lab's estimate), the guide's run one click away, and the sizing again when the CPU's
measured rate comes while the form is untouched."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from app.sizing.first_run import FIRST_RUN_MINUTES
from tests.test_window import window  # noqa: F401 (the fixture)

pytestmark = pytest.mark.usefixtures("russian")


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
