"""The run history: every run with its status, where it ran, steps, best validation loss,
tokens and weights; actions on the selected run. Rows come from app.runs' HistoryRow.

Columns fit their contents and the run's name takes the rest, never less than a readable
minimum (a horizontal scroll bar rather than «t…»); a column the user widens or narrows
keeps that width (double-click its edge: back to fitting). A click on a header sorts by it
(newest first by default); the actions follow the selected run, whatever the order.
"""

from __future__ import annotations

import math
from typing import Any

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtGui import QAction, QColor
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QMenu,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.base import run_status as st
from app.base.i18n import t
from app.base.numbers import count_text, loss_text
from app.form.tooltips import wrap_tip
from app.runs import HistoryRow
from app.runs.history_names import display_names
from ui.base import palette

# A status's meaning colour (ui/base/palette: chosen for the system palette's lightness).
STATUS_COLORS = {
    st.RUNNING: "running", st.RUNNING_KAGGLE: "running", st.STARTING: "running",
    st.STOPPING: "warning", st.FAILED: "error", st.TIME_LIMIT: "warning",
    st.FINISHED: "finished", st.STOPPED: "stopped",
}


ID_ROLE = Qt.ItemDataRole.UserRole  # on the name cell: the run's id
SORT_ROLE = Qt.ItemDataRole.UserRole + 1  # on every cell: what the column sorts by
NAME_COLUMN = 1
CREATED_COLUMN = 8
NAME_MIN_PX = 320  # the name keeps this much (or all of it, if shorter) before others shrink it: a
# run named as the series name them («q lr=0.001 width=384») or a dated default stays whole


class _Cell(QTableWidgetItem):
    """A cell that sorts by its key (counts as numbers, «—» after every number), not by
    its text: «27,7 млн» must come after «950 тыс.»."""

    def __lt__(self, other: QTableWidgetItem) -> bool:  # Qt's sort calls this
        a, b = self.data(SORT_ROLE), other.data(SORT_ROLE)
        if a is None or b is None or type(a) is not type(b):
            return super().__lt__(other)
        return a < b


def _number(value: float | None, missing: float = -math.inf) -> float:
    return missing if value is None else float(value)


def column_keys() -> list[str]:
    return [key for key, _ in _columns()]


def _columns() -> list[tuple[str, str]]:
    return [
        ("overlay", t("На графике", "On plot")),
        ("name", t("Прогон", "Run")),
        ("status", t("Статус", "Status")),
        ("where", t("Где", "Where")),
        ("steps", t("Шаги", "Steps")),
        ("best", t("Лучшая val", "Best val")),
        ("tokens", t("Токенов", "Tokens")),
        ("params", t("Весов", "Weights")),
        ("created", t("Создан", "Created")),
    ]


