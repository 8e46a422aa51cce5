"""«В очередь», «Серия…» and «Поиск…» beside «Старт»: the form's run to the queue (where the form's
«Машина» says, or — from the button's menu — wherever frees first), or a series of it.
They emit the form view's `queue_requested` / `series_requested` / `search_requested`; the
window hands them to the «Очередь» and «Поиск» tabs."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QHBoxLayout, QMenu, QPushButton, QToolButton, QWidget

from app.base.i18n import t


class QueueButtons(QWidget):
    def __init__(self, view: Any) -> None:
        super().__init__()
        self.view = view
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        self.queue_button = QToolButton()
        self.queue_button.setText(t("В очередь", "Queue"))
        self.queue_button.setToolTip(t(
            "Поставить этот прогон в очередь: он начнётся сам, когда машина из формы освободится. "
            "В меню — «куда освободится раньше»: этот ПК или любой аккаунт Kaggle.",
            "Put this run in the queue: it starts by itself when the form's machine is free. The menu "
            "has «wherever frees first»: this PC or any Kaggle account."))
        self.queue_button.setPopupMode(QToolButton.ToolButtonPopupMode.MenuButtonPopup)
        menu = QMenu(self.queue_button)
        self.as_form = menu.addAction(t("На машину из формы", "To the form's machine"))
        self.as_form.triggered.connect(lambda: self._queue(""))
        self.anywhere = menu.addAction(t("Куда освободится раньше: этот ПК или Kaggle",
                                         "Wherever frees first: this PC or Kaggle"))
        self.anywhere.triggered.connect(lambda: self._queue("any"))
        self.queue_button.setMenu(menu)
        self.queue_button.clicked.connect(lambda: self._queue(""))
        self.series_button = QPushButton(t("Серия…", "Series…"))
        self.series_button.setToolTip(t(
            "Несколько прогонов этой формы в очередь: одно или два поля меняются по списку значений "
            "(например, lr 0,001; 0,0003), каждое сочетание — свой прогон; по итогам — таблица и победитель.",
            "Several runs of this form into the queue: one or two fields over listed values (e.g. lr "
            "0.001; 0.0003), each combination a run; afterwards a table and the winner."))
        self.series_button.clicked.connect(self._series)
        self.search_button = QPushButton(t("Поиск…", "Search…"))
        self.search_button.setToolTip(t(
            "Поиск гиперпараметров: одно–четыре поля в пределах (например, lr от 0,0001 до 0,01), попытки — "
            "прогоны в очереди на свободных машинах; безнадёжные останавливаются с чекпоинтом; вкладка «Поиск».",
            "A hyperparameter search: one to four fields within ranges (e.g. lr 0.0001 to 0.01), each trial a "
            "queued run on a free machine; hopeless ones stop with a checkpoint; the «Search» tab."))
        self.search_button.clicked.connect(self._search)
        row.addWidget(self.search_button)
        row.addWidget(self.series_button)
        row.addWidget(self.queue_button)

    def _queue(self, target: str) -> None:
        if self.view.form.can_queue():
            self.view.queue_requested.emit(self.view.form.run_config(), target)

    def _search(self) -> None:
        if self.view.form.can_queue():
            self.view.search_requested.emit(self.view.form.run_config())

    def _series(self) -> None:
        if self.view.form.can_queue():
            self.view.series_requested.emit(self.view.form.run_config())
