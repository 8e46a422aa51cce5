"""The heat guard against the real trainer: it pauses between steps and resumes on cooling."""

from __future__ import annotations

import time

from app.gpu.heat_guard import PAUSED, HeatGuard
from tests.trainer_run import events, start_trainer, write_run


def wait_for(predicate, timeout: float = 60.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_guard_pauses_and_resumes_the_real_trainer(tmp_path, tiny_data):
    run = write_run(tmp_path / "run", tiny_data, steps_to=100_000, eval_every=100_000)
    proc = start_trainer(run)  # the real trainer process, forked (tests/forked.py)
    try:
        wait_for(lambda: events(run, "step"), what="the first step")
        clock = [0.0]
        guard = HeatGuard(run, threshold_c=85, hold_s=10, hysteresis_c=5,
                          clock=lambda: clock[0])
        for t in range(12):  # the card holds 88 °C for 11 s
            clock[0] = float(t)
            status = guard.update([88.0, 70.0])
        assert status.state == PAUSED and (run / "PAUSE").exists()
        # The trainer says "paused: ..." on stderr when it holds.
        wait_for(lambda: any(line.startswith("paused:") for line in proc.stderr().splitlines()),
                 what="the trainer's pause")
        held_at = len(events(run, "step"))
        clock[0] += 5
        assert guard.update([81.0]).state == PAUSED  # not cool enough (hysteresis)
        assert len(events(run, "step")) == held_at  # still holding between steps
        assert guard.update([79.0]).action == "resumed" and not (run / "PAUSE").exists()
        wait_for(lambda: events(run, "pause"), what="the pause event")
        pause = events(run, "pause")[0]
        assert pause["step"] == events(run, "step")[held_at - 1]["step"]
        assert pause["seconds"] >= 0
        wait_for(lambda: len(events(run, "step")) > held_at, what="steps after the pause")
    finally:
        (run / "STOP").write_text("")
        try:
            assert proc.wait(timeout=60) == 0, proc.stderr()
        finally:
            proc.end()
