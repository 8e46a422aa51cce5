"""Progress reports and cancelling for the data side's long operations.

The window passes a callback (it forwards to a Qt signal) and a CancelToken (its «Отмена»
button sets it); the CLI passes a text progress bar. Callbacks come from the thread that does
the work, at most about ten times a second, plus once at the end of each phase.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

from ..base.i18n import Said, t
from ..base.numbers import count_text


@dataclass(frozen=True)
class Progress:
    phase: str  # scan | check | tokenizer | tokenize | split | done
    done: float
    total: float | None  # None: size unknown (an indeterminate bar)
    unit: str = ""  # files | chars | tokens
    message: str = ""

    @property
    def fraction(self) -> float | None:
        if not self.total:
            return None
        return max(0.0, min(1.0, self.done / self.total))


ProgressFn = Callable[[Progress], None]


class Cancelled(Exception):
    """The user cancelled; nothing half-done was left behind."""

    def __init__(self) -> None:
        super().__init__(t("Отменено: ничего не изменено.", "Cancelled: nothing was changed."))


class CancelToken:
    """Set from any thread; the worker checks it between pieces of work."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def check(self) -> None:
        if self._event.is_set():
            raise Cancelled()


def check(cancel: CancelToken | None) -> None:
    if cancel is not None:
        cancel.check()


class Reporter:
    """Throttles a progress callback to about ten calls a second."""

    def __init__(self, callback: ProgressFn | None, interval: float = 0.1) -> None:
        self.callback = callback
        self.interval = interval
        self._last = 0.0

    def __call__(self, phase: str, done: float, total: float | None, unit: str = "",
                 message: str = "", force: bool = False) -> None:
        if self.callback is None:
            return
        now = time.monotonic()
        if force or now - self._last >= self.interval:
            self._last = now
            self.callback(Progress(phase, done, total, unit, message))


PHASE_NAMES = {
    "scan": ("Чтение файлов", "Reading files"),
    "check": ("Проверка наборов", "Checking datasets"),
    "tokenizer": ("Обучение токенизатора", "Training the tokenizer"),
    "tokenize": ("Токенизация", "Tokenizing"),
    "split": ("Запись файлов", "Writing files"),
    "done": ("Готово", "Done"),
}


def phase_name(phase: str) -> str:
    ru, en = PHASE_NAMES.get(phase, (phase, phase))
    return t(ru, en)


class TextBar:
    """A one-line progress bar on stderr (lines at each phase's start and end, and every
    `every` seconds between, when stderr is not a terminal)."""

    def __init__(self, stream: TextIO | None = None, width: int = 28, every: float = 5.0) -> None:
        self.stream = stream or sys.stderr
        self.width = width
        self.every = every  # seconds between lines within a phase when not on a terminal
        self._last_write = 0.0
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._phase = ""
        self._last_line = ""

    def __call__(self, p: Progress) -> None:
        name = phase_name(p.phase)
        frac = p.fraction
        if frac is None:
            amount = f"{_human(p.done, p.unit)}" if p.done else ""
            line = f"{name}: {amount} {p.message}".rstrip()
        else:
            filled = int(frac * self.width)
            bar = "#" * filled + "-" * (self.width - filled)
            line = f"{name} [{bar}] {frac * 100:5.1f}% {_human(p.done, p.unit)}/{_human(p.total or 0, p.unit)} {p.message}".rstrip()
        if self.tty:
            pad = max(0, len(self._last_line) - len(line))
            self.stream.write("\r" + line + " " * pad)
            if p.phase == "done":
                self.stream.write("\n")
        elif (p.phase != self._phase or (frac == 1.0 and self._last_line != line)
              or (time.monotonic() - self._last_write >= self.every and self._last_line != line)):
            # A log-friendly line at each phase's start and end, and every few seconds between:
            # the window reads these lines from the child's pipe into its status bar, and a
            # tokenizing phase of minutes must not look stuck at its first per cent.
            self.stream.write(line + "\n")
            self._last_write = time.monotonic()
        self.stream.flush()
        self._phase = p.phase
        self._last_line = line

    def close(self) -> None:
        if self.tty and self._last_line:
            self.stream.write("\n")
            self.stream.flush()
            self._last_line = ""

    def warning(self, text: str) -> None:
        """Something the user should know that did not stop the command (a skipped file, too
        little text for the held-out sample): its own line, after the bar."""
        self.close()
        self.stream.write(f"{t('предупреждение', 'warning')}: {text}\n")
        self.stream.flush()


PROGRESS_ENV = "TERNIT_PROGRESS"  # "json": progress as JSON lines, for a program that reads them


class JsonLines:
    """Progress as one JSON object a line on stderr ({"progress": phase, "done", "total", "unit",
    "message"}), for the window: it runs `ternit data ...` as a child process and draws its
    own bar. The Reporter already limits the lines to about ten a second."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr

    def __call__(self, p: Progress) -> None:
        self.stream.write(json.dumps({"progress": p.phase, "done": p.done, "total": p.total, "unit": p.unit,
                                      "message": p.message}, ensure_ascii=False) + "\n")
        self.stream.flush()

    def close(self) -> None:
        pass

    def warning(self, text: str) -> None:
        """A warning as {"warning": text}: the window keeps these apart from failures and shows
        them after the command ends, in any interface language."""
        line: dict = {"warning": text}
        if isinstance(text, Said):  # both languages: the window may switch before it shows it
            line.update(ru=text.texts["ru"], en=text.texts["en"], key=text.key)
        self.stream.write(json.dumps(line, ensure_ascii=False) + "\n")
        self.stream.flush()


def progress_for_cli() -> TextBar | JsonLines:
    """The command line's progress: a text bar, or JSON lines when TERNIT_PROGRESS=json."""
    return JsonLines() if os.environ.get(PROGRESS_ENV) == "json" else TextBar()


def _json_line(line: str, key: str) -> dict | None:
    """A JsonLines line whose first key is `key`, as a dict (None for any other line)."""
    line = line.strip()
    if not line.startswith('{"' + key + '"'):
        return None
    try:
        d = json.loads(line)
    except ValueError:
        return None
    return d if isinstance(d, dict) and key in d else None


def parse_progress_line(line: str) -> Progress | None:
    """A JsonLines line back into a Progress (None for any other line: a message)."""
    d = _json_line(line, "progress")
    if d is None:
        return None
    try:
        total = d.get("total")
        return Progress(str(d["progress"]), float(d.get("done") or 0), None if total is None else float(total),
                        str(d.get("unit") or ""), str(d.get("message") or ""))
    except (ValueError, TypeError):
        return None


# The kind of prepare's «held-out sample too small» warning: the window's form says it live
# for its own context, so app.data.manage leaves it out of the prepare's note.
VAL_SAMPLE_WARNING = "val_sample"


def parse_warning_line(line: str) -> str | None:
    """A JsonLines warning line back into its text (None for any other line)."""
    d = _json_line(line, "warning")
    if d is None:
        return None
    if isinstance(d.get("ru"), str) and isinstance(d.get("en"), str):
        return Said(d["ru"], d["en"], str(d.get("key") or ""))
    return str(d["warning"])


def _human(n: float, unit: str) -> str:
    """Characters and tokens as the interface writes counts («1,2 млн»); files as they are."""
    return count_text(n) if unit in ("chars", "tokens") else f"{int(n)}"
