"""The lab's log file: what a broad `except` swallowed, with its traceback, for a bug report.

Standard `logging`: each module logs to `logging.getLogger(__name__)`; `setup()`, called once
as the window (ui/main.py) and the CLI (app/cli/main.py) start, sends records of INFO and above to
a rotating file in the lab's data folder (`log_path()`: a few MB, a few old files kept). The
path is shown in «Справка → О программе» and in the README.

Secrets never reach the file: Kaggle keys are not logged by the lab's code, and whatever
looks like one (32 hex digits, a KGAT_ token) is masked in every line written, tracebacks
included (tests/test_logs.py).
"""

from __future__ import annotations

import errno
import logging
import logging.handlers
import re
import sys
from pathlib import Path

from . import paths

FILE_NAME = "ternit-lab.log"
MAX_BYTES = 2 * 1024 * 1024  # a file this size is rotated: lab.log.1 … lab.log.3
BACKUPS = 3
FORMAT = "%(asctime)s %(levelname)s %(process)d %(threadName)s %(name)s: %(message)s"
# A Kaggle legacy API key is 32 hex digits; the new API tokens start with KGAT_ (the rest
# masked whole, whatever its characters: _ and - included).
SECRET = re.compile(r"\bKGAT_[0-9A-Za-z_\-]+|\b[0-9a-fA-F]{32}\b")
MASK = "***"

_handler: LabFileHandler | None = None
NO_ROOM = {errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", errno.ENOSPC)}


def log_folder() -> Path:
    return paths.data_dir() / "logs"


def log_path() -> Path:
    """The current log file (the rotated ones beside it end in .1, .2, .3)."""
    return log_folder() / FILE_NAME


def mask_secrets(text: str) -> str:
    return SECRET.sub(MASK, text)


class MaskingFormatter(logging.Formatter):
    """The whole line masked, message and traceback alike."""

    def format(self, record: logging.LogRecord) -> str:
        return mask_secrets(super().format(record))


class LabFileHandler(logging.handlers.RotatingFileHandler):
    """The log file, which must never be the failure the user sees: a write that fails (a
    full disk) is said once on stderr in one line, not as logging's traceback per record."""

    failed = False

    def _open(self):  # type: ignore[no-untyped-def]  # logging's own
        stream = super()._open()
        paths.not_world_writable(Path(self.baseFilename))  # under a umask of 000
        return stream

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 — logging's name
        error = sys.exc_info()[1]
        if self.failed or (isinstance(error, OSError) and error.errno in NO_ROOM):
            return  # a full disk is said by what the user asked for, which fails on it too
        self.failed = True
        print(f"ternit: the log file {self.baseFilename} cannot be written ({error}); going on without it",
              file=sys.stderr)


def setup(level: int = logging.INFO) -> Path | None:
    """Log to `log_path()` from now on (again with the same folder: nothing changes; with
    another, as tests give: the file moves there). None when the file cannot be opened (a
    read-only data folder): the lab works on, the reason said once on stderr."""
    global _handler
    target = log_path()
    if _handler is not None and Path(_handler.baseFilename) == target:
        return target
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        paths.not_world_writable(target.parent)
        handler = LabFileHandler(
            target, maxBytes=MAX_BYTES, backupCount=BACKUPS, encoding="utf-8", delay=True)
    except OSError as e:
        print(f"ternit: no log file ({e})", file=sys.stderr)
        return None
    handler.setFormatter(MaskingFormatter(FORMAT))
    handler.setLevel(level)
    root = logging.getLogger()
    if _handler is not None:
        root.removeHandler(_handler)
        _handler.close()
    root.addHandler(handler)
    if root.level == logging.NOTSET or root.level > level:
        root.setLevel(level)
    _handler = handler
    return target