class HistoryView(QWidget):
    """Signals carry the run id."""

    continue_requested = Signal(str)
    continue_edit_requested = Signal(str)
    stop_requested = Signal(str)
    show_requested = Signal(str)
    open_folder_requested = Signal(str)
    export_requested = Signal(str)
    metrics_requested = Signal(str)  # «Метрики в CSV…» (the table's context menu)
    overlay_changed = Signal(str, bool)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.rows: list[HistoryRow] = []  # as given: newest first
        self._by_id: dict[str, HistoryRow] = {}
        self.overlaid: set[str] = set()
        self.followed: str | None = None  # the run the plot shows (its box is ticked)
        self.user_widths: dict[str, int] = {}  # column key -> the width the user dragged it to
        self._filling = False
        self._fitting = False
        self._row_gap = 0  # px left empty under the table so that it ends on a whole row
        cols = _columns()
        self._keys = [c[0] for c in cols]
        self.table = QTableWidget(0, len(cols))
        self.table.setHorizontalHeaderLabels([c[1] for c in cols])
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.setAlternatingRowColors(True)
        header = self.table.horizontalHeader()
        # Interactive: the user may drag any column; the lab fits those they have not.
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setStretchLastSection(False)
        header.sectionResized.connect(self._section_resized)
        header.sectionHandleDoubleClicked.connect(self._refit_column)
        self.table.setSortingEnabled(True)
        header.setSortIndicator(CREATED_COLUMN, Qt.SortOrder.DescendingOrder)
        self.table.viewport().installEventFilter(self)  # its width changes: the name refits
        self.table.itemSelectionChanged.connect(self._selection_changed)
        self.table.itemChanged.connect(self._item_changed)
        self.table.cellDoubleClicked.connect(lambda r, _c: self._emit(self.show_requested, r))
        self.table.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.table.customContextMenuRequested.connect(self._context_menu)
        self.buttons: dict[str, QAbstractButton] = {}
        bar = QHBoxLayout()
        bar.addStretch(1)  # no title: the tab says «История», and the actions need the width
        specs = [
            ("continue", t("Продолжить", "Continue"), self.continue_requested,
             t("Сразу продолжить с последнего чекпоинта, с теми же настройками\n"
               "(завершённый прогон — дальше его «Шагов до»)",
               "Continue from the latest checkpoint now, with the same settings\n"
               "(a finished run: on past its “Steps to”)")),
            ("continue_edit", t("Изменить и продолжить…", "Edit and continue…"), self.continue_edit_requested,
             t("Форма заполнится из чекпоинта (модель заблокирована):\n"
               "поменяйте «Шагов до» или другое и нажмите «Продолжить»",
               "Fills the form from the checkpoint (model locked):\n"
               "change “Steps to” or more, then press “Continue”")),
            ("stop", t("Остановить", "Stop"), self.stop_requested,
             t("Попросить обучение сохраниться и выйти", "Ask the trainer to save and exit")),
            ("show", t("Показать", "Show"), self.show_requested,
             t("Показать прогон (с его родителями) на графике", "Show the run (with its parents) on the plot")),
            ("folder", t("Открыть папку", "Open folder"), self.open_folder_requested,
             t("Папка прогона: run.json, events.jsonl, trainer.log, чекпоинты",
               "The run's folder: run.json, events.jsonl, trainer.log, checkpoints")),
            ("export", t("Экспорт весов", "Export weights"), self.export_requested,
             t("Сохранить веса последнего чекпоинта в .safetensors",
               "Save the latest checkpoint's weights as .safetensors")),
        ]
        for key, text, signal, tip in specs:
            # «Изменить и продолжить…» is a narrow ✎ beside «Продолжить» (its name in its
            # tooltip): one more full-width button made the window wider than a laptop's half.
            b = QToolButton() if key == "continue_edit" else QPushButton(text)
            if key == "continue_edit":
                b.setText("✎")
                b.setAccessibleName(text)
                tip = f"{text}\n{tip}"
            b.setToolTip(tip)
            b.clicked.connect(lambda _=False, s=signal: self._emit(s, self.table.currentRow()))
            self.buttons[key] = b
            bar.addWidget(b)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(bar)
        layout.addWidget(self.table, 1)
        self._selection_changed()

    def _fit_whole_rows(self) -> None:
        """When the rows overflow the table, it ends on a whole row: the pixels of a row that
        would be cut stay empty under it. A pane that ends mid-row (the window at its smallest,
        a splitter dragged) showed half a run as if it were the last one; the scroll bar says
        that more follow."""
        table = self.table
        step = table.rowHeight(0) if table.rowCount() else table.verticalHeader().defaultSectionSize()
        space = table.viewport().height() + self._row_gap  # the height the rows would have without the gap
        gap = space % step if step > 0 and table.rowCount() * step > space else 0
        if gap != self._row_gap:
            self._row_gap = gap
            self.layout().setContentsMargins(0, 0, 0, gap)

    def context_actions(self, row: int) -> list[QAction]:
        """The context menu's items for a table row (none off the rows)."""
        if self.run_id_at(row) is None:
            return []
        csv = QAction(t("Метрики в CSV…", "Metrics as CSV…"), self)
        csv.setToolTip(t("Шаг, время, loss, lr, токены, скорость и валидация прогона\n"
                         "(с прогонами, которые он продолжает) — в файл CSV",
                         "The run's step, time, loss, lr, tokens, speed and validation\n"
                         "(with the runs it continues) as a CSV file"))
        csv.triggered.connect(lambda _=False, r=row: self._emit(self.metrics_requested, r))
        return [csv]

    def _context_menu(self, pos: Any) -> None:
        actions = self.context_actions(self.table.rowAt(pos.y()))
        if actions:
            menu = QMenu(self)
            menu.addActions(actions)
            menu.exec(self.table.viewport().mapToGlobal(pos))

    def run_id_at(self, row: int) -> str | None:
        """The id of the run shown in this table row (rows move when sorted)."""
        item = self.table.item(row, NAME_COLUMN)
        run_id = item.data(ID_ROLE) if item is not None else None
        return run_id if run_id in self._by_id else None

    def row_of(self, run_id: str) -> int:
        """The table row that shows this run now (-1: none)."""
        for r in range(self.table.rowCount()):
            if self.run_id_at(r) == run_id:
                return r
        return -1

    def _emit(self, signal, row: int) -> None:
        run_id = self.run_id_at(row)
        if run_id is not None:
            signal.emit(run_id)

    def selected(self) -> HistoryRow | None:
        run_id = self.run_id_at(self.table.currentRow())
        return self._by_id.get(run_id) if run_id is not None else None

    def select(self, run_id: str) -> None:
        r = self.row_of(run_id)
        if r >= 0:
            self.table.selectRow(r)

    def _selection_changed(self) -> None:
        row = self.selected()
        for key in ("continue", "continue_edit"):
            self.buttons[key].setEnabled(bool(row and row.can_continue))
        self.buttons["stop"].setEnabled(bool(row and row.can_stop))
        self.buttons["export"].setEnabled(bool(row and row.can_export and not row.can_stop))
        for key in ("show", "folder"):
            self.buttons[key].setEnabled(row is not None)

    def set_followed(self, run_id: str | None) -> None:
        """The run the plot follows: its «На графике» box is ticked (and not the user's to
        untick: another run is put on the plot with «Показать»)."""
        if run_id == self.followed:
            return
        self.followed = run_id
        if self.rows:
            self.set_rows(self.rows)

    def on_plot(self, run_id: str) -> bool:
        return run_id == self.followed or run_id in self.overlaid

    def _item_changed(self, item: QTableWidgetItem) -> None:
        if self._filling or item.column() != 0:
            return
        run_id = self.run_id_at(item.row())
        if run_id is None:
            return
        on = item.checkState() == Qt.CheckState.Checked
        (self.overlaid.add if on else self.overlaid.discard)(run_id)
        self.overlay_changed.emit(run_id, on)

    def set_rows(self, rows: list[HistoryRow]) -> None:
        """Show these rows (newest first), keeping the selection and the overlay ticks."""
        keep = self.selected().id if self.selected() else None
        self.rows = list(rows)
        self._by_id = {row.id: row for row in rows}
        self._filling = True
        # Filled unsorted (a sorted table moves a row while its cells are being set), then
        # sorted once by the header's column.
        self.table.setSortingEnabled(False)
        try:
            self.table.setRowCount(len(rows))
            names = display_names(rows)
            for r, row in enumerate(rows):
                tick = _Cell()
                shown = self.on_plot(row.id)
                tick.setData(SORT_ROLE, 1 if shown else 0)
                flags = Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable
                if row.id != self.followed:
                    flags |= Qt.ItemFlag.ItemIsUserCheckable
                tick.setFlags(flags)
                tick.setCheckState(Qt.CheckState.Checked if shown else Qt.CheckState.Unchecked)
                tick.setToolTip(t("Этот прогон — на графике («Показать» другой — сменит его)",
                                  "This run is on the plot (“Show” another to replace it)")
                                if row.id == self.followed else
                                t("Наложить на график для сравнения", "Overlay on the plot to compare"))
                self.table.setItem(r, 0, tick)
                name = names[row.id]
                best = loss_text(row.best_val_loss)
                where = row.where + (f" · {row.kernel_ref}" if row.kernel_ref else "")
                cells = [name, row.status_label, where, row.steps, best,
                         count_text(row.tokens_seen), count_text(row.params), row.created]
                keys: list[Any] = [name.casefold(), row.status_label.casefold(), where.casefold(),
                                   _number(row.last_step), _number(row.best_val_loss, math.inf),
                                   _number(row.tokens_seen), _number(row.params),
                                   float(len(rows) - r)]  # rows come newest first
                tip = wrap_tip("\n".join(x for x in (
                    row.id, t(f"создан {row.created}", f"created {row.created}"), row.folder,
                    row.kernel_ref and f"Kaggle: {row.kernel_ref}", row.message) if x))
                for c, text in enumerate(cells, start=1):
                    item = _Cell(text)
                    item.setData(SORT_ROLE, keys[c - 1])
                    item.setToolTip(tip)
                    if c == 2:
                        item.setForeground(QColor(palette.color(STATUS_COLORS.get(row.status, "muted"))))
                    self.table.setItem(r, c, item)
                self.table.item(r, NAME_COLUMN).setData(ID_ROLE, row.id)
        finally:
            self.table.setSortingEnabled(True)
            self._filling = False
        if keep:
            self.select(keep)
        self._selection_changed()
        self.fit_columns()
        self._fit_whole_rows()  # the count of rows decides whether they overflow

    # -- columns -------------------------------------------------------------------------

    def fit_columns(self) -> None:
        """Columns the user has not sized fit their contents; the name takes what is left,
        at least NAME_MIN_PX (or its own width, when shorter)."""
        header = self.table.horizontalHeader()
        self._fitting = True
        try:
            for c, key in enumerate(self._keys):
                if key in self.user_widths:
                    header.resizeSection(c, self.user_widths[key])
                elif c != NAME_COLUMN:
                    self.table.resizeColumnToContents(c)
            self._fit_name()
        finally:
            self._fitting = False

    def _fit_name(self) -> None:
        if "name" in self.user_widths:
            return
        header = self.table.horizontalHeader()
        others = sum(header.sectionSize(c) for c in range(len(self._keys)) if c != NAME_COLUMN)
        free = self.table.viewport().width() - others
        contents = max(self.table.sizeHintForColumn(NAME_COLUMN), header.sectionSizeHint(NAME_COLUMN))
        self._fitting = True
        try:
            header.resizeSection(NAME_COLUMN, max(min(NAME_MIN_PX, contents), free))
        finally:
            self._fitting = False

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt's name)
        super().changeEvent(event)
        if palette.changed(event) and getattr(self, "rows", None):  # statuses in the new colours
            self.set_rows(self.rows)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt's name)
        if event.type() == QEvent.Type.Resize and watched is self.table.viewport():
            self._fit_name()
            self._fit_whole_rows()
        return super().eventFilter(watched, event)

    def _section_resized(self, column: int, _old: int, new: int) -> None:
        if self._fitting or self._filling or not (0 <= column < len(self._keys)):
            return
        self.user_widths[self._keys[column]] = new  # dragged by the user: kept from now on

    def _refit_column(self, column: int) -> None:
        """A double-click on a column's edge: it fits its contents again (and is no longer
        the user's width)."""
        if 0 <= column < len(self._keys):
            self.user_widths.pop(self._keys[column], None)
        self.fit_columns()

    # -- what the window remembers ----------------------------------------------------------

    def sort_order(self) -> tuple[str, str]:
        header = self.table.horizontalHeader()
        column = header.sortIndicatorSection()
        key = self._keys[column] if 0 <= column < len(self._keys) else "created"
        desc = header.sortIndicatorOrder() == Qt.SortOrder.DescendingOrder
        return key, "desc" if desc else "asc"

    def apply_layout(self, widths: dict[str, int], sort: tuple[str, str] | None) -> None:
        """Widths the user set and the sort order, as remembered (unknown columns ignored)."""
        self.user_widths = {k: int(w) for k, w in widths.items() if k in self._keys}
        if sort is not None and sort[0] in self._keys:
            order = Qt.SortOrder.DescendingOrder if sort[1] == "desc" else Qt.SortOrder.AscendingOrder
            self.table.sortByColumn(self._keys.index(sort[0]), order)
        self.fit_columns()
