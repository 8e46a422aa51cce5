"""Every tooltip the window shows kept to app.tooltips' rule (≤ ~60 characters a line,
≤ 12 lines), wherever in ui/ it was set: one filter on the application rewraps a widget's
tooltip when it changes and a menu item's when its action changes. The text is only
rewrapped (the rule is idempotent), never reworded."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QApplication, QWidget

from app.tooltips import wrap_tip

_WATCHED = frozenset({QEvent.Type.ToolTipChange, QEvent.Type.ActionChanged, QEvent.Type.ActionAdded})


class _TooltipWrapper(QObject):
    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt's name)
        kind = event.type()
        if kind not in _WATCHED:
            return False
        if kind == QEvent.Type.ToolTipChange and isinstance(watched, QWidget):
            tip = watched.toolTip()
            wrapped = wrap_tip(tip)
            if wrapped != tip:
                watched.setToolTip(wrapped)  # sends ToolTipChange again: a fixed point now
        elif kind != QEvent.Type.ToolTipChange:
            action = event.action()  # type: ignore[attr-defined]
            if isinstance(action, QAction):
                tip = action.toolTip()
                wrapped = wrap_tip(tip)
                if wrapped != tip:
                    action.setToolTip(wrapped)
        return False


_installed: dict[int, _TooltipWrapper] = {}


def install(app: QApplication | None = None) -> None:
    """Keep every tooltip of this application to the rule (once per application)."""
    app = app or QApplication.instance()  # type: ignore[assignment]
    if app is None or id(app) in _installed:
        return
    wrapper = _TooltipWrapper(app)
    app.installEventFilter(wrapper)
    _installed[id(app)] = wrapper


def wrap_all(root: QWidget) -> None:
    """Rewrap the tooltips already set under `root` (set before `install`)."""
    for w in [root, *root.findChildren(QWidget)]:
        tip = w.toolTip()
        if tip and wrap_tip(tip) != tip:
            w.setToolTip(wrap_tip(tip))
    for action in root.findChildren(QAction):
        tip = action.toolTip()
        if tip and wrap_tip(tip) != tip:
            action.setToolTip(wrap_tip(tip))
