"""Work that must not freeze the window, in a thread, its result back in the GUI thread.

`run_in_thread(work, done, owner)`: `work()` runs in a daemon thread; its return value (or the
exception it raised: shown to the user, never a crash of the window) reaches `done` through a
queued Qt signal, so `done` runs in the GUI thread. An owner closed meanwhile is no error.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from PySide6.QtCore import QObject, Signal


class _Bridge(QObject):
    """Carries a worker thread's result back to the GUI thread (queued signal)."""

    finished = Signal(object)


def run_in_thread(work: Callable[[], object], done: Callable[[object], None], owner: QObject,
                  name: str = "background") -> threading.Thread:
    bridge = _Bridge(owner)
    bridge.finished.connect(done)

    def body() -> None:
        try:
            result: object = work()
        except Exception as e:  # noqa: BLE001 — handed to `done`, which shows it
            result = e
        try:
            bridge.finished.emit(result)
        except RuntimeError:  # the owner (and its bridge) was deleted meanwhile
            pass

    th = threading.Thread(target=body, name=name, daemon=True)
    th.start()
    return th
