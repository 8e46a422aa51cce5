"""The window's meaning colours for the system palette now in use (app.window.colors chooses
them by its lightness): a dark desktop theme gets readable reds and a dark plot."""

from __future__ import annotations

from PySide6.QtCore import QEvent
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QApplication, QWidget

from app.window.colors import colors, is_dark

# Distinct series lines (the loss plot's runs, the GPU monitor's history, a series' curves):
# each keeps ≥ 3:1 against both the light and the dark plot background, so they stay fixed.
SERIES = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b")


def dark() -> bool:
    app = QApplication.instance()
    pal = app.palette() if isinstance(app, QApplication) else QPalette()
    return is_dark(pal.color(QPalette.ColorRole.Window).lightness())


def table() -> dict:
    """The whole colour table for the current palette (for app code that writes rich text)."""
    return colors(dark())


def color(name: str) -> str:
    """One colour ("error", "warning", "note", "muted", …) for the current palette."""
    return table()[name]


def style(name: str, extra: str = "") -> str:
    """A style sheet that colours a label's text: style("error")."""
    return f"color: {color(name)};{(' ' + extra) if extra else ''}"


def changed(event: QEvent) -> bool:
    """A widget's changeEvent that means a new system palette (a desktop switched to a dark
    theme, `app.setPalette`): the colours taken from here must be read again. Qt tells only
    widgets without a colour style sheet of their own: a styled label is repainted by the
    unstyled widget that holds it."""
    return event.type() == QEvent.Type.PaletteChange


def set_style(widget: QWidget, sheet: str) -> None:
    """A style sheet, set only when it differs: setting one re-polishes the widget (costly
    each second) and, as it carries a colour, sends the widget a PaletteChange of its own."""
    if widget.styleSheet() != sheet:
        widget.setStyleSheet(sheet)


def dark_palette() -> QPalette:
    """A dark system palette, as a dark desktop theme gives one (`ternit-lab --dark`, tests)."""
    from PySide6.QtGui import QColor

    pal = QPalette()
    roles = {
        QPalette.ColorRole.Window: "#2b2b2b", QPalette.ColorRole.WindowText: "#e8e8e8",
        QPalette.ColorRole.Base: "#1e1e1e", QPalette.ColorRole.AlternateBase: "#262626",
        QPalette.ColorRole.Text: "#e8e8e8", QPalette.ColorRole.Button: "#353535",
        QPalette.ColorRole.ButtonText: "#e8e8e8", QPalette.ColorRole.ToolTipBase: "#353535",
        QPalette.ColorRole.ToolTipText: "#e8e8e8", QPalette.ColorRole.Highlight: "#2f65ca",
        QPalette.ColorRole.HighlightedText: "#ffffff", QPalette.ColorRole.PlaceholderText: "#8a8a8a",
        QPalette.ColorRole.Mid: "#5a5a5a", QPalette.ColorRole.Link: "#8ab4f8",
    }
    for role, value in roles.items():
        pal.setColor(role, QColor(value))
    for role in (QPalette.ColorRole.Text, QPalette.ColorRole.ButtonText, QPalette.ColorRole.WindowText):
        pal.setColor(QPalette.ColorGroup.Disabled, role, QColor("#7a7a7a"))
    return pal


def use_dark(app: QApplication) -> None:
    """Switch the application to the dark palette (the Fusion style follows any palette)."""
    app.setStyle("Fusion")
    app.setPalette(dark_palette())
