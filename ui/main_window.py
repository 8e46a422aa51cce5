"""The lab's main window: the «Новый прогон» form on the left; the followed run, its live
loss and the run history on the right.

Thin: runs are started, polled, stopped, continued and retried through app.runs'
RunManager; the form's rules are app.form's. This module (and everything it imports at
load time) never imports torch: the trainer is always its own process.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

from PySide6.QtCore import QProcess, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QAction, QActionGroup, QDesktopServices, QKeySequence
from PySide6.QtWidgets import (
    QAbstractButton,
    QApplication,
    QCheckBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QMenu,
    QMessageBox,
    QScrollArea,
    QSplitter,
    QStyle,
    QSystemTrayIcon,
    QTabWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app import form_memory, paths
from app.data import manage as data_manage
from app.form import ContinueFrom, FormContext, continue_now
from app.i18n import current_language, t
from app.lab import ActionError, Lab
from app.runs import RunEnded, RunManager, RunRecord
from app.runs.live import LiveFollower
from app.window_layout import WindowLayout

from . import settings
from .background import run_in_thread
from .cli_task import CliTask, TaskBar
from .history import HistoryView
from .run_banner import RunBanner
from .run_form import RunFormView

POLL_MS = 500
LIVE = "live"
DEFAULT_SIZE = (1500, 950)  # the first start's size; later starts take the one left


def _keys(standard: QKeySequence.StandardKey, fallback: str) -> list[QKeySequence]:
    """The platform's own keys for an action where Qt knows them, else the usual ones
    (Windows, for one, has no standard key for Quit)."""
    return QKeySequence.keyBindings(standard) or [QKeySequence(fallback)]


def key_text(action: QAction) -> str:
    """An action's first key as the platform writes it («Ctrl+Enter»); "" when it has none."""
    return action.shortcut().toString(QKeySequence.SequenceFormat.NativeText)


