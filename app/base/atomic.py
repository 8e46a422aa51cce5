"""Atomic file writes: a crash leaves either the old file or the new one, never half of one.

Temporary file in the same folder, flush, fsync, rename over the target, then fsync the
folder so the rename itself is durable (POSIX). `mode` is applied to the temporary file
before any byte is written, so a secret never exists world-readable, even briefly.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_bytes(path: Path, data: bytes, mode: int | None = None) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        if mode is not None:
            os.chmod(tmp, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def write_text(path: Path, text: str, mode: int | None = None) -> None:
    write_bytes(path, text.encode("utf-8"), mode)


def write_json(path: Path, data: Any, mode: int | None = None, indent: int | None = 2) -> None:
    write_text(path, json.dumps(data, indent=indent, ensure_ascii=False) + "\n", mode)


def fsync_file(path: Path) -> None:
    """Flush a finished file's bytes to disk. Through a handle opened for writing: on Windows
    os.fsync is FlushFileBuffers, which refuses a read-only handle (Errno 13)."""
    fd = os.open(path, os.O_RDWR | getattr(os, "O_BINARY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(folder: Path) -> None:
    """Flush a folder's entries (a rename is durable only then); a no-op where impossible."""
    if os.name != "posix":
        return
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
