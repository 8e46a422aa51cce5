"""What `Lab` announces, without Qt: plain callbacks that the window's views connect.

The pattern is napari's evented model: the model holds the state and says what changed
(`model.events.<name>.connect(callback)`), the views listen. No action handler of the
window refreshes views one by one, so none can forget one: Lab announces the change, and
every view that subscribed to it hears it, whoever caused the change (a click, a poll,
the heat guard, a test).
"""

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


class LabEvents:
    """What changed, by name:

    - `history()`: the run history has changed (rows to read again);
    - `run(run_id)`: a run's state changed (its status, its steps, a pause), or time moved
      on for the followed one (its speed and time left);
    - `followed(chain)`: the run shown on the plot and in the banner is (again) this one:
      the runs it continues and itself, oldest first;
    - `monitored(record | None)`: the run the GPU monitor watches (the one training here);
    - `law()`: the lab's law was fitted again (the form's «Как выбрать размер» lines); said from
      the fitting thread.
    """

    def __init__(self) -> None:
        self.history = Event("history")
        self.run = Event("run")
        self.followed = Event("followed")
        self.monitored = Event("monitored")
        self.law = Event("law")
