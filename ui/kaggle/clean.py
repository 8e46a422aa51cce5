"""«Очистить датасеты…» in the Kaggle accounts dialog: the lab's datasets no run needs, with
their sizes, deleted once the user confirms. Thin: app.kaggle.cleanup decides what is the
lab's and what a run still needs; the listing and the deleting run off the GUI thread."""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QLabel, QMessageBox, QPushButton, QWidget

from app.base.i18n import t
from app.base.numbers import bytes_text
from app.kaggle import cleanup
from app.kaggle.accounts import Accounts
from app.kaggle.store import KaggleStore
from ui.base.background import run_in_thread


def _with_accounts(work):  # noqa: ANN001, ANN202 — a thread's own state connection around `work`
    def run() -> object:
        store = KaggleStore()
        try:
            return work(Accounts(store))
        finally:
            store.close()
    return run


class CleanFlow(QObject):
    """Survey → confirm → delete; `finished` after the last step (or a refusal)."""

    finished = Signal()

    def __init__(self, parent: QWidget, status: QLabel, button: QPushButton) -> None:
        super().__init__(parent)
        self.parent_widget = parent
        self.status = status
        self.button = button
        self.confirm = self._ask  # a test answers for the user

    def start(self, names: list[str]) -> None:
        if not names:
            return
        self.button.setEnabled(False)
        self.status.setText(t("Смотрю, что лаборатория хранит на Kaggle…", "Looking at what the lab keeps on Kaggle…"))
        run_in_thread(_with_accounts(lambda acc: cleanup.survey(acc, names)), self._surveyed, self,
                      name="kaggle-clean")

    def _surveyed(self, result: object) -> None:
        if isinstance(result, Exception):
            return self._end(str(result))
        items: list[cleanup.LabDataset] = result  # type: ignore[assignment]
        removable = [i for i in items if i.removable]
        if not removable:
            return self._end(t("Удалять нечего: " + ("все датасеты нужны идущим прогонам." if items else
                                                       "датасетов лаборатории на этих аккаунтах нет."),
                               "Nothing to delete: " + ("running legs need every dataset." if items else
                                                        "these accounts hold no datasets of the lab.")))
        if not self.confirm(removable, [i for i in items if not i.removable]):
            return self._end(t("Ничего не удалено.", "Nothing deleted."))
        self.status.setText(t(f"Удаляю {len(removable)} датасетов…", f"Deleting {len(removable)} datasets…"))
        run_in_thread(_with_accounts(lambda acc: (len(removable), cleanup.delete(acc, removable))),
                      self._deleted, self, name="kaggle-clean")

    def _ask(self, removable: list[cleanup.LabDataset], kept: list[cleanup.LabDataset]) -> bool:
        size = bytes_text(cleanup.total_bytes(removable))
        box = QMessageBox(QMessageBox.Icon.Question, t("Очистить датасеты", "Clean datasets"), t(
            f"Удалить {len(removable)} датасетов лаборатории ({size}), не нужных ни одному прогону? "
            "Если понадобятся, лаборатория загрузит их заново.",
            f"Delete {len(removable)} datasets of the lab ({size}) that no run needs? "
            "The lab uploads them again if they are needed."), parent=self.parent_widget)
        box.setStandardButtons(QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No)
        box.setDefaultButton(QMessageBox.StandardButton.No)
        lines = [i.line() for i in removable]
        if kept:
            lines += ["", t("Оставлю (нужны идущим прогонам):", "Kept (running legs need them):")]
            lines += [i.line() for i in kept]
        box.setDetailedText("\n".join(lines))
        return box.exec() == QMessageBox.StandardButton.Yes

    def _deleted(self, result: object) -> None:
        if isinstance(result, Exception):
            return self._end(str(result))
        total, failed = result  # type: ignore[misc]
        text = t(f"Удалено датасетов: {total - len(failed)} из {total}.", f"Deleted {total - len(failed)} of {total} datasets.")
        self._end("\n".join([text, *(f"{item.ref}: {why}" for item, why in failed)]))

    def _end(self, text: str) -> None:
        self.status.setText(text)
        self.button.setEnabled(True)
        self.finished.emit()
