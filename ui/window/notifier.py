"""Messages the user should see on any tab, even with the window behind others: a tray
message where the desktop has a tray, and always the status bar."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtWidgets import QMainWindow

if TYPE_CHECKING:
    from PySide6.QtWidgets import QSystemTrayIcon

TRAY_MS = 10_000


class Notifier:
    """`sent` keeps every (title, text), in order (the tests read it)."""

    def __init__(self, window: QMainWindow) -> None:
        self.window = window
        self.sent: list[tuple[str, str]] = []
        self.tray: QSystemTrayIcon | None = None

    def notify(self, title: str, text: str) -> None:
        # Qt's tray classes load with the first message, not with the window's first frame.
        from PySide6.QtWidgets import QStyle, QSystemTrayIcon

        self.sent.append((title, text))
        if self.tray is None and QSystemTrayIcon.isSystemTrayAvailable():
            icon = self.window.style().standardIcon(QStyle.StandardPixmap.SP_ComputerIcon)
            self.tray = QSystemTrayIcon(icon, self.window)
            self.tray.setToolTip("Ternit Lab")
            self.tray.show()
        if self.tray is not None and QSystemTrayIcon.supportsMessages():
            self.tray.showMessage(title, text, QSystemTrayIcon.MessageIcon.Information, TRAY_MS)
        self.window.statusBar().showMessage(f"{title}: {text}")

    def hide(self) -> None:
        if self.tray is not None:
            self.tray.hide()
