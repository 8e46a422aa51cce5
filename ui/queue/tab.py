"""«Очередь»: the queued runs with where each will train, when it is expected to start and
end, and its state; move up/down, hold, remove, pause the queue; a series' results; the
timeline below, and who drives the queue. The tab gives app.queue's QueueDriver its looks
(every few seconds, in a worker thread: the driver starts the queue's own runner when it has
work and nobody drives it) and shows what the driver announces (`events.changed`): no
handler here refreshes the view itself.

It reaches nothing of the window: the window connects `message` (a status-bar line) and the
driver's `events.news` (a tray message), and hands it the form's runs (`add`).
"""

from __future__ import annotations

import threading
from datetime import datetime
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.base.i18n import t
from app.queue.driver import TICK_S, QueueDriver
from app.queue.store import DONE, FAILED, RUNNING, STARTING, Item
from app.queue.world import Timeline, machine_label
from ui.base import palette
from ui.base.background import run_in_thread

ID_ROLE = Qt.ItemDataRole.UserRole
FIRST_TICK_MS = 400
STATE_COLORS = {STARTING: "running", RUNNING: "running", DONE: "finished", FAILED: "error"}


def clock(at: float | None, now: float) -> str:
    if at is None:
        return "—"
    when = datetime.fromtimestamp(at)
    return when.strftime("%H:%M") if abs(at - now) < 20 * 3600 else when.strftime("%d.%m %H:%M")


