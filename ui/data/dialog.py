"""«Лаборатория → Данные…»: the constellations and datasets of the lab's library, and adding,
removing, renaming and re-checking them without the command line.

Thin: every decision (rows, statuses, allowed actions, messages) is app.data.manage's.
Adding and re-checking read files and can take long, so they run as `ternit data add|check`
in a child process (QProcess) with a progress bar and «Отмена»; the window never freezes, and
a cancelled add leaves the library as it was (the command stops like Ctrl-C). The quick
statuses (file sizes and dates) are computed in a thread.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from PySide6.QtCore import QEvent, QProcess, Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QInputDialog,
    QLabel,
    QLineEdit,
    QMessageBox,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.base.i18n import t
from app.base.state import StateError, failure_text, open_state, repairs_to_say
from app.data import manage, readers
from app.data.library import Library, LibraryError
from ui.base import palette, settings, wheel_guard
from ui.base.background import run_in_thread
from ui.base.cli_task import CliTask, TaskBar
from ui.base.status_message import StatusMessage

CONSTELLATION_COLUMNS = (("Созвездие", "Constellation"), ("Наборы", "Datasets"), ("Размер", "Size"),
                         ("Документы", "Documents"), ("Символы", "Characters"), ("Токены", "Tokens"))
DATASET_COLUMNS = (("Набор", "Dataset"), ("Путь", "Path"), ("Размер", "Size"),
                   ("Созвездия", "Constellations"), ("Состояние", "Status"))
STATUS_COLOR = {"ok": "note", "changed": "warning", "missing": "error"}  # app.window.colors' names


class AddDialog(QDialog):
    """The name of the new dataset and the constellation it goes into (new or existing)."""

    def __init__(self, path: str, targets: list[str], constellation: str | None,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(t("Добавить данные", "Add data"))
        self.setMinimumWidth(560)  # the path and the hint on a line or two, not a column
        self.path = path
        default = manage.default_name(path)
        form = QFormLayout(self)
        where = QLabel(path)
        where.setWordWrap(True)
        form.addRow(t("Путь", "Path"), where)
        self.name = QLineEdit(default)
        self.name.setToolTip(t("Имя набора в библиотеке; по умолчанию — имя файла или папки.",
                               "The dataset's name in the library; by default the file's or folder's name."))
        form.addRow(t("Имя набора", "Dataset name"), self.name)
        self.constellation = QComboBox()
        self.constellation.setEditable(True)
        self.constellation.addItems(targets)
        self.constellation.setCurrentText(constellation or default)
        self.constellation.setToolTip(t(
            "Выберите созвездие из списка или введите новое имя — оно будет создано. Созвездие — "
            "группа наборов, которую форма берёт в обучение.",
            "Pick a constellation from the list or type a new name: it is created. A constellation "
            "is a group of datasets the form trains on."))
        form.addRow(t("Созвездие", "Constellation"), self.constellation)
        hint = QLabel(t("Лаборатория прочтёт ", "The lab reads ") + readers.what_is_read() + t(
            ". Она запомнит хэши файлов; сами файлы не меняются и никуда не копируются.",
            ". It remembers the files' hashes; the files themselves are not changed or copied."))
        hint.setWordWrap(True)
        form.addRow(hint)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form.addRow(buttons)
        wheel_guard.guard(self)


class DataDialog(QDialog):
    """Лаборатория → Данные…"""

    changed = Signal()  # the library changed: the form's constellation list must be read again
    renamed = Signal(str, str)  # a constellation's old and new name: the form's tick follows it
    task_finished = Signal(int)  # an add or a re-check ended: the child's exit code
    statuses_ready = Signal()  # the quick statuses (sizes and dates) are in the table

    def __init__(self, parent: QWidget | None = None, library: Library | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(t("Данные", "Data"))
        self.resize(1100, 620)
        self._own_library = library is None
        self.library: Library | None = library
        opened = ""
        if library is None:
            try:
                self.library = Library()
                opened = " ".join(repairs_to_say())  # a damaged file set aside as it opened: said
            except (StateError, LibraryError, sqlite3.Error) as e:  # a locked state file, a full disk
                opened = failure_text(e)
        self.statuses: dict[str, manage.DatasetStatus] = {}
        self.task: CliTask | None = None  # the add or re-check running now
        self.output = manage.CliOutput()  # the latest child's output
        self._task = ""
        self._closed = False
        self._added = ""
        self._crows: dict[str, manage.ConstellationRow] = {}
        self._drows: dict[str, manage.DatasetRow] = {}

        layout = QVBoxLayout(self)
        intro = QLabel(t(
            "Набор — ваш файл или папка с текстом; созвездие — группа наборов, которую форма «Новый прогон» "
            "берёт в обучение. Лаборатория только читает ваши файлы: убрать набор — не значит удалить файлы.",
            "A dataset is a text file or folder of yours; a constellation is a group of datasets the "
            "“New run” form trains on. The lab only reads your files: removing a dataset never deletes them."))
        intro.setWordWrap(True)
        layout.addWidget(intro)

        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self._constellations_part())
        split.addWidget(self._datasets_part())
        split.setSizes([240, 320])
        self.split = split
        layout.addWidget(split, 1)
        self._build_foot(layout)
        self.constellations.itemSelectionChanged.connect(self._update_buttons)
        self.datasets.itemSelectionChanged.connect(self._update_buttons)
        self._restore_layout()
        self.refresh()
        if self.library is None:
            self.status.setText(opened)
        else:
            self.load_statuses()
            if opened:
                self.status.setText(opened)

    # -- building --------------------------------------------------------------------------

    def _constellations_part(self) -> QWidget:
        """The constellations table and its buttons."""
        top = QWidget()
        top_col = QVBoxLayout(top)
        top_col.setContentsMargins(0, 0, 0, 0)
        top_col.addWidget(self._heading(t("Созвездия", "Constellations")))
        self.constellations = self._table(CONSTELLATION_COLUMNS, stretch=1)
        top_col.addWidget(self.constellations)
        row = QHBoxLayout()
        self.rename_button = self._button(row, t("Переименовать…", "Rename…"), t(
            "Новое имя созвездия. Подготовленные данные и прогоны помнят старое имя.",
            "A new name for the constellation. Prepared data and runs keep the old name."), self.rename_selected)
        self.remove_constellation_button = self._button(row, t("Удалить созвездие", "Remove constellation"), t(
            "Забыть созвездие; его наборы остаются в библиотеке, файлы на диске не тронуты.",
            "Forget the constellation; its datasets stay in the library, the files on disk are untouched."),
            self.remove_selected_constellation)
        row.addStretch(1)
        top_col.addLayout(row)
        return top

    def _datasets_part(self) -> QWidget:
        """The datasets table and its buttons."""
        bottom = QWidget()
        bottom_col = QVBoxLayout(bottom)
        bottom_col.setContentsMargins(0, 0, 0, 0)
        bottom_col.addWidget(self._heading(t("Наборы данных", "Datasets")))
        self.datasets = self._table(DATASET_COLUMNS, stretch=1)
        bottom_col.addWidget(self.datasets)
        row = QHBoxLayout()
        self.add_file_button = self._button(row, t("Добавить файл…", "Add a file…"), t(
            "Добавить текстовый файл (с любым именем: .txt, .md, .jsonl, .gz или без расширения) в "
            "созвездие — новое или существующее.",
            "Add a text file (of any name: .txt, .md, .jsonl, .gz or no extension) to a constellation, "
            "new or existing."),
            lambda: self.pick_and_add(folder=False))
        self.add_folder_button = self._button(row, t("Добавить папку…", "Add a folder…"), t(
            "Добавить папку с текстовыми файлами (со вложенными папками) в созвездие — новое или существующее.",
            "Add a folder of text files (with its subfolders) to a constellation, new or existing."),
            lambda: self.pick_and_add(folder=True))
        self.take_out_button = self._button(row, t("Убрать из созвездия…", "Take out of constellation…"), t(
            "Убрать набор из одного созвездия; в библиотеке он останется, файлы на диске не тронуты.",
            "Take the dataset out of one constellation; it stays in the library, the files on disk are untouched."),
            self.take_out_selected)
        self.remove_dataset_button = self._button(row, t("Убрать из библиотеки", "Remove from library"), t(
            "Забыть набор (и убрать его из всех созвездий). Файлы на диске не тронуты.",
            "Forget the dataset (and take it out of every constellation). The files on disk are untouched."),
            self.remove_selected_dataset)
        self.check_button = self._button(row, t("Перепроверить", "Re-check"), t(
            "Прочесть заново изменившиеся файлы всех наборов и найти новые и пропавшие (ternit data check).",
            "Read the changed files of every dataset again and find new and missing ones (ternit data check)."),
            self.recheck)
        row.addStretch(1)
        bottom_col.addLayout(row)
        return bottom

    def _build_foot(self, layout: QVBoxLayout) -> None:
        """A running task's progress with «Отмена», the status line, «Закрыть»."""
        self.task_bar = TaskBar()
        self.progress = self.task_bar.progress
        self.cancel_button = self.task_bar.cancel_button
        layout.addWidget(self.task_bar)
        self.status = StatusMessage()  # a framed message, not small black text
        layout.addWidget(self.status)
        row = QHBoxLayout()
        row.addStretch(1)
        close = QPushButton(t("Закрыть", "Close"))
        close.setToolTip(t("Закрыть окно (идущее добавление будет отменено)",
                           "Close the window (an add in progress is cancelled)"))
        close.clicked.connect(self.accept)
        row.addWidget(close)
        layout.addLayout(row)

    @staticmethod
    def _heading(text: str) -> QLabel:
        label = QLabel(text)
        label.setStyleSheet("font-weight: bold;")
        return label

    @staticmethod
    def _table(columns: tuple[tuple[str, str], ...], stretch: int) -> QTableWidget:
        table = QTableWidget(0, len(columns))
        table.setHorizontalHeaderLabels([t(ru, en) for ru, en in columns])
        header = table.horizontalHeader()
        for col in range(len(columns)):
            header.setSectionResizeMode(col, QHeaderView.ResizeMode.Stretch if col == stretch
                                        else QHeaderView.ResizeMode.ResizeToContents)
        table.verticalHeader().setVisible(False)
        table.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
        table.setSelectionMode(QTableWidget.SelectionMode.SingleSelection)
        table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        return table

    @staticmethod
    def _button(row: QHBoxLayout, text: str, tip: str, slot) -> QPushButton:
        b = QPushButton(text)
        b.setToolTip(tip)
        b.clicked.connect(lambda _=False: slot())
        row.addWidget(b)
        return b

    # -- showing ---------------------------------------------------------------------------
    def refresh(self) -> None:
        """Read the library again into both tables (the selection stays on the same names)."""
        keep_c, keep_d = self.selected_constellation(), self.selected_dataset()
        if self.library is None:
            self._update_buttons()
            return
        try:
            crows = manage.constellation_rows(self.library)
            drows = manage.dataset_rows(self.library)
        except (StateError, LibraryError, OSError, sqlite3.Error) as e:
            self.status.setText(failure_text(e))
            return
        self._crows = {r.name: r for r in crows}
        self._drows = {r.name: r for r in drows}
        self.constellations.setRowCount(len(crows))
        for i, r in enumerate(crows):
            name = r.name + (t(" (встроенное)", " (builtin)") if r.builtin else "")
            cells = (name, r.datasets, r.size, r.documents, r.characters, r.tokens)
            for col, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setToolTip(r.tooltip)
                item.setData(Qt.ItemDataRole.UserRole, r.name)
                if col >= 2:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.constellations.setItem(i, col, item)
        self.datasets.setRowCount(len(drows))
        for i, r in enumerate(drows):
            cells = (r.name, r.path, r.size, ", ".join(r.constellations) or "—")
            for col, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setToolTip(r.path if col == 1 else r.tooltip)
                item.setData(Qt.ItemDataRole.UserRole, r.name)
                if col == 2:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.datasets.setItem(i, col, item)
            self._set_status_cell(i, r.name)
        self._select(self.constellations, keep_c)
        self._select(self.datasets, keep_d)
        self._update_buttons()

    def _set_status_cell(self, row: int, name: str) -> None:
        st = self.statuses.get(name, manage.DatasetStatus("unknown", t("Проверяется…", "Being checked…")))
        item = QTableWidgetItem(st.text)
        item.setToolTip(st.detail)
        item.setData(Qt.ItemDataRole.UserRole, name)
        if st.status in STATUS_COLOR:
            item.setForeground(QColor(palette.color(STATUS_COLOR[st.status])))
        self.datasets.setItem(row, 4, item)

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt's name)
        super().changeEvent(event)
        table = getattr(self, "datasets", None)  # None while the dialog is being built
        if palette.changed(event) and table is not None:  # the statuses in the new palette's colours
            self.status.paint()
            for row in range(table.rowCount()):
                item = table.item(row, 0)
                if item is not None:
                    self._set_status_cell(row, item.data(Qt.ItemDataRole.UserRole))

    @staticmethod
    def _select(table: QTableWidget, name: str | None) -> None:
        if name is None:
            return
        for r in range(table.rowCount()):
            item = table.item(r, 0)
            if item is not None and item.data(Qt.ItemDataRole.UserRole) == name:
                table.selectRow(r)
                return

    def load_statuses(self) -> threading.Thread:
        """Each dataset's files against the library by size and date, in a thread (a big
        folder's listing must not freeze the window); «Перепроверить» reads them."""
        assert self.library is not None
        path = self.library.state.path

        def work() -> object:
            state = open_state(path)  # this thread's own connection
            try:
                return manage.quick_statuses(Library(state))
            finally:
                state.close()

        return run_in_thread(work, self._statuses_loaded, self, name="data-statuses")

    def _statuses_loaded(self, result: object) -> None:
        if self._closed:
            return
        if isinstance(result, Exception):
            self.status.setText(str(result))
        else:
            assert isinstance(result, dict)
            for name, st in result.items():
                # A re-check's answer (it read the files) outranks a look at sizes and dates.
                self.statuses.setdefault(name, st)
            self.refresh()
        self.statuses_ready.emit()

    def selected_constellation(self) -> str | None:
        return self._selected(self.constellations)

    def selected_dataset(self) -> str | None:
        return self._selected(self.datasets)

    @staticmethod
    def _selected(table: QTableWidget) -> str | None:
        rows = {i.row() for i in table.selectedIndexes()}
        if not rows:
            return None
        item = table.item(min(rows), 0)
        return item.data(Qt.ItemDataRole.UserRole) if item is not None else None

    @property
    def proc(self) -> QProcess | None:
        """The running child, if any."""
        return self.task.proc if self.task is not None else None

    def _update_buttons(self) -> None:
        busy = self.task is not None or self.library is None  # no library: nothing can be done
        c = self._crows.get(self.selected_constellation() or "")
        d = self._drows.get(self.selected_dataset() or "")
        own_c = c is not None and not c.builtin
        self.rename_button.setEnabled(own_c and not busy)
        self.remove_constellation_button.setEnabled(own_c and not busy)
        own_d = d is not None and not d.builtin
        self.take_out_button.setEnabled(own_d and bool(d and d.constellations) and not busy)
        self.remove_dataset_button.setEnabled(own_d and not busy)
        for b in (self.add_file_button, self.add_folder_button, self.check_button):
            b.setEnabled(not busy)
        if c is not None and c.builtin:
            why = t("Встроенное созвездие demo не переименовать и не удалить.",
                    "The builtin demo constellation cannot be renamed or removed.")
            self.rename_button.setToolTip(why)
            self.remove_constellation_button.setToolTip(why)
        else:
            self.rename_button.setToolTip(t("Новое имя созвездия. Подготовленные данные и прогоны помнят старое имя.",
                                            "A new name for the constellation. Prepared data and runs keep the old name."))
            self.remove_constellation_button.setToolTip(t(
                "Забыть созвездие; его наборы остаются в библиотеке, файлы на диске не тронуты.",
                "Forget the constellation; its datasets stay in the library, the files on disk are untouched."))

    # -- instant actions -------------------------------------------------------------------
    def _do(self, action, *args) -> bool:
        if self.library is None:
            return False
        try:
            message = action(self.library, *args)
        except (LibraryError, StateError, sqlite3.Error) as e:
            self.status.setText(failure_text(e))
            return False
        self.status.setText(message)
        self.refresh()
        self.changed.emit()
        return True

    def rename_constellation(self, old: str, new: str) -> bool:
        done = self._do(manage.rename_constellation, old, new)
        if done:
            self.renamed.emit(old, new)
        return done

    def remove_constellation(self, name: str, confirm: bool = True) -> bool:
        if confirm and not self._ask(t("Удалить созвездие", "Remove the constellation"),
                                     manage.confirm_remove_constellation_text(name)):
            return False
        return self._do(manage.remove_constellation, name)

    def remove_dataset(self, name: str, constellation: str | None = None, confirm: bool = True) -> bool:
        if confirm and not self._ask(t("Убрать набор", "Remove the dataset"),
                                     manage.confirm_remove_text(name, constellation)):
            return False
        ok = self._do(manage.remove_dataset, name, constellation)
        if ok and constellation is None:
            self.statuses.pop(name, None)
        return ok

    def _ask(self, title: str, text: str) -> bool:
        return QMessageBox.question(self, title, text) == QMessageBox.StandardButton.Yes

    def rename_selected(self) -> None:
        old = self.selected_constellation()
        if old is None:
            return
        new, ok = QInputDialog.getText(self, t("Переименовать созвездие", "Rename the constellation"),
                                       t(f"Новое имя для «{old}»:", f"A new name for {old!r}:"), text=old)
        if ok and new.strip() and new.strip() != old:
            self.rename_constellation(old, new)

    def remove_selected_constellation(self) -> None:
        name = self.selected_constellation()
        if name is not None:
            self.remove_constellation(name)

    def take_out_selected(self) -> None:
        name = self.selected_dataset()
        row = self._drows.get(name or "")
        if name is None or row is None or not row.constellations:
            return
        choices = row.constellations
        selected_c = self.selected_constellation()
        if len(choices) == 1:
            constellation = choices[0]
        else:
            current = choices.index(selected_c) if selected_c in choices else 0
            constellation, ok = QInputDialog.getItem(
                self, t("Убрать из созвездия", "Take out of a constellation"),
                t(f"Из какого созвездия убрать «{name}»?", f"Take {name!r} out of which constellation?"),
                choices, current, False)
            if not ok:
                return
        self.remove_dataset(name, constellation)

    def remove_selected_dataset(self) -> None:
        name = self.selected_dataset()
        if name is not None:
            self.remove_dataset(name)

    # -- adding and re-checking: child processes -------------------------------------------
    def pick_and_add(self, folder: bool) -> None:
        if folder:
            path = QFileDialog.getExistingDirectory(self, t("Папка с текстом", "A folder of text"), str(Path.home()))
        else:
            path, _ = QFileDialog.getOpenFileName(
                self, t("Текстовый файл", "A text file"), str(Path.home()),
                # Every file first: the lab reads text from a file of any name (app.data.readers).
                t("Все файлы (*);;Текст (*.txt *.md *.jsonl *.gz)", "All files (*);;Text (*.txt *.md *.jsonl *.gz)"))
        if not path or self.library is None:
            return
        selected = self.selected_constellation()
        own = selected if selected in manage.add_targets(self.library) else None
        dlg = AddDialog(path, manage.add_targets(self.library), own, self)
        if dlg.exec() != QDialog.DialogCode.Accepted:
            return
        self.add(path, dlg.name.text(), dlg.constellation.currentText())

    def add(self, path: str | Path, name: str | None = None, constellation: str | None = None) -> QProcess | None:
        """Add `path` as a dataset to `constellation` (both default to the file's or folder's
        name) in a child process; None when refused before it starts (the reason is shown)."""
        if self.library is None:
            return None
        name = (name if name is not None else manage.default_name(path)).strip()
        constellation = (constellation if constellation is not None else name).strip()
        problem = manage.precheck_add(self.library, path, name, constellation)
        if problem:
            self.status.setText(problem)
            return None
        self._added = name
        return self._start(manage.add_command(path, name, constellation), "add",
                           t(f"Добавление «{name}» в «{constellation}»…", f"Adding {name!r} to {constellation!r}…"))

    def recheck(self) -> QProcess | None:
        return self._start(manage.check_command(), "check", t("Перепроверка наборов…", "Re-checking the datasets…"))

    def _start(self, args: list[str], task: str, message: str) -> QProcess | None:
        if self.task is not None:
            self.status.setText(t("Дождитесь конца текущей операции или отмените её.",
                                  "Wait for the current operation to end, or cancel it."))
            return None
        child = CliTask(args, self)
        self.task, self.output, self._task = child, child.output, task
        # The bar first: it is hidden by the time _finished says how it went.
        self.task_bar.follow(child, message, (
            t("Остановить добавление: в библиотеке ничего не изменится.", "Stop adding: nothing changes in the library.")
            if task == "add" else
            t("Остановить перепроверку: уже перепроверенные наборы останутся перепроверенными.",
              "Stop re-checking: the datasets already re-checked stay re-checked.")))
        child.ended.connect(self._finished)
        self.status.setText(message)
        self._update_buttons()
        child.start()
        return child.proc

    def _finished(self, code: int) -> None:
        if self.task is None:
            return
        child, self.task = self.task, None
        child.deleteLater()
        if self._closed:
            return
        if self._task == "check":
            found = self.output.checks()
            self.statuses.update(found)
            changed = sum(1 for s in found.values() if s.status == "changed")
            missing = sum(1 for s in found.values() if s.status == "missing")
            if code in (0, 2) and found:
                self.status.setText(t(f"Перепроверено наборов: {len(found)}; изменились: {changed}; нет на диске: "
                                      f"{missing}." + (" Подготовьте данные снова для изменившихся." if changed else ""),
                                      f"Datasets re-checked: {len(found)}; changed: {changed}; missing: {missing}."
                                      + (" Prepare the data again for the changed ones." if changed else "")))
            elif code == 0:
                self.status.setText(t("Своих наборов нет: перепроверять нечего.", "No datasets of yours to re-check."))
            else:
                self.status.setText(manage.failure_text(code, self.output), "error")
        elif code == 0:
            self.statuses[self._added] = manage.DatasetStatus("ok", t("Только что прочитан.", "Just read."))
            self.status.setText(manage.notes_text(self.output))
        else:
            self.status.setText(manage.failure_text(code, self.output), "error")
        self.refresh()
        if code == 0 or self._task == "check":  # a re-check may have stored new content
            self.changed.emit()
        self.task_finished.emit(code)

    def cancel(self) -> None:
        """Stop the child like Ctrl-C (SIGTERM): it removes nothing it did not add; killed if
        it has not stopped after a few seconds."""
        self.task_bar.cancel()

    # -- what it remembers (settings.json, as the main window's layout) --------------------
    def _restore_layout(self) -> None:
        """The size and the split the user left last time; a refused state keeps the default."""
        try:
            states = settings.load_layout().states
        except OSError:
            return
        if "data.geometry" in states:
            self.restoreGeometry(states["data.geometry"])
        if "data.splitter" in states:
            self.split.restoreState(states["data.splitter"])

    def save_layout(self) -> bool:
        try:
            layout = settings.load_layout()
            layout.states["data.geometry"] = bytes(self.saveGeometry().data())
            layout.states["data.splitter"] = bytes(self.split.saveState().data())
            settings.save_layout(layout)
        except OSError:  # a read-only config folder: the defaults next time
            return False
        return True

    def done(self, result: int) -> None:  # closing: stop a child, release our state connection
        if self.task is not None:
            self.task.stop_and_wait()
        if not self._closed:
            self._closed = True
            self.save_layout()
            if self._own_library and self.library is not None:
                self.library.state.close()
        super().done(result)


__all__ = ["AddDialog", "DataDialog"]
