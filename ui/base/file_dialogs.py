"""The window's file dialogs, with Qt's own words all in the interface language.

Why they were half English in the Russian window although ui/window/qt_language.py installs
`qtbase_ru.qm`: Qt's widget-based QFileDialog (the one on Linux without a desktop's platform
theme, and under the tests) takes «Имя», «Сохранить», «Отмена» from that catalogue, but two
labels of its form — "&Look in:" and "Files of &type:" — have no entry in Qt 6's qtbase_ru,
so they stayed English. A native dialog (Windows, a GNOME/KDE desktop) is the OS's and
speaks the OS's language. So every dialog is built here and those labels set by the lab;
everything else stays Qt's (or the OS's).
"""

from __future__ import annotations

from PySide6.QtWidgets import QFileDialog, QWidget

from app.base.i18n import t


def make(parent: QWidget | None, title: str, start: str = "", filters: str = "",
         mode: QFileDialog.FileMode = QFileDialog.FileMode.ExistingFile,
         save: bool = False) -> QFileDialog:
    """A file dialog with the labels Qt's catalogue lacks in the interface language."""
    dialog = QFileDialog(parent, title, start, filters)
    dialog.setFileMode(mode)
    if mode == QFileDialog.FileMode.Directory:
        dialog.setOption(QFileDialog.Option.ShowDirsOnly, True)
    if save:
        dialog.setAcceptMode(QFileDialog.AcceptMode.AcceptSave)
    dialog.setLabelText(QFileDialog.DialogLabel.LookIn, t("&Папка:", "&Look in:"))
    dialog.setLabelText(QFileDialog.DialogLabel.FileType, t("&Тип файлов:", "Files of &type:"))
    return dialog


def _chosen(dialog: QFileDialog) -> list[str]:
    return dialog.selectedFiles() if dialog.exec() else []


def open_file(parent: QWidget | None, title: str, start: str = "", filters: str = "") -> str:
    """One existing file ("" when cancelled)."""
    files = _chosen(make(parent, title, start, filters))
    return files[0] if files else ""


def open_files(parent: QWidget | None, title: str, start: str = "", filters: str = "") -> list[str]:
    """Existing files ([] when cancelled)."""
    return _chosen(make(parent, title, start, filters, QFileDialog.FileMode.ExistingFiles))


def save_file(parent: QWidget | None, title: str, start: str = "", filters: str = "") -> str:
    """Where to write a new file ("" when cancelled)."""
    files = _chosen(make(parent, title, start, filters, QFileDialog.FileMode.AnyFile, save=True))
    return files[0] if files else ""


def folder(parent: QWidget | None, title: str, start: str = "") -> str:
    """An existing folder ("" when cancelled)."""
    files = _chosen(make(parent, title, start, mode=QFileDialog.FileMode.Directory))
    return files[0] if files else ""
