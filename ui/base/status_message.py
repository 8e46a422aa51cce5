"""A window's message line as a person notices it: a framed panel with a sign («ℹ», «⚠»),
the text a size up and in the palette's colours, hidden while there is nothing to say —
not small black text at a dialog's bottom (the data window's «no text in the folder»).

The sign is one the label's font has (an empty box stood in for «ⓘ», which the usual Linux
fonts lack: issue 27), else a plain letter."""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import QLabel, QWidget

from ui.base import palette

# Per level, the signs to use, best first; the last is in every font.
_SIGNS = {"info": ("ℹ", "i"), "warning": ("⚠", "!"), "error": ("⚠", "!")}


class StatusMessage(QLabel):
    """`setText(text, level)`: level "info", "warning" or "error"; an empty text hides it."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWordWrap(True)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.setTextFormat(Qt.TextFormat.RichText)
        self.level = "info"
        self._plain = ""
        self.setVisible(False)

    def setText(self, text: str, level: str = "info") -> None:  # noqa: N802 (Qt's name)
        self._plain, self.level = text or "", level
        self.setVisible(bool(self._plain))
        self.paint()
        body = html.escape(self._plain).replace("\n", "<br>")
        super().setText(f"<b>{self.sign()}</b>&nbsp; {body}" if self._plain else "")

    def sign(self) -> str:
        """The level's sign that this label's font can draw."""
        metrics = QFontMetrics(self.font())
        return next((s for s in _SIGNS.get(self.level, ("",)) if not s or metrics.inFontUcs4(ord(s))), "")

    def paint(self) -> None:
        """In the palette's colours (again). Its own style sheet keeps Qt's PaletteChange from
        it: the window that holds it calls this on its own (ui/base/palette.changed)."""
        level = self.level
        ink = palette.color({"info": "ink", "warning": "warning", "error": "error"}.get(level, "ink"))
        edge = palette.color({"info": "muted", "warning": "warning", "error": "error"}.get(level, "muted"))
        palette.set_style(self, f"QLabel {{ color: {ink}; border: 1px solid {edge}; border-radius: 4px; "
                                "padding: 8px 10px; font-size: 11pt; background: palette(alternate-base); }")

    def text(self) -> str:  # the words, as the dialog and its tests read them
        return self._plain
