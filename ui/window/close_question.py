"""The question when the window closes while a run trains here: it goes on without the
window (the next start picks it up), or stop it and close, or stay."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QAbstractButton, QCheckBox, QMessageBox, QWidget

from app.base.i18n import t
from app.runs import RunRecord
from ui.base import settings


def ask_about_running(parent: QWidget, running: list[RunRecord], stop: Callable[[str], object],
                      close: Callable[[], None]) -> QMessageBox:
    """Window-modal but not blocking (open(), not exec()): the answer comes back through the
    buttons. «Закрыть окно» and «Остановить и закрыть» call `close()` (after `stop(run_id)`
    for each run, for the latter); «Отмена» leaves the window open. The box's
    `buttons_by_answer` names its buttons "keep", "stop" and "cancel"."""
    names = ", ".join(f"«{r.name}»" for r in running)
    box = QMessageBox(parent)
    box.setIcon(QMessageBox.Icon.Question)
    box.setWindowTitle("Ternit Lab")
    box.setText(t(f"Обучение {names} идёт.", f"{names} is training."))
    box.setInformativeText(t(
        "Без окна оно продолжится в своём процессе до конца или до лимита; откройте Ternit Lab "
        "снова — окно подхватит прогон. «Остановить и закрыть» сохранит чекпоинт: потом можно продолжить.",
        "Without the window it goes on in its own process until it ends or hits its limit; open "
        "Ternit Lab again and the window picks the run up. «Stop and close» saves a checkpoint: it can "
        "be continued later."))
    keep = box.addButton(t("Закрыть окно, обучение продолжится", "Close the window, keep training"),
                         QMessageBox.ButtonRole.AcceptRole)
    stop_button = box.addButton(t("Остановить и закрыть", "Stop and close"), QMessageBox.ButtonRole.DestructiveRole)
    cancel = box.addButton(t("Отмена", "Cancel"), QMessageBox.ButtonRole.RejectRole)
    box.setDefaultButton(keep)
    box.setEscapeButton(cancel)
    # Parented to the box: setCheckBox alone leaves the checkbox to Python's collector.
    box.setCheckBox(QCheckBox(t("Больше не спрашивать", "Do not ask again"), box))
    box.buttons_by_answer = {"keep": keep, "stop": stop_button, "cancel": cancel}  # type: ignore[attr-defined]

    def answered(button: QAbstractButton) -> None:
        if button is cancel:
            return
        if box.checkBox().isChecked():
            settings.save_ask_on_close(False)
        if button is stop_button:
            for rec in running:
                stop(rec.id)
        close()

    box.buttonClicked.connect(answered)
    box.open()
    return box
