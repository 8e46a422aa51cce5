"""«Подготовить данные» in the main window, offscreen, with the real `ternit data prepare`
child process on real text made here: its progress under the button, «Отмена», and what it
says when it ends (warnings and failures stay in sight until the next prepare)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from PySide6.QtCore import QProcess, Qt
from PySide6.QtWidgets import QApplication

from app.base import paths
from app.base import run_status as st
from app.data.library import Library
from app.data.textgen import documents
from app.runs import RunManager
from tests.trainer_run import end_left_trainers
from tests.ui_actions import choose

WAIT_MS = 90_000  # generous: the machine is small and shared


@pytest.fixture
def window(qtbot, russian):
    from ui.window.main_window import MainWindow

    w = MainWindow(runs=RunManager(), poll_ms=100)
    qtbot.addWidget(w)
    w.resize(1400, 900)
    w.show()
    yield w
    if w.prepare_row.task is not None:
        w.prepare_row.task.stop_and_wait()
    end_left_trainers(w.runs)  # never leave a trainer behind
    w.close()


def add_texts(folder: Path, constellation: str, count: int, seed: int = 0, extra: bytes | None = None) -> Path:
    """A folder of made-up text added to `constellation` in the lab's real library."""
    folder.mkdir()
    for i, doc in enumerate(documents(count, seed=seed)):
        (folder / f"{i:04d}.txt").write_text(doc, encoding="utf-8")
    if extra is not None:
        (folder / "latin1.txt").write_bytes(extra)
    lib = Library()
    try:
        lib.add(folder, name=constellation, constellation=constellation)
    finally:
        lib.state.close()
    return folder


def tick_only(view, constellation: str) -> None:
    for name, box in view._constellation_boxes.items():
        if box.isChecked() != (name == constellation):
            box.click()


def show(window, constellation: str, context: str = "32") -> None:
    QApplication.processEvents()  # a window rebuilt in another language shows its new widgets
    window.reload_context()  # as after «Данные…»: the form lists the new constellation
    view = window.form_view
    tick_only(view, constellation)
    view.inputs["context"].selectAll()
    view.inputs["context"].insert(context)
    view.inputs["context"].editingFinished.emit()
    assert view.form.values["context"] == int(context)
    assert view.prepare_button.isVisible() and view.prepare_button.isEnabled()


def prepared_entries() -> list[str]:
    root = paths.prepared_dir()
    return sorted(p.name for p in root.iterdir()) if root.is_dir() else []


def test_progress_reaches_the_view_and_the_run_starts_after(qtbot, window, tmp_path):
    add_texts(tmp_path / "сказки", "сказки", 400, seed=3)
    view = window.form_view
    show(window, "сказки")
    seen: list[str] = []
    with qtbot.waitSignal(window.data_prepared, timeout=WAIT_MS) as done:
        qtbot.mouseClick(view.prepare_button, Qt.MouseButton.LeftButton)
        task = window.prepare_row.task
        assert task is not None and window.prepare_row.bar.isVisible()
        assert not view.prepare_button.isEnabled()  # one prepare at a time
        assert window.prepare_row.bar.cancel_button.isVisible()
        task.progressed.connect(lambda: seen.append(window.prepare_row.bar.progress.text()))
    assert done.args == [0], window.prepare_row.note.text()
    # The bar showed the phases by name, with their percentage (the JSON progress lines).
    assert any(x.startswith("Токенизация") and "%" in x for x in seen), seen
    assert any(x.startswith("Обучение токенизатора") for x in seen), seen
    assert not window.prepare_row.bar.isVisible()
    assert window.statusBar().currentMessage() == "Данные «сказки» подготовлены"
    prep = view.form.prepared_for_selection()
    assert prep is not None and prep.constellations == ("сказки",) and Path(prep.dir).parent == paths.prepared_dir()
    assert not view.prepare_button.isVisible() and view.start_button.isEnabled(), view.why.text()

    # The run starts on it and trains.
    for name, text in (("name", "prep"), ("width", "32"), ("heads", "2"), ("layers", "1"),
                       ("batch_per_card", "2"), ("steps_to", "3")):
        view.inputs[name].selectAll()
        qtbot.keyClicks(view.inputs[name], text)
    choose(view, "gpu", "cpu")
    assert view.start_button.isEnabled(), view.why.text()
    qtbot.mouseClick(view.start_button, Qt.MouseButton.LeftButton)
    run_id = window.followed
    assert run_id, window.statusBar().currentMessage()
    assert window.runs.registry.get(run_id).config()["data"]["dir"] == prep.dir
    qtbot.waitUntil(lambda: window.runs.registry.get(run_id).status == st.FINISHED, timeout=WAIT_MS)


