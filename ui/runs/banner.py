"""The followed run above the plot: its name, status and progress; «Остановить»; a
failure's reason with its one-click retry; what the lab is doing for a Kaggle run."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QEvent, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from app.base import run_status as st
from app.base.i18n import t
from app.base.numbers import int_text, loss_text
from app.runs import RunRecord
from ui.base import palette


class RunBanner(QWidget):
    """The followed run: name, status, progress; Stop; a failure's reason and its retry."""

    stop_clicked = Signal()
    retry_clicked = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.title = QLabel(t("Нет прогона на графике", "No run on the plot"))
        self.title.setStyleSheet("font-size: 14px; font-weight: bold;")
        self.detail = QLabel()
        self.stop_button = QPushButton(t("Остановить", "Stop"))
        self.stop_button.setToolTip(t("Обучение доделает шаг, сохранит чекпоинт и выйдет",
                                      "The trainer finishes the step, saves a checkpoint and exits"))
        self.stop_button.clicked.connect(self.stop_clicked)
        self.failure = QLabel()
        self.failure.setWordWrap(True)
        # What the lab is doing for a Kaggle run (uploading, waiting for the network, how
        # to stop the kernel): it lives in the run's message, not in its events.
        self.live = QLabel()  # tokens/s, time per step, time left: a line of its own
        self.live.setWordWrap(True)
        self.note = QLabel()
        self.note.setWordWrap(True)
        self._paint()
        self.retry_button = QPushButton()
        self.retry_button.clicked.connect(self.retry_clicked)
        top = QHBoxLayout()
        top.addWidget(self.title)
        top.addWidget(self.detail, 1)
        top.addWidget(self.stop_button)
        bottom = QHBoxLayout()
        bottom.addWidget(self.note, 1)
        bottom.addWidget(self.failure, 1)
        bottom.addWidget(self.retry_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(top)
        layout.addWidget(self.live)
        layout.addLayout(bottom)
        self.show_run(None)

    def _paint(self) -> None:
        palette.set_style(self.failure, palette.style("error"))
        palette.set_style(self.note, palette.style("muted"))

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt's name)
        super().changeEvent(event)
        if palette.changed(event) and hasattr(self, "note"):  # built: a new palette's colours
            self._paint()

    def show_run(self, rec: RunRecord | None, failure: Any = None, live: str = "") -> None:
        """`live`: the running run's speed and time left (app.runs.live), "" when none."""
        if rec is None:
            self.detail.setText("")
            self.live.setVisible(False)
            self.note.setVisible(False)
            self.stop_button.setVisible(False)
            self.failure.setVisible(False)
            self.retry_button.setVisible(False)
            return
        self.title.setText(rec.name)
        parts = [st.label(rec.status)]
        if rec.last_step is not None:
            parts.append(t("шаг ", "step ") + int_text(rec.last_step)
                         + (f" / {int_text(rec.steps_to)}" if rec.steps_to else ""))
        if rec.last_loss is not None:
            parts.append(f"loss {loss_text(rec.last_loss)}")
        if rec.best_val_loss is not None:
            parts.append(f"val {loss_text(rec.best_val_loss)}")
        self.detail.setText("  ·  ".join(parts))
        self.live.setText(live if rec.active else "")
        self.live.setVisible(bool(self.live.text()))
        stopping = rec.status == st.STOPPING
        self.stop_button.setVisible(rec.active)
        self.stop_button.setEnabled(rec.active and not stopping)
        self.stop_button.setText(t("Сохранение…", "Saving…") if stopping else t("Остановить", "Stop"))
        kaggle = rec.target_kind == "kaggle"
        self.stop_button.setToolTip(
            t("Следующего этапа не будет; само ядро Kaggle доработает до своего лимита "
              "(остановить сразу — на kaggle.com, без последнего чекпоинта)",
              "No further leg starts; the Kaggle kernel itself runs to its limit "
              "(to stop it now: on kaggle.com, without a last checkpoint)") if kaggle else
            t("Обучение доделает шаг, сохранит чекпоинт и выйдет",
              "The trainer finishes the step, saves a checkpoint and exits"))
        if kaggle:
            self.note.setText((rec.last_message or "") if rec.active else "")
        else:  # a PAUSE file holds the trainer (the heat guard's or the user's): say so here
            from app.gpu.heat_guard import pause_note

            self.note.setText(pause_note(rec.path) if rec.active else "")
        self.note.setVisible(bool(self.note.text()))
        if failure is not None:
            self.failure.setText("\n".join(x for x in (failure.message, failure.advice) if x))
            label = failure.retry_label()
            self.retry_button.setText(label or "")
            self.retry_button.setVisible(bool(label))
            self.failure.setVisible(True)
        else:
            self.failure.setVisible(False)
            self.retry_button.setVisible(False)
