"""«Лаборатория → Данные…» (offscreen Qt) over the real state database, with the real
`ternit data` child processes on real text files made here."""

from __future__ import annotations

import os

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel

from app.base.i18n import set_language
from app.data.library import Library

WAIT_MS = 30_000
STALLED_DISK = os.path.join(os.path.dirname(__file__), "stalled_disk")


def stalled_file(monkeypatch, folder) -> None:
    """A text file in `folder` whose reading never finishes in the child commands (a stalled
    network disk: tests/stalled_disk/sitecustomize.py), so an add is caught mid-way."""
    (folder / "zz-stuck.txt").write_text("Этот файл не дочитать.\n", encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (STALLED_DISK, os.environ.get("PYTHONPATH")) if p))
    monkeypatch.setenv("TERNIT_TEST_STALL", "zz-stuck.txt")


@pytest.fixture
def dialog(qtbot, russian):
    from ui.data.dialog import DataDialog

    dlg = DataDialog()
    qtbot.addWidget(dlg)
    dlg.show()
    with qtbot.waitSignal(dlg.statuses_ready, timeout=WAIT_MS):
        pass
    yield dlg
    dlg.done(0)


def texts(folder, n=3):
    folder.mkdir()
    for i in range(n):
        (folder / f"{i}.txt").write_text(f"Глава {i}.\n\nТекст главы номер {i}, немного слов.\n", encoding="utf-8")
    return folder


def row_of(table, name):
    for r in range(table.rowCount()):
        if table.item(r, 0).data(Qt.ItemDataRole.UserRole) == name:
            return [table.item(r, c).text() for c in range(table.columnCount())]
    return None


def library_names():
    lib = Library()
    try:
        return [d.name for d in lib.datasets()], [c.name for c in lib.constellations()]
    finally:
        lib.state.close()


def test_add_a_folder_to_a_new_constellation_lists_it_with_its_counts(qtbot, dialog, tmp_path):
    folder = texts(tmp_path / "рассказы")
    with qtbot.waitSignal(dialog.changed, timeout=WAIT_MS), \
            qtbot.waitSignal(dialog.task_finished, timeout=WAIT_MS) as got:
        assert dialog.add(str(folder)) is not None  # both names default to the folder's
        assert dialog.progress.isVisible() and dialog.cancel_button.isVisible()
    assert got.args == [0], dialog.status.text()
    crow = row_of(dialog.constellations, "рассказы")
    assert crow is not None, "the new constellation is listed"
    assert crow[1] == "рассказы" and crow[3] == "3" and crow[5] == "не посчитаны"
    drow = row_of(dialog.datasets, "рассказы")
    assert drow[1] == str(folder) and drow[3] == "рассказы" and drow[4] == "в порядке"
    assert "добавлен" in dialog.status.text() and "файлов: 3" in dialog.status.text()
    assert not dialog.progress.isVisible()
    # The same library, read by anyone else (the form, the command line), has it.
    datasets, constellations = library_names()
    assert "рассказы" in datasets and "рассказы" in constellations


@pytest.mark.parametrize("lang, words", [("ru", ("нет текста", "ничего не добавлено", "UTF-8")),
                                         ("en", ("no text", "nothing was added", "UTF-8"))])
def test_a_file_with_no_text_is_refused_with_the_commands_message(qtbot, tmp_path, lang, words):
    from ui.data.dialog import DataDialog

    set_language(lang)
    try:
        dlg = DataDialog()
        qtbot.addWidget(dlg)
        empty = tmp_path / "пусто.txt"
        empty.write_bytes(b"")
        with qtbot.waitSignal(dlg.task_finished, timeout=WAIT_MS) as got:
            dlg.add(str(empty), constellation="новое")
        assert got.args == [2]
        message = dlg.status.text()
        assert str(empty) in message and all(w in message for w in words), message
        assert not message.startswith("ternit data:")
        datasets, constellations = library_names()
        assert "пусто" not in datasets and "новое" not in constellations
        assert row_of(dlg.constellations, "новое") is None
        dlg.done(0)
    finally:
        set_language(None)


