"""The window over a local run's life, offscreen, with the real trainer on the CPU: Start
pressed twice, two runs on one computer, a run folder or a data folder deleted by hand, a
locked state file, the language switched while a failure is shown. (Closing the window while
a run trains: test_window_rough_edges, on the run continued there.)"""

from __future__ import annotations

import re
import shutil
import sqlite3

import pytest
from PySide6.QtCore import Qt

from app.base import paths
from app.base import run_status as st
from app.runs import RunManager
from tests.test_window import WAIT_MS, fill_tiny, type_into, window  # noqa: F401 (the fixture)

pytestmark = pytest.mark.usefixtures("russian")
CYRILLIC = re.compile("[А-Яа-яЁё]")


def test_start_pressed_twice_starts_one_run_says_it_trains_with_its_speed_and_why_not_a_second(qtbot, window):  # noqa: F811
    """One run started from the form serves what is seen while it trains: a double click
    starts one; the form says its own run trains (no error); the banner says speed and time
    left; another run may start beside it; once it ended, the same settings start again."""
    view = window.form_view
    fill_tiny(qtbot, view)
    # «Лимит» 3 min and «Шагов до» at its maximum: the limit comes first however fast this
    # machine trains the tiny model (at 1.5 ms a step, 100 000 steps took less than 3 min).
    type_into(qtbot, view, "steps_to", "100000000")
    qtbot.mouseClick(view.start_button, Qt.MouseButton.LeftButton)
    qtbot.mouseClick(view.start_button, Qt.MouseButton.LeftButton)  # a double click
    runs = window.runs.registry.list_runs()
    assert len(runs) == 1, [r.id for r in runs]
    run_id = runs[0].id
    assert window.followed == run_id, window.statusBar().currentMessage()
    # Start says its own run is training, not an error.
    red = [label.text() for label in (*view.messages.values(), view.why, window.banner.failure)
           if label.isVisible() and "#b00020" in label.styleSheet()]
    assert red == []
    assert "Старт недоступен" not in view.why.text()
    assert not view.start_button.isEnabled()  # a second click would train the same numbers
    assert "«tiny» обучается" in view.why.text() and run_id in view.why.text()

    # The banner says speed and time left while it trains.
    live = window.banner.live
    qtbot.waitUntil(lambda: live.isVisible() and "ток/с" in live.text(), timeout=WAIT_MS)
    assert "мс/шаг" in live.text() and "лимит через" in live.text() and "раньше «Шагов до»" in live.text()

    # Another run on the same computer may start, with a word on what two trainings share.
    type_into(qtbot, view, "steps_to", "99999999")
    assert view.start_button.isEnabled(), view.why.text()
    assert "делят процессор" in view.messages["gpu"].text()

    window.language_actions["en"].trigger()
    view = window.form_view
    type_into(qtbot, view, "steps_to", "100000000")
    assert not view.start_button.isEnabled()
    assert "«tiny» is training" in view.why.text(), view.why.text()

    # Once it has ended, the same settings start again.
    window.stop_run(run_id)
    qtbot.waitUntil(lambda: window.runs.registry.get(run_id).status == st.STOPPED, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: view.start_button.isEnabled(), timeout=WAIT_MS)


