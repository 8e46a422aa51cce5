"""The «Видеокарта» tab of the main window: the GPU monitor (ui/monitor_panel.py), pointed
at the run that trains here (app.window.lab decides which), its heat-guard pauses said in the tray
and its warnings marked on the tab, since «История» is often in front."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from app.base.i18n import t
from app.gpu import heat_guard

if TYPE_CHECKING:
    from .main_window import MainWindow
    from .monitor_panel import MonitorPanel

log = logging.getLogger(__name__)


def build_monitor(window: MainWindow) -> MonitorPanel | None:
    """The monitor as the «Видеокарта» tab, started; None (and the reason in the log) when
    it cannot be built: the rest of the window works without it. Imported here: the
    window shows before the monitor's modules load."""
    from .monitor_panel import MonitorPanel

    try:
        monitor = MonitorPanel()
    except Exception:  # a broken sampler or settings file must not keep the window from opening
        log.exception("the GPU monitor could not be built; the window goes on without its tab")
        return None
    window.tabs.addTab(monitor, t("Видеокарта", "GPU"))
    if window.pending_tab == "gpu":  # in front, as the user left it
        window.tabs.setCurrentWidget(monitor)
    monitor.pause_changed.connect(lambda paused: heat_pause_changed(window, paused))
    monitor.alerts_changed.connect(lambda alerts: alerts_changed(window, alerts))
    monitor.start()
    return monitor


def point_at_run(window: MainWindow) -> None:
    """Point the monitor (its trainer figures, its heat guard) at the run the lab says
    trains here."""
    if window.monitor is None:
        return
    rec = window.lab.monitor_target()
    window.monitor.set_run(rec.path if rec is not None else None, local=True)
    window.monitor.set_trainer_pid(rec.pid if rec is not None else None)


def heat_pause_changed(window: MainWindow, paused: bool) -> None:
    """The heat guard paused or resumed the run: said in the tray too, since the «GPU» tab
    may not be in front."""
    monitor = window.monitor
    if paused and monitor is not None and monitor.guard is not None:
        window.notify(*heat_guard.pause_notice(monitor.guard, monitor.guard_status))
    elif not paused:
        window.statusBar().showMessage(heat_guard.resumed_text())
    window.update_banner()


def alerts_changed(window: MainWindow, alerts: list) -> None:
    """The monitor's warnings (memory full as a run starts, a card at its slowdown
    threshold, a lost card) reach the user on any tab: marked on the «GPU» tab and said in
    the status bar; they showed only on that tab, often behind «History»."""
    index = window.tabs.indexOf(window.monitor)
    if index < 0:
        return
    window.tabs.setTabText(index, t("Видеокарта", "GPU") + (" ⚠" if alerts else ""))
    window.tabs.setTabToolTip(index, "\n".join(a.text for a in alerts))
    if alerts:
        window.statusBar().showMessage("⚠ " + alerts[0].text)