def test_a_missing_path_is_the_commands_message_too(qtbot, dialog, tmp_path):
    with qtbot.waitSignal(dialog.task_finished, timeout=WAIT_MS) as got:
        dialog.add(str(tmp_path / "нет-такой"), name="x", constellation="y")
    assert got.args == [2] and "нет такого пути" in dialog.status.text()


def test_rename_and_remove_a_constellation(qtbot, dialog, tmp_path):
    lib = dialog.library
    lib.add(texts(tmp_path / "a"), name="a", constellation="старое")
    dialog.refresh()
    dialog._select(dialog.constellations, "старое")
    assert dialog.rename_button.isEnabled() and dialog.remove_constellation_button.isEnabled()
    with qtbot.waitSignal(dialog.changed, timeout=WAIT_MS):
        assert dialog.rename_constellation("старое", "новое")
    assert row_of(dialog.constellations, "старое") is None and row_of(dialog.constellations, "новое")
    assert row_of(dialog.datasets, "a")[3] == "новое"
    assert "теперь называется «новое»" in dialog.status.text()
    # A taken name is refused with the library's reason, and nothing changes.
    lib.add(texts(tmp_path / "b"), name="b", constellation="другое")
    dialog.refresh()
    assert not dialog.rename_constellation("новое", "другое")
    assert "уже есть" in dialog.status.text() and row_of(dialog.constellations, "новое")
    with qtbot.waitSignal(dialog.changed, timeout=WAIT_MS):
        assert dialog.remove_constellation("новое", confirm=False)
    assert row_of(dialog.constellations, "новое") is None
    assert row_of(dialog.datasets, "a") is not None  # the dataset stays in the library
    assert "наборы остались в библиотеке" in dialog.status.text()


def test_datasets_are_taken_out_and_removed_but_files_stay(qtbot, dialog, tmp_path):
    folder = texts(tmp_path / "c")
    dialog.library.add(folder, name="c", constellation="одно")
    dialog.library.add_to_constellation("второе", "c")
    dialog.refresh()
    assert dialog.remove_dataset("c", "одно", confirm=False)
    assert row_of(dialog.datasets, "c")[3] == "второе"
    assert "файлы на диске не тронуты" in dialog.status.text()
    assert dialog.remove_dataset("c", confirm=False)
    assert row_of(dialog.datasets, "c") is None and sorted(p.name for p in folder.iterdir()) == [
        "0.txt", "1.txt", "2.txt"]
    assert "файлы на диске не тронуты" in dialog.status.text()


def test_the_demo_cannot_be_renamed_or_removed(qtbot, dialog):
    dialog._select(dialog.constellations, "demo")
    assert dialog.selected_constellation() == "demo"
    assert not dialog.rename_button.isEnabled() and not dialog.remove_constellation_button.isEnabled()
    assert "demo" in dialog.rename_button.toolTip()
    # Even asked directly, the library refuses and says why.
    assert not dialog.remove_constellation("demo", confirm=False)
    assert "встроенное созвездие" in dialog.status.text()
    assert not dialog.rename_constellation("demo", "моё")
    dialog._select(dialog.datasets, "python-docs")
    assert not dialog.remove_dataset_button.isEnabled() and not dialog.take_out_button.isEnabled()
    assert not dialog.remove_dataset("python-docs", confirm=False)
    assert row_of(dialog.constellations, "demo") is not None and row_of(dialog.datasets, "python-docs")


