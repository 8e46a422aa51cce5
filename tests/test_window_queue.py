"""The queue in the window (offscreen, the real trainer): «В очередь» from the form, a series
from one field, the list and the timeline following a run as it moves, the tray message when
the queue empties, and the queue still there after the window is closed and opened again.
The window never drives the queue: it starts the queue's own runner, which ends by itself."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialogButtonBox

from app.queue.series import Results, Row
from app.queue.store import DONE, RUNNING, STARTING, WAITING
from app.runs import RunManager
from tests.trainer_run import end_left_trainers
from tests.ui_actions import choose

WAIT_MS = 90_000  # generous: the CI machine is small and shared

pytestmark = pytest.mark.usefixtures("russian")


def make_window(qtbot, tiny_data):
    from ui.window.main_window import MainWindow

    w = MainWindow(runs=RunManager(), poll_ms=100, queue_ms=150, extra_prepared=[str(tiny_data)],
                   remember_layout=False)
    qtbot.addWidget(w)
    w.resize(1400, 900)
    w.show()
    return w


def fill_tiny(qtbot, view) -> None:
    for name, box in view._constellation_boxes.items():
        if box.isChecked() != (name == "tiny"):
            box.click()
    for name, text in (("name", "q"), ("context", "16"), ("width", "16"), ("heads", "2"), ("layers", "1"),
                       ("batch_per_card", "2"), ("steps_to", "4"), ("limit_min", "2")):
        edit = view.inputs[name]
        edit.selectAll()
        qtbot.keyClicks(edit, text)
    choose(view, "gpu", "cpu")


def states(tab) -> list[str]:
    return [r.item.state for r in tab.last.rows] if tab.last else []


def test_queue_from_the_form_a_series_and_the_queue_after_a_restart(qtbot, tiny_data):
    w = make_window(qtbot, tiny_data)
    tab = w.queue_tab
    try:
        view = w.form_view
        fill_tiny(qtbot, view)
        assert view.queue_buttons.isEnabled(), view.why.text()
        w.tabs.setCurrentWidget(tab)
        timeline = tab.ensure_timeline()
        seen: set[str] = set()
        tab.refreshed.connect(lambda: seen.update(b.state for b in timeline.bars))
        qtbot.mouseClick(view.queue_buttons.queue_button, Qt.MouseButton.LeftButton)
        # The list and the timeline follow the run: waiting or starting, running, done.
        qtbot.waitUntil(lambda: states(tab) == [DONE], timeout=WAIT_MS)
        assert {RUNNING, DONE} <= seen or {STARTING, DONE} <= seen, seen
        row = tab.last.rows[0]
        assert row.machine == "local" and row.start <= row.end
        assert tab.table.item(0, 2).text() == "этот ПК" and tab.table.item(0, 5).text() == "готов"
        assert [b.machine for b in timeline.bars] == ["local"]
        qtbot.waitUntil(lambda: any(title == "Очередь пуста" for title, _ in w.notifications), timeout=WAIT_MS)
        assert w.queue.started is not None  # the window started the runner, a process of its own
        qtbot.waitUntil(lambda: w.queue.started.poll() is not None, timeout=WAIT_MS)  # it ended by itself
        assert w.queue.started.returncode == 0

        # Paused, a series from one field (lr): two waiting runs, planned one after another on this PC.
        qtbot.mouseClick(tab.pause_button, Qt.MouseButton.LeftButton)
        dialog = w.queue_series(view.form.run_config())
        assert dialog.first.currentData() == "lr"
        dialog.first_values.setText("0,001; 0,003")
        assert "2" in dialog.count.text()
        dialog.buttons.button(QDialogButtonBox.StandardButton.Ok).click()
        qtbot.waitUntil(lambda: states(tab) == [DONE, WAITING, WAITING], timeout=WAIT_MS)
        names = [r.item.name for r in tab.last.rows]
        assert names[1:] == ["q lr=0.001", "q lr=0.003"]
        first, second = tab.last.rows[1:]
        assert [b.machine for b in timeline.bars if b.state == WAITING] == ["local", "local"]
        assert first.machine == second.machine == "local" and first.end <= second.start + 1
        assert tab.pause_button.isChecked()
        series_id = tab.last.rows[1].item.series_id
    finally:
        end_left_trainers(w.runs)
        w.close()

    # Closed and opened again: the queue is there as it was, still paused.
    again = make_window(qtbot, tiny_data)
    try:
        qtbot.waitUntil(lambda: len(states(again.queue_tab)) == 3, timeout=WAIT_MS)
        assert states(again.queue_tab) == [DONE, WAITING, WAITING]
        assert again.queue_tab.pause_button.isChecked()
        assert [r.item.series_id for r in again.queue_tab.last.rows[1:]] == [series_id, series_id]
        # Paused: nobody drives it, and the window says so (it never drives the queue itself).
        assert again.queue.started is None and "приостановлена" in again.queue_tab.who.text()
        assert "приостановлена" in again.queue_status.text()
        # «Настройки»: the queue after a reboot (the logon entry) and the sleep request, on and off.
        from app.base import settings
        from app.queue import autostart

        night = again.menu.night_actions
        assert not night["autostart"].isChecked() and night["awake"].isChecked()
        night["autostart"].trigger()
        assert autostart.status().installed and "включён" in again.statusBar().currentMessage()
        night["autostart"].trigger()
        assert not autostart.status().installed
        night["awake"].trigger()
        assert settings.keep_awake() is False
    finally:
        again.close()


def test_series_results_name_the_winner(qtbot):
    from ui.queue.series_dialog import SeriesResultsDialog

    def row(i: int, lr: float, width: int, loss: float) -> Row:
        return Row(i, {"training.lr": lr, "model.width": width}, DONE, f"r{i}", "finished", loss, loss - 0.01,
                   loss + 0.01, loss / 0.69 / 1.6, None, None, 4)

    res = Results(1, "s", ["training.lr", "model.width"],
                  [row(1, 0.001, 16, 5.6), row(2, 0.001, 32, 5.4), row(3, 0.003, 16, 5.5), row(4, 0.003, 32, 5.2)],
                  4, True, True, "победил lr=0.003 width=32")
    dialog = SeriesResultsDialog(res)
    qtbot.addWidget(dialog)
    assert dialog.table.rowCount() == 4
    assert dialog.table.item(3, 0).text().startswith("★") and dialog.table.item(3, 0).font().bold()
    assert not dialog.table.item(0, 0).text().startswith("★")
    assert "победил" in dialog.verdict.text() and dialog.plot is not None
