"""What `Lab` announces, without Qt: plain callbacks that the window's views connect.

The pattern is napari's evented model: the model holds the state and says what changed
(`model.events.<name>.connect(callback)`), the views listen. No action handler of the
window refreshes views one by one, so none can forget one: Lab announces the change, and
every view that subscribed to it hears it, whoever caused the change (a click, a poll,
the heat guard, a test).
"""

from __future__ import annotations

from ..base.announcement import Event


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