def test_cancel_an_add_in_progress_leaves_the_library_unchanged(qtbot, dialog, tmp_path, monkeypatch):
    """A file that never finishes reading (a stalled network disk) holds the add; «Отмена»
    stops the child and nothing of the add is kept."""
    folder = texts(tmp_path / "долго")
    stalled_file(monkeypatch, folder)
    before = library_names()
    with qtbot.waitSignal(dialog.task_finished, timeout=WAIT_MS) as got:
        dialog.add(str(folder), constellation="долгое")
        qtbot.waitUntil(lambda: dialog.output.progress is not None, timeout=WAIT_MS)
        assert not dialog.add_folder_button.isEnabled()  # one operation at a time
        qtbot.mouseClick(dialog.cancel_button, Qt.MouseButton.LeftButton)
    assert got.args == [130]
    assert "Отменено" in dialog.status.text() and "ничего не изменилось" in dialog.status.text()
    assert library_names() == before
    assert row_of(dialog.constellations, "долгое") is None
    assert not dialog.cancel_button.isVisible() and dialog.add_folder_button.isEnabled()


def test_statuses_show_changed_and_missing_files_and_recheck_reads_them(qtbot, tmp_path, russian):
    from ui.data.dialog import DataDialog

    lib = Library()
    kept = texts(tmp_path / "kept")
    lib.add(kept, name="kept", constellation="k")
    gone = tmp_path / "gone.txt"
    gone.write_text("Файл, который пропадёт.\n", encoding="utf-8")
    lib.add(gone, name="gone")
    lib.state.close()
    (kept / "1.txt").write_text("Другой текст, длиннее прежнего.\n", encoding="utf-8")
    gone.unlink()
    dlg = DataDialog()
    qtbot.addWidget(dlg)
    assert row_of(dlg.datasets, "kept")[4] == "…"  # until the thread answers
    with qtbot.waitSignal(dlg.statuses_ready, timeout=WAIT_MS):
        pass
    assert row_of(dlg.datasets, "kept")[4] == "изменился"
    assert row_of(dlg.datasets, "gone")[4] == "нет на диске"
    assert row_of(dlg.datasets, "python-docs")[4] == "в порядке"
    with qtbot.waitSignal(dlg.task_finished, timeout=WAIT_MS) as got:
        dlg.recheck()
    assert got.args == [2]  # a dataset's path is gone: the command's exit code says so
    assert row_of(dlg.datasets, "kept")[4] == "изменился"
    assert "Подготовьте данные снова" in dlg.statuses["kept"].detail and "~ 1.txt" in dlg.statuses["kept"].detail
    assert row_of(dlg.datasets, "gone")[4] == "нет на диске"
    assert "изменились: 1" in dlg.status.text() and "нет на диске: 1" in dlg.status.text()
    dlg.done(0)


def test_the_dialog_in_english(qtbot):
    from ui.data.dialog import DataDialog

    set_language("en")
    try:
        dlg = DataDialog()
        qtbot.addWidget(dlg)
        assert dlg.windowTitle() == "Data" and dlg.add_folder_button.text() == "Add a folder…"
        assert "untouched" in dlg.remove_dataset_button.toolTip()
        assert row_of(dlg.constellations, "demo")[0] == "demo (builtin)"
        dlg.done(0)
    finally:
        set_language(None)


def test_lab_menu_opens_data_and_the_form_lists_a_new_constellation(qtbot, tmp_path, russian):
    """«Лаборатория → Данные…»: after an add there, the run form's constellations (with their
    token counts) are read again: the new one can be ticked at once."""
    from app.runs import RunManager
    from ui.data.dialog import DataDialog
    from ui.window.main_window import MainWindow

    window = MainWindow(runs=RunManager(), poll_ms=100)
    qtbot.addWidget(window)
    lab = window.menuBar().actions()[0].menu()
    action = next(a for a in lab.actions() if a.text() == "Данные…")
    assert lab.toolTipsVisible()  # else Qt never shows the items' tooltips
    assert "созвездия" in action.toolTip()
    assert "повести" not in window.form_view._constellation_boxes
    action.trigger()
    dlg = window.findChild(DataDialog)
    assert dlg is not None and dlg.isVisible()
    with qtbot.waitSignal(dlg.task_finished, timeout=WAIT_MS) as got:
        dlg.add(str(texts(tmp_path / "повести")))
    assert got.args == [0], dlg.status.text()
    box = window.form_view._constellation_boxes.get("повести")
    assert box is not None and "токены ещё не посчитаны" in box.text()
    box.setChecked(True)
    assert "повести" in window.form_view.form.values["constellations"]
    # A rename in the dialog takes the form's tick along: the old name would be "no such
    # constellation" and «Подготовить данные» would fail on it.
    assert dlg.rename_constellation("повести", "рассказы")
    ticked = window.form_view.form.values["constellations"]
    assert "рассказы" in ticked and "повести" not in ticked
    assert window.form_view._constellation_boxes["рассказы"].isChecked()
    assert "повести" not in window.form_view._constellation_boxes
    dlg.done(0)
    window.timer.stop()


