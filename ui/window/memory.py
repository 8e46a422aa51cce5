"""What the main window remembers between starts (settings.json through ui.base.settings, the
values' rules in app.window.layout and app.form.remembered): its size and place, the splitters,
the tab in front, the history's columns and sort, and the form's last from-scratch values."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtWidgets import QMainWindow, QSplitter, QTabWidget, QWidget

from app.form import remembered as form_memory
from app.window.layout import WindowLayout
from ui.base import settings
from ui.form.run_form import RunFormView
from ui.runs.history import HistoryView


@dataclass
class Parts:
    """What of the window its memory reads and puts back."""

    window: QMainWindow  # its size and place
    main_split: QSplitter
    right_split: QSplitter
    history: HistoryView
    tabs: QTabWidget
    text_tab: QWidget  # «Текст»
    monitor: QWidget | None  # the «Видеокарта» tab, once built


def read_layout() -> WindowLayout:
    try:
        return settings.load_layout()
    except OSError:  # an unreadable config folder: the defaults
        return WindowLayout()


def restore_layout(parts: Parts, layout: WindowLayout, geometry: bool) -> bool:
    """Put back what `layout` holds; a part Qt refuses (an old or damaged state) keeps its
    default. Qt moves a geometry saved on a screen that is gone onto one that is there.
    True when the «Видеокарта» tab was in front and is not built yet: it comes to the
    front with the monitor, a moment later."""
    if geometry and "geometry" in layout.states:
        parts.window.restoreGeometry(layout.states["geometry"])
    for name, split in (("splitter.main", parts.main_split), ("splitter.right", parts.right_split)):
        if name in layout.states:
            split.restoreState(layout.states[name])
    parts.history.apply_layout(layout.columns, layout.sort)
    if layout.tab == "gpu" and parts.monitor is None:
        return True
    if layout.tab is not None:
        parts.tabs.setCurrentWidget(_tabs(parts).get(layout.tab) or parts.history)
    return False


def _tabs(parts: Parts) -> dict[str, QWidget | None]:
    """The bottom tabs by app.window.layout.TABS' names (the GPU tab once built)."""
    return {"history": parts.history, "text": parts.text_tab, "gpu": parts.monitor}


def layout_now(parts: Parts, gpu_pending: bool) -> WindowLayout:
    """The window's layout as the user has it now (`gpu_pending`: the «Видеокарта» tab is
    to come to the front once built)."""
    front = parts.tabs.currentWidget()
    tab = "gpu" if gpu_pending else next((k for k, w in _tabs(parts).items() if w is front), "history")
    return WindowLayout(
        states={"geometry": bytes(parts.window.saveGeometry().data()),
                "splitter.main": bytes(parts.main_split.saveState().data()),
                "splitter.right": bytes(parts.right_split.saveState().data())},
        tab=tab, columns=dict(parts.history.user_widths), sort=parts.history.sort_order())


def save_layout(parts: Parts, gpu_pending: bool, form_view: RunFormView) -> bool:
    """Remember the layout and the form for the next start (the data window's own parts kept)."""
    layout = read_layout()
    now = layout_now(parts, gpu_pending)
    layout.states.update(now.states)
    layout.tab, layout.columns, layout.sort = now.tab, now.columns, now.sort
    try:
        settings.save_layout(layout)
        snapshot = form_memory.snapshot(form_view.form)
        if snapshot:  # a form continuing a checkpoint keeps the last from-scratch values
            settings.save_form(snapshot)
    except OSError:  # a read-only config folder: the next start takes the defaults
        return False
    return True


def restore_form(form_view: RunFormView) -> None:
    """The form as the user left it at the last close (app.form.remembered checks each value)."""
    try:
        kept = settings.load_form()
    except OSError:
        return
    form_memory.restore(form_view.form, kept)
    form_view.refresh()