class QueueTab(QWidget):
    message = Signal(str)        # a line for the status bar
    refreshed = Signal()         # the list and the timeline show the queue as it is now

    def __init__(self, driver: QueueDriver, tick_ms: int = int(TICK_S * 1000)) -> None:
        super().__init__()
        self.driver = driver
        self.timeline_view: Any = None  # ui.queue.timeline.QueueTimeline, built on first show
        self.last: Timeline | None = None
        self._ticking = False
        self._round: threading.Thread | None = None  # the round in flight, if any
        self._build()
        driver.events.changed.connect(self.show_timeline)
        self._listening = True
        self.timer = QTimer(self)
        self.timer.setInterval(tick_ms)
        self.timer.timeout.connect(self.tick)
        self.timer.start()
        QTimer.singleShot(FIRST_TICK_MS, self.tick)  # after the window's first frame

    # -- layout -----------------------------------------------------------------------------
    def _build(self) -> None:
        col = QVBoxLayout(self)
        col.setContentsMargins(0, 0, 0, 0)
        bar = QHBoxLayout()
        self.pause_button = QPushButton(t("Пауза очереди", "Pause the queue"))
        self.pause_button.setCheckable(True)
        self.pause_button.setToolTip(t("Идущие прогоны идут; новые не начинаются, пока пауза",
                                       "Running runs go on; no new one starts while paused"))
        self.pause_button.clicked.connect(self._pause_clicked)
        self.up_button = QPushButton("▲")
        self.up_button.setToolTip(t("Раньше в очереди", "Earlier in the queue"))
        self.up_button.clicked.connect(lambda: self._edit(lambda i: self.driver.move(i, -1)))
        self.down_button = QPushButton("▼")
        self.down_button.setToolTip(t("Позже в очереди", "Later in the queue"))
        self.down_button.clicked.connect(lambda: self._edit(lambda i: self.driver.move(i, +1)))
        self.hold_button = QPushButton(t("Отложить", "Hold"))
        self.hold_button.setCheckable(True)
        self.hold_button.setToolTip(t("Очередь обходит отложенный прогон, пока его не вернут",
                                      "The queue passes a held run by until it is put back"))
        self.hold_button.clicked.connect(lambda on: self._edit(lambda i: self.driver.hold(i, on)))
        self.remove_button = QPushButton(t("Убрать", "Remove"))
        self.remove_button.clicked.connect(lambda: self._edit(self.driver.remove))
        self.series_button = QPushButton(t("Итоги серии…", "Series results…"))
        self.series_button.clicked.connect(self.show_series)
        for b in (self.pause_button, self.up_button, self.down_button, self.hold_button, self.remove_button,
                  self.series_button):
            bar.addWidget(b)
        self.who = QLabel()
        self.who.setStyleSheet(palette.style("muted"))
        bar.addWidget(self.who, 1)
        col.addLayout(bar)
        self.table = QTableWidget(0, 7)
        self.table.setHorizontalHeaderLabels([t("№", "#"), t("Прогон", "Run"), t("Где", "Where"), t("Начало", "Start"),
                                              t("Конец", "End"), t("Состояние", "State"), t("Примечание", "Note")])
        self.table.verticalHeader().setVisible(False)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.itemSelectionChanged.connect(self._selection_changed)
        self.split = QSplitter(Qt.Orientation.Vertical)
        self.split.addWidget(self.table)
        self.timeline_slot = QLabel(t("График очереди появится здесь", "The queue's timeline appears here"))
        self.timeline_slot.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.split.addWidget(self.timeline_slot)
        self.split.setStretchFactor(0, 1)
        self.split.setStretchFactor(1, 1)
        col.addWidget(self.split, 1)
        self._selection_changed()

    def ensure_timeline(self) -> Any:
        if self.timeline_view is None:
            from ui.queue.timeline import QueueTimeline  # pyqtgraph: loaded when first needed

            self.timeline_view = QueueTimeline()
            self.split.replaceWidget(1, self.timeline_view)
            self.timeline_slot.deleteLater()
            if self.last is not None:
                self.timeline_view.show_timeline(self.last)
        return self.timeline_view

    def showEvent(self, event: Any) -> None:  # noqa: N802 (Qt's name)
        super().showEvent(event)
        self.ensure_timeline()

    # -- the queue's rounds ---------------------------------------------------------------------
    def tick(self) -> None:
        """A look at the queue off the window's thread, then the list and timeline again."""
        if self._ticking:
            return
        self._ticking = True
        self._round = run_in_thread(self.driver.tick, self._ticked, self, name="queue")

    def _ticked(self, result: object) -> None:
        self._ticking = False
        # Announced: show_timeline below, and the window's tray.
        self.driver.refresh(result if isinstance(result, Timeline) else None)

    def show_timeline(self, tl: Timeline) -> None:
        """What the driver announced: the list, the timeline, the pause, who drives."""
        self.last = tl
        self._fill(tl)
        if self.timeline_view is not None:
            self.timeline_view.show_timeline(tl)
        self.pause_button.setChecked(tl.paused)
        self.who.setText(self.driver.who_drives(tl))
        self.refreshed.emit()

    def _fill(self, tl: Timeline) -> None:
        keep = self.selected()
        self.table.setRowCount(len(tl.rows))
        for i, r in enumerate(tl.rows):
            it = r.item
            cells = [str(r.place or ""), it.name, machine_label(r.machine), clock(r.start, tl.now),
                     clock(r.end, tl.now), r.label, r.note]
            for j, text in enumerate(cells):
                cell = QTableWidgetItem(text)
                cell.setData(ID_ROLE, it.id)
                if j == 6 and text:
                    cell.setToolTip(text)
                if j == 5 and it.state in STATE_COLORS:
                    cell.setForeground(QColor(palette.color(STATE_COLORS[it.state])))
                self.table.setItem(i, j, cell)
            if it.id == keep:
                self.table.selectRow(i)
        self._selection_changed()

    # -- selection and edits ---------------------------------------------------------------------
    def selected(self) -> int | None:
        rows = self.table.selectionModel().selectedRows() if self.table.selectionModel() else []
        if not rows:
            return None
        cell = self.table.item(rows[0].row(), 0)
        return int(cell.data(ID_ROLE)) if cell is not None else None

    def select(self, item_id: int) -> None:
        for i in range(self.table.rowCount()):
            cell = self.table.item(i, 0)
            if cell is not None and cell.data(ID_ROLE) == item_id:
                self.table.selectRow(i)
                return

    def _item(self) -> Item | None:
        sel = self.selected()
        if sel is None or self.last is None:
            return None
        return next((r.item for r in self.last.rows if r.item.id == sel), None)

    def _selection_changed(self) -> None:
        it = self._item()
        self.up_button.setEnabled(bool(it and it.movable))
        self.down_button.setEnabled(bool(it and it.movable))
        self.hold_button.setEnabled(bool(it and it.movable))
        self.hold_button.setChecked(bool(it and it.held))
        self.remove_button.setEnabled(bool(it and it.removable))
        self.series_button.setEnabled(bool(it and it.series_id is not None))

    def _edit(self, action: Any) -> None:
        sel = self.selected()
        if sel is None:
            return
        try:
            text = action(sel)
        except ValueError as e:  # QueueError: says why (started meanwhile, …)
            text = str(e)
        if text:
            self.message.emit(text)

    def _pause_clicked(self, on: bool) -> None:
        self.message.emit(self.driver.set_paused(on))

    # -- adding --------------------------------------------------------------------------------
    def add(self, config: dict[str, Any], target: str | None = None, parent_id: str | None = None,
            vary: list[tuple[str, list[Any]]] | None = None) -> None:
        """The form's run (or a series of it) to the queue: pre-checked in a thread."""
        self.message.emit(t("Проверка и постановка в очередь…", "Checking and queueing…"))
        run_in_thread(lambda: self.driver.add(config, target, vary=vary, parent_id=parent_id), self._added, self,
                      name="queue-add")

    def _added(self, result: object) -> None:
        if isinstance(result, Exception):
            self.message.emit(str(result))
            return
        self.message.emit(self.driver.added_text(result))  # type: ignore[arg-type]
        self.driver.refresh()
        self.tick()  # it may start at once

    def show_series(self) -> Any:
        it = self._item()
        if it is None or it.series_id is None:
            return None
        from ui.queue.series_dialog import SeriesResultsDialog

        dialog = SeriesResultsDialog(self.driver.series_results(it.series_id), self)
        dialog.show()
        return dialog

    def stop(self, wait_s: float = 10.0) -> None:
        """The tab goes (the window closes, or is rebuilt in another language): no more
        rounds, and the one in flight ends before the tab (whose thread reports to it) does."""
        self.timer.stop()
        if self._listening:  # a window closed twice stops its tab twice
            self._listening = False
            self.driver.events.changed.disconnect(self.show_timeline)
        if self._round is not None:
            self._round.join(wait_s)
