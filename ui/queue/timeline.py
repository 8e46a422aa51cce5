"""The queue's timeline: one row per machine (this PC, each Kaggle account), the queued runs
as bars from their (expected) start to end, each account's weekly quota refresh marked, and
a line at now. It draws app.queue's Timeline; nothing is decided here.

Built on first show (pyqtgraph and numpy load then, not with the window).
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import QRectF
from PySide6.QtGui import QBrush, QColor, QPen
from PySide6.QtWidgets import QGraphicsRectItem

from app.base.i18n import t
from app.queue.store import DONE, FAILED, RUNNING, STARTING, WAITING
from app.queue.world import Bar, Timeline
from ui.base import palette

STATE_COLORS = {WAITING: "muted", STARTING: "running", RUNNING: "running", DONE: "finished", FAILED: "error"}
BAR_HEIGHT = 0.6


class QueueTimeline(pg.PlotWidget):
    """`show_timeline(timeline)`; `bars` and `marks` keep what is drawn (the tests read them)."""

    def __init__(self) -> None:
        super().__init__(axisItems={"bottom": pg.DateAxisItem(orientation="bottom")})
        self.setBackground(palette.color("plot_bg"))
        self.setMouseEnabled(x=True, y=False)
        self.getPlotItem().hideButtons()
        self.getPlotItem().showGrid(x=True, y=False, alpha=0.2)
        self.bars: list[Bar] = []
        self.marks: dict[str, list[float]] = {}
        self._items: list[object] = []
        self._now = pg.InfiniteLine(angle=90, pen=pg.mkPen(palette.color("warning"), width=1))
        self.addItem(self._now)
        self.setMinimumHeight(120)

    def show_timeline(self, tl: Timeline) -> None:
        for item in self._items:
            self.removeItem(item)
        self._items = []
        self.bars = tl.bars()
        self.marks = {m: list(ts) for m, ts in tl.refreshes.items() if ts}
        for bar in self.bars:
            self._draw_bar(bar)
        for machine, times in self.marks.items():
            self._draw_refresh(tl.machines.index(machine), times)
        self._now.setValue(tl.now)
        axis = self.getPlotItem().getAxis("left")
        axis.setTicks([[(i, tl.machine_text(m)) for i, m in enumerate(tl.machines)]])
        self.setYRange(-0.6, max(0.6, len(tl.machines) - 0.4), padding=0)
        # Tall enough that each lane's label fits: a row per machine, a lane per session at once.
        lanes = {b.row: b.lanes for b in self.bars}
        self.setMinimumHeight(60 + sum(30 * lanes.get(i, 1) for i in range(len(tl.machines))))
        ends = [b.end for b in self.bars] or [tl.now + 3600.0]
        starts = [b.start for b in self.bars] or [tl.now]
        self.setXRange(min(min(starts), tl.now) - 60.0, max(ends) + 60.0, padding=0.02)

    def _draw_bar(self, bar: Bar) -> None:
        color = QColor(palette.color(STATE_COLORS.get(bar.state, "muted")))
        height = BAR_HEIGHT / bar.lanes
        bottom = bar.row - BAR_HEIGHT / 2 + bar.lane * height
        rect = QGraphicsRectItem(QRectF(bar.start, bottom, bar.end - bar.start, height * 0.92))
        fill = QColor(color)
        fill.setAlpha(110 if bar.state == WAITING else 170)
        rect.setBrush(QBrush(fill))
        pen = QPen(color)
        pen.setCosmetic(True)
        rect.setPen(pen)
        rect.setToolTip(bar.name)
        self.addItem(rect)
        label = pg.TextItem(bar.name, color=palette.color("ink"), anchor=(0, 0.5))
        font = label.textItem.font()
        font.setPointSizeF(font.pointSizeF() * 0.85)
        label.setFont(font)
        label.setPos(bar.start, bottom + height / 2)
        self.addItem(label)
        self._items += [rect, label]

    def _draw_refresh(self, row: int, times: list[float]) -> None:
        """A short upright tick on the account's row at each quota refresh."""
        xs, ys = [], []
        for at in times:
            xs += [at, at]
            ys += [row - 0.45, row + 0.45]
        line = pg.PlotDataItem(xs, ys, connect="pairs", pen=pg.mkPen(palette.color("finished"), width=2,
                                                                         style=pg.QtCore.Qt.PenStyle.DashLine))
        line.setToolTip(t("обновление квоты", "quota refresh"))
        self.addItem(line)
        self._items.append(line)
