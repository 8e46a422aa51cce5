"""The window as a new user meets it (issue 27): controls that stay put under the mouse
wheel, a form that keeps its place and its shape, a Text tab that is remembered."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, QPointF
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QAbstractSpinBox, QComboBox, QWidget

from tests.test_window import window  # noqa: F401 (the fixture)

pytestmark = pytest.mark.usefixtures("russian")


def wheel_over(qtbot, w: QWidget, notches: int = -1) -> None:
    """One real (spontaneous) wheel turn with the pointer over `w`, as a mouse sends it:
    Qt hands an ignored one on to the parents only when it comes from the platform."""
    pos = w.mapTo(w.window(), w.rect().center())
    QTest.wheelEvent(w.window().windowHandle(), QPointF(pos), QPoint(0, 120 * notches))
    qtbot.wait(1)


def test_the_wheel_over_an_unfocused_combo_box_scrolls_the_form_and_leaves_the_card(qtbot, window):  # noqa: F811
    """One notch over «Видеокарта» while scrolling changed the card (and the estimate with it)."""
    window.resize(1400, 700)
    view = window.form_view
    scroll = window.form_scroll
    combo = view.inputs["gpu"]
    assert combo.count() > 1
    scroll.ensureWidgetVisible(combo)
    view.inputs["name"].setFocus()
    card, estimate, at = combo.currentData(), view.size_text(), scroll.verticalScrollBar().value()
    wheel_over(qtbot, combo)
    assert (combo.currentData(), view.form.values["gpu"], view.size_text()) == (card, card, estimate)
    assert scroll.verticalScrollBar().value() > at  # the form scrolled instead
    # Clicked into, the combo box takes the wheel as Qt's own does.
    combo.setFocus()
    qtbot.waitUntil(combo.hasFocus)
    wheel_over(qtbot, combo)
    assert combo.currentData() != card


def test_every_combo_box_and_number_box_of_the_window_is_guarded(qtbot, window):  # noqa: F811
    from ui import wheel_guard
    from ui.data_dialog import AddDialog

    window.tabs.setCurrentWidget(window.text_tab)
    add = AddDialog("/tmp/some.txt", ["demo"], None, window)
    qtbot.addWidget(add)
    controls = [w for root in (window, add) for w in root.findChildren(QWidget)
                if isinstance(w, (QComboBox, QAbstractSpinBox))]
    assert len(controls) >= 10  # the form's, the plot's, the text tab's, the GPU tab's, the dialog's
    loose = [f"{type(w).__name__} {w.toolTip()[:40]!r}" for w in controls if not wheel_guard.guarded(w)]
    assert loose == []


def test_emptying_a_field_keeps_the_form_where_it_was_scrolled(qtbot, window):  # noqa: F811
    """Backspace in a number field while scrolled down to the estimate: the estimate folded
    to a line, the form grew shorter and jumped up, the numbers being watched out of view."""
    window.resize(1400, 700)
    view, scroll = window.form_view, window.form_scroll
    measured = window.load_measured()  # the estimate as it settles after the start
    qtbot.waitUntil(lambda: not measured.is_alive())
    qtbot.wait(20)
    bar = scroll.verticalScrollBar()
    edit = view.inputs["width"]
    bar.setValue(bar.maximum())
    edit.setFocus()
    qtbot.waitUntil(edit.hasFocus)
    at = bar.value()
    assert at > 0
    edit.selectAll()
    qtbot.keyClick(edit, "\b")  # Backspace: the field empty, the estimate says what is missing
    assert edit.text() == "" and view.form.values["width"] is None
    assert "исправьте поля модели" in view.size_text()
    qtbot.wait(20)
    assert bar.value() == at
    qtbot.keyClicks(edit, "384")
    qtbot.wait(20)
    assert bar.value() == at and "Сколько весов: 16\u00a0084\u00a0992" in view.size_text()
    top = view.size_box.mapTo(scroll.viewport(), view.size_box.rect().topLeft()).y()
    assert 0 <= top < scroll.viewport().height()  # the estimate is in sight
    assert edit.hasFocus()  # still in the field: the estimate's rows come and go around it
    view.inputs["name"].setFocus()  # leaving the field gives the held space back
    qtbot.waitUntil(lambda: view.size_box.minimumHeight() == 0)
