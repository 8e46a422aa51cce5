"""«Текст»: what the selected run's model writes. Its samples during training step by step
(app.text.training_samples), and a playground that continues a prompt from the run's latest checkpoint
or evaluates it on a text file (app.text.playground; the model runs in a child process, the
window never imports torch). The tab follows the run selected in «История» (else the run
on the plot) and reads new samples from a timer while it is shown."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QEvent, QLocale, QObject, Qt, QTimer
from PySide6.QtWidgets import (
    QApplication,
    QComboBox,
    QDoubleSpinBox,
    QFileDialog,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QSplitter,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from app.base.i18n import current_language, t
from app.runs import RunManager
from app.text import playground as play
from app.text import training_samples as view
from app.text.generation import GenerationError
from ui.base import palette, wheel_guard
from ui.text.child import ChildRun

POLL_MS = 1000


class TextTab(QWidget):
    """`history`: the HistoryView whose selection the tab follows; `followed`: the run on
    the plot, for when nothing is selected."""

    def __init__(self, runs: RunManager, history: QWidget, followed: Callable[[], str | None],
                 poll_ms: int = POLL_MS) -> None:
        super().__init__()
        self.runs, self.history, self.followed = runs, history, followed
        self.feed = view.SampleFeed([])
        self.child: ChildRun | None = None
        self._watched: QObject | None = None
        self._prompt_shown = ""
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(self._build_samples())
        # In a scroll area: squeezed by the plot above, it scrolls instead of making the
        # window taller than the screen.
        scroll = QScrollArea()
        scroll.setWidget(self._build_playground())
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        split.addWidget(scroll)
        split.setStretchFactor(0, 1)
        split.setStretchFactor(1, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(split)
        wheel_guard.guard(self)  # the wheel scrolls the playground, not its numbers
        self.timer = QTimer(self)
        self.timer.setInterval(poll_ms)
        self.timer.timeout.connect(self.poll)
        self.timer.start()
        table = getattr(history, "table", None)
        if table is not None:
            table.itemSelectionChanged.connect(self.show_selected)
        app = QApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(self.stop)
        self.show_selected()
        self._render(force=True)

    # -- building ------------------------------------------------------------------------

    def _build_samples(self) -> QWidget:
        box = QWidget()
        col = QVBoxLayout(box)
        col.setContentsMargins(0, 0, 0, 0)
        self.samples_note = QLabel()
        self.samples_note.setWordWrap(True)
        self.samples_note.setStyleSheet(palette.style("muted"))
        self.samples_view = QTextBrowser()
        self.samples_view.setOpenLinks(False)
        col.addWidget(self.samples_note)
        col.addWidget(self.samples_view, 1)
        return box

    def _build_playground(self) -> QWidget:
        box = QWidget()
        col = QVBoxLayout(box)
        col.setContentsMargins(0, 0, 0, 0)
        self.prompt = QPlainTextEdit()
        self.prompt.setPlaceholderText(t("Затравка: начало текста, который модель продолжит (пусто — с начала документа)",
                                         "Prompt: the start of a text for the model to continue (empty: a document's start)"))
        self.prompt.setMaximumHeight(64)
        col.addWidget(self.prompt)
        col.addLayout(self._build_controls())
        self.status = QLabel()
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self._status_error = False
        col.addWidget(self.status)
        self.output = QTextBrowser()
        col.addWidget(self.output, 1)
        self.eval_result = QLabel()
        self.eval_result.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.eval_result.setStyleSheet("font-family: monospace;")
        col.addWidget(self.eval_result)
        return box

    def _build_controls(self) -> QGridLayout:
        self.tokens = QSpinBox()
        self.tokens.setRange(play.TOKENS[0], play.TOKENS[1])
        self.tokens.setValue(play.TOKENS[2])
        self.tokens.setToolTip(play.tokens_tip())
        self.temperature = QDoubleSpinBox()
        self.temperature.setRange(play.TEMPERATURE[0], play.TEMPERATURE[1])
        self.temperature.setSingleStep(0.1)
        self.temperature.setDecimals(2)
        self.temperature.setValue(play.TEMPERATURE[2])
        # 0,80 in Russian, 0.80 in English, whatever the system's locale
        self.temperature.setLocale(QLocale(QLocale.Language.Russian if current_language() == "ru"
                                           else QLocale.Language.English))
        self.temperature.setToolTip(play.temperature_tip())
        self.top_k = QSpinBox()
        self.top_k.setRange(play.TOP_K[0], play.TOP_K[1])
        self.top_k.setValue(play.TOP_K[2])
        self.top_k.setToolTip(play.top_k_tip())
        self.device = QComboBox()
        for d in play.DEVICES:
            self.device.addItem(play.device_label(d), d)
        self.device.setToolTip(t("Где считать: «авто» — видеокарта, если torch её видит, иначе процессор",
                                 "Where to compute: «auto» takes the GPU when torch sees one, else the CPU"))
        # Two short rows of settings and one of buttons: the tab must not widen the window.
        grid = QGridLayout()
        pairs = ((t("Длина", "Length"), self.tokens), (t("Температура", "Temperature"), self.temperature),
                 ("Top-k", self.top_k), (t("Устройство", "Device"), self.device))
        for i, (label, widget) in enumerate(pairs):
            tag = QLabel(label)
            tag.setToolTip(widget.toolTip())
            grid.addWidget(tag, i // 2, (i % 2) * 2)
            grid.addWidget(widget, i // 2, (i % 2) * 2 + 1)
        self.write_button = QPushButton(t("Написать", "Write"))
        self.write_button.setToolTip(t("Продолжить затравку последним чекпоинтом прогона",
                                       "Continue the prompt with the run's latest checkpoint"))
        self.write_button.clicked.connect(self.write)
        self.stop_button = QPushButton(t("Стоп", "Stop"))
        self.stop_button.setToolTip(t("Прервать сейчас (процесс генерации завершится)",
                                      "Stop now (the generation process ends)"))
        self.stop_button.clicked.connect(self.stop)
        self.eval_button = QPushButton(t("Оценить на файле…", "Evaluate on a file…"))
        self.eval_button.setToolTip(t("Потери, перплексия и бит на байт чекпоинта на вашем текстовом файле",
                                      "The checkpoint's loss, perplexity and bits per byte on your text file"))
        self.eval_button.clicked.connect(self._pick_eval_file)
        buttons = QHBoxLayout()
        for b in (self.write_button, self.stop_button, self.eval_button):
            buttons.addWidget(b)
        buttons.addStretch(1)
        grid.addLayout(buttons, 2, 0, 1, 4)
        self._sync_buttons()
        return grid

    def carry_over(self, old: TextTab) -> None:
        """Take what the user had in `old` (the window rebuilt in another language): the
        prompt, the settings, the continuation written and the evaluation's result, and a
        generation still going, which goes on writing here."""
        self.prompt.setPlainText(old.prompt.toPlainText())
        self.tokens.setValue(old.tokens.value())
        self.temperature.setValue(old.temperature.value())
        self.top_k.setValue(old.top_k.value())
        self.device.setCurrentIndex(max(0, self.device.findData(old.device.currentData())))
        self.eval_result.setText(old.eval_result.text())
        child, old.child = old.child, None
        if child is None:
            return
        child.changed.disconnect(old._show_child)
        child.ended.disconnect(old._sync_buttons)
        child.setParent(self)  # the old tab's deletion would end the process with it
        self._adopt(child, old._prompt_shown)

    # -- the run's samples ------------------------------------------------------------------

    def current_run(self) -> str | None:
        row = getattr(self.history, "selected", lambda: None)()
        return getattr(row, "id", None) or self.followed()

    def show_selected(self) -> None:
        """Follow the run selected now (its chain); nothing is re-read when it is the same."""
        run_id = self.current_run()
        if run_id == self.feed.run_id:
            return
        self.feed = view.SampleFeed(view.chain_of(self.runs.registry, run_id) if run_id else [])
        self._render(force=True)

    def poll(self) -> None:
        if self.isVisible():
            self.show_selected()  # the plot's run may change with nothing selected
            self._render()

    def _render(self, force: bool = False) -> None:
        if not (self.feed.poll() or force):
            return
        samples = self.feed.samples
        if not samples:
            self.samples_note.setText(view.empty_text(self._selected_config()))
            self.samples_view.clear()
            return
        names = {}
        for run_id, _ in self.feed.chain:
            try:
                names[run_id] = self.runs.registry.get(run_id).name
            except KeyError:
                pass
        self.samples_note.setText(view.summary_text(samples))
        bar = self.samples_view.verticalScrollBar()
        at = bar.value()
        self.samples_view.setHtml(view.samples_html(samples, names, palette.table()))
        bar.setValue(at)  # reading an older step: new ones on top do not move the view back

    def _selected_config(self) -> dict | None:
        """The followed run's run.json ({} when it cannot be read); None: no run."""
        if self.feed.run_id is None:
            return None
        try:
            return self.runs.registry.get(self.feed.run_id).config()
        except (KeyError, OSError, ValueError):  # gone or unreadable: the general words
            return {}

    def showEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        super().showEvent(event)
        self._render()
        top = self.window()
        if top is not self and top is not self._watched:  # the window closing stops the child
            top.installEventFilter(self)
            self._watched = top

    def _paint(self) -> None:
        """The notes in the system palette's colours; the status in its own text colour
        unless it says what went wrong."""
        palette.set_style(self.samples_note, palette.style("muted"))
        palette.set_style(self.status, palette.style("error") if self._status_error else "")

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt's name)
        super().changeEvent(event)
        if palette.changed(event) and hasattr(self, "timer"):  # built: a new palette's colours
            self._paint()
            self._render(force=True)
            self._show_child()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt's name)
        if watched is self._watched and event.type() == QEvent.Type.Close:
            self.stop()
        return False

    # -- the playground ---------------------------------------------------------------------

    def _chain_target(self) -> play.Target:
        run_id = self.current_run()
        chain = self.runs.registry.lineage(run_id) if run_id else []
        return play.chain_target(chain)

    def write(self) -> None:
        """«Написать»: the continuation streams into the output as the child writes it."""
        req = play.Request(self.prompt.toPlainText(), self.tokens.value(), round(self.temperature.value(), 2),
                           self.top_k.value(), str(self.device.currentData()))
        try:
            target = self._chain_target()
            argv, stdin, seed = play.sample_command(target, req)
        except (GenerationError, KeyError) as e:
            self._refuse(e)
            return
        self._start(argv, stdin, play.Session("sample", seed, target.notes))

    def evaluate(self, file: str | Path) -> None:
        """The checkpoint's loss, perplexity and bits per byte on `file`."""
        try:
            target = self._chain_target()
            argv = play.eval_command(target, Path(file), str(self.device.currentData()))
        except (GenerationError, KeyError) as e:
            self._refuse(e)
            return
        self.eval_result.clear()
        self._start(argv, "", play.Session("eval", notes=target.notes))

    def _pick_eval_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, t("Текстовый файл для оценки", "A text file to evaluate on"),
                                              "", t("Текст (*.txt *.md);;Все файлы (*)", "Text (*.txt *.md);;All files (*)"))
        if path:
            self.evaluate(path)

    def _refuse(self, e: Exception) -> None:
        self.status.setText(e.message if isinstance(e, GenerationError) else
                            t("Этого прогона больше нет в истории.", "This run is no longer in the history."))
        self._status_error = True
        self._paint()

    def _start(self, argv: list[str], stdin: str, session: play.Session) -> None:
        self.stop()
        if session.kind == "sample":
            self.output.clear()
        self._adopt(ChildRun(argv, stdin, session, self), stdin)

    def _adopt(self, child: ChildRun, prompt: str) -> None:
        """Show `child` (started for `prompt`) here, as it writes."""
        self._prompt_shown = prompt
        self.child = child
        child.changed.connect(self._show_child)
        child.ended.connect(self._sync_buttons)
        self._show_child()
        self._sync_buttons()

    def _show_child(self) -> None:
        if self.child is None:
            return
        s = self.child.session
        self.status.setText(s.status)
        self._status_error = bool(s.error)
        self._paint()
        if s.kind == "sample":
            self.output.setHtml(view.continuation_html(self._prompt_shown, s.text, palette.table()))
            self.output.verticalScrollBar().setValue(self.output.verticalScrollBar().maximum())
        elif s.result:
            self.eval_result.setText(s.result)

    def stop(self) -> None:
        """«Стоп»: the child ends now (killed and reaped); what it wrote stays shown."""
        if self.child is not None:
            self.child.stop()
        self._sync_buttons()

    @property
    def busy(self) -> bool:
        return self.child is not None and self.child.running

    def _sync_buttons(self) -> None:
        busy = self.busy
        self.write_button.setEnabled(not busy)
        self.eval_button.setEnabled(not busy)
        self.stop_button.setEnabled(busy)
