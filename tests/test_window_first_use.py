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
    from ui.base import wheel_guard
    from ui.data.dialog import AddDialog
    from ui.search.dialog import SearchDialog

    window.tabs.setCurrentWidget(window.text_tab)
    add = AddDialog("/tmp/some.txt", ["demo"], None, window)
    search = SearchDialog({}, window)
    qtbot.addWidget(add)
    qtbot.addWidget(search)
    controls = [w for root in (window, add, search) for w in root.findChildren(QWidget)
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


def squashed(root: QWidget) -> list[str]:
    """What is cut or overlapping among the visible controls and texts under `root`: two
    that overlap, a wrapped text shorter than its lines need, a control smaller than Qt's
    own minimum for it."""
    from itertools import combinations

    from PySide6.QtCore import QRect
    from PySide6.QtWidgets import QAbstractButton, QLabel, QLineEdit

    leaves = [w for w in root.findChildren(QWidget)
              if isinstance(w, (QLabel, QLineEdit, QComboBox, QAbstractButton)) and w.isVisibleTo(root)
              and w.isVisible()]
    said = []

    def name(w: QWidget) -> str:
        return f"{type(w).__name__} {getattr(w, 'text', lambda: '')()[:30]!r}"

    for w in leaves:
        if isinstance(w, QLabel) and w.wordWrap() and w.text():
            if w.height() < w.heightForWidth(w.width()) - 1:
                said.append(f"{name(w)} cut: {w.height()} < {w.heightForWidth(w.width())} px")
        elif w.height() < w.minimumSizeHint().height() - 1:
            said.append(f"{name(w)} squashed: {w.height()} < {w.minimumSizeHint().height()} px high")
    rects = [(w, QRect(w.mapTo(root, w.rect().topLeft()), w.size())) for w in leaves]
    for (a, ra), (b, rb) in combinations(rects, 2):
        both = ra.intersected(rb)
        if both.width() > 1 and both.height() > 1 and not (a.isAncestorOf(b) or b.isAncestorOf(a)):
            said.append(f"{name(a)} overlaps {name(b)}")
    return said


def settle(qtbot, window) -> None:  # noqa: ANN001, F811
    """Until Qt's posted layout work is done: the sizes of the window, the form's view and
    the form the same twice running, and the form as tall as its texts need."""
    view, scroll = window.form_view, window.form_scroll
    seen: list[tuple] = []

    def steady() -> bool:
        seen.append((window.size().toTuple(), scroll.viewport().size().toTuple(), view.size().toTuple()))
        return len(seen) > 1 and seen[-1] == seen[-2] and view.height() >= view.heightForWidth(view.width()) - 1

    qtbot.waitUntil(steady, timeout=10_000)


def form_layout_faults(window) -> list[str]:  # noqa: ANN001, F811
    view, scroll = window.form_view, window.form_scroll
    faults = squashed(view) + squashed(view.footer)
    if view.width() > scroll.viewport().width():
        faults.append(f"the form is cut at the right: {view.width()} > {scroll.viewport().width()} px")
    if scroll.viewport().height() < 3 * view.inputs["name"].height():
        faults.append(f"the form's view is a sliver: {scroll.viewport().height()} px")
    return faults


@pytest.fixture(params=[None, 14], ids=["font-default", "font-14pt"])
def app_font(request, qapp):
    """The application's font for the window made after it (a desktop set to large text)."""
    font = qapp.font()
    if request.param:
        bigger = qapp.font()
        bigger.setPointSize(request.param)
        qapp.setFont(bigger)
    yield request.param
    qapp.setFont(font)


@pytest.mark.parametrize("lang", ["ru", "en"])
def test_the_form_at_the_window_s_minimum_size_scrolls_instead_of_squashing(qtbot, app_font, window, lang):  # noqa: F811
    """The window and its splitters at their smallest, with every field in error (the
    longest «why» under «Старт»), «Дополнительно» open, a large font: no row overlaps
    another, no text is cut, the form scrolls."""
    window.set_language(lang)
    view = window.form_view
    view.set_advanced_open(True)
    for name in ("context", "width", "heads", "layers", "batch_per_card", "steps_to", "limit_min"):
        view.inputs[name].setText("x")
        view._typed(name, "x")
    window.resize(1, 1)
    window.main_split.setSizes([1, 10_000])
    window.right_split.setSizes([1, 10_000])
    settle(qtbot, window)
    assert window.main_split.widget(0).width() > 0  # the form's column is not dragged away
    faults = form_layout_faults(window)
    assert faults == [], "\n".join(faults)
    from ui.runs.loss_plot import PLOT_MIN_HEIGHT

    assert squashed(window.plot) == [] and window.plot.widget.height() >= PLOT_MIN_HEIGHT  # axes apart


def test_a_form_grown_by_a_change_is_never_painted_in_its_old_height(qtbot, window):  # noqa: F811
    """A change that adds lines (messages under fields, the estimate's rows) had the form laid
    out and painted in its old height first, rows squeezed together, until the scroll area
    caught up: the form has its new height as the change returns."""
    view = window.form_view
    window.resize(1, 1)
    settle(qtbot, window)
    for text in ("x", "64", "", "5000000", "x"):
        for name in ("context", "width", "heads", "steps_to"):
            view.inputs[name].setText(text)
            view._typed(name, text)
            assert view.height() >= view.heightForWidth(view.width()) - 1, (name, text)


def test_the_text_tab_is_in_front_after_a_restart_and_a_language_switch(qtbot, tiny_data):
    """The README promises the bottom tab as it was left; «Текст» came back as «История»,
    after a restart and after a change of language, and lost its prompt and settings."""
    from app.runs import RunManager
    from ui.window.main_window import MainWindow

    def start() -> MainWindow:
        w = MainWindow(runs=RunManager(), poll_ms=100, extra_prepared=[str(tiny_data)])
        qtbot.addWidget(w)
        w.show()
        w.ensure_ready()
        return w

    w = start()
    w.tabs.setCurrentWidget(w.text_tab)
    w.text_tab.prompt.setPlainText("Жили-были")
    w.text_tab.top_k.setValue(7)
    w.set_language("en")
    assert w.tabs.currentWidget() is w.text_tab
    assert (w.text_tab.prompt.toPlainText(), w.text_tab.top_k.value()) == ("Жили-были", 7)
    w.set_language("ru")
    w.close()
    w = start()
    assert w.tabs.currentWidget() is w.text_tab
    w.tabs.setCurrentWidget(w.monitor)
    w.close()
    w = start()
    assert w.tabs.currentWidget() is w.monitor  # the GPU tab as before
    w.close()


def test_a_catalogue_card_this_pc_has_not_is_an_estimate_and_never_starts(qtbot, window):  # noqa: F811
    """«RTX 5070 Ti» chosen on a PC without it: the estimate used its figures, «Старт» was
    on and the run trained on the CPU. Offered as «оценка для …», it sizes a plan and Start
    says why it cannot go; neither the button nor the key starts anything."""
    from PySide6.QtCore import Qt

    from tests.test_window import fill_tiny
    from tests.ui_actions import choose

    view = window.form_view
    fill_tiny(qtbot, view)  # this PC (the tests' PC has no card): the CPU
    assert view.start_button.isEnabled(), view.why.text()
    combo = view.inputs["gpu"]
    items = {combo.itemData(i): combo.itemText(i) for i in range(combo.count())}
    assert "local" not in items and items["cpu"] == "процессор (CPU)"
    assert items["rtx5070ti"] == "оценка для RTX 5070 Ti (16 ГБ)"
    choose(view, "gpu", "rtx5070ti")
    assert "из 16\u00a0384 МБ" in view.size_text() and "2,5 × T4" in view.size_text()  # sized for that card
    assert not view.start_button.isEnabled()
    assert "«RTX 5070 Ti (16 ГБ)» — только оценка" in view.why.text() and "выберите процессор" in view.why.text()
    assert "только оценка" in view.messages["gpu"].text()
    view.start_button.click()
    window.shortcut_actions["start"].trigger()  # Ctrl+Enter
    qtbot.keyClick(view.inputs["name"], Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    assert window.runs.registry.list_runs() == [] and window.followed is None


def test_a_file_dialog_of_the_russian_window_speaks_russian(qtbot, window):  # noqa: F811
    """The file dialogs («Текстовый файл для оценки», «Экспорт весов», «Добавить данные»)
    said Open/Cancel in the Russian interface: Qt's own translations are loaded, and go
    with a switch to English."""
    from PySide6.QtWidgets import QDialogButtonBox, QFileDialog, QLineEdit

    def buttons() -> set[str]:
        dialog = QFileDialog(window, "t")
        dialog.setOption(QFileDialog.Option.DontUseNativeDialog)  # the one Qt draws (a bare Linux)
        dialog.setAcceptMode(QFileDialog.AcceptMode.AcceptOpen)
        qtbot.addWidget(dialog)
        box = dialog.findChild(QDialogButtonBox)
        return {b.text().replace("&", "") for b in box.buttons()}

    assert buttons() == {"Открыть", "Отмена"}
    edit = QLineEdit()
    qtbot.addWidget(edit)
    menu = edit.createStandardContextMenu()
    assert any(a.text().replace("&", "").startswith("Копировать") for a in menu.actions())
    window.set_language("en")
    assert buttons() == {"Open", "Cancel"}


def test_the_add_data_dialog_says_what_is_read_and_its_signs_are_in_the_font(qtbot, tmp_path):
    """The dialog said only .txt/.md/.jsonl are read, yet a file of any name is; and an empty
    box stood in the data window's message for «ⓘ», a sign the usual fonts lack."""
    from PySide6.QtGui import QFontMetrics
    from PySide6.QtWidgets import QLabel

    from app.data.library import Library
    from ui.base.status_message import StatusMessage
    from ui.data.dialog import AddDialog

    chapter = tmp_path / "chapter-01"  # no extension: read as text
    chapter.write_text("Глава первая. Жили-были.\n" * 20, encoding="utf-8")
    dialog = AddDialog(str(chapter), ["demo"], None)
    qtbot.addWidget(dialog)
    hint = next(w.text() for w in dialog.findChildren(QLabel) if w.text().startswith("Лаборатория прочтёт"))
    assert "с любым именем, с расширением или без" in hint and ".gz" in hint
    added = Library().add(chapter, "chapter", constellation="книги")
    assert added.dataset.documents == 1 and added.dataset.characters > 0
    for level in ("info", "warning", "error"):
        message = StatusMessage()
        qtbot.addWidget(message)
        message.setText("что-то случилось", level)
        sign = message.sign()
        assert sign and QFontMetrics(message.font()).inFontUcs4(ord(sign)), (level, sign)


@pytest.mark.parametrize("lang", ["ru", "en"])
def test_one_decimal_rule_the_language_s_in_the_history_the_header_and_the_form(qtbot, window, tiny_data, lang):  # noqa: F811
    """«5.3702» in the history and the header beside «0,001» in the form: every decimal the
    window shows has the interface language's mark."""
    from tests.test_runs_local import config

    window.set_language(lang)
    rec = window.runs.create(config(tiny_data))
    window.runs.registry.update(rec.id, best_val_loss=5.3702, last_loss=5.41, last_step=1200, status="stopped")
    window.refresh_history()
    window.follow(rec.id)
    mark = "," if lang == "ru" else "."
    table = window.history.table
    cells = [table.item(0, c).text() for c in range(table.columnCount()) if table.item(0, c)]
    assert f"5{mark}3702" in cells
    assert f"loss 5{mark}4100" in window.banner.detail.text() and f"val 5{mark}3702" in window.banner.detail.text()
    assert window.form_view.inputs["lr"].text() == f"0{mark}001"


def test_the_russian_command_line_says_how_a_run_ended_in_russian(russian):
    """«конец: steps_reached — reached step 30»: the trainer's code and its English line."""
    import io

    from app.runs.cli import Progress

    out = io.StringIO()
    progress = Progress(out=out)
    progress({"event": "eval", "step": 30, "val_loss": 5.37021, "val_ci95": [5.3, 5.44]})
    progress({"event": "end", "step": 30, "reason": "steps_reached", "message": "reached step 30"})
    progress({"event": "end", "step": 7, "reason": "stopped", "message": "stopped on request at step 7 (RUN_DIR/STOP exists)"})
    assert out.getvalue().splitlines() == ["  val loss 5,3702  (95%: 5,3000…5,4400)", "конец: достигнут шаг 30",
                                           "конец: остановлен по запросу на шаге 7 (в папке прогона есть файл STOP)"]


def test_the_text_tab_s_hint_speaks_without_run_json_s_keys(qtbot, window, tiny_data):  # noqa: F811
    from tests.test_runs_local import config

    tab = window.text_tab
    window.tabs.setCurrentWidget(tab)
    assert "«История»" in tab.samples_note.text()
    writes = window.runs.create(config(tiny_data))  # evaluates every 10 steps
    silent = window.runs.create(config(tiny_data, sample_tokens=0))
    window.refresh_history()
    window.history.select(writes.id)
    tab.show_selected()
    note = tab.samples_note.text()
    assert "каждые 10 шагов" in note and "training." not in note and "sample" not in note
    window.history.select(silent.id)
    tab.show_selected()
    assert "не пишет" in tab.samples_note.text() and "training." not in tab.samples_note.text()


def test_every_word_of_the_lab_s_file_dialogs_is_russian_in_the_russian_window(qtbot, window):  # noqa: F811
    """Half English although qtbase_ru.qm is loaded: Qt 6's catalogue has no «Look in:» and
    «Files of type:» of its own dialog (the one a Linux without a desktop theme, and the
    tests, show). ui/base/file_dialogs builds every dialog of the lab and says them."""
    import re

    from PySide6.QtWidgets import QFileDialog, QLabel, QPushButton

    from ui.base import file_dialogs

    dialog = file_dialogs.make(window, "t", filters="CSV (*.csv)", mode=QFileDialog.FileMode.AnyFile, save=True)
    dialog.setOption(QFileDialog.Option.DontUseNativeDialog)
    qtbot.addWidget(dialog)
    words = [w.text() for w in dialog.findChildren(QLabel) + dialog.findChildren(QPushButton) if w.text()]
    latin = [w for w in words if re.search("[A-Za-z]{2}", w.replace("CSV", ""))]
    assert latin == [], words
    assert "&Папка:" in words and "&Тип файлов:" in words


def _cut_history_rows(table) -> list[str]:  # noqa: ANN001
    """The history's rows the view shows in part: any row that begins inside the viewport
    and ends below it (a row scrolled out above is not shown)."""
    height = table.viewport().height()
    cut = []
    for r in range(table.rowCount()):
        top = table.rowViewportPosition(r)
        if 0 <= top < height < top + table.rowHeight(r):
            cut.append(f"row {r}: {top}..{top + table.rowHeight(r)} px in a viewport of {height} px")
    return cut


def test_the_history_shows_whole_rows_at_the_window_s_smallest_size(qtbot, app_font, window):  # noqa: F811
    """At the window's smallest the history's last row was cut in half: the rows it shows are
    whole at the minimum and a few pixels above it (the minimum's height is this platform's
    metrics: under another font and style the history's pane ends mid-row), scrolled to the
    top and to the bottom, and the run in the last whole row is reached by the scroll bar."""
    from app.base import run_status as st
    from tests.test_ui_history import row

    window.history.set_rows([row(f"r{i}", st.FINISHED, created=f"2026-11-30 00:{i:02d}") for i in range(12)])
    window.resize(1, 1)
    window.main_split.setSizes([1, 10_000])
    settle(qtbot, window)
    smallest = window.size()
    table = window.history.table
    for extra in (0, 7, 13, 19, 26):
        window.resize(smallest.width(), smallest.height() + extra)
        window.right_split.setSizes([1, 10_000])
        settle(qtbot, window)
        assert table.viewport().height() >= 2 * table.rowHeight(0)  # the pane shows rows at all
        bar = table.verticalScrollBar()
        for value in (bar.minimum(), bar.maximum()):
            bar.setValue(value)
            qtbot.waitUntil(lambda: _cut_history_rows(table) == [], timeout=5_000)
        assert table.rowViewportPosition(table.rowCount() - 1) >= 0  # the bottom: the last run in sight
