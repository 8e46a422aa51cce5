"""The run history: every run with its status, where it ran, steps, best validation loss,
tokens and weights; actions on the selected run. Rows come from app.runs' HistoryRow."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.i18n import t
from app.numbers import count_text
from app.runs import HistoryRow
from app.runs import status as st

STATUS_COLORS = {
    st.RUNNING: "#1b7f3b", st.RUNNING_KAGGLE: "#1b7f3b", st.STARTING: "#1b7f3b",
    st.STOPPING: "#8a5a00", st.FAILED: "#b00020", st.TIME_LIMIT: "#8a5a00",
    st.FINISHED: "#1f4e99", st.STOPPED: "#555555",
}


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
    stop_requested = Signal(str)
    show_requested = Signal(str)
    open_folder_requested = Signal(str)
    export_requested = Signal(str)
    overlay_changed = Signal(str, bool)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.rows: list[HistoryRow] = []
        self.overlaid: set[str] = set()
        self._filling = False
        cols = _columns()
        self.table = QTableWidget(0, len(cols))
        self.table.setHorizontalHeaderLabels([c[1] for c in cols])
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.setAlternatingRowColors(True)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        self.table.itemSelectionChanged.connect(self._selection_changed)
        self.table.itemChanged.connect(self._item_changed)
        self.table.cellDoubleClicked.connect(lambda r, _c: self._emit(self.show_requested, r))
        self.buttons: dict[str, QPushButton] = {}
        bar = QHBoxLayout()
        title = QLabel(t("История прогонов", "Run history"))
        title.setStyleSheet("font-weight: bold;")
        bar.addWidget(title)
        bar.addStretch(1)
        specs = [
            ("continue", t("Продолжить", "Continue"), self.continue_requested,
             t("Форма заполнится из последнего чекпоинта: модель заблокирована, всё готово к старту",
               "Fills the form from the latest checkpoint: model locked, ready to start")),
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
            b = QPushButton(text)
            b.setToolTip(tip)
            b.clicked.connect(lambda _=False, s=signal: self._emit(s, self.table.currentRow()))
            self.buttons[key] = b
            bar.addWidget(b)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(bar)
        layout.addWidget(self.table, 1)
        self._selection_changed()

    def _emit(self, signal, row: int) -> None:
        if 0 <= row < len(self.rows):
            signal.emit(self.rows[row].id)

    def selected(self) -> HistoryRow | None:
        r = self.table.currentRow()
        return self.rows[r] if 0 <= r < len(self.rows) else None

    def select(self, run_id: str) -> None:
        for i, row in enumerate(self.rows):
            if row.id == run_id:
                self.table.selectRow(i)
                return

    def _selection_changed(self) -> None:
        row = self.selected()
        self.buttons["continue"].setEnabled(bool(row and row.can_continue))
        self.buttons["stop"].setEnabled(bool(row and row.can_stop))
        self.buttons["export"].setEnabled(bool(row and row.can_export and not row.can_stop))
        for key in ("show", "folder"):
            self.buttons[key].setEnabled(row is not None)

    def _item_changed(self, item: QTableWidgetItem) -> None:
        if self._filling or item.column() != 0 or not (0 <= item.row() < len(self.rows)):
            return
        run_id = self.rows[item.row()].id
        on = item.checkState() == Qt.CheckState.Checked
        (self.overlaid.add if on else self.overlaid.discard)(run_id)
        self.overlay_changed.emit(run_id, on)

    def set_rows(self, rows: list[HistoryRow]) -> None:
        """Show these rows (newest first), keeping the selection and the overlay ticks."""
        keep = self.selected().id if self.selected() else None
        self.rows = list(rows)
        self._filling = True
        try:
            self.table.setRowCount(len(rows))
            for r, row in enumerate(rows):
                tick = QTableWidgetItem()
                tick.setFlags(Qt.ItemFlag.ItemIsUserCheckable | Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable)
                tick.setCheckState(Qt.CheckState.Checked if row.id in self.overlaid else Qt.CheckState.Unchecked)
                tick.setToolTip(t("Наложить на график для сравнения", "Overlay on the plot to compare"))
                self.table.setItem(r, 0, tick)
                name = row.name + (t(f" (этап {row.leg})", f" (leg {row.leg})") if row.leg > 1 else "")
                best = f"{row.best_val_loss:.4f}" if row.best_val_loss is not None else "—"
                where = row.where + (f" · {row.kernel_ref}" if row.kernel_ref else "")
                cells = [name, row.status_label, where, row.steps, best,
                         count_text(row.tokens_seen), count_text(row.params), row.created]
                tip = "\n".join(x for x in (row.id, row.folder, row.kernel_ref and f"Kaggle: {row.kernel_ref}",
                                             row.message) if x)
                for c, text in enumerate(cells, start=1):
                    item = QTableWidgetItem(text)
                    item.setToolTip(tip)
                    if c == 2:
                        item.setForeground(QColor(STATUS_COLORS.get(row.status, "#333333")))
                    self.table.setItem(r, c, item)
        finally:
            self._filling = False
        if keep:
            self.select(keep)
        self._selection_changed()
