"""The lab's main window: the «Новый прогон» form on the left; the followed run, its live
loss and the run history on the right.

Thin: what to show and what an action means are app.window.lab's (`Lab`, tested headless); the
form's rules are app.form.run_form's. The views refresh from what Lab announces
(`Lab.events`: the history, a run's state, the followed run, the monitored run), never from
a list at the end of each action. The menus, the close-time question, the prepare row, the
export, the notifications, the GPU tab and what the window remembers are small modules
in ui/'s rooms (this window's own helpers beside it in ui/window/); each gets the objects and callbacks it needs, never this window. This module (and everything it imports at load time) never imports torch:
the trainer is always its own process (docs/ARCHITECTURE.md).
"""

from __future__ import annotations

import contextlib
import sys
import threading
from typing import Any

from PySide6.QtCore import QProcess, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QAction, QDesktopServices
from PySide6.QtWidgets import (
    QApplication,
    QDialog,
    QLabel,
    QMainWindow,
    QMessageBox,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.base import settings as app_settings
from app.base.i18n import t
from app.form.run_form import ContinueFrom, FormContext
from app.queue.driver import QueueDriver
from app.runs import RunEnded, RunManager, RunRecord
from app.runs.live import LiveFollower
from app.search.adding import create_search
from app.search.store import SearchStore
from app.window.lab import ActionError, Lab, Started
from ui.base import settings, tooltips
from ui.base.background import run_in_thread
from ui.base.cli_task import CliTask
from ui.data.prepare_row import PrepareRow
from ui.form.column import FormColumn
from ui.form.run_form import RunFormView
from ui.monitor import tab as monitor_tab
from ui.queue.series_dialog import SeriesDialog
from ui.queue.tab import QueueTab
from ui.runs.banner import RunBanner
from ui.runs.export_weights import export_metrics, export_weights
from ui.runs.history import HistoryView
from ui.search.dialog import SearchDialog
from ui.search.tab import SearchTab
from ui.text.tab import TextTab
from ui.window import memory as window_memory
from ui.window import qt_language
from ui.window.close_question import ask_about_running
from ui.window.menu import Menu, MenuCalls, build_menu
from ui.window.notifier import Notifier

POLL_MS = 500
LIVE = "live"
DEFAULT_SIZE = (1500, 950)  # the first start's size; later starts take the one left


class MainWindow(QMainWindow):
    """`runs`: the RunManager to use (tests give one over their own folders).
    `remember_layout`: take the size, splitters, tab and history columns from the last
    start and keep them at close (off for --snapshot, which must not disturb them)."""

    data_prepared = Signal(int)  # «Подготовить данные» finished: the exit code (0: done)
    launch_done = Signal(str, str)  # a background (Kaggle) start ended: run id, error or ""
    law_ready = Signal()  # the lab's law was fitted again (in its thread): the form's sizes anew

    def __init__(self, runs: RunManager | None = None, ctx: FormContext | None = None,
                 poll_ms: int = POLL_MS, extra_prepared: list[str] | None = None,
                 remember_layout: bool = True, drive_queue: bool = True, queue_ms: int | None = None) -> None:
        super().__init__()
        tooltips.install()  # every tooltip of the window to app.form.tooltips' rule (≤ 60 × 12)
        qt_language.install()  # Qt's own words (file dialogs, «ОК»/«Отмена») in the interface language
        self.remember_layout = remember_layout
        self.menu: Menu | None = None
        self.pending_tab: str | None = None  # «Видеокарта» comes with the deferred monitor
        self.lab = Lab(runs, extra_prepared)  # the decisions; this window shows them
        # The queue: shown and edited here, driven by its own runner (started when needed, never
        # by --snapshot: a picture must start no run).
        self.queue = QueueDriver(self.lab.runs, start_runner=drive_queue)
        self.queue_ms = queue_ms
        self._subscribe()
        self.queue.events.news.connect(self.notify)  # a queued run skipped or retried, the queue emptied
        self.queue_status = QLabel()  # the status line's part that says who drives the queue
        self.statusBar().addPermanentWidget(self.queue_status)
        self.queue.events.changed.connect(lambda tl: self.queue_status.setText(tl.who))
        self.queue.events.changed.connect(lambda _: self._show_awake())  # the queue's look: every few s
        self._live = LiveFollower()  # the followed run's speed and time left
        self.overlays: set[str] = set()
        self.notifier = Notifier(self)
        self.notifications = self.notifier.sent  # (title, text), in order
        self.export_processes: list[QProcess] = []
        self._close_confirmed = False  # the close question was answered: close for real
        self.close_question: QMessageBox | None = None
        self.prepare_row = PrepareRow(self)  # «Подготовить данные»: its task and its last note
        self.prepare_row.message.connect(lambda text: self.statusBar().showMessage(text))
        self.prepare_row.ended.connect(self._prepare_ended)
        self.runs.add_listener(self._run_ended)
        self.launch_done.connect(self._launch_done)
        self.setWindowTitle("Ternit Lab")
        self._build(ctx if ctx is not None else self.lab.form_context())
        self._build_menu()
        self.resize(*DEFAULT_SIZE)
        if remember_layout:  # the form first: its refresh after the geometry resized the window
            window_memory.restore_form(self.form_view)
            self._restore_layout(window_memory.read_layout(), geometry=True)
        self.timer = QTimer(self)
        self.timer.setInterval(poll_ms)
        self.timer.timeout.connect(self.tick)
        self.timer.start()
        self.refresh_history()
        # The plot (pyqtgraph, numpy) and the GPU monitor are built just after the window
        # first shows: it appears at once, and they fill in a moment later.
        QTimer.singleShot(0, self.ensure_ready)

    def _subscribe(self) -> None:
        """The views hear what Lab announces (app/window/events.py), whoever caused it."""
        events = self.lab.events
        events.law.connect(self._emit_law_ready)  # from the fitting thread into the window's
        self.law_ready.connect(lambda: self.form_view.refresh_sizes())
        events.history.connect(self.refresh_history)
        events.followed.connect(self._show_followed)
        events.followed.connect(lambda _chain: self.update_banner())
        events.run.connect(lambda run_id: run_id == self.followed and self.update_banner())
        events.monitored.connect(lambda rec: monitor_tab.point_at_run(self.monitor, rec))

    @property
    def runs(self) -> RunManager:
        return self.lab.runs

    @property
    def shortcut_actions(self) -> dict[str, QAction]:
        """The menus' actions with a key, by name (ui/window/menu.py)."""
        return self.menu.shortcut_actions if self.menu is not None else {}

    @property
    def language_actions(self) -> dict[str, QAction]:
        return self.menu.language_actions if self.menu is not None else {}

    @property
    def about_action(self) -> QAction | None:
        return self.menu.about_action if self.menu is not None else None

    @property
    def followed(self) -> str | None:
        """The run on the plot and in the banner."""
        return self.lab.followed

    # -- layout ------------------------------------------------------------------------

    def _build(self, ctx: FormContext) -> None:
        self.form_view = RunFormView(ctx, continue_provider=self.continue_info)
        self.form_view.start_requested.connect(self.start_run)
        self.form_view.prepare_requested.connect(self.prepare_data)
        left = FormColumn(self.form_view)  # the form scrolls, its footer («Старт») under it
        self.form_scroll = left.scroll
        self.banner = RunBanner()
        self.banner.stop_clicked.connect(lambda: self.followed and self.stop_run(self.followed))
        self.banner.retry_clicked.connect(lambda: self.followed and self.retry_run(self.followed))
        self._plot: Any = None
        self.monitor: Any = None  # ui.monitor.panel.MonitorPanel, built with the plot
        self.plot_slot = QLabel(t("Загрузка графика…", "Loading the plot…"))
        self.plot_slot.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.history = HistoryView()
        self.history.continue_requested.connect(self.continue_run)
        self.history.continue_edit_requested.connect(self.edit_continue)
        self.history.stop_requested.connect(self.stop_run)
        self.history.show_requested.connect(self.follow)
        self.history.open_folder_requested.connect(self.open_folder)
        self.history.export_requested.connect(self.export_weights)
        self.history.metrics_requested.connect(self.export_metrics)
        self.history.overlay_changed.connect(self.set_overlay)
        self.tabs = QTabWidget()
        self.tabs.addTab(self.history, t("История", "History"))
        self.text_tab = TextTab(self.runs, self.history, lambda: self.followed)  # follows the history's selection
        self.tabs.addTab(self.text_tab, t("Текст", "Text"))
        old_queue = getattr(self, "queue_tab", None)
        if old_queue is not None:  # a language switch rebuilds the tab; one timer drives the queue
            old_queue.stop()
        self.queue_tab = QueueTab(self.queue, **({"tick_ms": self.queue_ms} if self.queue_ms else {}))
        self.queue_tab.message.connect(lambda text: self.statusBar().showMessage(text))
        self.tabs.addTab(self.queue_tab, t("Очередь", "Queue"))
        old_search = getattr(self, "search_tab", None)
        if old_search is not None:
            old_search.stop()
        self.search_tab = SearchTab(SearchStore(self.runs.registry.state))
        self.search_tab.use_best.connect(self.form_view.load_config)  # the best trial as a new form
        self.tabs.addTab(self.search_tab, t("Поиск", "Search"))
        self.form_view.queue_requested.connect(self.queue_run)
        self.form_view.series_requested.connect(self.queue_series)
        self.form_view.search_requested.connect(self.start_search)
        right_top = QWidget()
        col = QVBoxLayout(right_top)
        col.setContentsMargins(0, 0, 0, 0)
        col.addWidget(self.banner)
        col.addWidget(self.plot_slot, 1)
        self._right_col = col
        right = QSplitter(Qt.Orientation.Vertical)
        right.addWidget(right_top)
        right.addWidget(self.tabs)
        right.setStretchFactor(0, 3)
        right.setStretchFactor(1, 2)
        right.setSizes([620, 330])
        self.right_split = right
        self.prepare_row.build(self.form_view)
        main = QSplitter()
        main.addWidget(left)
        main.addWidget(right)
        main.setStretchFactor(1, 1)
        main.setSizes([600, 960])
        self.main_split = main
        self.setCentralWidget(main)
        self.statusBar().showMessage(self.lab.start_message())

    def _build_menu(self) -> None:
        calls = MenuCalls(set_language=self.set_language, reload_context=self.reload_context,
                          refresh_history=self.lab.refresh, add_prepared=self.add_prepared,
                          status=self.statusBar().showMessage, quit=self.close)
        self.menu = build_menu(self.menuBar(), self, self.form_view, calls, self.menu)

    def _memory_parts(self) -> window_memory.Parts:
        return window_memory.Parts(self, self.main_split, self.right_split, self.history, self.tabs, self.text_tab,
                                   self.monitor)

    def _restore_layout(self, layout: Any, geometry: bool) -> None:
        if window_memory.restore_layout(self._memory_parts(), layout, geometry):
            self.pending_tab = "gpu"  # the tab comes with the monitor, a moment later

    def save_layout(self) -> bool:
        """Remember the layout and the form for the next start (not for --snapshot)."""
        return self.remember_layout and window_memory.save_layout(
            self._memory_parts(), self.pending_tab == "gpu", self.form_view)

    def ensure_ready(self) -> None:
        """Build the deferred parts (the loss plot, the GPU monitor) if not yet built."""
        if self._plot is not None:
            return
        from ui.runs.loss_plot import LossPlot

        self._plot = LossPlot()
        self._right_col.replaceWidget(self.plot_slot, self._plot)
        self.plot_slot.hide()  # at once: deleted later, it was painted over the plot's bar meanwhile
        self.plot_slot.deleteLater()
        self.monitor = monitor_tab.build_monitor(
            self.tabs, self.pending_tab == "gpu", self.notify, self.statusBar().showMessage,
            lambda: self.lab.run_changed(self.lab.monitored))
        self.pending_tab = None
        if self.followed:
            self.follow(self.followed)
        else:
            self._follow_initial()
        self.load_measured()

    def load_measured(self) -> threading.Thread:
        """Speeds and memory measured by earlier runs (their events), for the estimates:
        read in a thread, since a long history means large event files."""
        return run_in_thread(self.lab.measured, self._measured_loaded, self, name="measured-runs")

    def _measured_loaded(self, measured: object) -> None:
        ctx = self.form_view.form.ctx
        Lab.take_measured(ctx, measured)
        self.form_view.set_context(ctx)

    @property
    def plot(self) -> Any:
        """The loss plot (ui.runs.loss_plot.LossPlot), built on first use."""
        self.ensure_ready()
        return self._plot

    # -- language ----------------------------------------------------------------------

    def set_language(self, lang: str) -> None:
        """Switch the interface language now (and remember it); the form keeps its values."""
        settings.save_language(lang)
        qt_language.install()
        form = self.form_view.form
        followed, overlays = self.followed, set(self.overlays)
        view = self._plot.view_settings() if self._plot is not None else None
        # splitters, tab, history columns: as the user left them
        layout = window_memory.layout_now(self._memory_parts(), self.pending_tab == "gpu")
        old, old_text = self.centralWidget(), self.text_tab
        if self.monitor is not None:
            self.monitor.stop()
        self.lab.forget_failures()  # their advice is in the old language
        self._build(form.ctx)
        self.text_tab.carry_over(old_text)  # the prompt, the text written, a generation going
        self._restore_layout(layout, geometry=False)
        old.deleteLater()
        self.form_view.form = form
        self.form_view.set_context(form.ctx)
        self._build_menu()
        self.refresh_history()  # the new views show what the lab holds
        self.overlays = set()
        if followed:
            self.follow(followed)
        else:  # no run on the plot: the plot and the «GPU» tab are rebuilt all the same (they
            # stayed «Загрузка графика…» and gone, the monitor stopped, until a run was shown)
            self.ensure_ready()
        for run_id in overlays:
            self.history.overlaid.add(run_id)
            self.set_overlay(run_id, True)
        if view is not None:  # the axis, log scale and raw points stay as the user set them
            self.plot.apply_view_settings(view)
        self.refresh_history()  # the overlaid runs' «На графике» boxes ticked again

    # -- context -----------------------------------------------------------------------

    def reload_context(self) -> None:
        """Read the choices again (new data, accounts); what the window learnt meanwhile —
        measured speeds, the runs going — stays."""
        self.form_view.set_context(self.lab.reload_context(self.form_view.form.ctx))

    def add_prepared(self, folder: str) -> bool:
        ctx = self.form_view.form.ctx
        try:
            self.lab.add_prepared(folder, ctx)
        except ActionError as e:
            self.statusBar().showMessage(str(e))
            return False
        self.form_view.set_context(ctx)
        return True

    def prepare_data(self, constellations: list[str]) -> CliTask:
        """«Подготовить данные»: `ternit data prepare` in a child process, its progress under
        the button with «Отмена» (ui/data/prepare_row.py)."""
        return self.prepare_row.start(Lab.prepare_args(self.form_view.form, constellations), constellations, self)

    def _prepare_ended(self, code: int) -> None:
        self.reload_context()  # the form finds the new folder and picks it
        self.prepare_row.enable()
        self.data_prepared.emit(code)

    # -- runs --------------------------------------------------------------------------

    def start_run(self, config: dict[str, Any], continuing: ContinueFrom | None = None) -> RunRecord | None:
        """Start (or continue, when the form continues a checkpoint) and follow the run. A
        Kaggle start uploads and pushes in a thread; `launch_done` reports its end.
        `continuing`: a continue started without the form (the history's one click)."""
        from_form = continuing is None
        try:
            started = self.lab.start(config, self.form_view.form.continuing if from_form else continuing)
        except ActionError as e:
            self.banner.failure.setText(str(e))
            self.banner.failure.setVisible(True)
            self.statusBar().showMessage(str(e))
            return None
        self._launch_started(started)
        if from_form:  # the history's one click leaves the user's form as it is
            self.form_view.form.from_scratch()
            self.form_view.refresh()
        return started.run

    def queue_run(self, config: dict[str, Any], target: str = "") -> None:
        """«В очередь»: the form's run to the queue (where the form says, or "any")."""
        continuing = self.form_view.form.continuing
        self.queue_tab.add(config, target or None, parent_id=continuing.run_id if continuing else None)

    def queue_series(self, config: dict[str, Any]) -> QDialog:
        """«Серия…»: choose one or two fields and their values; each combination is queued."""
        dialog = SeriesDialog(self.form_view.form.values, self)
        dialog.accepted.connect(lambda: self.queue_tab.add(config, dialog.target(), vary=dialog.vary()))
        dialog.open()
        return dialog

    def start_search(self, config: dict[str, Any]) -> QDialog:
        """«Поиск…»: the fields and ranges to search; the search's trials are queued as slots free."""
        dialog = SearchDialog(self.form_view.form.values, self)

        def accepted() -> None:
            search = create_search(self.search_tab.store, config, **dialog.result_kwargs())
            self.search_tab.reload()
            self.tabs.setCurrentWidget(self.search_tab)
            self.statusBar().showMessage(t(f"Поиск {search.id}: попытки пойдут через очередь",
                                           f"Search {search.id}: its trials go through the queue"))

        dialog.accepted.connect(accepted)
        dialog.open()
        return dialog

    def _emit_law_ready(self) -> None:
        with contextlib.suppress(RuntimeError):  # the window was closed meanwhile
            self.law_ready.emit()

    def _emit_launch_done(self, run_id: str, error: str) -> None:
        """From the launch thread: into the window's thread through the signal."""
        with contextlib.suppress(RuntimeError):  # the window was closed meanwhile
            self.launch_done.emit(run_id, error)

    def _launch_done(self, run_id: str, error: str) -> None:
        self.statusBar().showMessage(self.lab.launch_ended(run_id, error))

    def stop_run(self, run_id: str) -> None:
        self.statusBar().showMessage(self.lab.stop(run_id))

    def retry_run(self, run_id: str) -> RunRecord | None:
        """One click after a failure: the same run with the advice applied."""
        try:
            started = self.lab.retry(run_id)
        except ActionError as e:
            self.statusBar().showMessage(str(e))
            return None
        self._launch_started(started, say=started.kaggle)
        return started.run

    def _launch_started(self, started: Started, say: bool = True) -> None:
        """A run the lab started (and follows): a Kaggle one is uploaded in a thread."""
        if started.kaggle:
            self.lab.launch_in_background(started.run.id, self._emit_launch_done)
        if say:
            self.statusBar().showMessage(started.message)

    def continue_info(self, run_id: str) -> ContinueFrom | None:
        """What «Продолжить» fills the form with (None, and a message, if it cannot)."""
        try:
            return self.lab.continue_info(run_id)
        except ActionError as e:
            self.statusBar().showMessage(str(e))
            return None

    def continue_run(self, run_id: str) -> bool:
        """«Продолжить» in the history: one click continues from the checkpoint with the
        run's own settings; the form is left as the user has it. When it cannot start as it
        is (data to prepare, …), the form is filled instead, saying why (Lab.continue_now)."""
        try:
            info, config, why_not = self.lab.continue_now(run_id, self.form_view.form.ctx)
        except ActionError as e:
            self.statusBar().showMessage(str(e))
            return False
        if config is None:
            self.form_view.continue_from(info)
            self.follow(run_id)
            self.statusBar().showMessage(why_not)
            return False
        return self.start_run(config, continuing=info) is not None

    def edit_continue(self, run_id: str) -> bool:
        """«Изменить и продолжить…»: the form filled from the checkpoint, model locked, for
        a change of «Шагов до» (or more) before «Продолжить»; the plot shows the run."""
        info = self.continue_info(run_id)
        if info is None:
            return False
        self.form_view.continue_from(info)
        self.follow(run_id)
        return True

    def follow(self, run_id: str) -> None:
        """Show a run (with the runs it continues, as one curve) on the plot, live: the lab
        follows it, and the views hear it (`_show_followed`, the banner, the monitor)."""
        self.lab.follow(run_id)

    def _show_followed(self, chain: list[RunRecord]) -> None:
        """The followed run on the plot (its chain as one curve) and ticked in the history."""
        rec = chain[-1]
        self.plot.remove(LIVE)
        self.plot.follow(LIVE, [(r.id, r.events_path) for r in chain], label=rec.name)
        self.plot.set_title(t(f"Потери: {rec.name}", f"Loss: {rec.name}"))
        self.history.set_followed(rec.id)  # its «На графике» box ticked
        self.history.select(rec.id)

    def set_overlay(self, run_id: str, on: bool) -> None:
        """Overlay a run from the history on the plot (several at once, to compare)."""
        key = f"overlay:{run_id}"
        if not on:
            self.overlays.discard(run_id)
            self.plot.remove(key)
            return
        try:
            name, series = self.lab.overlay(run_id)
        except ActionError as e:
            self.statusBar().showMessage(str(e))
            return
        self.overlays.add(run_id)
        self.plot.show_series(key, series, label=name, primary=False)

    def _follow_initial(self) -> None:
        """Re-attach: follow a run that is still going, else show the newest run."""
        run_id = self.lab.initial_run()
        if run_id:
            self.follow(run_id)

    def tick(self) -> None:
        """The timer: poll the runs (what changed reaches the views as Lab announces it:
        statuses, the banner, the history, a Kaggle leg followed into), then the plot's new
        points and the monitored run's step for the GPU monitor."""
        tick = self.lab.poll()
        if tick.error:
            self.statusBar().showMessage(tick.error)
            return
        if self._plot is not None:
            self._plot.poll()
        if self.monitor is not None and tick.monitor_step is not None:
            self.monitor.on_step_event(tick.monitor_step)

    def update_banner(self) -> None:
        rec, failure = self.lab.followed_state()
        # Speed and time left (app.runs.live, the same line `ternit run … --wait` prints).
        self.banner.show_run(rec, failure, live=self._live.text_for(rec) if rec is not None else "")

    def refresh_history(self) -> None:
        rows = self.lab.history()
        self.history.set_rows(rows)
        self.form_view.set_checkpoints(Lab.checkpoint_choices(rows))
        if self.lab.update_active_runs(self.form_view.form.ctx):  # the form warns of two on one card
            self.form_view.refresh()


    # -- files -------------------------------------------------------------------------

    def open_folder(self, run_id: str) -> None:
        try:
            folder = self.lab.run_folder(run_id)
        except ActionError as e:
            self.statusBar().showMessage(str(e))
            return
        QDesktopServices.openUrl(QUrl.fromLocalFile(folder))

    def export_weights(self, run_id: str, out: str | None = None) -> QProcess | None:
        """The latest checkpoint's weights as .safetensors (ui/runs/export_weights.py)."""
        proc = export_weights(self, self.lab, run_id, out)
        if proc is not None:
            self.export_processes.append(proc)
        return proc

    def export_metrics(self, run_id: str, out: str | None = None) -> bool:
        """«Метрики в CSV…» (ui/runs/export_weights.py)."""
        return export_metrics(self, self.runs.registry, run_id, out)

    # -- notifications and closing -------------------------------------------------------

    def _run_ended(self, ended: RunEnded) -> None:
        """A run ended, failed or hit its limit: a tray message (or the status bar where the
        desktop has no tray)."""
        self.notify(ended.title(), ended.text())
        self.load_measured()  # the run's speed and memory now correct the estimates

    def _show_awake(self) -> None:
        """The monitor's line on the sleep request (who holds it, or why nobody does)."""
        if self.monitor is not None:
            self.monitor.awake_label.setText(self.queue.awake_line())

    def notify(self, title: str, text: str) -> None:
        self.notifier.notify(title, text)

    def _closed_by_answer(self) -> None:
        self._close_confirmed = True
        self.close()

    def closeEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        # Closing the window does not stop training: the runs go on and are re-attached later.
        # While one trains, the user is told so first (unless they asked not to be).
        if not self._close_confirmed and self.isVisible() and app_settings.ask_on_close():
            running = self.lab.training_here()
            question = self.queue.close_question(running)
            if question is not None:
                event.ignore()
                if self.close_question is not None:  # asked before and answered «Отмена»
                    self.close_question.deleteLater()
                self.close_question = ask_about_running(self, question, running, self.runs.stop,
                                                        lambda: self.queue.set_paused(True), self._closed_by_answer)
                return
        self.save_layout()
        self.timer.stop()
        self.queue_tab.stop()  # the queue goes on: its runner is a process of its own
        self.search_tab.stop()
        self.prepare_row.stop_and_wait()
        if self.monitor is not None:
            self.monitor.stop()
        self.lab.shutdown()  # Kaggle runs are followed again at the next start
        self.notifier.hide()
        super().closeEvent(event)


def app_instance(argv: list[str] | None = None) -> QApplication:
    app = QApplication.instance()
    if app is None:
        app = QApplication(argv or sys.argv[:1])
        app.setApplicationName("Ternit Lab")
    return app  # type: ignore[return-value]
