"""The «Видеокарта» tab of the main window: the GPU monitor (ui/monitor/panel.py), pointed
at the run that trains here (app.window.lab decides which), its heat-guard pauses said in the tray
and its warnings marked on the tab, since «История» is often in front."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtWidgets import QTabWidget

from app.base.i18n import t
from app.gpu import heat_guard
from app.runs import RunRecord

if TYPE_CHECKING:
    from ui.monitor.panel import MonitorPanel

log = logging.getLogger(__name__)


def build_monitor(tabs: QTabWidget, in_front: bool, notify: Callable[[str, str], None],
                  status: Callable[[str], None], paused: Callable[[], None]) -> MonitorPanel | None:
    """The monitor as a tab of `tabs` (in front when `in_front`), started; None (and the
    reason in the log) when it cannot be built: the rest of the window works without it.
    `notify(title, text)`: the tray; `status(text)`: the status bar; `paused()`: the heat
    guard paused or resumed the watched run. Imported here: the window shows before the
    monitor's modules load."""
    from ui.monitor.panel import MonitorPanel

    try:
        monitor = MonitorPanel()
    except Exception:  # a broken sampler or settings file must not keep the window from opening
        log.exception("the GPU monitor could not be built; the window goes on without its tab")
        return None
    tabs.addTab(monitor, t("Видеокарта", "GPU"))
    if in_front:  # as the user left it
        tabs.setCurrentWidget(monitor)
    monitor.pause_changed.connect(lambda on: heat_pause_changed(monitor, on, notify, status, paused))
    monitor.alerts_changed.connect(lambda alerts: alerts_changed(tabs, monitor, alerts, status))
    monitor.start()
    return monitor


def point_at_run(monitor: MonitorPanel | None, rec: RunRecord | None) -> None:
    """Point the monitor (its trainer figures, its heat guard) at the run the lab says
    trains here (Lab.monitor_target)."""
    if monitor is None:
        return
    monitor.set_run(rec.path if rec is not None else None, local=True)
    monitor.set_trainer_pid(rec.pid if rec is not None else None)


def heat_pause_changed(monitor: MonitorPanel, paused: bool, notify: Callable[[str, str], None],
                       status: Callable[[str], None], changed: Callable[[], None]) -> None:
    """The heat guard paused or resumed the run: said in the tray too, since the «GPU» tab
    may not be in front."""
    if paused and monitor.guard is not None:
        notify(*heat_guard.pause_notice(monitor.guard, monitor.guard_status))
    elif not paused:
        status(heat_guard.resumed_text())
    changed()


def alerts_changed(tabs: QTabWidget, monitor: MonitorPanel, alerts: list, status: Callable[[str], None]) -> None:
    """The monitor's warnings (memory full as a run starts, a card at its slowdown
    threshold, a lost card) reach the user on any tab: marked on the «GPU» tab and said in
    the status bar; they showed only on that tab, often behind «History»."""
    index = tabs.indexOf(monitor)
    if index < 0:
        return
    tabs.setTabText(index, t("Видеокарта", "GPU") + (" ⚠" if alerts else ""))
    tabs.setTabToolTip(index, "\n".join(a.text for a in alerts))
    if alerts:
        status("⚠ " + alerts[0].text)
