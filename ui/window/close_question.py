"""The question when the window closes with work going on without it — a run training here,
queued runs that will start without the window (app.queue.driver.CloseQuestion says which):
close (everything goes on), pause the queue and close, stop the training and close, or stay."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QAbstractButton, QCheckBox, QMessageBox, QWidget

from app.base.i18n import t
from app.queue.driver import CloseQuestion
from app.runs import RunRecord
from ui.base import settings


def ask_about_running(parent: QWidget, question: CloseQuestion, running: list[RunRecord],
                      stop: Callable[[str], object], pause: Callable[[], object],
                      close: Callable[[], None]) -> QMessageBox:
    """Window-modal but not blocking (open(), not exec()): the answer comes back through the
    buttons. «Закрыть окно» closes; «Приостановить очередь» (when runs wait) pauses the queue
    first; «Остановить и закрыть» (when a run trains here) stops each run first; «Отмена»
    leaves the window open. The box's `buttons_by_answer` names its buttons "keep", "pause",
    "stop" and "cancel" (those it has); «Больше не спрашивать» applies to every answer."""
    box = QMessageBox(parent)
    box.setIcon(QMessageBox.Icon.Question)
    box.setWindowTitle("Ternit Lab")
    box.setText(question.text)
    box.setInformativeText(question.detail)
    keep = box.addButton(t("Закрыть окно, обучение продолжится", "Close the window, keep training")
                         if running else t("Закрыть окно", "Close the window"), QMessageBox.ButtonRole.AcceptRole)
    answers = {"keep": keep}
    if question.waiting:
        answers["pause"] = box.addButton(t("Приостановить очередь", "Pause the queue"),
                                         QMessageBox.ButtonRole.ActionRole)
    if running:
        answers["stop"] = box.addButton(t("Остановить и закрыть", "Stop and close"),
                                        QMessageBox.ButtonRole.DestructiveRole)
    cancel = answers["cancel"] = box.addButton(t("Отмена", "Cancel"), QMessageBox.ButtonRole.RejectRole)
    box.setDefaultButton(keep)
    box.setEscapeButton(cancel)
    # Parented to the box: setCheckBox alone leaves the checkbox to Python's collector.
    box.setCheckBox(QCheckBox(t("Больше не спрашивать", "Do not ask again"), box))
    box.buttons_by_answer = answers  # type: ignore[attr-defined]

    def answered(button: QAbstractButton) -> None:
        if button is cancel:
            return
        if box.checkBox().isChecked():
            settings.save_ask_on_close(False)
        if button is answers.get("pause"):
            pause()
        if button is answers.get("stop"):
            for rec in running:
                stop(rec.id)
        close()

    box.buttonClicked.connect(answered)
    box.open()
    return box
