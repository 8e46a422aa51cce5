"""The window over a local run's life, offscreen, with the real trainer on the CPU: Start
pressed twice, two runs on one computer, a run folder or a data folder deleted by hand, a
locked state file, the language switched while a failure is shown."""

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


def test_start_pressed_twice_starts_one_run_and_says_why_not_a_second(qtbot, window):  # noqa: F811
    view = window.form_view
    fill_tiny(qtbot, view)
    qtbot.mouseClick(view.start_button, Qt.MouseButton.LeftButton)
    qtbot.mouseClick(view.start_button, Qt.MouseButton.LeftButton)  # a double click
    runs = window.runs.registry.list_runs()
    assert len(runs) == 1, [r.id for r in runs]
    run_id = runs[0].id
    assert not view.start_button.isEnabled()
    assert "«tiny» обучается" in view.why.text() and run_id in view.why.text()

    # Another run on the same computer may start, with a word on what two trainings share.
    type_into(qtbot, view, "steps_to", "99999")
    assert view.start_button.isEnabled(), view.why.text()
    assert "делят процессор" in view.messages["gpu"].text()

    window.language_actions["en"].trigger()
    view = window.form_view
    type_into(qtbot, view, "steps_to", "100000")
    assert not view.start_button.isEnabled()
    assert "«tiny» is training" in view.why.text(), view.why.text()

    # Once it has ended, the same settings start again.
    window.stop_run(run_id)
    qtbot.waitUntil(lambda: window.runs.registry.get(run_id).status == st.STOPPED, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: view.start_button.isEnabled(), timeout=WAIT_MS)


def test_a_deleted_data_folder_is_caught_in_the_form_not_by_a_failed_run(qtbot, tiny_data, tmp_path):
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
    w.close()


def test_a_run_folder_deleted_by_hand_is_shown_as_such(qtbot, window):  # noqa: F811
    form = window.form_view.form
    for name, value in (("context", 32), ("width", 32), ("heads", 2), ("layers", 2), ("batch_per_card", 4),
                        ("steps_to", 5)):
        form.set(name, value)
    form.set("gpu", "cpu")
    form.values["constellations"] = ["tiny"]
    rec = window.start_run(form.run_config())
    qtbot.waitUntil(lambda: window.runs.registry.get(rec.id).status == st.FINISHED, timeout=WAIT_MS)
    shutil.rmtree(rec.path)

    window.refresh_history()
    row = next(r for r in window.history.rows if r.id == rec.id)
    assert row.status_label == "папка удалена" and not row.can_continue and not row.can_export
    window.history.select(rec.id)
    assert not window.history.buttons["continue"].isEnabled()
    window.open_folder(rec.id)
    assert "Папки прогона нет" in window.statusBar().currentMessage() and rec.folder in window.statusBar().currentMessage()
    assert window.continue_info(rec.id) is None
    assert "Папки прогона нет" in window.statusBar().currentMessage()


def test_a_locked_state_file_at_start_is_reported_and_leaves_no_half_made_run(qtbot, window):  # noqa: F811
    view = window.form_view
    fill_tiny(qtbot, view)
    lock = sqlite3.connect(str(paths.state_db_path()), isolation_level=None, timeout=0)
    lock.execute("BEGIN EXCLUSIVE")  # another program holds the lab's state file
    try:
        window.runs.registry.state.conn.execute("PRAGMA busy_timeout = 200")  # not 10 s in a test
        qtbot.mouseClick(view.start_button, Qt.MouseButton.LeftButton)
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    message = window.statusBar().currentMessage()
    assert "занят" in message and "state.sqlite" in message, message
    assert window.banner.failure.isVisible() and window.banner.failure.text() == message
    assert window.runs.registry.list_runs() == []
    assert list(paths.runs_dir().iterdir()) == []  # no folder a restart would adopt as a run
    window.runs.registry.state.conn.execute("PRAGMA busy_timeout = 10000")


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


def test_closing_while_a_run_trains_asks_and_can_stop_it(qtbot, window):  # noqa: F811
    from app.base import settings

    view = window.form_view
    fill_tiny(qtbot, view)
    qtbot.mouseClick(view.start_button, Qt.MouseButton.LeftButton)
    run_id = window.followed
    qtbot.waitUntil(lambda: window.runs.registry.get(run_id).status == st.RUNNING, timeout=WAIT_MS)

    window.close()
    box = window.close_question
    assert window.isVisible() and box.isVisible()
    assert "продолжится" in box.informativeText() and "подхватит" in box.informativeText()
    qtbot.mouseClick(box.buttons_by_answer["cancel"], Qt.MouseButton.LeftButton)
    assert window.isVisible() and window.runs.registry.get(run_id).status == st.RUNNING

    window.close()
    box = window.close_question
    box.checkBox().setChecked(True)
    qtbot.mouseClick(box.buttons_by_answer["stop"], Qt.MouseButton.LeftButton)
    assert not window.isVisible()
    assert window.runs.registry.get(run_id).status == st.STOPPING
    assert settings.ask_on_close() is False  # «Больше не спрашивать» is remembered
    runs = RunManager()
    qtbot.waitUntil(lambda: runs.poll() is not None and runs.registry.get(run_id).status == st.STOPPED,
                    timeout=WAIT_MS)
