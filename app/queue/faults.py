"""Fault points for the tests of a runner killed at a chosen moment.

`point(name)` ends this process at once, as a power cut or the task manager would (SIGKILL:
no handler, no clean-up), when TERNIT_QUEUE_KILL_AT names it. Only the tests set it; the
runner's restart must then finish what was begun without doing anything twice.
"""

from __future__ import annotations

import os
import signal

ENV = "TERNIT_QUEUE_KILL_AT"
# The moments: the item claimed (machine chosen, run id reserved); the run's folder and row
# created; about to spawn the trainer or upload and push the Kaggle leg.
POINTS = ("claimed", "created", "launching")


def point(name: str) -> None:
    assert name in POINTS, name
    if os.environ.get(ENV) == name:
        os.kill(os.getpid(), getattr(signal, "SIGKILL", signal.SIGTERM))