@pytest.mark.parametrize("lang, words", [
    ("ru", ("Подготовить данные «пропавшие» не удалось", "больше не существует", "Лаборатория → Данные…")),
    ("en", ("Preparing the data of 'пропавшие' failed", "no longer exists", "Lab → Data…")),
])
def test_a_failed_prepare_says_why_and_what_to_do_and_it_stays(qtbot, window, tmp_path, lang, words):
    folder = add_texts(tmp_path / "пропавшие", "пропавшие", 5)
    window.set_language(lang)  # the window in that language, as from its menu
    show(window, "пропавшие")
    folder.rename(tmp_path / "moved")  # the files vanished since they were added
    view = window.form_view
    with qtbot.waitSignal(window.data_prepared, timeout=WAIT_MS) as done:
        qtbot.mouseClick(view.prepare_button, Qt.MouseButton.LeftButton)
    assert done.args == [2]
    note = window.prepare_row.note.text()
    for w in words:
        assert w in note, note
    assert "ternit data:" not in note
    assert window.prepare_row.note_box.isVisible() and "#b00020" in window.prepare_row.note.styleSheet()
    assert not window.prepare_row.bar.isVisible() and view.prepare_button.isEnabled()
    # Other news in the status bar, the run list polling: the failure is still there.
    window.statusBar().showMessage("другое")
    window.tick()
    assert window.prepare_row.note_box.isVisible() and window.prepare_row.note.text() == note
    assert view.form.prepared_for_selection() is None and prepared_entries() == []


def test_too_little_text_is_refused_and_shown(qtbot, window, tmp_path):
    add_texts(tmp_path / "крохи", "крохи", 4)
    show(window, "крохи")
    with qtbot.waitSignal(window.data_prepared, timeout=WAIT_MS) as done:
        qtbot.mouseClick(window.form_view.prepare_button, Qt.MouseButton.LeftButton)
    assert done.args == [1]
    note = window.prepare_row.note.text()
    assert "слишком мало текста, чтобы отложить проверочную выборку" in note, note
    assert "4 куска" in note, note  # (was «4 кусков»)
    assert "«Подготовить данные» снова" in note and window.prepare_row.note_box.isVisible()
    assert prepared_entries() == []


@pytest.mark.skipif(not hasattr(signal, "SIGSTOP"), reason="needs SIGSTOP to hold the child still")
@pytest.mark.parametrize("child", ["cleans up", "is killed"])
def test_cancel_leaves_no_prepared_folder_and_says_so(qtbot, window, tmp_path, monkeypatch, child):
    from ui.base import cli_task

    # "cleans up": the child, let go after «Отмена», removes its temporary folder itself. The
    # grace before a kill is then the test's own wait (as in the closing test below): on a
    # loaded machine it took longer than the window's 5 s and was killed (seen under load:
    # `assert ['.большие-v4000-….tmp-10135-…'] == []`).
    # "is killed": the child never comes back (held stopped) and the window kills it after
    # the grace: the window removes the folder the killed child left, so the note still holds.
    monkeypatch.setattr(cli_task, "KILL_AFTER_MS", WAIT_MS if child == "cleans up" else 300)
    add_texts(tmp_path / "большие", "большие", 1500, seed=5)
    show(window, "большие")
    view = window.form_view
    held: list[int] = []

    def hold() -> None:
        # Freeze the child as soon as it works in its temporary folder, so «Отмена» surely lands
        # mid-prepare whatever the machine's speed; it goes on (and gets the signal) after.
        # Each progress read freezes it first and looks second: on a loaded machine several
        # phases can arrive in one read, so waiting for a named phase could miss them all.
        p = window.prepare_row.task.output.progress
        if held or p is None:
            return
        pid = window.prepare_row.task.proc.processId()
        os.kill(pid, signal.SIGSTOP)
        if p.phase != "done" and any(".tmp-" in n for n in prepared_entries()):
            held.append(pid)
        else:
            os.kill(pid, signal.SIGCONT)

    with qtbot.waitSignal(window.data_prepared, timeout=WAIT_MS) as done:
        qtbot.mouseClick(view.prepare_button, Qt.MouseButton.LeftButton)
        window.prepare_row.task.progressed.connect(hold)
        qtbot.waitUntil(lambda: bool(held), timeout=WAIT_MS)
        assert [n for n in prepared_entries() if ".tmp-" in n], prepared_entries()  # it was writing
        qtbot.mouseClick(window.prepare_row.bar.cancel_button, Qt.MouseButton.LeftButton)
        assert window.prepare_row.bar.progress.text() == "Отмена…"
        if child == "cleans up":
            os.kill(held[0], signal.SIGCONT)
    assert done.args == [130]
    assert prepared_entries() == []  # no folder, no hidden half-written one
    note = window.prepare_row.note.text()
    assert "отменена" in note and "незаконченная папка удалена" in note, note
    assert window.prepare_row.note_box.isVisible()
    assert view.form.prepared_for_selection() is None
    assert view.prepare_button.isVisible() and view.prepare_button.isEnabled()
    assert "не подготовлены" in view.why.text()


