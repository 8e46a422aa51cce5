"""The event stream: RUN_DIR/events.jsonl, one JSON object per line, appended and flushed.

Every event is also echoed as one line on stdout (a Kaggle kernel's log stream carries it
to the lab); human-readable lines go to stderr. Only rank 0 writes.
"""

from __future__ import annotations

import json
import math
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


class EventLog:
    def __init__(self, path: Path | None, echo: bool = True) -> None:
        self.path = path
        self.echo = echo
        self._file = open(path, "a", encoding="utf-8") if path is not None else None  # noqa: SIM115
        if path is not None and _ends_torn(path):
            # A run killed mid-write left half a line; resumed in place, the next event
            # would be glued onto it and lost with it. End the torn line first.
            self._file.write("\n")
            self._file.flush()

    def emit(self, event: str, step: int, **fields: Any) -> dict[str, Any]:
        record = {"event": event, "time": round(time.time(), 3), "step": int(step), **_clean(fields)}
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
        if self._file is not None:
            self._file.write(line + "\n")
            self._file.flush()
        if self.echo:
            print(line, flush=True)
        return record

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def say(message: str) -> None:
    """A line for humans (stderr, which the lab keeps in trainer.log)."""
    print(message, file=sys.stderr, flush=True)
