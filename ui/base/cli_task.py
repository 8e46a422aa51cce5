"""A `ternit ...` command the window runs as a child process, and the bar that follows it.

Long data work (adding a folder, re-checking, preparing) runs as `python -m app.cli data ...`
in a QProcess, so the window never freezes and never imports what the command needs. The
child writes JSON progress lines (app.data.manage.cli_env: TERNIT_PROGRESS=json and the
window's language); CliTask reads them into an app.data.manage.CliOutput, and TaskBar draws
its progress with «Отмена». Used by the «Данные» dialog and by the form's «Подготовить данные».
"""

from __future__ import annotations

import codecs
import sys

from PySide6.QtCore import QObject, QProcess, QProcessEnvironment, QTimer, Signal
from PySide6.QtWidgets import QHBoxLayout, QProgressBar, QPushButton, QWidget

from app.base.i18n import t
from app.data import manage

KILL_AFTER_MS = 5000  # a cancelled child that has not stopped by then is killed
CANCELLED = 130  # the exit code of a command stopped like Ctrl-C


class CliTask(QObject):
    """One child command. `progressed` when its progress moved, `ended(code)` once when it is
    over: its exit code, CANCELLED after «Отмена» (even if it had to be killed), -1 when it
    could not start or crashed."""

    progressed = Signal()
    ended = Signal(int)

    def __init__(self, args: list[str], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.args = list(args)
        self.output = manage.CliOutput()
        self.cancelled = False
        self.code: int | None = None  # set when ended
        self.pid: int | None = None  # the child's, from its start (gone from QProcess after its end)
        self.killed = False  # «Отмена» had to kill it (it could not clean up after itself)
        # Incremental: a read may end inside a Cyrillic letter's two bytes.
        self._err_decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._out_decoder = codecs.getincrementaldecoder("utf-8")("replace")
        proc = QProcess(self)
        proc.setProgram(sys.executable)
        proc.setArguments(self.args)
        env = QProcessEnvironment.systemEnvironment()
        for key, value in manage.cli_env().items():
            env.insert(key, value)
        proc.setProcessEnvironment(env)
        proc.readyReadStandardError.connect(self._read_stderr)
        proc.readyReadStandardOutput.connect(self._read_stdout)
        proc.started.connect(self._started)
        proc.finished.connect(self._finished)
        proc.errorOccurred.connect(self._error)
        self.proc = proc

    @property
    def running(self) -> bool:
        return self.code is None

    def start(self) -> None:
        self.proc.start()

    def cancel(self) -> None:
        """Stop the child like Ctrl-C (SIGTERM: the data commands clean up what they started);
        killed if it has not stopped after KILL_AFTER_MS."""
        if self.code is not None or self.cancelled:
            return
        self.cancelled = True
        self.proc.terminate()
        QTimer.singleShot(KILL_AFTER_MS, self._kill_if_running)

    def stop_and_wait(self, ms: int | None = None) -> None:
        """Cancel and wait up to `ms` (default KILL_AFTER_MS, read now) before killing it
        (closing a window: the child must not outlive it half-done)."""
        if self.code is not None:
            return
        ms = KILL_AFTER_MS if ms is None else ms
        self.cancel()
        if not self.proc.waitForFinished(ms):
            self.proc.kill()
            self.proc.waitForFinished(1000)
        if self.code is None:  # finished was not delivered inside waitForFinished
            self._finished(self.proc.exitCode(), self.proc.exitStatus())

    def _started(self) -> None:
        self.pid = int(self.proc.processId()) or None

    def _kill_if_running(self) -> None:
        if self.code is None and self.proc.state() != QProcess.ProcessState.NotRunning:
            self.proc.kill()

    def _read_stderr(self) -> None:
        text = self._err_decoder.decode(bytes(self.proc.readAllStandardError()))
        # Line by line: a loaded machine delivers a burst of progress lines in one read, and
        # each phase it names is shown (and announced) in turn, not only the burst's last.
        for piece in text.splitlines(keepends=True):
            if self.output.feed_stderr(piece):
                self.progressed.emit()

    def _read_stdout(self) -> None:
        self.output.feed_stdout(self._out_decoder.decode(bytes(self.proc.readAllStandardOutput())))

    def _error(self, error: QProcess.ProcessError) -> None:
        if error == QProcess.ProcessError.FailedToStart and self.code is None:
            self.output.messages.append(t(f"не удалось запустить {sys.executable}: {self.proc.errorString()}",
                                          f"could not start {sys.executable}: {self.proc.errorString()}"))
            self._end(-1)

    def _finished(self, code: int, status: QProcess.ExitStatus) -> None:
        if self.code is not None:
            return
        self._read_stderr()
        self._read_stdout()
        self.output.feed_stderr(self._err_decoder.decode(b"", final=True))
        self.output.feed_stdout(self._out_decoder.decode(b"", final=True))
        self.output.finish()
        if self.cancelled and code != 0:
            # killed after the grace time: the command wrote nothing final, but what it was
            # writing may still lie in its temporary folder (the caller removes it: `killed`)
            self.killed = status == QProcess.ExitStatus.CrashExit
            code = CANCELLED
        elif status == QProcess.ExitStatus.CrashExit and code == 0:
            code = -1  # killed by a signal from elsewhere: never a success
        self._end(code)

    def _end(self, code: int) -> None:
        self.code = code
        self.ended.emit(code)


class TaskBar(QWidget):
    """A progress bar (phase name and percentage) with «Отмена», shown while it follows a
    CliTask and hidden after."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        self.progress = QProgressBar()
        self.progress.setTextVisible(True)
        self.cancel_button = QPushButton(t("Отмена", "Cancel"))
        self.cancel_button.clicked.connect(self.cancel)
        row.addWidget(self.progress, 1)
        row.addWidget(self.cancel_button)
        self.task: CliTask | None = None
        self.setVisible(False)

    def follow(self, task: CliTask, message: str, cancel_tip: str) -> None:
        """Show `message` until the first progress line, then the task's progress."""
        self.task = task
        self.progress.setRange(0, 0)  # indeterminate until the first progress line
        self.progress.setFormat(message)
        self.cancel_button.setToolTip(cancel_tip)
        self.cancel_button.setEnabled(True)
        # Bound methods, not lambdas: Qt drops them with this bar (a window rebuilt in another
        # language makes a new bar that follows the same task).
        task.progressed.connect(self._progressed)
        task.ended.connect(self._ended)
        self.setVisible(True)
        if task.output.progress is not None:  # followed mid-way: show where it is now
            self._progressed()

    def cancel(self) -> None:
        if self.task is None or not self.task.running:
            return
        self.cancel_button.setEnabled(False)
        self.progress.setFormat(t("Отмена…", "Cancelling…"))
        self.task.cancel()

    def _progressed(self) -> None:
        task = self.task
        if task is None or task.cancelled:
            return
        p = task.output.progress
        if p is not None and p.total:
            self.progress.setRange(0, 1000)
            self.progress.setValue(int(1000 * (p.fraction or 0)))
        else:
            self.progress.setRange(0, 0)
        self.progress.setFormat(manage.progress_text(p))

    def _ended(self, _code: int) -> None:
        if self.task is not None and self.task.running:
            return  # an earlier task's end; this bar already follows a newer one
        self.task = None
        self.setVisible(False)


__all__ = ["CANCELLED", "KILL_AFTER_MS", "CliTask", "TaskBar"]
