"""One kind of announcement, without Qt: plain callbacks that whoever listens connects (the
pattern of napari's evented models). The window's core announces with it
(app/window/events.py), and so does the queue's window side (app/queue/driver.py): it lives
here, below both, so the queue need not reach into the window for it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Callback = Callable[..., object]


class Event:
    """One kind of announcement. `connect(fn)`: fn is called with what `emit` is given,
    after those connected before it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._callbacks: list[Callback] = []

    def connect(self, callback: Callback) -> Callback:
        self._callbacks.append(callback)
        return callback

    def disconnect(self, callback: Callback) -> None:
        self._callbacks.remove(callback)

    def emit(self, *args: Any) -> None:
        """Every callback hears it. One that raises does not keep the later ones from
        hearing; the first exception is raised again once all have been called."""
        failure: BaseException | None = None
        for callback in list(self._callbacks):
            try:
                callback(*args)
            except Exception as e:  # raised again below, after the others heard it
                if failure is None:
                    failure = e
        if failure is not None:
            raise failure

    def __repr__(self) -> str:
        return f"Event({self.name!r}, {len(self._callbacks)} callbacks)"
