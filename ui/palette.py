"""The window's meaning colours for the system palette now in use (app.colors chooses
them by its lightness): a dark desktop theme gets readable reds and a dark plot."""

from __future__ import annotations

from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QApplication

from app.colors import colors, is_dark


def dark() -> bool:
    app = QApplication.instance()
    pal = app.palette() if isinstance(app, QApplication) else QPalette()
    return is_dark(pal.color(QPalette.ColorRole.Window).lightness())


def color(name: str) -> str:
    """One colour ("error", "warning", "note", "muted", …) for the current palette."""
    return colors(dark())[name]


def style(name: str, extra: str = "") -> str:
    """A style sheet that colours a label's text: style("error")."""
    return f"color: {color(name)};{(' ' + extra) if extra else ''}"
