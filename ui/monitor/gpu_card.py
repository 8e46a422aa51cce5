"""One GPU in the monitor panel: memory bar, temperature, load, the trainer's memory, history.

Only formatting: the texts, levels and warnings come from app.gpu.present.
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import QEvent, Qt
from PySide6.QtWidgets import QFrame, QLabel, QProgressBar, QVBoxLayout, QWidget

from app.base.i18n import t
from app.gpu.present import GpuView
from ui.base import palette

# A level's meaning colour (app.gpu.present decides the level; app.window.colors the colour for the
# system palette): as text on the window, and as the memory bar's fill behind the bar's text.
LEVEL_COLOURS = {
    "normal": "gpu_normal",
    "warm": "gpu_warm",
    "hot": "gpu_hot",
    "high": "gpu_warm",
    "full": "gpu_hot",
    "unknown": "muted",
}
FILL_COLOURS = {"normal": "gpu_fill_normal", "high": "gpu_fill_high", "full": "gpu_fill_full"}
# History series -> (colour, RU label, EN label): palette.SERIES, the loss plot's line colours.
SERIES_STYLE = {
    "mem_pct": (palette.SERIES[0], "память, %", "memory, %"),
    "util_pct": (palette.SERIES[2], "загрузка, %", "load, %"),
    "temp_c": (palette.SERIES[1], "температура, °C", "temperature, °C"),
}
_style = palette.set_style


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
        self.temp_colour = palette.color(LEVEL_COLOURS["unknown"])
        self.load_label = QLabel()
        self.load_label.setWordWrap(True)
        self.trainer_label = QLabel()
        self.trainer_label.setWordWrap(True)
        self.plot_widget = pg.PlotWidget()
        self.plot_widget.setMinimumHeight(110)
        self.plot_widget.setMouseEnabled(x=False, y=False)
        self.plot_widget.setMenuEnabled(False)
        plot = self.plot_widget.getPlotItem()
        # No pyqtgraph grid: it is redrawn with the axes every second and doubled the cost of
        # an update (scripts/bench_monitor_panel.py); three light lines guide the eye instead.
        self.guides = [pg.InfiniteLine(level, angle=0) for level in (25, 50, 75)]
        for line in self.guides:
            plot.addItem(line)
        plot.setXRange(-history_s, 0, padding=0)
        plot.setYRange(0, 100, padding=0.02)
        plot.setLabel("bottom", t("секунд назад", "seconds ago"))
        self.legend = plot.addLegend(offset=(5, 5))
        self.curves = {
            name: plot.plot(pen=pg.mkPen(colour, width=1.5), name=t(ru, en), connect="finite")
            for name, (colour, ru, en) in SERIES_STYLE.items()
        }
        # The card's slowdown threshold, on the temperature's scale.
        self.slowdown_line = pg.InfiniteLine(angle=0)
        self.slowdown_line.setVisible(False)
        plot.addItem(self.slowdown_line)
        self._shown: tuple[GpuView, float | None, str | None] | None = None
        self._paint_plot()
        layout = QVBoxLayout(self)
        for w in (self.title, self.memory_bar, self.temp_label, self.load_label,
                  self.trainer_label, self.plot_widget):
            layout.addWidget(w)

    def _paint_plot(self) -> None:
        """The plot in the system palette's colours (a dark theme gets a dark plot)."""
        self.plot_widget.setBackground(palette.color("plot_bg"))
        plot = self.plot_widget.getPlotItem()
        ink = pg.mkPen(palette.color("plot_fg"))
        for axis in ("left", "bottom"):
            plot.getAxis(axis).setPen(ink)
            plot.getAxis(axis).setTextPen(ink)
        for line in self.guides:
            line.setPen(pg.mkPen(palette.color("grid")))
        self.slowdown_line.setPen(pg.mkPen(palette.color("gpu_hot"), style=Qt.PenStyle.DashLine))
        self.legend.setLabelTextColor(palette.color("plot_fg"))
        for _sample, label in self.legend.items:
            label.setText(label.text)  # a LabelItem takes a new colour only with its text

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt's name)
        super().changeEvent(event)
        if palette.changed(event):
            self._paint_plot()
            if self._shown is not None:
                self.show_view(*self._shown)

    def show_view(self, view: GpuView, slowdown_c: float | None,
                  lang: str | None = None) -> None:
        self._shown = (view, slowdown_c, lang)
        self.title.setText(view.title)
        lost = f" {palette.style('error')}" if view.lost else ""
        _style(self.title, "font-weight: bold;" + lost)
        frac = view.memory_fraction
        self.memory_bar.setValue(int(round((frac or 0.0) * 1000)))
        self.memory_bar.setFormat(view.memory_text)
        colour = palette.color(FILL_COLOURS.get(view.memory_level, "gpu_fill_normal"))
        _style(self.memory_bar, f"QProgressBar::chunk {{ background-color: {colour}; }}"
                                " QProgressBar { text-align: center; }")
        self.memory_level = view.memory_level
        self.temp_label.setText(t("Температура: ", "Temperature: ", lang) + view.temperature_text)
        self.temperature_level = view.temperature_level
        self.temp_colour = palette.color(LEVEL_COLOURS.get(view.temperature_level, "muted"))
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
