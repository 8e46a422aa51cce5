"""Exactly one runner drives the queue: an OS lock on `queue.lock` in the lab's data folder.

The lock is the operating system's own (flock on POSIX, a byte-range lock on Windows: the
trainer's own `trainer.base.lock.try_lock`, one writer per run folder), so it
goes away with its process however that ends: a runner that was SIGKILLed or crashed never
leaves the queue locked. The file says who holds it (pid, what program, since when), so a
second runner is refused with a line naming the first.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainer.base.lock import WINDOWS_BYTE, try_lock

from ..base import paths
from ..base.i18n import t

LOCK_FILE = "queue.lock"


class RunnerBusy(RuntimeError):
    """Another runner drives the queue: the message names it."""


def lock_path() -> Path:
    return paths.data_dir() / LOCK_FILE


@dataclass(frozen=True)
class Note:
    """What the lock file says of its holder. `pid` is the runner's own process — on Windows
    not the pid `Popen` returned when a venv's launcher started it (app/queue/detach.py)."""

    pid: int
    program: str
    since: float
    awake: dict[str, Any] | None = None  # the runner's sleep request (trainer/run/awake.py's Hold)


def read_note(path: Path | None = None) -> Note | None:
    """The lock file's note, or None (no file, no note yet, a torn one)."""
    try:
        note = json.loads((path or lock_path()).read_text(encoding="utf-8"))
        awake = note.get("awake")
        return Note(int(note["pid"]), str(note["program"]), float(note["since"]),
                    awake if isinstance(awake, dict) else None)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def holder(path: Path | None = None) -> str:
    """Who the lock file says drives the queue ("process 1234 (ternit queue run), since
    12:03"), or ""."""
    note = read_note(path)
    if note is None:
        return ""
    since = time.strftime("%d.%m %H:%M:%S", time.localtime(note.since))
    return t(f"процесс {note.pid} ({note.program}), с {since}", f"process {note.pid} ({note.program}), since {since}")


def current_holder(path: Path | None = None) -> Note | None:
    """The note of the runner holding the lock now (None when nobody holds it: a note left by
    a runner that ended names nobody)."""
    path = path or lock_path()
    if not is_held(path):
        return None
    return read_note(path)


def is_held(path: Path | None = None) -> bool:
    """Whether some runner (this process's included) holds the queue's lock now."""
    path = path or lock_path()
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return False
    try:
        if not try_lock(fd):
            return True
        _unlock(fd)
        return False
    finally:
        os.close(fd)


def _unlock(fd: int) -> None:
    if os.name == "nt":  # pragma: no cover - Windows wants the range unlocked before the close
        import msvcrt

        try:
            os.lseek(fd, WINDOWS_BYTE, os.SEEK_SET)
            msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
        except OSError:
            pass


class RunnerLock:
    """acquire() raises RunnerBusy naming the holder; release() or the process's end frees it."""

    def __init__(self, program: str, path: Path | None = None) -> None:
        self.path = path or lock_path()
        self.program = program
        self._fd: int | None = None
        self._note: dict[str, Any] = {}

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        if self._fd is not None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        if not try_lock(fd):
            os.close(fd)
            who = holder(self.path) or t("другой процесс", "another process")
            raise RunnerBusy(t(f"очередь уже ведёт {who}; второй не запускается — дождитесь его или закройте его",
                               f"the queue is already driven by {who}; a second runner does not start — "
                               "wait for it or close it"))
        self._fd = fd
        self._note = {"pid": os.getpid(), "program": self.program, "since": time.time()}
        self._write_note()

    def annotate(self, **fields: Any) -> None:
        """Add to the holder's note what others may want to see (its sleep request)."""
        if self._fd is not None:
            self._note.update(fields)
            self._write_note()

    def _write_note(self) -> None:
        assert self._fd is not None
        try:
            os.lseek(self._fd, 0, os.SEEK_SET)
            os.ftruncate(self._fd, 0)
            os.write(self._fd, json.dumps(self._note).encode())
        except OSError:
            pass  # the lock holds without the note; only the refusal's wording loses the name

    def release(self) -> None:
        if self._fd is None:
            return
        _unlock(self._fd)
        os.close(self._fd)
        self._fd = None
