"""The loss plot: train loss (raw and smoothed) and validation with its 95% band, live.

One `RunTrace` per run on the plot (the followed run, plus any overlaid from the history).
Points arrive as trainer events; they go into growing numpy buffers and the curves are
redrawn from views of them, with pyqtgraph's peak downsampling and clip-to-view on, so
100,000 points stay smooth. A continued run is fed its whole chain (parent first), so it is
one curve; where the data changed the validation curve starts a new segment and a dashed
line marks it; pauses (heat guard) get a dotted line.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, Qt
from PySide6.QtWidgets import QCheckBox, QComboBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from app.base.i18n import t
from app.runs.events import EventTail
from app.runs.series import DATA_CHANGED, LEG, PAUSE, LossSeries, Marker, SeriesBuilder
from ui.base import palette, wheel_guard

SMOOTHING = 0.9  # EMA weight of the past: about the last 10 steps
PLOT_MIN_HEIGHT = 180  # px: the axes, their labels and a readable curve
RECENT_SHARE = 0.25  # «Конец крупно»: the last quarter of the run's x-range


class _Buffer:
    """A numpy array that grows by doubling; `view()` is the filled part."""

    def __init__(self, capacity: int = 1024) -> None:
        self.data = np.empty(capacity, dtype=np.float64)
        self.n = 0

    def append(self, value: float) -> None:
        if self.n == len(self.data):
            self.data = np.concatenate([self.data, np.empty(len(self.data), dtype=np.float64)])
        self.data[self.n] = value
        self.n += 1

    def view(self) -> np.ndarray:
        return self.data[: self.n]


class RunTrace:
    """One run's curve (with the runs it continues) and the plot items that draw it.

    The points are app.runs' LossSeries, built by its SeriesBuilder from the trainer's
    events (the same rules as the history: a resume replaces redone steps, new data starts
    a new validation segment). Only new points are copied into the numpy buffers.
    """

    def __init__(self, plot: pg.PlotItem, key: str, label: str, color: str, primary: bool) -> None:
        self.plot, self.key, self.label, self.color, self.primary = plot, key, label, color, primary
        self.builder = SeriesBuilder()
        self._tails: dict[str, EventTail] = {}
        self.x_tokens = False
        self._reset_buffers()
        raw_color = pg.mkColor(color).lighter(170)
        raw_name = t(f"{label}: обучение", f"{label}: train") if primary else None
        self.raw_curve = pg.PlotDataItem(pen=pg.mkPen(raw_color, width=1), name=raw_name, connect="finite")
        self.smooth_curve = pg.PlotDataItem(pen=pg.mkPen(color=color, width=2),
                                            name=t(f"{label}: сглажено", f"{label}: smoothed"), connect="finite")
        self.raw_curve.setVisible(primary)
        plot.addItem(self.raw_curve)
        plot.addItem(self.smooth_curve)
        for item in (self.raw_curve, self.smooth_curve):
            # After addItem (which applies the PlotItem's modes): peak downsampling keeps
            # spikes visible; clip-to-view draws only what is shown.
            item.setDownsampling(auto=True, method="peak")
            item.setClipToView(True)
        self._val_items: list[Any] = []
        self._marker_items: list[pg.InfiniteLine] = []
        self._drawn_val = -1
        self._drawn_markers = -1

    def _reset_buffers(self) -> None:
        self.steps, self.tokens, self.loss, self.smooth = _Buffer(), _Buffer(), _Buffer(), _Buffer()
        self._ema: float | None = None  # seeded by the first point: no start-up bias
        self._copied = 0
        self._last_step_copied: int | None = None

    @property
    def series(self) -> LossSeries:
        return self.builder.series

    # -- feeding -----------------------------------------------------------------------

    def load(self, series: LossSeries) -> None:
        """Show a finished series (a run from the history, with its parents)."""
        self.builder = SeriesBuilder(series)
        self._reset_buffers()

    def follow(self, runs: list[tuple[str, Path]]) -> None:
        """Follow a chain live: (run id, events.jsonl) oldest first; `poll()` reads on."""
        self.builder = SeriesBuilder()
        self._tails = {run_id: EventTail(path) for run_id, path in runs}
        self._reset_buffers()
        self.poll()

    def poll(self) -> bool:
        """Read what the followed runs appended; returns whether anything arrived."""
        got = False
        for run_id, tail in self._tails.items():
            events = tail.read()
            if events:
                self.builder.begin_run(run_id)
                for ev in events:
                    self.builder.add(ev)
                got = True
        return got

    def add_events(self, run_id: str, events: Iterable[dict[str, Any]]) -> None:
        self.builder.begin_run(run_id)
        for ev in events:
            self.builder.add(ev)

    # -- drawing -----------------------------------------------------------------------

    def _sync_buffers(self) -> None:
        s = self.series
        n = len(s.steps)
        # A resume that redid steps truncated the series: copy everything again.
        if n < self._copied or (self._copied and s.steps[self._copied - 1] != self._last_step_copied):
            self._reset_buffers()
        for i in range(self._copied, n):
            loss = s.loss[i]
            self.steps.append(s.steps[i])
            self.tokens.append(s.tokens[i])
            self.loss.append(loss)
            if math.isfinite(loss):
                self._ema = loss if self._ema is None else SMOOTHING * self._ema + (1 - SMOOTHING) * loss
            self.smooth.append(self._ema if self._ema is not None else math.nan)
        self._copied = n
        self._last_step_copied = s.steps[n - 1] if n else None

    def redraw(self, full: bool = False) -> None:
        self._sync_buffers()
        x = self.tokens.view() if self.x_tokens else self.steps.view()
        self.raw_curve.setData(x, self.loss.view())
        self.smooth_curve.setData(x, self.smooth.view())
        s = self.series
        if full or self._drawn_val != len(s.eval_steps):
            self._draw_val()
        if full or self._drawn_markers != len(s.markers):
            self._draw_markers()

    def _draw_val(self) -> None:
        for item in self._val_items:
            self.plot.removeItem(item)
        self._val_items = []
        s = self.series
        self._drawn_val = len(s.eval_steps)
        color = pg.mkColor(self.color).darker(140)
        band_color = pg.mkColor(self.color)
        band_color.setAlpha(45)
        for n, segment in enumerate(sorted(set(s.eval_segment))):
            idx = [i for i, g in enumerate(s.eval_segment) if g == segment and math.isfinite(s.val_loss[i])]
            if not idx:
                continue
            src = s.eval_tokens if self.x_tokens else s.eval_steps
            xs = np.array([src[i] for i in idx], dtype=float)
            lo = pg.PlotDataItem(xs, np.array([s.val_low[i] for i in idx]), pen=pg.mkPen(None))
            hi = pg.PlotDataItem(xs, np.array([s.val_high[i] for i in idx]), pen=pg.mkPen(None))
            # The band's edges join the plot first: addItem puts them in the plot's log mode,
            # and the band copies their paths only when made (a band made earlier stayed in
            # linear units, drawn at 10^loss under the log scale).
            for item in (lo, hi):
                self.plot.addItem(item)
                self._val_items.append(item)
            band = pg.FillBetweenItem(lo, hi, brush=pg.mkBrush(band_color))
            name = t(f"{self.label}: валидация ± 95%", f"{self.label}: validation ± 95%") if n == 0 else None
            line = pg.PlotDataItem(xs, np.array([s.val_loss[i] for i in idx]),
                                   pen=pg.mkPen(color, width=2, style=Qt.PenStyle.DashLine),
                                   symbol="o", symbolSize=6, symbolBrush=color, symbolPen=None, name=name)
            # The band's extent is its edges' (lo, hi above): its own box, empty at the origin
            # for a single point, stretched the y-axis down to 0 at the first evaluation.
            self.plot.addItem(band, ignoreBounds=True)
            self.plot.addItem(line)
            self._val_items += [band, line]

    def _draw_markers(self) -> None:
        for item in self._marker_items:
            self.plot.removeItem(item)
        self._marker_items = []
        self._drawn_markers = len(self.series.markers)
        # Markers at one position share one line and one label: a continuation on new data
        # is a new leg and a data change at the same step, and two labels there overprinted
        # each other. The line takes the style of the weightiest kind.
        at: dict[float, list[Marker]] = {}
        for m in self.series.markers:
            at.setdefault(m.tokens if self.x_tokens else m.step, []).append(m)
        for pos, group in at.items():
            texts = list(dict.fromkeys(_marker_text(m) for m in group))
            kind = min((m.kind for m in group), key=_MARKER_WEIGHT.index)
            line = pg.InfiniteLine(pos=pos, angle=90, movable=False, pen=_marker_pen(kind),
                                   label=" · ".join(texts), labelOpts={"position": 0.97, "color": palette.color("muted"),
                                                                       "anchors": [(0, 0), (0, 0)]})
            self.plot.addItem(line)
            self._marker_items.append(line)

    def remove(self) -> None:
        for item in [self.raw_curve, self.smooth_curve, *self._val_items, *self._marker_items]:
            self.plot.removeItem(item)

    def x_extent(self) -> tuple[float, float] | None:
        """The first and last x of the train curve as drawn (steps or tokens)."""
        x = self.tokens.view() if self.x_tokens else self.steps.view()
        return (float(x[0]), float(x[-1])) if len(x) else None

    @property
    def points(self) -> int:
        return len(self.series.steps)

    def val_points(self) -> int:
        return len(self.series.eval_steps)


_MARKER_WEIGHT = (DATA_CHANGED, PAUSE, LEG)


def _marker_text(m: Marker) -> str:
    if m.kind == DATA_CHANGED:
        return t("данные сменились: валидация заново", "data changed: validation anew")
    if m.kind == PAUSE:
        if m.seconds is not None and math.isfinite(m.seconds) and m.seconds > 0:
            return t(f"пауза {m.seconds:.0f} с", f"pause {m.seconds:.0f} s")
        return t("пауза", "pause")
    return t("продолжение", "continued")


def _marker_pen(kind: str) -> Any:
    if kind == DATA_CHANGED:
        return pg.mkPen(palette.color("marker_data"), width=1.5, style=Qt.PenStyle.DashLine)
    if kind == PAUSE:
        return pg.mkPen(palette.color("marker_pause"), style=Qt.PenStyle.DotLine)
    return pg.mkPen(palette.color("marker_leg"), style=Qt.PenStyle.DashDotLine)


class LossPlot(QWidget):
    """The plot with its switches: steps/tokens, log scale, zoom to recent, raw curve on/off.

    The y-axis is pyqtgraph's auto-range over the curves' own extent (train, validation and
    its band's edges) with pyqtgraph's margin; «Конец крупно» shows the last quarter of the
    x-range with the y-axis fitted to what is visible there.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        # The system palette's background and ink (a dark theme gets a dark plot), not white.
        pg.setConfigOptions(antialias=False, background=palette.color("plot_bg"), foreground=palette.color("plot_fg"))
        self.traces: dict[str, RunTrace] = {}
        bar = QHBoxLayout()
        self.title = QLabel()
        self.title.setStyleSheet("font-weight: bold;")
        self.x_axis = QComboBox()
        self.x_axis.addItem(t("по шагам", "by steps"), "steps")
        self.x_axis.addItem(t("по токенам", "by tokens"), "tokens")
        self.x_axis.setToolTip(t("Ось X: номер шага или сколько токенов модель прочитала",
                                 "X axis: the step number or how many tokens the model has read"))
        self.log_y = QCheckBox(t("лог. шкала", "log scale"))
        self.log_y.setToolTip(t("Логарифмическая шкала потерь: видно и начало, и медленный спад",
                                "Logarithmic loss axis: shows both the start and the slow decline"))
        self.recent = QCheckBox(t("конец крупно", "zoom to recent"))
        self.recent.setToolTip(t(
            "Последняя четверть прогона, шкала потерь — по видимой части: медленный спад в конце "
            "не теряется на фоне быстрого начала. Сдвиг графика мышью выключает",
            "The last quarter of the run, the loss axis fitted to what is visible: the slow fall "
            "at the end is not lost beside the fast start. Dragging the plot turns it off"))
        self.show_raw = QCheckBox(t("сырые точки", "raw points"))
        self.show_raw.setChecked(True)
        self.show_raw.setToolTip(t("Потери каждого шага; толстая линия — сглаженные",
                                   "The loss of every step; the thick line is smoothed"))
        bar.addWidget(self.title, 1)
        for w in (self.x_axis, self.log_y, self.recent, self.show_raw):
            bar.addWidget(w)
        self.widget = pg.PlotWidget()
        # Room for the axes and a curve at the window's smallest: less, and the tick labels
        # ran into each other over a flat strip.
        self.widget.setMinimumHeight(PLOT_MIN_HEIGHT)
        self.plot: pg.PlotItem = self.widget.getPlotItem()
        self.plot.showGrid(x=True, y=True, alpha=0.25)
        # PlotItem applies its own downsampling and clip-to-view to every item it adds, so
        # they are set here (peak downsampling keeps spikes; clip-to-view draws what is shown).
        self.plot.setDownsampling(auto=True, mode="peak")
        self.plot.setClipToView(True)
        # Room on the right: the last tick label and the curve's end touched the window's edge.
        self.plot.layout.setContentsMargins(4, 4, 14, 4)
        self.plot.addLegend(offset=(10, -10), brush=pg.mkBrush(*palette.color("legend_bg")),
                            labelTextColor=palette.color("plot_fg"))  # bottom left: loss falls away from it
        self._set_axis_labels()
        # Said on the empty plot, so an empty frame does not look broken.
        self.hint = pg.TextItem(t("Запустите прогон или выберите его в истории",
                                  "Start a run or pick one in the history"), color=palette.color("hint"), anchor=(0.5, 0.5))
        self.hint.setPos(0.5, 0.5)
        self.plot.addItem(self.hint, ignoreBounds=True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 8, 0)  # off the window's right edge
        layout.addLayout(bar)
        layout.addWidget(self.widget, 1)
        self.x_axis.currentIndexChanged.connect(self._axis_changed)
        self.log_y.toggled.connect(self._log_toggled)
        self.recent.toggled.connect(self._recent_toggled)
        self.plot.vb.sigRangeChangedManually.connect(lambda _mask: self.recent.setChecked(False))
        self.show_raw.toggled.connect(self._raw_toggled)
        self.set_title(t("Потери", "Loss"))
        wheel_guard.guard(self)  # the wheel zooms the plot, not the axis choice beside it

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt's name)
        super().changeEvent(event)
        if palette.changed(event) and hasattr(self, "hint"):  # built: the new palette's colours
            self._paint()

    def _paint(self) -> None:
        """The plot in the system palette's colours again (a desktop switched theme)."""
        pg.setConfigOptions(background=palette.color("plot_bg"), foreground=palette.color("plot_fg"))
        self.widget.setBackground(palette.color("plot_bg"))
        ink = palette.color("plot_fg")
        for axis in ("left", "bottom"):
            self.plot.getAxis(axis).setPen(ink)
            self.plot.getAxis(axis).setTextPen(ink)
        legend = self.plot.legend
        if legend is not None:
            legend.setBrush(pg.mkBrush(*palette.color("legend_bg")))
            legend.setLabelTextColor(ink)
            for _sample, label in legend.items:
                label.setText(label.text)  # a LabelItem takes a new colour only with its text
        self.hint.setColor(palette.color("hint"))
        for trace in self.traces.values():
            trace._draw_markers()

    def _set_axis_labels(self) -> None:
        x = self.x_axis.currentData() == "tokens"
        self.plot.setLabel("bottom", t("токены", "tokens") if x else t("шаг", "step"))
        self.plot.setLabel("left", t("потери (loss)", "loss"))

    def set_title(self, text: str) -> None:
        self.title.setText(text)

    def view_settings(self) -> dict[str, Any]:
        """The user's choices on the plot's bar (kept when the window is rebuilt)."""
        return {"x": self.x_axis.currentData(), "log": self.log_y.isChecked(), "recent": self.recent.isChecked(),
                "raw": self.show_raw.isChecked()}

    def apply_view_settings(self, view: dict[str, Any]) -> None:
        i = self.x_axis.findData(view.get("x"))
        if i >= 0:
            self.x_axis.setCurrentIndex(i)
        self.log_y.setChecked(bool(view.get("log")))
        self.recent.setChecked(bool(view.get("recent")))
        self.show_raw.setChecked(bool(view.get("raw", True)))

    @property
    def x_tokens(self) -> bool:
        return self.x_axis.currentData() == "tokens"

    def _axis_changed(self) -> None:
        self._set_axis_labels()
        for trace in self.traces.values():
            trace.x_tokens = self.x_tokens
            trace.redraw(full=True)
        self.plot.enableAutoRange()
        self._follow_view()

    def _log_toggled(self, on: bool) -> None:
        self.plot.setLogMode(x=False, y=on)
        # The curves follow the log mode by themselves; the validation bands do not
        # (pyqtgraph's FillBetweenItem keeps the paths it was made with): remake them.
        for trace in self.traces.values():
            trace.redraw(full=True)

    def _recent_toggled(self, on: bool) -> None:
        # autoVisible: the y auto-range counts only the points inside the x-range shown.
        self.plot.setAutoVisible(y=on)
        if on:
            self._follow_view()
        else:
            self.plot.enableAutoRange()

    def _follow_view(self) -> None:
        """«Конец крупно»: the x-range on the last quarter of the runs shown, moved on as points
        arrive; the y-axis follows by itself (auto-range over the visible points)."""
        if not self.recent.isChecked():
            return
        extents = [e for e in (tr.x_extent() for tr in self.traces.values()) if e is not None]
        if not extents:
            return
        first, last = min(e[0] for e in extents), max(e[1] for e in extents)
        self.plot.setXRange(last - RECENT_SHARE * (last - first), last, padding=0.02)
        self.plot.enableAutoRange(axis="y")

    def _raw_toggled(self, on: bool) -> None:
        for trace in self.traces.values():
            trace.raw_curve.setVisible(on and trace.primary)

    # -- runs --------------------------------------------------------------------------

    def clear(self) -> None:
        for trace in self.traces.values():
            trace.remove()
        self.traces.clear()

    def trace(self, key: str, label: str | None = None, primary: bool = True) -> RunTrace:
        """The trace for `key`, made on first use."""
        if key not in self.traces:
            # The first colour no run on the plot has: counting the traces gave a new one
            # the colour of one still shown once another had been removed (two runs alike).
            used = [tr.color for tr in self.traces.values()]
            color = min(palette.SERIES, key=lambda c: (used.count(c), palette.SERIES.index(c)))
            tr = RunTrace(self.plot, key, label or key, color, primary)
            tr.x_tokens = self.x_tokens
            tr.raw_curve.setVisible(primary and self.show_raw.isChecked())
            self.traces[key] = tr
            self.hint.setVisible(False)
        return self.traces[key]

    def remove(self, key: str) -> None:
        tr = self.traces.pop(key, None)
        self.hint.setVisible(not self.traces)
        if tr:
            tr.remove()
            if self.plot.legend:
                for item in (tr.raw_curve, tr.smooth_curve):
                    self.plot.legend.removeItem(item)

    def show_series(self, key: str, series: LossSeries, label: str | None = None, primary: bool = False) -> RunTrace:
        """A run from the history (overlay): drawn once from its LossSeries."""
        tr = self.trace(key, label, primary)
        tr.load(series)
        tr.redraw(full=True)
        self._follow_view()
        return tr

    def follow(self, key: str, runs: list[tuple[str, Path]], label: str | None = None) -> RunTrace:
        """The run being watched (with its parents): read live by `poll()`."""
        tr = self.trace(key, label, primary=True)
        tr.follow(runs)
        tr.redraw(full=True)
        self._follow_view()
        return tr

    def poll(self) -> bool:
        """Read new events of followed runs and redraw what changed (the window's timer)."""
        got = False
        for tr in self.traces.values():
            if tr.poll():
                tr.redraw()
                got = True
        if got:
            self._follow_view()
        return got
