"""Reading a run's events.jsonl: incrementally (EventTail) or all at once.

The trainer appends one JSON object per line and flushes; a reader may therefore meet a
line that is still being written. EventTail returns only complete lines and remembers
its byte offset, so polling it from a timer costs only the new bytes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

Event = dict[str, Any]


class EventTail:
    """Follows one events.jsonl: `read()` gives the events appended since the last call.

    A missing file reads as no events yet. A partial last line is left for the next call.
    A line that is complete but not JSON (a torn write after a crash) is skipped and
    counted in `bad_lines`, never raised: the window must keep following the run.
    If the file shrinks (replaced by a new one), reading starts again from the top.
    """

    def __init__(self, path: Path | str, offset: int = 0) -> None:
        self.path = Path(path)
        self.offset = offset
        self.bad_lines = 0

    def read(self, max_bytes: int | None = None) -> list[Event]:
        try:
            size = os.path.getsize(self.path)
        except OSError:
            return []
        if size < self.offset:
            self.offset = 0
        if size == self.offset:
            return []
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            chunk = f.read(max_bytes if max_bytes is not None else size - self.offset)
        end = chunk.rfind(b"\n")
        if end < 0:
            return []
        self.offset += end + 1
        events: list[Event] = []
        for line in chunk[: end + 1].splitlines():
            if not line.strip():
                continue
            try:
                ev = json.loads(line)
            except ValueError:
                self.bad_lines += 1
                continue
            if isinstance(ev, dict) and "event" in ev:
                events.append(ev)
            else:
                self.bad_lines += 1
        return events


def read_events(path: Path | str) -> list[Event]:
    """Every complete event of a file (none if it does not exist)."""
    return EventTail(path).read()


def iter_events(path: Path | str, chunk_bytes: int = 1 << 22) -> Iterator[Event]:
    """The events of a possibly large file, read in chunks of complete lines."""
    tail = EventTail(path)
    while True:
        batch = tail.read(chunk_bytes)
        if not batch:
            # A chunk with no newline in it: one line longer than the chunk; widen once.
            before = tail.offset
            batch = tail.read()
            if not batch and tail.offset == before:
                return
        yield from batch
