"""The window's rough edges a new user met on the first day (issue 16), each through the
window as a user drives it: keys typed at 30 ms a key, clicks, a restart. (Start saying its
own run trains, and the banner's speed: test_window_lifecycle, on the run started there.)"""

from __future__ import annotations

import json

import pytest
from PySide6.QtCore import Qt, QTimer

from app.base import run_status as st
from app.base import settings
from app.runs import RunManager
from tests.test_window import WAIT_MS, fill_tiny, type_into, window  # noqa: F401 (the fixture)
from tests.ui_actions import choose

pytestmark = pytest.mark.usefixtures("russian")


def test_a_name_typed_at_30_ms_a_key_keeps_every_letter_while_the_window_refreshes(qtbot, window):  # noqa: F811
    view = window.form_view
    fill_tiny(qtbot, view)
    edit = view.inputs["name"]
    edit.setFocus()
    # What the window does by itself meanwhile: the measured speeds arrive, a run starts or
    # ends elsewhere, «Обновить» — each redraws the whole form.
    redraw = QTimer(view)
    redraw.timeout.connect(lambda: view.set_context(view.form.ctx))
    redraw.start(10)
    try:
        for name in ("nc-stop", "run-alpha-7", "long-run_v2"):
            edit.selectAll()
            qtbot.keyClicks(edit, name, delay=30)
            assert (edit.text(), view.form.values["name"]) == (name, name)
        # A letter typed in the middle stays where the cursor is.
        qtbot.keyClick(edit, Qt.Key.Key_Home)
        qtbot.keyClicks(edit, "my-", delay=30)
        assert edit.text() == "my-long-run_v2" == view.form.values["name"]
    finally:
        redraw.stop()


def test_continue_in_the_history_continues_in_one_click_and_closing_then_asks_and_can_stop_it(qtbot, window):  # noqa: F811
    """«Продолжить» in one click leaves the form as the user has it; with the continued run
    training, closing the window asks, and can stop it (one run pair serves both)."""
    view = window.form_view
    fill_tiny(qtbot, view)
    qtbot.mouseClick(view.start_button, Qt.MouseButton.LeftButton)
    run_id = window.followed
    qtbot.waitUntil(lambda: (window.runs.registry.get(run_id).last_step or 0) >= 2, timeout=WAIT_MS)
    window.stop_run(run_id)
    qtbot.waitUntil(lambda: window.runs.registry.get(run_id).status == st.STOPPED, timeout=WAIT_MS)
    type_into(qtbot, view, "name", "next-idea")  # the user meanwhile plans another run
    window.refresh_history()
    window.history.select(run_id)
    qtbot.mouseClick(window.history.buttons["continue"], Qt.MouseButton.LeftButton)
    child_id = window.followed
    assert child_id != run_id, window.statusBar().currentMessage()
    child = window.runs.registry.get(child_id)
    assert child.parent_id == run_id and child.active
    assert child.config()["training"]["steps_to"] == 100000  # the parent's «Шагов до»
    # The form is the user's, untouched: no checkpoint loaded into it.
    assert view.form.continuing is None and view.form.values["name"] == "next-idea"

    # Closing while a run trains asks, and can stop it.
    qtbot.waitUntil(lambda: window.runs.registry.get(child_id).status == st.RUNNING, timeout=WAIT_MS)
    window.close()
    box = window.close_question
    assert window.isVisible() and box.isVisible()
    assert "идёт" in box.text() and "в своих процессах" in box.informativeText()
    assert "pause" not in box.buttons_by_answer  # nothing is queued: no «Приостановить очередь»
    qtbot.mouseClick(box.buttons_by_answer["cancel"], Qt.MouseButton.LeftButton)
    assert window.isVisible() and window.runs.registry.get(child_id).status == st.RUNNING

    window.close()
    box = window.close_question
    box.checkBox().setChecked(True)
    qtbot.mouseClick(box.buttons_by_answer["stop"], Qt.MouseButton.LeftButton)
    assert not window.isVisible()
    assert window.runs.registry.get(child_id).status == st.STOPPING
    assert settings.ask_on_close() is False  # «Больше не спрашивать» is remembered
    runs = RunManager()
    qtbot.waitUntil(lambda: runs.poll() is not None and runs.registry.get(child_id).status == st.STOPPED,
                    timeout=WAIT_MS)


def test_a_restart_opens_the_form_as_the_user_left_it(qtbot, tiny_data):
    from ui.window.main_window import MainWindow

    def start() -> MainWindow:
        w = MainWindow(runs=RunManager(), poll_ms=100, extra_prepared=[str(tiny_data)])
        qtbot.addWidget(w)
        w.show()
        return w

    w = start()
    fill_tiny(qtbot, w.form_view)
    choose(w.form_view, "economical", "full")
    kept = dict(w.form_view.form.values)
    w.close()
    w = start()
    view = w.form_view
    assert view.form.values == kept
    assert view.inputs["width"].text() == "32" and view._constellation_boxes["tiny"].isChecked()
    assert view.start_button.isEnabled(), view.why.text()
    w.close()

    # A value damaged by hand or gone from the lab since is ignored; the rest comes back.
    path = settings.path()
    saved = json.loads(path.read_text(encoding="utf-8"))
    saved["form"].update(width="wide", heads=-2, layers=10**9, constellations=["gone", "tiny"],
                         gpu="rtx9999", machine="someone-else", economical="max")
    path.write_text(json.dumps(saved), encoding="utf-8")
    w = start()
    values = w.form_view.form.values
    assert (values["width"], values["heads"], values["layers"]) == (512, 8, 8)  # the defaults
    assert values["constellations"] == ["tiny"] and values["context"] == 32
    assert values["gpu"] == "cpu" and values["machine"] == "local" and values["economical"] == "off"
    w.close()
