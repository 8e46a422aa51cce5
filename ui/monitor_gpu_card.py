"""One GPU in the monitor panel: memory bar, temperature, load, the trainer's memory, history.

Only formatting: the texts, levels and warnings come from app.gpu.present.
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QLabel, QProgressBar, QVBoxLayout, QWidget

from app.gpu.present import GpuView
from app.i18n import t

# Colour per level (app.gpu.present decides the level).
LEVEL_COLOURS = {
    "normal": "#2e7d32",
    "warm": "#e08a00",
    "hot": "#c62828",
    "high": "#e08a00",
    "full": "#c62828",
    "unknown": "#777777",
}
SERIES_STYLE = {  # history series -> (colour, RU label, EN label)
    "mem_pct": ("#1f77b4", "память, %", "memory, %"),
    "util_pct": ("#2ca02c", "загрузка, %", "load, %"),
    "temp_c": ("#d62728", "температура, °C", "temperature, °C"),
}


def _style(widget: QWidget, sheet: str) -> None:
    # Setting a style sheet re-polishes the widget even when it is the same: only on change.
    if widget.styleSheet() != sheet:
        widget.setStyleSheet(sheet)


class GpuCard(QFrame):
    def __init__(self, index: int, history_s: float, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.index = index
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.title = QLabel()
        self.title.setStyleSheet("font-weight: bold;")
        self.memory_bar = QProgressBar()
        self.memory_bar.setRange(0, 1000)
        self.memory_bar.setTextVisible(True)
        self.memory_bar.setToolTip(t(
            "Сколько памяти карты занято сейчас — всеми программами, включая контекст CUDA и "
            "кэш распределителя PyTorch. Это больше, чем тренер выделил под свои тензоры.",
            "How much of the card's memory is in use now — by every program, including the "
            "CUDA context and PyTorch's allocator cache. It is more than the trainer allocated "
            "for its tensors."))
        self.temp_label = QLabel()
        self.memory_level = self.temperature_level = "unknown"
        self.temp_colour = LEVEL_COLOURS["unknown"]
        self.load_label = QLabel()
        self.load_label.setWordWrap(True)
        self.trainer_label = QLabel()
        self.trainer_label.setWordWrap(True)
        self.plot_widget = pg.PlotWidget(background="w")
        self.plot_widget.setMinimumHeight(110)
        self.plot_widget.setMouseEnabled(x=False, y=False)
        self.plot_widget.setMenuEnabled(False)
        plot = self.plot_widget.getPlotItem()
        # No pyqtgraph grid: it is redrawn with the axes every second and doubled the cost of
        # an update (scripts/bench_monitor_panel.py); three light lines guide the eye instead.
        for level in (25, 50, 75):
            plot.addItem(pg.InfiniteLine(level, angle=0, pen=pg.mkPen("#dddddd")))
        for axis in ("left", "bottom"):
            plot.getAxis(axis).setPen(pg.mkPen("#333333"))
            plot.getAxis(axis).setTextPen(pg.mkPen("#333333"))
        plot.setXRange(-history_s, 0, padding=0)
        plot.setYRange(0, 100, padding=0.02)
        plot.setLabel("bottom", t("секунд назад", "seconds ago"))
        plot.addLegend(offset=(5, 5))
        self.curves = {
            name: plot.plot(pen=pg.mkPen(colour, width=1.5), name=t(ru, en), connect="finite")
            for name, (colour, ru, en) in SERIES_STYLE.items()
        }
        # The card's slowdown threshold, on the temperature's scale.
        self.slowdown_line = pg.InfiniteLine(
            angle=0, pen=pg.mkPen("#c62828", style=Qt.PenStyle.DashLine))
        self.slowdown_line.setVisible(False)
        plot.addItem(self.slowdown_line)
        layout = QVBoxLayout(self)
        for w in (self.title, self.memory_bar, self.temp_label, self.load_label,
                  self.trainer_label, self.plot_widget):
            layout.addWidget(w)

    def show_view(self, view: GpuView, slowdown_c: float | None,
                  lang: str | None = None) -> None:
        self.title.setText(view.title)
        _style(self.title, "font-weight: bold;" + (" color: #c62828;" if view.lost else ""))
        frac = view.memory_fraction
        self.memory_bar.setValue(int(round((frac or 0.0) * 1000)))
        self.memory_bar.setFormat(view.memory_text)
        colour = LEVEL_COLOURS.get(view.memory_level, LEVEL_COLOURS["unknown"])
        _style(self.memory_bar, f"QProgressBar::chunk {{ background-color: {colour}; }}"
                                " QProgressBar { text-align: center; }")
        self.memory_level = view.memory_level
        self.temp_label.setText(t("Температура: ", "Temperature: ", lang) + view.temperature_text)
        self.temperature_level = view.temperature_level
        self.temp_colour = LEVEL_COLOURS.get(view.temperature_level, LEVEL_COLOURS["unknown"])
        bold = " font-weight: bold;" if view.temperature_level == "hot" else ""
        _style(self.temp_label, f"color: {self.temp_colour};{bold}")
        self.load_label.setText(view.load_text)
        self.trainer_label.setText(view.trainer_text)
        self.trainer_label.setVisible(bool(view.trainer_text))
        if slowdown_c is not None:
            self.slowdown_line.setValue(slowdown_c)
        self.slowdown_line.setVisible(slowdown_c is not None)

    def show_history(self, series: dict[str, list[float]]) -> None:
        xs = series["t"]
        for name, curve in self.curves.items():
            curve.setData(xs, series[name])