def test_warnings_stay_in_sight_until_the_next_prepare(qtbot, window, tmp_path):
    # Little text (a vocabulary of 4000 cannot be filled, the held-out sample is short) and a
    # file that is not UTF-8: prepared, with warnings.
    add_texts(tmp_path / "малые", "малые", 30, extra=b"ab\xff\xfecd text here\n")
    show(window, "малые")
    view = window.form_view
    with qtbot.waitSignal(window.data_prepared, timeout=WAIT_MS) as done:
        qtbot.mouseClick(view.prepare_button, Qt.MouseButton.LeftButton)
    assert done.args == [0], window.prepare_row.note.text()
    note = window.prepare_row.note.text()
    assert note.startswith("Данные «малые» подготовлены, но обратите внимание:"), note
    assert "2 последовательности байт не в UTF-8 заменены" in note, note  # (was «2 последовательностей»)
    assert "текста мало для словаря 4000" in note, note
    # The short held-out sample is the form's to say, for its own context (the note's text
    # was fixed at the prepare's context and language: «по 1024» for a context of 128).
    assert "проверочная выборка меньше желаемой" not in note, note
    assert "в проверочной выборке" in view.size_text(), view.size_text()
    assert "#8a5a00" in window.prepare_row.note.styleSheet()
    assert window.statusBar().currentMessage() == "Данные «малые» подготовлены — с предупреждениями"
    assert view.form.prepared_for_selection() is not None  # picked, warnings or not
    assert view.start_button.isEnabled(), view.why.text()
    # The held-out sample is too short for a context of 1024: Start says so, rather than a run
    # that the trainer refuses at its start.
    view.inputs["context"].selectAll()
    qtbot.keyClicks(view.inputs["context"], "1024")
    assert not view.start_button.isEnabled()
    assert "Данных мало для контекста 1024" in view.why.text() and "Уменьшите «Контекст n»" in view.why.text()
    view.inputs["context"].selectAll()
    qtbot.keyClicks(view.inputs["context"], "32")
    assert view.start_button.isEnabled(), view.why.text()
    window.statusBar().showMessage("другое")
    window.tick()
    assert window.prepare_row.note_box.isVisible() and window.prepare_row.note.text() == note
    # A language switch rebuilds the window: the note is redrawn (the warnings themselves are
    # the command's words, in the language it ran in).
    window.set_language("en")
    assert window.prepare_row.note.text().startswith("The data of 'малые' is prepared, but note:")
    window.set_language("ru")
    assert window.prepare_row.note.text() == note
    # The next prepare (here: the same data again, from the cache) replaces it.
    with qtbot.waitSignal(window.data_prepared, timeout=WAIT_MS):
        window.prepare_data(["малые"])
        assert not window.prepare_row.note_box.isVisible()
    # The cache hit re-reads the datasets: the replaced bytes are said again, the rest was
    # said when the folder was made.
    assert "заменены" in window.prepare_row.note.text()
    # «✕» hides it.
    qtbot.mouseClick(window.prepare_row.note_close, Qt.MouseButton.LeftButton)
    assert not window.prepare_row.note_box.isVisible()


