"""Every tooltip the window shows kept to app.form.tooltips' rule (≤ ~60 characters a line,
≤ 12 lines), wherever in ui/ it was set: one filter on the application rewraps a widget's
tooltip when it changes, a menu item's when its action changes, and shows a table cell's
or a tab's wrapped. The text is only rewrapped (the rule is idempotent), never reworded."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QAction, QHelpEvent
from PySide6.QtWidgets import QAbstractItemView, QApplication, QTabBar, QToolTip, QWidget

from app.form.tooltips import wrap_tip

_WATCHED = frozenset({QEvent.Type.ToolTipChange, QEvent.Type.ActionChanged, QEvent.Type.ActionAdded,
                      QEvent.Type.ToolTip})


class _TooltipWrapper(QObject):
    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt's name)
        kind = event.type()
        if kind not in _WATCHED:
            return False
        if kind == QEvent.Type.ToolTip:
            return _show_item_tip(watched, event)  # type: ignore[arg-type]
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


def _show_item_tip(watched: QObject, event: QHelpEvent) -> bool:
    """A table cell's, a list item's or a tab's tooltip (data, not a widget's property):
    shown wrapped here; True when shown (Qt's own would be the unwrapped text)."""
    if isinstance(watched, QTabBar):
        i = watched.tabAt(event.pos())
        tip = watched.tabToolTip(i) if i >= 0 else ""
        rect = watched.tabRect(i) if i >= 0 else None
    else:
        view = watched.parent() if isinstance(watched, QWidget) else None
        if not isinstance(view, QAbstractItemView) or watched is not view.viewport():
            return False
        index = view.indexAt(event.pos())
        tip = index.data(Qt.ItemDataRole.ToolTipRole) if index.isValid() else None
        rect = view.visualRect(index) if index.isValid() else None
    if not isinstance(tip, str) or not tip or wrap_tip(tip) == tip:
        return False
    QToolTip.showText(event.globalPos(), wrap_tip(tip), watched, rect)  # type: ignore[arg-type]
    return True


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


_BENCH_EVENTS, _BENCH_ROUNDS = 50_000, 6


def bench() -> int:
    """`QT_QPA_PLATFORM=offscreen python -m ui.base.tooltips`: what the filter costs an event —
    QApplication.sendEvent of a plain event to a widget with the filter and without, the
    order alternated (docs/PERF.md)."""
    import statistics
    import time

    app = QApplication.instance() or QApplication([])
    widget = QWidget()
    wrapper = _TooltipWrapper(app)
    event = QEvent(QEvent.Type.User)
    times: dict[str, list[float]] = {"without": [], "with": []}
    for i in range(_BENCH_ROUNDS * 2):
        on = (i % 2 == 1) if (i // 2) % 2 == 0 else (i % 2 == 0)  # off,on,on,off,off,on,…
        if on:
            app.installEventFilter(wrapper)
        start = time.perf_counter()
        for _ in range(_BENCH_EVENTS):
            QApplication.sendEvent(widget, event)
        times["with" if on else "without"].append((time.perf_counter() - start) / _BENCH_EVENTS * 1e6)
        if on:
            app.removeEventFilter(wrapper)
    for key, values in times.items():
        print(f"{key:8s} filter: median {statistics.median(values):.2f} µs/event, "
              f"spread {min(values):.2f}–{max(values):.2f} ({_BENCH_ROUNDS} rounds of {_BENCH_EVENTS})")
    return 0


if __name__ == "__main__":
    raise SystemExit(bench())
