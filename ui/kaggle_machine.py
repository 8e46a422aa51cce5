"""«Машина» for the run form: a combo of this computer, «Авто» and the Kaggle accounts with
their remaining quota, and under it the one line saying whom «Авто» would pick now and why.

The window engineer can use the widget as is, or only `auto_line(config)` for a label of
their own. Everything it shows comes from app.kaggle.machine (the state only, no network).
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QLabel, QVBoxLayout, QWidget

from app.i18n import t
from app.kaggle.machine import account_views, auto_explanation
from app.kaggle.quota import hours

LOCAL = "local"
AUTO = "auto"


def auto_line(config: dict[str, Any]) -> str:
    """The «Авто» explanation for a run.json dict, in one line."""
    return auto_explanation(config)


def machine_items() -> list[tuple[str, str]]:
    """(value, label) pairs: this computer, Auto, then each account with its quota."""
    items = [(LOCAL, t("Этот компьютер", "This computer")), (AUTO, t("Авто (Kaggle)", "Auto (Kaggle)"))]
    for v in account_views():
        if not v.usable:
            label = t(f"{v.username} — ключ не работает", f"{v.username} — key does not work")
        elif v.quota is None:
            label = t(f"{v.username} — квота неизвестна", f"{v.username} — quota unknown")
        else:
            label = t(f"{v.username} — осталось {hours(v.remaining_s)}", f"{v.username} — {hours(v.remaining_s)} left")
        items.append((v.username, label))
    return items


class MachinePicker(QWidget):
    """Emits `changed(value)`; call `set_config(run_json)` whenever the form changes."""

    changed = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.combo = QComboBox()
        self.line = QLabel()
        self.line.setWordWrap(True)
        self.line.setStyleSheet("color: #555;")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.combo)
        layout.addWidget(self.line)
        self._config: dict[str, Any] = {}
        self.reload()
        self.combo.currentIndexChanged.connect(self._on_change)

    def reload(self) -> None:
        current = self.value()
        self.combo.blockSignals(True)
        self.combo.clear()
        for value, label in machine_items():
            self.combo.addItem(label, value)
        idx = self.combo.findData(current) if current else self.combo.findData(AUTO)
        self.combo.setCurrentIndex(max(0, idx))
        self.combo.blockSignals(False)
        self._update_line()

    def value(self) -> str | None:
        return self.combo.currentData() if self.combo.count() else None

    def set_value(self, value: str) -> None:
        idx = self.combo.findData(value)
        if idx >= 0:
            self.combo.setCurrentIndex(idx)

    def set_config(self, config: dict[str, Any]) -> None:
        self._config = config
        self._update_line()

    def _on_change(self) -> None:
        self._update_line()
        self.changed.emit(self.value() or "")

    def _update_line(self) -> None:
        if self.value() == AUTO:
            self.line.setText(auto_line(self._config))
            self.line.show()
        else:
            self.line.hide()
