"""«Подготовить данные» under the form: `ternit data prepare` in a child process (tokenizing
is heavy and must not freeze the window), its progress with «Отмена», then how it ended
(its warnings or its failure), kept under the form until the next prepare and redrawn in a
new language. The outcome's words are app.data.manage's."""

from __future__ import annotations

from typing import Protocol

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtWidgets import (
    QAbstractButton,
    QHBoxLayout,
    QLabel,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.base.i18n import t
from app.data import manage as data_manage
from ui.base import palette
from ui.base.cli_task import CliTask, TaskBar

NOTE_COLOURS = {"error": "error", "warning": "warning"}  # an outcome's level -> app.window.colors' name


class FormFooter(Protocol):
    """What the row needs of the form it sits under (the form's view is one): the footer
    whose layout takes the progress bar and the note, and «Подготовить данные», off while a
    prepare runs."""

    @property
    def footer(self) -> QWidget: ...

    @property
    def prepare_button(self) -> QAbstractButton: ...


class PrepareRow(QObject):
    """Outlives the widgets it builds (`build` again after a change of language): the
    running `task`, the constellations it prepares and the last one's result stay."""

    message = Signal(str)  # for the status bar
    ended = Signal(int)  # a prepare finished: its exit code (0: done)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.task: CliTask | None = None  # running now
        self.names: list[str] = []
        # How the last prepare ended (exit code, its output, the constellations).
        self.result: tuple[int, data_manage.CliOutput, list[str]] | None = None
        self.view: FormFooter | None = None

    def build(self, view: FormFooter) -> None:
        """The progress bar and the note, under «Подготовить данные» and «Старт» in the
        form's footer."""
        self.view = view
        foot = view.footer.layout()
        assert isinstance(foot, QVBoxLayout)
        self.bar = TaskBar()
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.note.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self._level = ""
        self.note_close = QToolButton()
        self.note_close.setText("✕")
        self.note_close.setAutoRaise(True)
        self.note_close.setToolTip(t("Скрыть это сообщение", "Hide this message"))
        self.note_close.clicked.connect(self.hide_note)
        self.note_box = QWidget()
        # A new system palette: the note in its colours. Told through its box: the note's
        # own colour style sheet keeps Qt's PaletteChange from the note itself.
        self.note_box.installEventFilter(self)
        row = QHBoxLayout(self.note_box)
        row.setContentsMargins(0, 2, 0, 2)
        row.addWidget(self.note, 1)
        row.addWidget(self.note_close, 0, Qt.AlignmentFlag.AlignTop)
        foot.insertWidget(1, self.bar)
        foot.insertWidget(2, self.note_box)
        if self.task is not None and self.task.running:  # rebuilt in another language mid-prepare
            self.bar.follow(self.task, data_manage.prepare_started_text(self.names),
                            t(*data_manage.PREPARE_CANCEL_TIP))
            view.prepare_button.setEnabled(False)
        self.show_note()

    def show_note(self) -> None:
        if self.result is None:
            self.note_box.setVisible(False)
            return
        outcome = data_manage.prepare_outcome(*self.result)
        self.note.setText(outcome.note)
        self.note.setToolTip(outcome.tooltip)
        self._level = outcome.level
        self._paint_note()
        self.note_box.setVisible(bool(outcome.note))

    def _paint_note(self) -> None:
        palette.set_style(self.note, palette.style(NOTE_COLOURS.get(self._level, "muted")))

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt's name)
        if watched is self.note_box and palette.changed(event):
            self._paint_note()
        return False

    def hide_note(self) -> None:
        self.result = None
        self.show_note()

    def start(self, args: list[str], constellations: list[str], parent: QObject) -> CliTask:
        """One at a time: the button is off meanwhile (a second call returns the running one)."""
        if self.task is not None:
            return self.task
        task = CliTask(args, parent)
        self.task, self.names = task, list(constellations)
        self.result = None  # the last prepare's note goes: this one will say its own
        self.show_note()
        text = data_manage.prepare_started_text(constellations)
        self.bar.follow(task, text, t(*data_manage.PREPARE_CANCEL_TIP))
        task.ended.connect(self._ended)
        self.message.emit(text)
        if self.view is not None:
            self.view.prepare_button.setEnabled(False)
        task.start()
        return task

    def _ended(self, code: int) -> None:
        task, self.task = self.task, None
        if task is None:
            return
        task.deleteLater()
        if task.killed and task.pid is not None:  # «Отмена» had to kill it: its half-written folder goes now
            from app.data.prepare import remove_temps_of  # (not loaded for the first frame)

            remove_temps_of(task.pid)
        self.result = (code, task.output, self.names)
        self.message.emit(data_manage.prepare_outcome(*self.result).status)
        self.show_note()
        self.ended.emit(code)  # the window reads the form's choices again: it finds the folder

    def enable(self) -> None:
        if self.view is not None:
            self.view.prepare_button.setEnabled(True)

    def stop_and_wait(self) -> None:
        """Stopped like Ctrl-C, so it removes its unfinished folder; left to Qt, the child
        would be killed outright as the window goes and leave that folder behind."""
        if self.task is not None:
            self.task.stop_and_wait()
