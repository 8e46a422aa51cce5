"""What the main window remembers between starts (settings.json through ui.settings, the
values' rules in app.window.layout and app.form.remembered): its size and place, the splitters,
the tab in front, the history's columns and sort, and the form's last from-scratch values."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.form import remembered as form_memory
from app.window.layout import WindowLayout

from . import settings

if TYPE_CHECKING:
    from .main_window import MainWindow


def read_layout() -> WindowLayout:
    try:
        return settings.load_layout()
    except OSError:  # an unreadable config folder: the defaults
        return WindowLayout()


def restore_layout(window: MainWindow, layout: WindowLayout, geometry: bool) -> None:
    """Put back what `layout` holds; a part Qt refuses (an old or damaged state) keeps its
    default. Qt moves a geometry saved on a screen that is gone onto one that is there."""
    if geometry and "geometry" in layout.states:
        window.restoreGeometry(layout.states["geometry"])
    for name, split in (("splitter.main", window.main_split), ("splitter.right", window.right_split)):
        if name in layout.states:
            split.restoreState(layout.states[name])
    window.history.apply_layout(layout.columns, layout.sort)
    if layout.tab == "gpu" and window.monitor is None:
        window.pending_tab = "gpu"  # the tab comes with the monitor, a moment later
    elif layout.tab is not None:
        window.tabs.setCurrentIndex(window.tabs.indexOf(window.monitor) if layout.tab == "gpu" else 0)


def layout_now(window: MainWindow) -> WindowLayout:
    """The window's layout as the user has it now."""
    gpu = window.monitor is not None and window.tabs.currentWidget() is window.monitor
    return WindowLayout(
        states={"geometry": bytes(window.saveGeometry().data()),
                "splitter.main": bytes(window.main_split.saveState().data()),
                "splitter.right": bytes(window.right_split.saveState().data())},
        tab="gpu" if gpu or window.pending_tab == "gpu" else "history",
        columns=dict(window.history.user_widths), sort=window.history.sort_order())


def save_layout(window: MainWindow) -> bool:
    """Remember the layout and the form for the next start (the data window's own parts kept)."""
    layout = read_layout()
    now = layout_now(window)
    layout.states.update(now.states)
    layout.tab, layout.columns, layout.sort = now.tab, now.columns, now.sort
    try:
        settings.save_layout(layout)
        snapshot = form_memory.snapshot(window.form_view.form)
        if snapshot:  # a form continuing a checkpoint keeps the last from-scratch values
            settings.save_form(snapshot)
    except OSError:  # a read-only config folder: the next start takes the defaults
        return False
    return True


def restore_form(window: MainWindow) -> None:
    """The form as the user left it at the last close (app.form.remembered checks each value)."""
    try:
        kept = settings.load_form()
    except OSError:
        return
    form_memory.restore(window.form_view.form, kept)
    window.form_view.refresh()
