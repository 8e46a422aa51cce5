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
        return self._parse(self.read_lines(max_bytes))

    def read_lines(self, max_bytes: int | None = None) -> list[bytes]:
        """The complete raw lines appended since the last call (blank lines dropped)."""
        try:
            size = os.path.getsize(self.path)
        except OSError:
            return []
        if size < self.offset:
            self.offset = 0
        if size == self.offset:
            return []
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                chunk = f.read(max_bytes if max_bytes is not None else size - self.offset)
        except OSError:  # a folder in its place, no permission: no events, never a traceback
            return []
        end = chunk.rfind(b"\n")
        if end < 0:
            return []
        self.offset += end + 1
        return [line for line in chunk[: end + 1].split(b"\n") if line.strip()]

    def _parse(self, lines: list[bytes]) -> list[Event]:
        events, bad = parse_lines(lines)
        self.bad_lines += bad
        return events


def parse_lines(lines: list[bytes]) -> tuple[list[Event], int]:
    """Events from raw lines, and how many lines were not events.

    All lines are parsed as one JSON array first — one call into the C parser is about
    twice as fast as one per line on a 100,000-step file — and line by line only when
    that fails (a torn line after a crash).
    """
    if not lines:
        return [], 0
    try:
        items = json.loads(b"[" + b",".join(lines) + b"]")
    except ValueError:
        items = []
        for line in lines:
            try:
                items.append(json.loads(line))
            except ValueError:
                items.append(None)
    events = [e for e in items if isinstance(e, dict) and "event" in e]
    return events, len(items) - len(events)


def is_step_line(line: bytes) -> bool:
    """A `step` event, told without parsing (the trainer writes compact JSON)."""
    return b'"event":"step"' in line or b'"event": "step"' in line


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
