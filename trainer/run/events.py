"""The event stream: RUN_DIR/events.jsonl, one JSON object per line, appended and flushed.

Every event is also echoed as one line on stdout (a Kaggle kernel's log stream carries it
to the lab); human-readable lines go to stderr. Only rank 0 writes.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any


def _clean(value: Any) -> Any:
    """JSON has no NaN/inf: write them as strings so every line stays valid JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def _ends_torn(path: Path) -> bool:
    """Whether the file ends inside a line (it is not empty and its last byte is no newline)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            if f.tell() == 0:
                return False
            f.seek(-1, 2)
            return f.read(1) != b"\n"
    except OSError:
        return False


class OutputError(OSError):
    """events.jsonl or the log (stdout/stderr) could not be written: a full disk, a file-size
    limit, a folder in the way. The run saves what it can and ends (exit 3)."""


# Set by the first failed write. From then on the run is ending because of it: later writes
# are still tried (emit what can be emitted) but their failures are not raised again.
_failed: list[OutputError] = []


def _fail(what: str, error: BaseException) -> None:
    err = OutputError(f"could not write {what} ({type(error).__name__}: {error})")
    if not _failed:
        _failed.append(err)
        raise err


def _silence(stream: Any) -> None:
    """Point a standard stream whose file failed at the null device: what its buffer still
    holds is then flushed there at exit, not retried into the full file (which would end the
    process with Python's own exit code 120 and a second traceback)."""
    try:
        fd = stream.fileno()
        null = os.open(os.devnull, os.O_WRONLY)
    except (OSError, ValueError, AttributeError):
        return
    try:
        os.dup2(null, fd)
    finally:
        os.close(null)


def detach_terminal() -> None:
    """After a hang-up: stdout/stderr that were a terminal now go to the null device."""
    for stream in (sys.stdout, sys.stderr):
        try:
            tty = stream.isatty()
        except (OSError, ValueError, AttributeError):
            tty = True
        if tty:
            _silence(stream)


def _encodable(stream: Any, text: str) -> str:
    """`text` with what the stream's encoding lacks written as escapes (\\u20bd). Redirected
    streams are UTF-8 (trainer/base/streams.py); this is for a terminal in a legacy code page: a
    run never dies on a character, and a character is no full disk."""
    encoding = getattr(stream, "encoding", None) or "utf-8"
    return text.encode(encoding, "backslashreplace").decode(encoding)


def _write_stream(stream: Any, text: str, what: str) -> None:
    try:
        try:
            stream.write(text)
        except UnicodeEncodeError:  # nothing was written: a text stream encodes before writing
            stream.write(_encodable(stream, text))
        stream.flush()
    except (OSError, ValueError) as e:
        _silence(stream)
        _fail(what, e)


class EventLog:
    def __init__(self, path: Path | None, echo: bool = True) -> None:
        self.path = path
        self.echo = echo
        self._fd: int | None = None
        self._torn = False
        if path is None:
            return
        try:
            # Unbuffered appends: a failed write leaves nothing half-queued to be retried later.
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as e:
            raise OutputError(f"cannot open {path} for writing ({type(e).__name__}: {e}): move away what is in the way") from None
        # A run killed mid-write left half a line; resumed in place, the next event
        # would be glued onto it and lost with it. End the torn line first.
        self._torn = _ends_torn(path)

    def emit(self, event: str, step: int, **fields: Any) -> dict[str, Any]:
        record = {"event": event, "time": round(time.time(), 3), "step": int(step), **_clean(fields)}
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
        if self._fd is not None:
            self._append((("\n" if self._torn else "") + line + "\n").encode("utf-8"))
        if self.echo:
            _write_stream(sys.stdout, line + "\n", "the log (stdout)")
        return record

    def _append(self, data: bytes) -> None:
        assert self._fd is not None
        size = os.fstat(self._fd).st_size
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view):]
            self._torn = False
        except OSError as e:
            # Cut back what got in of this line, so the file still ends with a whole one.
            try:
                os.ftruncate(self._fd, size)
            except OSError:
                self._torn = True
            _fail(str(self.path), e)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def say(message: str) -> None:
    """A line for humans (stderr, which the lab keeps in trainer.log)."""
    _write_stream(sys.stderr, message + "\n", "the log (stderr)")
