"""A kernel's log stream → the run's own events.jsonl and trainer.log.

Kaggle's log stream replays from the start on every reconnect, in chunks that need not end
at a line break, one buffer per stream (stdout/stderr). Lines are counted in arrival order;
the count of lines already handled is kept in the state, so a reconnect (or a restart of
the lab) skips exactly those. The trainer echoes each event as one JSON line on stdout:
those go to events.jsonl exactly as written; every line goes to trainer.log.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

EVENTS = "events.jsonl"
LOG = "trainer.log"


def is_event_line(line: str) -> bool:
    s = line.strip()
    if not (s.startswith("{") and s.endswith("}")):
        return False
    try:
        obj = json.loads(s)
    except ValueError:
        return False
    return isinstance(obj, dict) and "event" in obj and "step" in obj


def lines_from(events: Iterable[dict[str, Any]], skip: int, final: bool = False) -> Iterable[tuple[int, list[str]]]:
    """(lines counted so far, new complete lines) after each chunk; the first `skip` lines
    (already handled before a reconnect) are counted but not returned. With `final` (the
    kernel had ended before the stream was opened) a last line without a newline counts
    too; otherwise it may be a line cut by a dropped connection, and waits for the replay."""
    buffers: dict[str, str] = {}
    count = 0

    def take(lines: list[str]) -> list[str]:
        """Count `lines`; return those past `skip`."""
        nonlocal count
        first = count
        count += len(lines)
        return [line.rstrip("\r") for line in lines[max(0, skip - first):]]

    for ev in events:
        data = ev.get("data")
        if not isinstance(data, str) or not data:
            continue
        name = str(ev.get("stream_name") or "stdout")
        *complete, buffers[name] = (buffers.get(name, "") + data).split("\n")
        fresh = take(complete)
        if fresh:
            yield count, fresh
    if final:
        fresh = take([b for b in buffers.values() if b])
        if fresh:
            yield count, fresh


class RunSink:
    """Appends to one run folder's events.jsonl and trainer.log, flushed (and fsynced)
    batch by batch. Event lines already at the end of events.jsonl are not written twice:
    a crash between writing and recording the count replays them exactly."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.events_path = self.run_dir / EVENTS
        self.log_path = self.run_dir / LOG
        _drop_partial_line(self.events_path)
        self._recent = set(_tail_lines(self.events_path))
        self._dirty = False
        self._log: Any = None
        self._events: Any = None

    def write(self, lines: list[str]) -> int:
        """Append a batch (flushed; `sync()` makes it durable); returns the event lines written."""
        events = [ln.strip() for ln in lines if is_event_line(ln)]
        events = [e for e in events if e not in self._recent]
        if self._log is None:
            self._log = open(self.log_path, "a", encoding="utf-8")  # noqa: SIM115 — closed in close()
        self._log.write("".join(ln + "\n" for ln in lines))
        self._log.flush()
        if events:
            if self._events is None:
                self._events = open(self.events_path, "a", encoding="utf-8")  # noqa: SIM115
            self._events.write("".join(e + "\n" for e in events))
            self._events.flush()  # the window's tail sees it at once
            self._dirty = True
        return len(events)

    def sync(self) -> None:
        """fsync events.jsonl: call before recording how many lines are handled."""
        if self._dirty and self._events is not None:
            os.fsync(self._events.fileno())
        self._dirty = False

    def close(self) -> None:
        self.sync()
        for f in (self._log, self._events):
            if f is not None:
                f.close()
        self._log = self._events = None

    def reconcile(self, kernel_events: Path) -> int:
        """Append the events the kernel wrote that the stream missed (by exact line)."""
        if not kernel_events.is_file():
            return 0
        self.close()
        have = set(_all_lines(self.events_path))
        missing = [ln.strip() for ln in kernel_events.read_text(encoding="utf-8").splitlines()
                   if ln.strip() and ln.strip() not in have and is_event_line(ln)]
        if missing:
            with open(self.events_path, "a", encoding="utf-8") as f:
                f.write("".join(e + "\n" for e in missing))
                f.flush()
                os.fsync(f.fileno())
        return len(missing)


def _drop_partial_line(path: Path) -> None:
    """A write cut by a crash can leave half a line at the end; its line was not recorded as
    handled, so the replay writes it again whole."""
    try:
        with open(path, "rb+") as f:
            size = f.seek(0, os.SEEK_END)
            if size == 0:
                return
            f.seek(max(0, size - (1 << 20)))
            tail = f.read()
            if tail.endswith(b"\n"):
                return
            cut = tail.rfind(b"\n")
            f.truncate(size - len(tail) + cut + 1 if cut >= 0 else max(0, size - len(tail)))
    except OSError:
        return


def _tail_lines(path: Path, max_bytes: int = 1 << 22) -> list[str]:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - max_bytes))
            data = f.read().decode("utf-8", "replace")
    except OSError:
        return []
    return [ln.strip() for ln in data.splitlines() if ln.strip()]


def _all_lines(path: Path) -> list[str]:
    try:
        return [ln.strip() for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
    except OSError:
        return []


def read_events(path: Path) -> list[dict[str, Any]]:
    out = []
    for ln in _all_lines(path):
        try:
            obj = json.loads(ln)
        except ValueError:
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out


def follow(events: Iterable[dict[str, Any]], skip: int, sink: RunSink,
           record: Callable[[int], None], final: bool = False, every_s: float = 0.5,
           stop: Callable[[], bool] = lambda: False) -> int:
    """Feed a stream into the sink. At most every `every_s` (and at the end) the sink is
    synced and `record(count)` called: a crash in between replays a few lines, which the
    sink recognises. Returns the count."""
    count = recorded = skip
    last = time.monotonic()
    try:
        for count, lines in lines_from(events, skip, final):
            sink.write(lines)
            if stop():  # the lab is quitting: what is written is recorded below
                break
            if time.monotonic() - last >= every_s:
                sink.sync()
                record(count)
                recorded, last = count, time.monotonic()
    finally:
        if count != recorded:
            sink.sync()
            record(count)
    return count