class MainWindow(QMainWindow):
    """`runs`: the RunManager to use (tests give one over their own folders).
    `remember_layout`: take the size, splitters, tab and history columns from the last
    start and keep them at close (off for --snapshot, which must not disturb them)."""

    data_prepared = Signal(int)  # «Подготовить данные» finished: the exit code (0: done)
    launch_done = Signal(str, str)  # a background (Kaggle) start ended: run id, error or ""

    def __init__(self, runs: RunManager | None = None, ctx: FormContext | None = None,
                 poll_ms: int = POLL_MS, extra_prepared: list[str] | None = None,
                 remember_layout: bool = True) -> None:
        super().__init__()
        self.remember_layout = remember_layout
        self.shortcut_actions: dict[str, QAction] = {}
        self._pending_tab: str | None = None  # «Видеокарта» comes with the deferred monitor
        self.lab = Lab(runs, extra_prepared)  # the decisions; this window shows them
        self._live = LiveFollower()  # the followed run's speed and time left
        self.overlays: set[str] = set()
        self.notifications: list[tuple[str, str]] = []
        self.export_processes: list[QProcess] = []
        self._close_confirmed = False  # the close question was answered: close for real
        self.close_question: QMessageBox | None = None
        self.tray: QSystemTrayIcon | None = None
        self.prepare_task: CliTask | None = None  # «Подготовить данные» running now
        self._prepare_names: list[str] = []
        # How the last prepare ended (exit code, its output, the constellations): its note is
        # shown under the form until the next prepare, and redrawn in a new language.
        self._prepare_result: tuple[int, data_manage.CliOutput, list[str]] | None = None
        self.runs.add_listener(self._run_ended)
        self.launch_done.connect(self._launch_done)
        self.setWindowTitle("Ternit Lab")
        self._build(ctx if ctx is not None else self.lab.form_context())
        self._build_menu()
        self.resize(*DEFAULT_SIZE)
        if remember_layout:  # the form first: its refresh after the geometry resized the window
            self._restore_form()
            self._restore_layout(self._read_layout(), geometry=True)
        self.timer = QTimer(self)
        self.timer.setInterval(poll_ms)
        self.timer.timeout.connect(self.tick)
        self.timer.start()
        self.refresh_history()
        # The plot (pyqtgraph, numpy) and the GPU monitor are built just after the window
        # first shows: it appears at once, and they fill in a moment later.
        QTimer.singleShot(0, self.ensure_ready)

    @property
    def runs(self) -> RunManager:
        return self.lab.runs

    @property
    def followed(self) -> str | None:
        """The run on the plot and in the banner."""
        return self.lab.followed

    @followed.setter
    def followed(self, run_id: str | None) -> None:
        self.lab.followed = run_id

    # -- layout ------------------------------------------------------------------------

    def _build(self, ctx: FormContext) -> None:
        self.form_view = RunFormView(ctx, continue_provider=self.continue_info)
        self.form_view.start_requested.connect(self.start_run)
        self.form_view.prepare_requested.connect(self.prepare_data)
        scroll = QScrollArea()
        scroll.setWidget(self.form_view)
        scroll.setWidgetResizable(True)
        # The form wraps its texts to the column: no sideways scrolling.
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        scroll.setMinimumWidth(520)
        self.banner = RunBanner()
        self.banner.stop_clicked.connect(lambda: self.followed and self.stop_run(self.followed))
        self.banner.retry_clicked.connect(lambda: self.followed and self.retry_run(self.followed))
        self._plot: Any = None
        self.monitor: QWidget | None = None
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
        left = QWidget()
        left_col = QVBoxLayout(left)
        left_col.setContentsMargins(0, 0, 0, 0)
        left_col.setSpacing(0)
        left_col.addWidget(scroll, 1)
        left_col.addWidget(self.form_view.footer)
        self._build_prepare_row()
        main = QSplitter()
        main.addWidget(left)
        main.addWidget(right)
        main.setStretchFactor(1, 1)
        main.setSizes([600, 960])
        self.main_split = main
        self.setCentralWidget(main)
        self.statusBar().showMessage(t("Готово", "Ready"))

    def _build_prepare_row(self) -> None:
        """Under «Подготовить данные» and «Старт»: a running prepare's progress with «Отмена»,
        then how the last prepare ended (its warnings or its failure), kept until the next one."""
        foot = self.form_view.footer.layout()
        assert isinstance(foot, QVBoxLayout)
        self.prepare_bar = TaskBar()
        self.prepare_note = QLabel()
        self.prepare_note.setWordWrap(True)
        self.prepare_note.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.prepare_note_close = QToolButton()
        self.prepare_note_close.setText("✕")
        self.prepare_note_close.setAutoRaise(True)
        self.prepare_note_close.setToolTip(t("Скрыть это сообщение", "Hide this message"))
        self.prepare_note_close.clicked.connect(self._hide_prepare_note)
        self.prepare_note_box = QWidget()
        row = QHBoxLayout(self.prepare_note_box)
        row.setContentsMargins(0, 2, 0, 2)
        row.addWidget(self.prepare_note, 1)
        row.addWidget(self.prepare_note_close, 0, Qt.AlignmentFlag.AlignTop)
        foot.insertWidget(1, self.prepare_bar)
        foot.insertWidget(2, self.prepare_note_box)
        task = self.prepare_task
        if task is not None and task.running:  # rebuilt in another language mid-prepare
            self.prepare_bar.follow(task, data_manage.prepare_started_text(self._prepare_names),
                                    t(*data_manage.PREPARE_CANCEL_TIP))
            self.form_view.prepare_button.setEnabled(False)
        self._show_prepare_note()

    def _show_prepare_note(self) -> None:
        if self._prepare_result is None:
            self.prepare_note_box.setVisible(False)
            return
        outcome = data_manage.prepare_outcome(*self._prepare_result)
        self.prepare_note.setText(outcome.note)
        self.prepare_note.setToolTip(outcome.tooltip)
        self.prepare_note.setStyleSheet({"error": "color: #b00020;", "warning": "color: #8a5a00;"}
                                        .get(outcome.level, "color: #555555;"))
        self.prepare_note_box.setVisible(bool(outcome.note))

    def _hide_prepare_note(self) -> None:
        self._prepare_result = None
        self._show_prepare_note()

    # -- what the window remembers (settings.json, app.window_layout) -----------------------

    @staticmethod
    def _read_layout() -> WindowLayout:
        try:
            return settings.load_layout()
        except OSError:  # an unreadable config folder: the defaults
            return WindowLayout()

    def _restore_layout(self, layout: WindowLayout, geometry: bool) -> None:
        """Put back what `layout` holds; a part Qt refuses (an old or damaged state) keeps
        its default. Qt moves a geometry saved on a screen that is gone onto one that is
        there."""
        if geometry and "geometry" in layout.states:
            self.restoreGeometry(layout.states["geometry"])
        for name, split in (("splitter.main", self.main_split), ("splitter.right", self.right_split)):
            if name in layout.states:
                split.restoreState(layout.states[name])
        self.history.apply_layout(layout.columns, layout.sort)
        if layout.tab == "gpu" and self.monitor is None:
            self._pending_tab = "gpu"  # the tab comes with the monitor, a moment later
        elif layout.tab is not None:
            self.tabs.setCurrentIndex(self.tabs.indexOf(self.monitor) if layout.tab == "gpu" else 0)

    def layout_now(self) -> WindowLayout:
        """The window's layout as the user has it now."""
        sort = self.history.sort_order()
        gpu = self.monitor is not None and self.tabs.currentWidget() is self.monitor
        return WindowLayout(
            states={"geometry": bytes(self.saveGeometry().data()),
                    "splitter.main": bytes(self.main_split.saveState().data()),
                    "splitter.right": bytes(self.right_split.saveState().data())},
            tab="gpu" if gpu or self._pending_tab == "gpu" else "history",
            columns=dict(self.history.user_widths), sort=sort)

    def save_layout(self) -> bool:
        """Remember the layout and the form for the next start (the data window's own parts kept)."""
        if not self.remember_layout:
            return False
        layout = self._read_layout()
        now = self.layout_now()
        layout.states.update(now.states)
        layout.tab, layout.columns, layout.sort = now.tab, now.columns, now.sort
        try:
            settings.save_layout(layout)
            snapshot = form_memory.snapshot(self.form_view.form)
            if snapshot:  # a form continuing a checkpoint keeps the last from-scratch values
                settings.save_form(snapshot)
        except OSError:  # a read-only config folder: the next start takes the defaults
            return False
        return True

    def _restore_form(self) -> None:
        """The form as the user left it at the last close (app.form_memory checks each value)."""
        try:
            kept = settings.load_form()
        except OSError:
            return
        form_memory.restore(self.form_view.form, kept)
        self.form_view.refresh()

    def ensure_ready(self) -> None:
        """Build the deferred parts (the loss plot, the GPU monitor) if not yet built."""
        if self._plot is not None:
            return
        from .loss_plot import LossPlot

        self._plot = LossPlot()
        self._right_col.replaceWidget(self.plot_slot, self._plot)
        self.plot_slot.deleteLater()
        self.monitor = self._monitor_panel()
        if self.monitor is not None:
            self.tabs.addTab(self.monitor, t("Видеокарта", "GPU"))
            if self._pending_tab == "gpu":  # in front, as the user left it
                self.tabs.setCurrentWidget(self.monitor)
            if hasattr(self.monitor, "pause_changed"):
                self.monitor.pause_changed.connect(self._heat_pause_changed)
                self.monitor.alerts_changed.connect(self._gpu_alerts_changed)
            self.monitor.start()
        self._pending_tab = None
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
        # An unreadable history gives no estimate corrections, never a broken window.
        ctx.measured = [] if isinstance(measured, Exception) else list(measured)  # type: ignore[arg-type]
        self.form_view.set_context(ctx)

    @property
    def plot(self) -> Any:
        """The loss plot (ui.loss_plot.LossPlot), built on first use."""
        self.ensure_ready()
        return self._plot

    def _monitor_panel(self) -> QWidget | None:
        """The GPU monitor (ui/monitor_panel.py, its own issue), when it is there."""
        try:
            from . import monitor_panel
        except Exception:  # absent or broken: the rest of the window still works
            return None
        cls = getattr(monitor_panel, "MonitorPanel", None)
        if cls is None:
            return None
        try:
            return cls()
        except Exception:
            return None

    def _build_menu(self) -> None:
        bar = self.menuBar()
        # Rebuilt in another language: the old menus and actions go, keys and all (two live
        # actions on one key make Qt fire neither).
        for action in self.shortcut_actions.values():
            action.setShortcuts([])
            action.deleteLater()
        self.shortcut_actions = {}
        for menu in bar.findChildren(QMenu, options=Qt.FindChildOption.FindDirectChildrenOnly):
            menu.deleteLater()
        bar.clear()
        lab = bar.addMenu(t("Лаборатория", "Lab"))
        data = QAction(t("Данные…", "Data…"), self)
        data.setShortcut(QKeySequence("Ctrl+D"))
        data.setToolTip(t("Наборы текста и созвездия: добавить, убрать, переименовать, перепроверить",
                          "Text datasets and constellations: add, remove, rename, re-check"))
        data.triggered.connect(self.open_data_dialog)
        lab.addAction(data)
        add_data = QAction(t("Добавить подготовленные данные…", "Add prepared data…"), self)
        add_data.setToolTip(t("Папка, подготовленная раньше (`ternit data prepare`, другой компьютер): "
                              "в ней tokenizer.json, train.bin, val.bin и meta.json",
                              "A folder prepared before (`ternit data prepare`, another computer): "
                              "it holds tokenizer.json, train.bin, val.bin and meta.json"))
        add_data.triggered.connect(self._pick_prepared)
        lab.addAction(add_data)
        runs_folder = QAction(t("Открыть папку прогонов", "Open the runs folder"), self)
        runs_folder.triggered.connect(lambda: QDesktopServices.openUrl(QUrl.fromLocalFile(str(paths.runs_dir()))))
        lab.addAction(runs_folder)
        refresh = QAction(t("Обновить", "Refresh"), self)
        refresh.setShortcuts(_keys(QKeySequence.StandardKey.Refresh, "F5"))
        refresh.setToolTip(t("Перечитать данные, подготовленные папки, аккаунты Kaggle и историю прогонов "
                             "(если их меняли вне окна: ternit в терминале, другой компьютер)",
                             "Read the data, prepared folders, Kaggle accounts and run history again "
                             "(when they were changed outside the window: ternit in a terminal, another computer)"))
        refresh.triggered.connect(self.refresh_all)
        lab.addAction(refresh)
        lab.addSeparator()
        quit_action = QAction(t("Выход (обучение продолжится)", "Quit (training goes on)"), self)
        quit_action.setShortcuts(_keys(QKeySequence.StandardKey.Quit, "Ctrl+Q"))
        quit_action.triggered.connect(self.close)
        lab.addAction(quit_action)
        lab.setToolTipsVisible(True)  # Qt hides menu items' tooltips unless asked
        # «Старт» as the form's button has it (enabled only when the button is); no key stops
        # a run: one stray press would end hours of training.
        start = QAction(self.form_view.start_button.text(), self)
        start.setShortcuts([QKeySequence("Ctrl+Enter"), QKeySequence("Ctrl+Return")])
        start.triggered.connect(self._start_by_key)
        bar.addMenu(t("Прогон", "Run")).addAction(start)
        self.form_view.changed.connect(self._sync_start_action)
        self.shortcut_actions = {"data": data, "refresh": refresh, "quit": quit_action, "start": start}
        kaggle = self._kaggle_action()
        if kaggle is not None:
            kaggle.setShortcut(QKeySequence("Ctrl+K"))
            bar.addMenu(t("Kaggle", "Kaggle")).addAction(kaggle)
            self.shortcut_actions["kaggle"] = kaggle
        options = bar.addMenu(t("Настройки", "Settings"))
        lang_menu = options.addMenu(t("Язык интерфейса", "Interface language"))
        group = QActionGroup(self)
        self.language_actions: dict[str, QAction] = {}
        for code, name in (("ru", "Русский"), ("en", "English")):
            action = QAction(name, self, checkable=True)
            action.setChecked(current_language() == code)
            action.triggered.connect(lambda _=False, c=code: self.set_language(c))
            group.addAction(action)
            lang_menu.addAction(action)
            self.language_actions[code] = action
        self.form_view.start_shortcut = key_text(start)
        self.form_view.refresh()  # its tooltip names the key; the action follows (changed)

    def _sync_start_action(self) -> None:
        """The «Старт» action follows the form's button: its text («Продолжить» for a
        continued run) and whether it can start now."""
        action = self.shortcut_actions.get("start")
        if action is not None:
            action.setText(self.form_view.start_button.text())
            action.setEnabled(self.form_view.start_button.isEnabled())

    def _start_by_key(self) -> None:
        if self.form_view.start_button.isEnabled():  # the form's own checks, as for a click
            self.form_view.start_button.click()

    def refresh_all(self) -> None:
        """«Обновить»: the form's choices and the history read again."""
        self.reload_context()
        self.refresh_history()
        self.statusBar().showMessage(t("Обновлено", "Refreshed"), 3000)

    def open_data_dialog(self) -> QWidget:
        """«Данные…» (ui/data_dialog.py): the form's constellations are read again after each
        change there, so a constellation just added can be ticked at once."""
        from .data_dialog import DataDialog

        dialog = DataDialog(self)
        dialog.changed.connect(self.reload_context)
        dialog.renamed.connect(self.form_view.rename_constellation)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.open()
        return dialog

    def _kaggle_action(self) -> QAction | None:
        try:
            from . import kaggle_accounts
        except Exception:
            return None
        dialog_cls = getattr(kaggle_accounts, "AccountsDialog", None)
        if dialog_cls is None:
            return None
        action = QAction(t("Аккаунты…", "Accounts…"), self)

        def open_dialog() -> None:
            dialog_cls(self).exec()
            self.reload_context()

        action.triggered.connect(open_dialog)
        return action

    # -- language ----------------------------------------------------------------------

    def set_language(self, lang: str) -> None:
        """Switch the interface language now (and remember it); the form keeps its values."""
        settings.save_language(lang)
        form = self.form_view.form
        followed, overlays = self.followed, set(self.overlays)
        view = self._plot.view_settings() if self._plot is not None else None
        layout = self.layout_now()  # splitters, tab, history columns: as the user left them
        old = self.centralWidget()
        if self.monitor is not None:
            self.monitor.stop()
        self.lab.forget_failures()  # their advice is in the old language
        self._build(form.ctx)
        self._restore_layout(layout, geometry=False)
        old.deleteLater()
        self.form_view.form = form
        self.form_view.set_context(form.ctx)
        self._build_menu()
        self.refresh_history()
        self.followed = None
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
        self.refresh_history()

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

    def _pick_prepared(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, t("Папка подготовленных данных", "Prepared data folder"),
                                                  str(paths.prepared_dir()))
        if folder:
            self.add_prepared(folder)

    def prepare_data(self, constellations: list[str]) -> CliTask:
        """«Подготовить данные»: `ternit data prepare` in a child process (tokenizing is heavy
        and must not freeze the window), its progress under the button with «Отмена»."""
        return self._prepare_in_background(Lab.prepare_args(self.form_view.form, constellations), constellations)

    def _prepare_in_background(self, args: list[str], constellations: list[str]) -> CliTask:
        if self.prepare_task is not None:  # one at a time: the button is off meanwhile
            return self.prepare_task
        task = CliTask(args, self)
        self.prepare_task, self._prepare_names = task, list(constellations)
        self._prepare_result = None  # the last prepare's note goes: this one will say its own
        self._show_prepare_note()
        message = data_manage.prepare_started_text(constellations)
        self.prepare_bar.follow(task, message, t(*data_manage.PREPARE_CANCEL_TIP))
        task.ended.connect(self._prepare_ended)
        self.statusBar().showMessage(message)
        self.form_view.prepare_button.setEnabled(False)
        task.start()
        return task

    def _prepare_ended(self, code: int) -> None:
        task, self.prepare_task = self.prepare_task, None
        if task is None:
            return
        task.deleteLater()
        self._prepare_result = (code, task.output, self._prepare_names)
        outcome = data_manage.prepare_outcome(*self._prepare_result)
        self.statusBar().showMessage(outcome.status)
        self._show_prepare_note()
        self.reload_context()  # the form finds the new folder and picks it
        self.form_view.prepare_button.setEnabled(True)
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
        if started.kaggle:
            self.lab.launch_in_background(started.run.id, self._emit_launch_done)
        self.statusBar().showMessage(started.message)
        self.refresh_history()
        self.follow(started.run.id)
        if from_form:  # the history's one click leaves the user's form as it is
            self.form_view.form.from_scratch()
            self.form_view.refresh()
        return started.run

    def _emit_launch_done(self, run_id: str, error: str) -> None:
        """From the launch thread: into the window's thread through the signal."""
        try:
            self.launch_done.emit(run_id, error)
        except RuntimeError:  # the window was closed meanwhile
            pass

    def _launch_done(self, run_id: str, error: str) -> None:
        self.statusBar().showMessage(self.lab.launch_ended(run_id, error))
        self.refresh_history()
        self._update_banner()

    def stop_run(self, run_id: str) -> None:
        self.statusBar().showMessage(self.lab.stop(run_id))
        self._update_banner()
        self.refresh_history()

    def retry_run(self, run_id: str) -> RunRecord | None:
        """One click after a failure: the same run with the advice applied."""
        try:
            started = self.lab.retry(run_id)
        except ActionError as e:
            self.statusBar().showMessage(str(e))
            return None
        if started.kaggle:
            self.lab.launch_in_background(started.run.id, self._emit_launch_done)
            self.statusBar().showMessage(started.message)
        self.refresh_history()
        self.follow(started.run.id)
        return started.run

    def continue_info(self, run_id: str) -> ContinueFrom | None:
        """What «Продолжить» fills the form with (None, and a message, if it cannot)."""
        try:
            return self.lab.continue_info(run_id)
        except ActionError as e:
            self.statusBar().showMessage(str(e))
            return None

    def continue_run(self, run_id: str) -> bool:
        """«Продолжить» in the history: one click continues from the checkpoint with the
        run's own settings (app.form.continue_now); the form is left as the user has it.
        When it cannot start as it is (data to prepare, …), the form is filled instead,
        saying why."""
        info = self.continue_info(run_id)
        if info is None:
            return False
        config, blockers = continue_now(self.form_view.form.ctx, info)
        if config is None:
            self.edit_continue(run_id)
            self.statusBar().showMessage(t("Продолжить сразу нельзя: ", "Cannot continue at once: ") + "; ".join(blockers))
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
        """Show a run (with the runs it continues, as one curve) on the plot, live."""
        chain = self.lab.follow(run_id)
        if chain is None:
            return
        rec = chain[-1]
        self.plot.remove(LIVE)
        self.plot.follow(LIVE, [(r.id, r.events_path) for r in chain], label=rec.name)
        self.plot.set_title(t(f"Потери: {rec.name}", f"Loss: {rec.name}"))
        self.history.select(run_id)
        self._update_banner()
        self._update_monitor()

    def _update_monitor(self) -> None:
        """Point the GPU monitor (its trainer figures, its heat guard) at the run the lab
        says trains here."""
        if self.monitor is None:
            return
        rec = self.lab.monitor_target()
        self.monitor.set_run(rec.path if rec is not None else None, local=True)
        self.monitor.set_trainer_pid(rec.pid if rec is not None else None)

    def _heat_pause_changed(self, paused: bool) -> None:
        """The heat guard paused or resumed the run: said in the tray too, since the «GPU»
        tab may not be in front."""
        from app.gpu import heat_guard

        guard = getattr(self.monitor, "guard", None)
        if paused and guard is not None:
            self.notify(*heat_guard.pause_notice(guard, getattr(self.monitor, "guard_status", None)))
        elif not paused:
            self.statusBar().showMessage(heat_guard.resumed_text())
        self._update_banner()

    def _gpu_alerts_changed(self, alerts: list) -> None:
        """The monitor's warnings (memory full as a run starts, a card at its slowdown
        threshold, a lost card) reach the user on any tab: marked on the «GPU» tab and said
        in the status bar; they showed only on that tab, often behind «History»."""
        index = self.tabs.indexOf(self.monitor)
        if index < 0:
            return
        self.tabs.setTabText(index, t("Видеокарта", "GPU") + (" ⚠" if alerts else ""))
        self.tabs.setTabToolTip(index, "\n".join(a.text for a in alerts))
        if alerts:
            self.statusBar().showMessage("⚠ " + alerts[0].text)

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
        """The timer: poll runs (statuses, notifications), the plot, the banner, the history."""
        tick = self.lab.poll()
        if tick.error:
            self.statusBar().showMessage(tick.error)
            return
        if self._plot is not None:
            self._plot.poll()
        if self.monitor is not None:
            if tick.monitor_changed:
                self._update_monitor()
            if tick.monitor_step is not None:
                self.monitor.on_step_event(tick.monitor_step)
        if tick.follow is not None:  # the Kaggle chain went on as its next leg
            self.follow(tick.follow)
        if tick.updates or self.followed:
            self._update_banner()
        if tick.history_due:
            self.refresh_history()

    def _update_banner(self) -> None:
        rec, failure = self.lab.followed_state()
        # Speed and time left (app.runs.live, the same line `ternit run … --wait` prints).
        self.banner.show_run(rec, failure, live=self._live.text_for(rec) if rec is not None else "")

    def refresh_history(self) -> None:
        rows = self.lab.history()
        self.history.set_rows(rows)
        self.form_view.set_checkpoints(Lab.checkpoint_choices(rows))
        self._show_active_runs()

    def _show_active_runs(self) -> None:
        """Tell the form which runs are going; it refreshes only when that set changed."""
        active = self.lab.active_runs()
        ctx = self.form_view.form.ctx
        if [r.id for r in active] != [r.id for r in ctx.active_runs]:
            ctx.active_runs = active
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
        """The latest checkpoint's weights as .safetensors, by `ternit export` in a child
        process (it loads torch; the window does not)."""
        try:
            ckpt = self.lab.export_checkpoint(run_id)  # none: said before asking where to
            if out is None:
                name = self.runs.registry.get(run_id).name
                out, _ = QFileDialog.getSaveFileName(self, t("Экспорт весов", "Export weights"),
                                                     str(Path.home() / f"{name}.safetensors"), "safetensors (*.safetensors)")
                if not out:
                    return None
        except ActionError as e:
            self.statusBar().showMessage(str(e))
            return None
        proc = QProcess(self)
        proc.setProgram(sys.executable)
        proc.setArguments(Lab.export_args(ckpt, out))
        proc.setProcessChannelMode(QProcess.ProcessChannelMode.MergedChannels)

        def done(code: int, _status: Any) -> None:
            text = bytes(proc.readAll()).decode("utf-8", "replace").strip()
            if code == 0:
                self.statusBar().showMessage(t(f"Веса сохранены: {out}", f"Weights saved: {out}"))
            else:
                self.statusBar().showMessage(t(f"Экспорт не удался: {text[-300:]}", f"Export failed: {text[-300:]}"))

        proc.finished.connect(done)
        self.statusBar().showMessage(t(f"Экспорт весов в {out}…", f"Exporting weights to {out}…"))
        proc.start()
        self.export_processes.append(proc)
        return proc

    def export_metrics(self, run_id: str, out: str | None = None) -> bool:
        """«Метрики в CSV…»: the run's table (app.runs.metrics) into a file the user picks."""
        from app.runs.metrics import save_metrics

        if out is None:
            name = self.runs.registry.get(run_id).name
            out, _ = QFileDialog.getSaveFileName(self, t("Метрики в CSV", "Metrics as CSV"),
                                                 str(Path.home() / f"{name}-metrics.csv"), "CSV (*.csv)")
            if not out:
                return False
        ok, line = save_metrics(self.runs.registry, run_id, out)
        self.statusBar().showMessage(line)
        return ok

    # -- notifications -----------------------------------------------------------------

    def _run_ended(self, ended: RunEnded) -> None:
        """A run ended, failed or hit its limit: a tray message (or the status bar where the
        desktop has no tray)."""
        self.notify(ended.title(), ended.text())
        self._update_banner()
        self.load_measured()  # the run's speed and memory now correct the estimates

    def notify(self, title: str, text: str) -> None:
        self.notifications.append((title, text))
        if self.tray is None and QSystemTrayIcon.isSystemTrayAvailable():
            self.tray = QSystemTrayIcon(self.style().standardIcon(QStyle.StandardPixmap.SP_ComputerIcon), self)
            self.tray.setToolTip("Ternit Lab")
            self.tray.show()
        if self.tray is not None and QSystemTrayIcon.supportsMessages():
            self.tray.showMessage(title, text, QSystemTrayIcon.MessageIcon.Information, 10_000)
        self.statusBar().showMessage(f"{title}: {text}")

    def training_here(self) -> list[RunRecord]:
        return self.lab.training_here()

    def _ask_about_running(self, running: list[RunRecord]) -> QMessageBox:
        """Closing while a run trains: say that it goes on without the window, and offer to
        stop it or to stay. Window-modal but not blocking (open(), not exec()): the answer
        comes back through the buttons."""
        names = ", ".join(f"«{r.name}»" for r in running)
        if self.close_question is not None:  # asked before and answered «Отмена»
            self.close_question.deleteLater()
        box = QMessageBox(self)
        box.setIcon(QMessageBox.Icon.Question)
        box.setWindowTitle("Ternit Lab")
        box.setText(t(f"Обучение {names} идёт.", f"{names} is training."))
        box.setInformativeText(t(
            "Без окна оно продолжится в своём процессе до конца или до лимита; откройте Ternit Lab "
            "снова — окно подхватит прогон. «Остановить и закрыть» сохранит чекпоинт: потом можно продолжить.",
            "Without the window it goes on in its own process until it ends or hits its limit; open "
            "Ternit Lab again and the window picks the run up. «Stop and close» saves a checkpoint: it can "
            "be continued later."))
        keep = box.addButton(t("Закрыть окно, обучение продолжится", "Close the window, keep training"),
                             QMessageBox.ButtonRole.AcceptRole)
        stop = box.addButton(t("Остановить и закрыть", "Stop and close"), QMessageBox.ButtonRole.DestructiveRole)
        cancel = box.addButton(t("Отмена", "Cancel"), QMessageBox.ButtonRole.RejectRole)
        box.setDefaultButton(keep)
        box.setEscapeButton(cancel)
        # Parented to the box: setCheckBox alone leaves the checkbox to Python's collector.
        box.setCheckBox(QCheckBox(t("Больше не спрашивать", "Do not ask again"), box))
        box.buttons_by_answer = {"keep": keep, "stop": stop, "cancel": cancel}  # type: ignore[attr-defined]

        def answered(button: QAbstractButton) -> None:
            if button is cancel:
                return
            if box.checkBox().isChecked():
                settings.save_ask_on_close(False)
            if button is stop:
                for rec in running:
                    self.runs.stop(rec.id)
            self._close_confirmed = True
            self.close()

        box.buttonClicked.connect(answered)
        self.close_question = box
        box.open()
        return box

    def closeEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        # Closing the window does not stop training: the runs go on and are re-attached later.
        # While one trains, the user is told so first (unless they asked not to be).
        if not self._close_confirmed and self.isVisible() and settings.ask_on_close():
            running = self.training_here()
            if running:
                event.ignore()
                self._ask_about_running(running)
                return
        self.save_layout()
        self.timer.stop()
        if self.prepare_task is not None:
            # Stopped like Ctrl-C, so it removes its unfinished folder; left to Qt, the child
            # would be killed outright as the window goes and leave that folder behind.
            self.prepare_task.stop_and_wait()
        if self.monitor is not None and hasattr(self.monitor, "stop"):
            self.monitor.stop()
        self.lab.shutdown()  # Kaggle runs are followed again at the next start
        if self.tray is not None:
            self.tray.hide()
        super().closeEvent(event)


def app_instance(argv: list[str] | None = None) -> QApplication:
    app = QApplication.instance()
    if app is None:
        app = QApplication(argv or sys.argv[:1])
        app.setApplicationName("Ternit Lab")
    return app  # type: ignore[return-value]
