"""`python -m tests.trainer_dying_save TRAINER_ARGS` (tests/test_trainer.py): `python -m
trainer TRAINER_ARGS` whose second checkpoint of the process is half-written when the
process is SIGKILLed, as a power cut in the middle of a save leaves it."""

from __future__ import annotations

import io
import os
import runpy
import signal
import sys

import torch

real_save = torch.save
calls = {"n": 0}


def dying_save(obj, f, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN201
    calls["n"] += 1
    if calls["n"] == 2:  # the second checkpoint of this process: write half of it, then die
        buf = io.BytesIO()
        real_save(obj, buf, *args, **kwargs)
        data = buf.getvalue()
        f.write(data[: len(data) // 2])
        f.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    return real_save(obj, f, *args, **kwargs)


if __name__ == "__main__":
    torch.save = dying_save
    sys.argv = ["trainer", *sys.argv[1:]]
    runpy.run_module("trainer", run_name="__main__", alter_sys=True)
