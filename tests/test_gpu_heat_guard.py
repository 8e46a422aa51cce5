"""Heat guard: fake clock, fake temperatures, a real run folder and a real PAUSE file."""

from __future__ import annotations

import json

import pytest

from app.gpu import heat_guard
from app.gpu.heat_guard import HEATING, IDLE, PAUSED, HeatGuard
from app.gpu.samples import GpuSample, Snapshot


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def guard(tmp_path):
    clock = Clock()
    g = HeatGuard(tmp_path, threshold_c=83, hold_s=30, hysteresis_c=5, clock=clock,
                  wall=lambda: 1_700_000_000.0)
    g.clock = clock
    return g


def feed(guard, temps, seconds, step=1.0):
    status = None
    end = guard.clock.now + seconds
    while guard.clock.now < end:
        guard.clock.now += step
        status = guard.update(temps)
    return status


def test_pauses_after_hold_and_resumes_below_hysteresis(guard):
    pause = guard.pause_path
    assert feed(guard, [70, 75], 60).state == IDLE and not pause.exists()
    status = feed(guard, [84, 75], 29)  # the hottest card counts
    assert status.state == HEATING and status.hot_for_s == pytest.approx(28)
    assert not pause.exists()
    assert feed(guard, [84, 75], 1).hot_for_s == pytest.approx(29)  # first seen hot at t=61
    status = feed(guard, [84, 75], 1)
    assert status.state == PAUSED and status.action == "paused" and pause.exists()
    note = json.loads(pause.read_text())
    assert note["by"] == "heat_guard" and note["resume_below_c"] == 78
    # Cooling a little is not enough (hysteresis): still paused at 80 °C.
    status = feed(guard, [80, 70], 20)
    assert status.state == PAUSED and status.paused_for_s == pytest.approx(20) and pause.exists()
    status = feed(guard, [77.9, 70], 1)
    assert status.state == IDLE and status.action == "resumed" and not pause.exists()
    assert guard.pauses == 1
    assert not list(pause.parent.glob(".PAUSE.*"))  # no temp files left behind


def test_short_spikes_do_not_pause(guard):
    for _ in range(5):
        feed(guard, [90], 20)
        feed(guard, [82], 1)  # below the threshold: the count starts anew
    assert guard.state == IDLE and guard.pauses == 0 and not guard.pause_path.exists()


def test_missing_readings_decide_nothing(guard):
    feed(guard, [90], 31)
    assert guard.state == PAUSED
    status = feed(guard, [None], 100)  # sensor n/a or card lost: stay paused, do not guess
    assert status.state == PAUSED and status.hottest_c is None and guard.pause_path.exists()
    lost = Snapshot(time=0, status="ok", gpus=[GpuSample(index=0, name="x", lost=True,
                                                          temp_c=99)])
    assert guard.update_from(lost).state == PAUSED
    cool = Snapshot(time=0, status="ok", gpus=[GpuSample(index=0, name="x", temp_c=60)])
    assert guard.update_from(cool).action == "resumed"


def test_never_removes_the_users_own_pause(guard):
    guard.pause_path.write_text("mine\n")
    feed(guard, [90], 31)
    assert guard.state == PAUSED
    feed(guard, [50], 1)
    assert guard.state == IDLE and guard.pause_path.read_text() == "mine\n"


def test_pause_removed_by_someone_else_starts_over(guard):
    feed(guard, [90], 31)
    guard.pause_path.unlink()  # the user pressed «resume»
    status = guard.update([90])
    assert status.state == HEATING and status.hot_for_s == 0
    guard.release()  # guard switched off: nothing of ours is left
    assert guard.state == IDLE and not guard.pause_path.exists()


def test_zero_hold_pauses_at_once_and_texts(guard):
    g = HeatGuard(guard.run_dir, threshold_c=80, hold_s=0, clock=guard.clock)
    status = g.update([80])
    assert status.state == PAUSED
    assert "продолжится, когда остынет ниже 75 °C" in heat_guard.status_text(g, status, "ru")
    assert "resumes when the card cools below 75 °C" in heat_guard.status_text(g, status, "en")
    assert heat_guard.status_text(None, None, "en") == "The heat guard is off"
    with pytest.raises(ValueError):
        HeatGuard(guard.run_dir, 80, hold_s=-1)


def test_a_pause_left_by_an_earlier_guard_is_taken_over(guard):
    """The window was killed while its guard held a pause: the next window's guard lifts it
    once the card is cool (it was left alone as if the user's, and the run waited until its
    time limit). The user's own PAUSE is still not touched."""
    feed(guard, [90], 31)
    assert guard.state == PAUSED and json.loads(guard.pause_path.read_text())["by"] == "heat_guard"
    again = HeatGuard(guard.run_dir, threshold_c=83, hold_s=30, clock=guard.clock)
    assert again.state == PAUSED
    assert again.update([80]).action is None  # still above 83 - 5
    assert again.update([70]).action == "resumed" and not again.pause_path.exists()
    guard.pause_path.write_text("mine\n")
    user = HeatGuard(guard.run_dir, threshold_c=83, hold_s=30, clock=guard.clock)
    assert user.state == IDLE and user.update([50]).action is None
    assert guard.pause_path.read_text() == "mine\n"


def test_pause_note_and_notice_say_who_paused_and_what_next(guard):
    assert heat_guard.pause_note(guard.run_dir, "en") == ""
    status = feed(guard, [90], 31)
    assert heat_guard.pause_note(guard.run_dir, "ru").startswith("На паузе: видеокарта перегрелась")
    assert "heat guard resumes training" in heat_guard.pause_note(guard.run_dir, "en")
    title, text = heat_guard.pause_notice(guard, status, "en")
    assert title == "Training paused: the GPU is too hot"
    assert text == ("The card was at 90 °C for over 30 s (threshold 83 °C). Training resumes by "
                    "itself once it cools below 78 °C.")
    title, text = heat_guard.pause_notice(guard, status, "ru")
    assert title == "Обучение на паузе: видеокарта перегрелась" and "ниже 78 °C" in text
    guard.release()
    guard.pause_path.write_text("mine\n")
    assert heat_guard.pause_note(guard.run_dir, "en") == (
        "Paused: the run folder holds a PAUSE file; delete it and training goes on")


def test_only_the_cards_the_trainer_runs_on_can_pause_it(guard):
    """A home PC with two cards, the trainer on card 0: card 1 hot (a game) does not pause
    the run; card 0 hot does. Where the driver cannot list processes, every card counts."""
    from app.gpu.samples import TRAINER_MEM_NA, TRAINER_MEM_NOT_LISTED, TRAINER_MEM_OK

    def snap(t0: float, t1: float, notes=(TRAINER_MEM_OK, TRAINER_MEM_NOT_LISTED)) -> Snapshot:
        return Snapshot(time=0, status="ok", gpus=[
            GpuSample(index=0, name="a", temp_c=t0, trainer_mem_note=notes[0]),
            GpuSample(index=1, name="b", temp_c=t1, trainer_mem_note=notes[1])])

    for _ in range(40):
        guard.clock.now += 1
        status = guard.update_from(snap(60, 95))
    assert status.state == IDLE and status.hottest_c == 60 and not guard.pause_path.exists()
    for _ in range(40):
        guard.clock.now += 1
        status = guard.update_from(snap(90, 60))
    assert status.state == PAUSED and guard.pause_path.exists()
    guard.release()
    for _ in range(40):
        guard.clock.now += 1
        status = guard.update_from(snap(60, 95, (TRAINER_MEM_NA, TRAINER_MEM_NA)))
    assert status.state == PAUSED  # which card is the trainer's cannot be known: all count
