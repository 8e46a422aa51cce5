"""The mouse wheel scrolls the form, not the control under it: a combo box or a number box
changes with the wheel only once it has the focus (clicked or tabbed into).

One notch over «Видеокарта» while scrolling the form changed the card, and the estimate
with it, unnoticed (issue 27). The usual Qt remedy: such controls take the focus by click
or Tab only (Qt.StrongFocus, not the wheel), and a wheel event over one without the focus
is ignored, so Qt hands it on to the parent (the form's scroll area).
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import QAbstractSpinBox, QComboBox, QWidget

_GUARDED = "ternit_wheel_guard"  # a property set on each control the filter is on


class _WheelGuard(QObject):
    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt's name)
        if event.type() == QEvent.Type.Wheel and isinstance(watched, QWidget) and not watched.hasFocus():
            # Kept from the control, and left unaccepted: Qt offers an ignored wheel
            # event to the parent widgets next, so the form scrolls.
            event.ignore()
            return True
        return False


_guard: _WheelGuard | None = None


def guard(root: QWidget) -> None:
    """Guard every combo box and number box under `root` (and `root` itself if it is one);
    those already guarded are left as they are. Call it again after adding controls."""
    global _guard
    if _guard is None:
        _guard = _WheelGuard()
    for w in [root, *root.findChildren(QWidget)]:
        if isinstance(w, (QComboBox, QAbstractSpinBox)) and not w.property(_GUARDED):
            w.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
            w.installEventFilter(_guard)
            w.setProperty(_GUARDED, True)


def guarded(w: QWidget) -> bool:
    """Whether `w` is under the guard (tests walk the window with it)."""
    return bool(w.property(_GUARDED))
