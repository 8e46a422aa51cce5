"""The «Текст» tab's child process (python -m trainer.text.sample) as a QProcess: its output
read as it comes, without a thread; «Стоп» kills it and reaps it at once, so no process is
left behind. What the lines mean is app.text.playground.Session's."""

from __future__ import annotations

from PySide6.QtCore import QObject, QProcess, QProcessEnvironment, Signal

from app.text.generation import child_env
from app.text.playground import Session


class ChildRun(QObject):
    """One run of the child; `changed` after each chunk that changed what is shown,
    `ended` once it has exited or was stopped."""

    changed = Signal()
    ended = Signal()

    def __init__(self, argv: list[str], stdin: str, session: Session, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self._stderr = b""
        self.proc = QProcess(self)
        self.proc.setProgram(argv[0])
        self.proc.setArguments(argv[1:])
        env = QProcessEnvironment()
        for key, value in child_env().items():
            env.insert(key, value)
        self.proc.setProcessEnvironment(env)
        self.proc.readyReadStandardOutput.connect(self._read)
        self.proc.readyReadStandardError.connect(self._read_err)
        self.proc.finished.connect(self._finished)
        self.proc.errorOccurred.connect(self._failed)
        self.proc.start()
        self.proc.write(stdin.encode("utf-8"))
        self.proc.closeWriteChannel()

    @property
    def running(self) -> bool:
        return self.proc.state() != QProcess.ProcessState.NotRunning

    def pid(self) -> int:
        return int(self.proc.processId())

    def _read(self) -> None:
        if self.session.feed(bytes(self.proc.readAllStandardOutput().data())):
            self.changed.emit()

    def _read_err(self) -> None:
        self._stderr = (self._stderr + bytes(self.proc.readAllStandardError().data()))[-8000:]

    def _finished(self, code: int, _status: QProcess.ExitStatus) -> None:
        if self.session.ended:  # stopped: the kill's exit is not a failure
            return
        self._read()
        self._read_err()
        self.session.finish(code, self._stderr.decode("utf-8", "replace"))
        self.changed.emit()
        self.ended.emit()

    def _failed(self, error: QProcess.ProcessError) -> None:
        if error == QProcess.ProcessError.FailedToStart and not self.session.ended:
            self.session.finish(-1, self.proc.errorString())
            self.changed.emit()
            self.ended.emit()

    def stop(self) -> None:
        """End the child now and wait for it: no process stays behind."""
        if self.session.ended and not self.running:
            return
        self.session.cancel()
        if self.running:
            self.proc.kill()
            self.proc.waitForFinished(5000)
        self.changed.emit()
        self.ended.emit()
