"""A run's status lines on the command line while nothing else is printed: a Kaggle run
uploading, Kaggle processing its datasets, its kernel waiting in Kaggle's queue (each line
says how long). The window shows the same message under the run (ui/runs/banner.py); here it
is printed once per change, to stderr."""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator
from typing import IO, Any

from ..base import run_status as st


class StatusLines:
    """Prints a run's status and message when either changes (a callback for wait())."""

    def __init__(self, out: IO[str] | None = None) -> None:
        self.out = out or sys.stderr
        self._last: tuple[str, str, str] | None = None

    def __call__(self, rec: Any) -> None:
        key = (rec.id, rec.status, rec.last_message or "")
        if key == self._last or rec.status not in st.KAGGLE_ACTIVE:
            return
        self._last = key
        message = f": {rec.last_message}" if rec.last_message else ""
        print(f"  {st.label(rec.status)}{message}", file=self.out, flush=True)


@contextlib.contextmanager
def echoed(run_id: str, out: IO[str] | None = None, every_s: float = 0.5) -> Iterator[StatusLines]:
    """Print the run's status lines from a thread of its own while the block runs (a Kaggle
    start blocks until its kernel is pushed: uploads and Kaggle's processing included)."""
    from .registry import Registry  # its own connection to the state, in the thread

    lines = StatusLines(out)
    done = threading.Event()

    def watch() -> None:
        registry = Registry()
        try:
            while True:
                try:
                    lines(registry.get(run_id))
                except st.RunNotFound:
                    return
                if done.wait(every_s):
                    return
        finally:
            registry.close()

    thread = threading.Thread(target=watch, name=f"status-{run_id}", daemon=True)
    thread.start()
    try:
        yield lines
    finally:
        done.set()
        thread.join(5)