def test_closing_the_dialog_during_an_add_cancels_it(qtbot, dialog, tmp_path, monkeypatch):
    folder = texts(tmp_path / "закрыть")
    stalled_file(monkeypatch, folder)
    before = library_names()
    proc = dialog.add(str(folder))
    qtbot.waitUntil(lambda: dialog.output.progress is not None, timeout=WAIT_MS)
    dialog.done(0)  # «Закрыть» while it reads
    assert proc.state() == proc.ProcessState.NotRunning
    assert library_names() == before


def test_a_taken_name_is_refused_before_anything_runs(qtbot, dialog, tmp_path):
    dialog.library.add(texts(tmp_path / "a"), name="книга", constellation="к")
    dialog.refresh()
    assert dialog.add(str(texts(tmp_path / "b")), name="книга", constellation="к") is None
    assert "«книга» уже занято" in dialog.status.text() and dialog.proc is None
    assert dialog.add(str(tmp_path / "b"), name="b", constellation="demo") is None
    assert "встроенное созвездие" in dialog.status.text()
    assert dialog.add(str(tmp_path / "b"), name="b", constellation="x,y") is None
    assert "запятую" in dialog.status.text()


def test_a_damaged_state_file_is_shown_not_a_crash(qtbot, russian):
    from app.base import paths
    from ui.data.dialog import DataDialog

    paths.state_db_path().parent.mkdir(parents=True, exist_ok=True)
    paths.state_db_path().write_bytes(b"not a database " * 50)
    dlg = DataDialog()
    qtbot.addWidget(dlg)
    # Set aside by the lab itself, a new one made, and said: the dialog works on.
    assert "повреждён" in dlg.status.text() and "отложен" in dlg.status.text(), dlg.status.text()
    assert list(paths.state_db_path().parent.glob("state.damaged-*.sqlite"))
    assert dlg.library is not None and dlg.add_folder_button.isEnabled()
    dlg.done(0)


def test_a_locked_state_file_is_shown_not_a_crash(qtbot, russian, monkeypatch):
    import sqlite3

    from app.base import paths, state
    from ui.data.dialog import DataDialog

    monkeypatch.setattr(state, "BUSY_TIMEOUT_MS", 1500)  # no need to wait the lab's 10 s here
    monkeypatch.setattr(state, "WAIT_NOTICE_S", 0.5)
    state.open_state().close()
    holder = sqlite3.connect(str(paths.state_db_path()), isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        dlg = DataDialog()
        qtbot.addWidget(dlg)
        assert "занят" in dlg.status.text() and dlg.datasets.rowCount() == 0, dlg.status.text()
        assert not dlg.add_folder_button.isEnabled() and not dlg.check_button.isEnabled()
        assert dlg.add(str(paths.state_db_path())) is None
        dlg.done(0)
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_the_form_with_no_constellations_points_to_the_data_window(qtbot, russian):
    from app.form.run_form import FormContext
    from ui.form.run_form import RunFormView

    view = RunFormView(FormContext())
    qtbot.addWidget(view)
    hints = [w.text() for w in view.findChildren(QLabel) if "Созвездий пока нет" in w.text()]
    assert hints and "«Лаборатория → Данные…»" in hints[0]
