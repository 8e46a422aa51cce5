"""«Серия…»: vary one or two of the form's fields over listed values (each combination a
queued run named by its values); and a series' results — its table and plot of the final
held-out loss (with its interval) and bits per byte against the varied values, the winner
marked. What the values mean and which run won is app.queue's (driver, series)."""

from __future__ import annotations

from typing import Any

from PySide6.QtGui import QFont
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.base.i18n import t
from app.base.numbers import field_text
from app.queue.driver import QueueDriver, SeriesField, parse_values, series_fields
from app.queue.series import Results, short_key, values_text
from app.queue.store import QueueError, state_label
from ui.base import palette, wheel_guard

NONE = ""


class SeriesDialog(QDialog):
    """Choose the fields and values; `vary()` and `target()` once accepted."""

    def __init__(self, current: dict[str, Any], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(t("Серия прогонов", "A series of runs"))
        self.fields = series_fields()
        self.current = current
        form = QFormLayout(self)
        self.first, self.first_values = self._row(form, t("Поле", "Field"), optional=False)
        self.second, self.second_values = self._row(form, t("Второе поле", "Second field"), optional=True)
        self.where = QComboBox()
        self.where.addItem(t("Как в форме (её «Машина»)", "As in the form (its «Machine»)"), "")
        self.where.addItem(t("Куда освободится раньше: этот ПК или Kaggle", "Wherever frees first: this PC or Kaggle"),
                           "any")
        form.addRow(t("Где", "Where"), self.where)
        self.count = QLabel()
        self.count.setStyleSheet(palette.style("muted"))
        form.addRow(self.count)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setText(t("В очередь", "Queue"))
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        form.addRow(self.buttons)
        wheel_guard.guard(self)  # the wheel does not change a field list it merely passes over
        self._update()

    def _row(self, form: QFormLayout, label: str, optional: bool) -> tuple[QComboBox, QLineEdit]:
        combo = QComboBox()
        if optional:
            combo.addItem("—", NONE)
        for f in self.fields:
            combo.addItem(f"{f.label} ({f.key})", f.name)
        if not optional:
            combo.setCurrentIndex(max(0, next((i for i, f in enumerate(self.fields) if f.name == "lr"), 0)))
        values = QLineEdit()
        values.setPlaceholderText(t("значения через «;» или пробел", "values separated by «;» or spaces"))
        box = QWidget()
        row = QHBoxLayout(box)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(combo)
        row.addWidget(values, 1)
        form.addRow(label, box)
        self._field_changed(combo, values)
        combo.currentIndexChanged.connect(lambda: self._field_changed(combo, values))
        values.textChanged.connect(self._update)
        return combo, values

    def _field(self, combo: QComboBox) -> SeriesField | None:
        name = combo.currentData()
        return next((f for f in self.fields if f.name == name), None)

    def _field_changed(self, combo: QComboBox, values: QLineEdit) -> None:
        f = self._field(combo)
        values.setEnabled(f is not None)
        values.setText(field_text(self.current.get(f.name)) if f is not None else "")

    def vary(self) -> list[tuple[str, list[Any]]]:
        """[(run.json key, values)]; QueueError says what is wrong."""
        out = []
        for combo, edit in ((self.first, self.first_values), (self.second, self.second_values)):
            f = self._field(combo)
            if f is not None:
                out.append((f.key, parse_values(edit.text(), f.kind)))
        if len({k for k, _ in out}) != len(out):
            raise QueueError(t("одно поле выбрано дважды", "one field is chosen twice"))
        return out

    def target(self) -> str | None:
        return self.where.currentData() or None

    def _update(self) -> None:
        try:
            vary = self.vary()
            text, ok = QueueDriver.series_count([v for _, v in vary]), True
        except QueueError as e:
            text, ok = str(e), False
        self.count.setText(text)
        self.count.setStyleSheet(palette.style("muted" if ok else "error"))
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setEnabled(ok)


class SeriesResultsDialog(QDialog):
    """A series' table, its plot and the verdict."""

    def __init__(self, res: Results, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.res = res
        self.setWindowTitle(t(f"Итоги серии {res.series_id}: {res.name}", f"Series {res.series_id} results: {res.name}"))
        col = QVBoxLayout(self)
        heads = [short_key(k) for k in res.keys] + [t("val loss (95 %)", "val loss (95 %)"),
                                                    t("бит на байт", "bits per byte"), t("шаг", "step"),
                                                    t("состояние", "state")]
        self.table = QTableWidget(len(res.rows), len(heads))
        self.table.setHorizontalHeaderLabels(heads)
        self.table.verticalHeader().setVisible(False)
        for i, r in enumerate(res.rows):
            loss = "—" if r.val_loss is None else f"{r.val_loss:.4f}" + (
                f" ({r.val_low:.4f}…{r.val_high:.4f})" if r.val_low is not None and r.val_high is not None else "")
            bpb = "—" if r.bits_per_byte is None else f"{r.bits_per_byte:.3f}"
            cells = [str(r.values.get(k, "")) for k in res.keys] + [loss, bpb, str(r.step or "—"), state_label(r.state)]
            for j, text in enumerate(cells):
                cell = QTableWidgetItem(("★ " if j == 0 and r.item_id == res.winner else "") + text)
                if r.item_id == res.winner:
                    font = QFont(cell.font())
                    font.setBold(True)
                    cell.setFont(font)
                self.table.setItem(i, j, cell)
        self.table.resizeColumnsToContents()
        col.addWidget(self.table)
        self.verdict = QLabel(res.verdict)
        self.verdict.setWordWrap(True)
        col.addWidget(self.verdict)
        self.plot = self._plot()
        if self.plot is not None:
            col.addWidget(self.plot, 1)
        self.resize(720, 560)

    def _plot(self) -> Any:
        """Final val loss (with its interval) against the first field's values, one line per
        value of the second; the winner as a star."""
        import pyqtgraph as pg

        res = self.res
        if not res.keys or not any(r.val_loss is not None for r in res.rows):
            return None
        first = res.keys[0]
        xs = list(dict.fromkeys(r.values.get(first) for r in res.rows))
        plot = pg.PlotWidget()
        plot.setBackground(palette.color("plot_bg"))
        plot.addLegend()
        plot.getPlotItem().getAxis("bottom").setTicks([[(i, str(v)) for i, v in enumerate(xs)]])
        plot.setLabel("bottom", first)
        plot.setLabel("left", "val loss")
        groups: dict[Any, list[Any]] = {}
        for r in res.rows:
            key = r.values.get(res.keys[1]) if len(res.keys) > 1 else None
            groups.setdefault(key, []).append(r)
        for n, (key, rows) in enumerate(groups.items()):
            pts = [(xs.index(r.values.get(first)), r) for r in rows if r.val_loss is not None]
            if not pts:
                continue
            color = palette.SERIES[n % len(palette.SERIES)]  # readable on both palettes
            name = values_text({res.keys[1]: key}) if len(res.keys) > 1 else "val loss"
            plot.plot([x for x, _ in pts], [r.val_loss for _, r in pts], pen=pg.mkPen(color, width=2),
                      symbol="o", symbolBrush=color, name=name)
            lows = [r for _, r in pts if r.val_low is not None and r.val_high is not None]
            if lows:
                plot.addItem(pg.ErrorBarItem(
                    x=_array([xs.index(r.values.get(first)) for r in lows]), y=_array([r.val_loss for r in lows]),
                    top=_array([r.val_high - r.val_loss for r in lows]),
                    bottom=_array([r.val_loss - r.val_low for r in lows]), beam=0.1, pen=pg.mkPen(color)))
        win = next((r for r in res.rows if r.item_id == res.winner), None)
        if win is not None and win.val_loss is not None:
            plot.plot([xs.index(win.values.get(first))], [win.val_loss], pen=None, symbol="star", symbolSize=18,
                      symbolBrush=palette.color("warning"))
        plot.getPlotItem().getViewBox().setDefaultPadding(0.1)
        return plot


def _array(values: list[float]) -> Any:
    import numpy as np

    return np.asarray(values, dtype=float)