def test_a_deleted_data_folder_is_caught_in_the_form_then_a_deleted_run_folder_is_shown_as_such(
        qtbot, tiny_data, tmp_path):
    """One finished run, two things deleted by hand in turn: its data folder (caught in the
    form, not by a failed run), then its run folder (shown as such in the history)."""
    from ui.main_window import MainWindow

    data = tmp_path / "data"
    shutil.copytree(tiny_data, data)
    w = MainWindow(runs=RunManager(), poll_ms=100, extra_prepared=[str(data)])
    qtbot.addWidget(w)
    w.ensure_ready()
    fill_tiny(qtbot, w.form_view)
    type_into(qtbot, w.form_view, "steps_to", "5")
    assert w.form_view.form.prepared_for_selection().dir == str(data)
    qtbot.mouseClick(w.form_view.start_button, Qt.MouseButton.LeftButton)
    run_id = w.followed
    qtbot.waitUntil(lambda: w.runs.registry.get(run_id).status == st.FINISHED, timeout=WAIT_MS)

    shutil.rmtree(data)  # moved or deleted while the window is open
    w.refresh_history()
    assert not w.continue_run(run_id)  # one click cannot start it: the form says why
    assert "Продолжить сразу нельзя" in w.statusBar().currentMessage()
    view = w.form_view
    assert not view.start_button.isEnabled()
    assert "не подготовлены" in view.why.text() and not view.prepare_button.isHidden()

    # The run's own folder deleted by hand too (one finished run serves both).
    rec = w.runs.registry.get(run_id)
    shutil.rmtree(rec.path)
    w.refresh_history()
    row = next(r for r in w.history.rows if r.id == rec.id)
    assert row.status_label == "папка удалена" and not row.can_continue and not row.can_export
    w.history.select(rec.id)
    assert not w.history.buttons["continue"].isEnabled()
    w.open_folder(rec.id)
    assert "Папки прогона нет" in w.statusBar().currentMessage() and rec.folder in w.statusBar().currentMessage()
    assert w.continue_info(rec.id) is None
    assert "Папки прогона нет" in w.statusBar().currentMessage()
    w.close()


def test_a_locked_state_file_at_start_is_reported_and_leaves_no_half_made_run(qtbot, window, monkeypatch):  # noqa: F811
    from app.base import state

    view = window.form_view
    fill_tiny(qtbot, view)
    # Not the lab's 10 s in a test: a write waits WAIT_NOTICE_S, says so, then waits the rest
    # of BUSY_TIMEOUT_MS (State._begin sets both on the connection at each BEGIN, so a
    # busy_timeout set here beforehand was overridden and the test waited the full 10 s).
    monkeypatch.setattr(state, "BUSY_TIMEOUT_MS", 600)
    monkeypatch.setattr(state, "WAIT_NOTICE_S", 0.2)
    lock = sqlite3.connect(str(paths.state_db_path()), isolation_level=None, timeout=0)
    lock.execute("BEGIN EXCLUSIVE")  # another program holds the lab's state file
    try:
        qtbot.mouseClick(view.start_button, Qt.MouseButton.LeftButton)
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    message = window.statusBar().currentMessage()
    assert "занят" in message and "state.sqlite" in message, message
    assert window.banner.failure.isVisible() and window.banner.failure.text() == message
    assert window.runs.registry.list_runs() == []
    assert list(paths.runs_dir().iterdir()) == []  # no folder a restart would adopt as a run
    window.runs.registry.state.conn.execute(f"PRAGMA busy_timeout = {state.BUSY_TIMEOUT_MS}")


def test_a_failure_shown_in_the_banner_follows_the_language(qtbot, window):  # noqa: F811
    import json
    import time

    form = window.form_view.form
    form.set("gpu", "cpu")
    form.values["constellations"] = ["tiny"]
    rec = window.runs.registry.create_run(form.run_config())
    now = time.time()
    events = [{"event": "start", "time": now, "step": 0, "params": 35200},
              {"event": "error", "time": now, "step": 3, "kind": "nan", "message": "loss is nan", "advice": ""},
              {"event": "end", "time": now, "step": 3, "reason": "error", "message": "loss is nan"}]
    rec.events_path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    window.runs.registry.ingest(rec.id)
    window.follow(rec.id)
    assert "обучение разошлось" in window.banner.failure.text()
    window.language_actions["en"].trigger()
    assert "training diverged" in window.banner.failure.text(), window.banner.failure.text()
    assert not CYRILLIC.search(window.banner.failure.text() + window.banner.retry_button.text())