@pytest.mark.skipif(not hasattr(signal, "SIGSTOP"), reason="needs SIGSTOP to hold the child still")
def test_closing_the_window_stops_a_prepare_like_ctrl_c(qtbot, window, tmp_path, monkeypatch):
    """Quitting mid-prepare: the child is stopped as «Отмена» stops it (it cleans up after
    itself), not left running nor killed outright by Qt as the window goes. The child is held
    (SIGSTOP) mid-prepare and let go just after the window's SIGTERM, so the close surely
    lands mid-prepare on any machine (a named pipe used to hold it, but `data add` now
    refuses one, and the prepare then sometimes ended before the close). The grace before a
    kill is the test's own wait: a loaded machine may take longer than the window's 5 s to
    bring the child back from SIGSTOP out of the tokenizer's training, and the test is about
    how the child ends, not how fast (it once read `[(9, CrashExit)]`: killed at 5 s)."""
    import threading

    from ui.base import cli_task

    slow_s = cli_task.KILL_AFTER_MS / 1000 + 1  # the child comes back later than the window's grace
    monkeypatch.setattr(cli_task, "KILL_AFTER_MS", WAIT_MS)
    add_texts(tmp_path / "застрявшие", "застрявшие", 1500, seed=3)
    show(window, "застрявшие")
    held: list[int] = []

    def hold() -> None:
        p = window.prepare_row.task.output.progress
        if not held and p is not None and p.phase in ("tokenizer", "tokenize"):
            held.append(window.prepare_row.task.proc.processId())
            os.kill(held[0], signal.SIGSTOP)

    qtbot.mouseClick(window.form_view.prepare_button, Qt.MouseButton.LeftButton)
    task = window.prepare_row.task
    exits: list[tuple[int, object]] = []
    task.proc.finished.connect(lambda code, status: exits.append((code, status)))
    task.progressed.connect(hold)
    qtbot.waitUntil(lambda: bool(held), timeout=WAIT_MS)
    cancel = task.cancel

    def cancel_then_let_go() -> None:  # the SIGTERM is pending; SIGCONT delivers it, late as on a loaded machine
        cancel()
        threading.Timer(slow_s, lambda: os.kill(held[0], signal.SIGCONT)).start()

    task.cancel = cancel_then_let_go
    with qtbot.waitSignal(window.data_prepared, timeout=WAIT_MS) as done:
        window.close()
    assert done.args == [130] and window.prepare_row.task is None
    # It ended by itself on SIGTERM (the CLI's interrupt code), not by a kill.
    assert exits == [(130, QProcess.ExitStatus.NormalExit)]
    assert prepared_entries() == []


@pytest.mark.skipif(not hasattr(signal, "SIGSTOP"), reason="needs SIGSTOP to hold the child still")
def test_a_language_switch_mid_prepare_keeps_its_bar_and_cancel(qtbot, window, tmp_path, monkeypatch):
    """Switching the language rebuilds the window: the new bar follows the running prepare at
    once (it showed nothing until the next line), and its «Cancel» still stops it."""
    from ui.base import cli_task

    monkeypatch.setattr(cli_task, "KILL_AFTER_MS", WAIT_MS)  # the test's wait, not the window's 5 s: see above
    add_texts(tmp_path / "длинные", "длинные", 1500, seed=7)
    show(window, "длинные")
    held: list[int] = []

    def hold() -> None:
        p = window.prepare_row.task.output.progress
        if not held and p is not None and p.phase in ("tokenizer", "tokenize"):
            held.append(window.prepare_row.task.proc.processId())
            os.kill(held[0], signal.SIGSTOP)

    with qtbot.waitSignal(window.data_prepared, timeout=WAIT_MS) as done:
        window.prepare_data(["длинные"])
        window.prepare_row.task.progressed.connect(hold)
        qtbot.waitUntil(lambda: bool(held), timeout=WAIT_MS)
        window.set_language("en")
        QApplication.processEvents()
        assert window.prepare_row.bar.isVisible()
        text = window.prepare_row.bar.progress.text()
        assert text.startswith(("Training the tokenizer", "Tokenizing")) and "%" in text, text
        assert not window.form_view.prepare_button.isEnabled()
        qtbot.mouseClick(window.prepare_row.bar.cancel_button, Qt.MouseButton.LeftButton)
        assert window.prepare_row.bar.progress.text() == "Cancelling…"
        os.kill(held[0], signal.SIGCONT)
    assert done.args == [130]
    assert window.prepare_row.note.text().startswith("Preparing the data was cancelled"), window.prepare_row.note.text()
    assert prepared_entries() == []


def test_many_warnings_are_summed_up_not_a_wall_of_text(russian):
    """A folder with hundreds of skipped files: a few lines under the form, more in the
    tooltip, and where all of them are (meta.json)."""
    from app.data.manage import MAX_NOTE_LINES, MAX_TIP_LINES, CliOutput, prepare_outcome

    out = CliOutput()
    out.feed_stderr("".join(f'{{"warning": "книги: {i:03d}.bin: двоичный файл — пропущен"}}\n' for i in range(300)))
    out.feed_stdout("/data/prepared/книги-v4000-abc\n  словарь 4000\n")
    got = prepare_outcome(0, out, ["книги"])
    assert got.level == "warning" and got.folder == "/data/prepared/книги-v4000-abc"
    lines = got.note.splitlines()
    assert len(lines) == 1 + MAX_NOTE_LINES + 1 and lines[-1].startswith("… и ещё 292")
    assert "meta.json" in lines[-1]
    tip = got.tooltip.splitlines()
    assert len(tip) == 1 + MAX_TIP_LINES + 2 and "… и ещё 260" in tip[-2] and tip[-1] == got.folder
