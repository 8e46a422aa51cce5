"""«Поиск»: the searches and one search's trials — their values, state and final held-out
loss with its interval — the optimisation history drawn by the lab (each complete trial's
loss and the best so far; Optuna's own plots need plotly or matplotlib), each field's
importance once enough trials have completed, and the best trial's values one click away as
a new form. What a search is and does is app.search's (view, driver); this only shows it.

It reaches nothing of the window: the window connects `use_best` (a run.json for the form)
and hands it the lab's state.
"""

from __future__ import annotations

from typing import Any

import pyqtgraph as pg
from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.base.i18n import t
from app.base.numbers import decimal_text, loss_text
from app.search.store import SearchError, SearchStore, label
from app.search.view import best_config, search_json
from ui.base import palette

REFRESH_MS = 5000


def _values_text(values: dict[str, Any]) -> str:
    return ", ".join(f"{k.rsplit('.', 1)[-1]} = {v:.4g}" if isinstance(v, float) else f"{k.rsplit('.', 1)[-1]} = {v}"
                     for k, v in values.items())


class SearchTab(QWidget):
    use_best = Signal(dict)      # the best trial's run.json, for a new form

    def __init__(self, store: SearchStore, refresh_ms: int = REFRESH_MS) -> None:
        super().__init__()
        self.store = store
        self.view: dict[str, Any] | None = None
        self.choice = QComboBox()
        self.choice.currentIndexChanged.connect(lambda _i: self.refresh())
        self.best_button = QPushButton(t("Лучшая — в форму", "Best into the form"))
        self.best_button.clicked.connect(self._use_best)
        top = QHBoxLayout()
        top.addWidget(QLabel(t("Поиск:", "Search:")))
        top.addWidget(self.choice, 1)
        top.addWidget(self.best_button)
        self.table = QTableWidget(0, 5)
        self.table.setHorizontalHeaderLabels([t("№", "#"), t("значения", "values"), t("состояние", "state"),
                                              t("val loss (95 %)", "val loss (95 %)"), t("прогон", "run")])
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.plot = pg.PlotWidget()
        self.plot.setLabel("bottom", t("попытка", "trial"))
        self.plot.setLabel("left", "val loss")
        self.points = pg.ScatterPlotItem(size=7, brush=pg.mkBrush(palette.SERIES[0]))
        self.best_line = pg.PlotDataItem(pen=pg.mkPen(palette.SERIES[1], width=2))  # the best so far
        self.plot.addItem(self.points)
        self.plot.addItem(self.best_line)
        self.importance = QLabel("")
        self.importance.setWordWrap(True)
        col = QVBoxLayout(self)
        col.addLayout(top)
        col.addWidget(self.table, 3)
        col.addWidget(self.plot, 2)
        col.addWidget(self.importance)
        self.timer = QTimer(self)
        self.timer.timeout.connect(self.refresh)
        if refresh_ms:
            self.timer.start(refresh_ms)
        self.reload()

    def reload(self) -> None:
        """The list of searches read again (newest selected when none was)."""
        current = self.choice.currentData()
        self.choice.blockSignals(True)
        self.choice.clear()
        for s in reversed(self.store.searches()):
            self.choice.addItem(f"{s.id}  {s.name}  ({label(s.state)})", s.id)
        if current is not None:
            i = self.choice.findData(current)
            self.choice.setCurrentIndex(max(0, i))
        self.choice.blockSignals(False)
        self.refresh()

    def refresh(self) -> None:
        sid = self.choice.currentData()
        if sid is None:
            self.view = None
            self._show(None)
            return
        try:
            self.view = search_json(self.store, self.store.search(int(sid)))
        except SearchError:
            self.view = None
        self._show(self.view)

    def _show(self, view: dict[str, Any] | None) -> None:
        trials = view["trials"] if view else []
        self.table.setRowCount(len(trials))
        for row, tr in enumerate(trials):
            ci = tr["val_ci95"]
            loss = loss_text(tr["val_loss"]) + (f" [{loss_text(ci[0])}…{loss_text(ci[1])}]" if ci else "")
            cells = [str(tr["number"]), _values_text(tr["values"]), label(tr["state"]), loss, tr["run_id"] or "—"]
            for col, text in enumerate(cells):
                self.table.setItem(row, col, QTableWidgetItem(text))
        history = view["history"] if view else []
        self.points.setData([h[0] for h in history], [h[1] for h in history])
        self.best_line.setData([h[0] for h in history], [h[2] for h in history])
        self.best_button.setEnabled(bool(view and view["best"]))
        imp = view["importances"] if view else {}
        self.importance.setText(
            t("Важность полей: ", "Field importance: ")
            + ", ".join(f"{k.rsplit('.', 1)[-1]} {decimal_text(v, 2)}" for k, v in imp.items()) if imp else
            t("Важность полей — когда завершится хотя бы 4 попытки и полей больше одного.",
              "Field importance: once at least 4 trials complete, with more than one field."))

    def _use_best(self) -> None:
        sid = self.choice.currentData()
        if sid is None:
            return
        cfg = best_config(self.store, self.store.search(int(sid)))
        if cfg is not None:
            self.use_best.emit(cfg)

    def stop(self) -> None:
        self.timer.stop()
