"""Heat guard: pause a local run while the card is too hot, resume when it has cooled.

When the hottest card stays at or above `threshold_c` for `hold_s` seconds, the guard writes
RUN_DIR/PAUSE. The trainer checks that file between steps: while it exists the trainer waits,
and when it is gone it appends {"event": "pause", "step": s, "time": t, "seconds": how long}
to events.jsonl, which the loss plot marks. The guard removes PAUSE once the card is below
`threshold_c - hysteresis_c` (so it does not flap around one degree). It never removes a PAUSE
it did not write (the user's own pause stays the user's).

Pure logic plus that one file: the clock and the temperatures come from outside, so the tests
drive it with a fake clock and fake samples.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from ..base import atomic
from ..base.numbers import decimal_text
from .samples import (
    TRAINER_MEM_NOT_LISTED,
    TRAINER_MEM_NOT_REPORTED,
    TRAINER_MEM_OK,
    GpuSample,
    Snapshot,
)

PAUSE_FILE = "PAUSE"

IDLE = "idle"  # cool enough (or no reading yet)
HEATING = "heating"  # at or above the threshold, counting towards hold_s
PAUSED = "paused"  # PAUSE written; waiting to cool below threshold - hysteresis


@dataclass
class GuardStatus:
    state: str
    hottest_c: float | None
    hot_for_s: float  # how long the card has been at or above the threshold (HEATING)
    paused_for_s: float  # how long the guard's pause has lasted (PAUSED)
    action: str | None = None  # "paused" or "resumed" when this update changed the file


def write_atomic(path: Path, text: str) -> None:
    """Temp file in the same folder + fsync + rename: the file is whole or absent."""
    atomic.write_text(path, text)


def written_by_guard(path: Path) -> bool:
    """Whether PAUSE at `path` is a heat guard's (its note says so), not the user's."""
    try:
        note = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(note, dict) and note.get("by") == "heat_guard"


def guarded_cards(snap: Snapshot) -> list[GpuSample]:
    """The cards whose heat pauses the run: those the driver lists the trainer on; none when
    it lists every card's processes and the trainer on none of them (it trains on the CPU,
    or has not reached a card yet); every card when that cannot be known."""
    cards = [g for g in snap.gpus if not g.lost]
    mine = [g for g in cards if g.trainer_mem_note in (TRAINER_MEM_OK, TRAINER_MEM_NOT_REPORTED)]
    if mine:
        return mine
    if cards and all(g.trainer_mem_note == TRAINER_MEM_NOT_LISTED for g in cards):
        return []
    return cards


class HeatGuard:
    def __init__(
        self,
        run_dir: Path | str,
        threshold_c: float,
        hold_s: float,
        hysteresis_c: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ):
        if hold_s < 0 or hysteresis_c < 0:
            raise ValueError("hold_s and hysteresis_c must not be negative")
        self.run_dir = Path(run_dir)
        self.threshold_c = float(threshold_c)
        self.hold_s = float(hold_s)
        self.hysteresis_c = float(hysteresis_c)
        self._clock = clock
        self._wall = wall
        self.state = IDLE
        self._hot_since: float | None = None
        self._paused_at: float | None = None
        self._owns_file = False
        self.pauses = 0
        if written_by_guard(self.pause_path):
            # A pause an earlier guard left (the window was killed while it held one): take it
            # over, or no one lifts it and the trainer waits on it until its time limit.
            self.state, self._paused_at, self._owns_file = PAUSED, clock(), True

    @property
    def pause_path(self) -> Path:
        return self.run_dir / PAUSE_FILE

    @property
    def resume_below_c(self) -> float:
        return self.threshold_c - self.hysteresis_c

    def update_from(self, snap: Snapshot, now: float | None = None) -> GuardStatus:
        """Feed a monitor snapshot: the hottest of the cards the trainer runs on counts. A
        hot card the trainer does not use (the other card of a home PC, busy with a game) is
        not a reason to pause it; where the driver cannot say which cards it uses, all count."""
        return self.update([g.temp_c for g in guarded_cards(snap)], now)

    def update(self, temps: Iterable[float | None], now: float | None = None) -> GuardStatus:
        now = self._clock() if now is None else now
        known = [float(x) for x in temps if x is not None]
        hottest = max(known) if known else None
        action = None

        if self.state == PAUSED and not self.pause_path.exists():
            # Someone (the user, a new leg of the run) removed PAUSE: their call; start over.
            self._reset()
        if hottest is None:
            # No reading (no card, lost card, sensor n/a): keep the state, decide nothing.
            pass
        elif self.state == IDLE:
            if hottest >= self.threshold_c:
                self.state, self._hot_since = HEATING, now
        elif self.state == HEATING:
            if hottest < self.threshold_c:
                self._reset()
        if self.state == HEATING and hottest is not None and now - self._hot_since >= self.hold_s:
            self._pause(hottest, now)
            action = "paused"
        elif self.state == PAUSED and hottest is not None and hottest < self.resume_below_c:
            self.release()
            action = "resumed"
        return GuardStatus(
            state=self.state,
            hottest_c=hottest,
            hot_for_s=now - self._hot_since if self.state == HEATING else 0.0,
            paused_for_s=now - self._paused_at if self.state == PAUSED else 0.0,
            action=action,
        )

    def _pause(self, hottest: float, now: float) -> None:
        path = self.pause_path
        if path.exists():
            self._owns_file = False  # the user paused already; leave their file alone
        else:
            note = {
                "by": "heat_guard",
                "reason": f"GPU at {hottest:.0f} °C for {self.hold_s:.0f} s "
                          f"(threshold {self.threshold_c:.0f} °C)",
                "resume_below_c": self.resume_below_c,
                "time": self._wall(),
            }
            write_atomic(path, json.dumps(note) + "\n")
            self._owns_file = True
        self.state, self._paused_at = PAUSED, now
        self.pauses += 1

    def release(self) -> None:
        """Remove the guard's own PAUSE (cooled, guard switched off, or the run ended)."""
        if self._owns_file:
            try:
                self.pause_path.unlink()
            except FileNotFoundError:
                pass
        self._reset()

    def _reset(self) -> None:
        self.state, self._hot_since, self._paused_at, self._owns_file = IDLE, None, None, False


def absent_text(lang: str | None = None) -> str:
    """Why the GPU tab has no heat guard on a PC without an NVIDIA card."""
    from app.base.i18n import t

    return t("Защиты от перегрева нет: она следит за температурой видеокарты NVIDIA, а у этого ПК её "
             "нет (обучение на процессоре; его нагрев ограничивает сама система).",
             "No heat guard: it watches an NVIDIA card's temperature, and this PC has none (training "
             "runs on the CPU, whose heat the system itself limits).", lang)


def applies(snap_status: str) -> bool:
    """Whether the heat guard has a card to watch: not when NVML finds none (NO_GPU)."""
    from .samples import NO_GPU

    return snap_status != NO_GPU


def status_text(guard: HeatGuard | None, status: GuardStatus | None,
                lang: str | None = None) -> str:
    """The heat guard's line in the monitor panel."""
    from app.base.i18n import t

    if guard is None:
        return t("Защита от перегрева выключена", "The heat guard is off", lang)
    limit = f"{guard.threshold_c:.0f} °C"
    if status is None or status.state == IDLE:
        return t(f"Защита от перегрева: пауза, если карта ≥ {limit} дольше {decimal_text(guard.hold_s, 0, 'ru')} с",
                 f"Heat guard: pause when the card is ≥ {limit} for over {decimal_text(guard.hold_s, 0, 'en')} s",
                 lang)
    hot = f"{status.hottest_c:.0f} °C" if status.hottest_c is not None else "?"
    if status.state == HEATING:
        return t(f"Защита от перегрева: карта {hot} ≥ {limit} уже {decimal_text(status.hot_for_s, 0, 'ru')} из "
                 f"{decimal_text(guard.hold_s, 0, 'ru')} с",
                 f"Heat guard: the card is {hot} ≥ {limit} for {decimal_text(status.hot_for_s, 0, 'en')} of "
                 f"{decimal_text(guard.hold_s, 0, 'en')} s", lang)
    cool = f"{guard.resume_below_c:.0f} °C"
    return t(f"Защита от перегрева: обучение на паузе {decimal_text(status.paused_for_s, 0, 'ru')} с (карта {hot}); "
             f"продолжится, когда остынет ниже {cool}",
             f"Heat guard: training paused for {decimal_text(status.paused_for_s, 0, 'en')} s (card at {hot}); it "
             f"resumes when the card cools below {cool}", lang)


def pause_note(run_dir: Path | str, lang: str | None = None) -> str:
    """What the run's banner says while RUN_DIR/PAUSE holds the trainer: empty when it does
    not. Read from the file itself, so it is true whoever wrote it (the guard, the user, a
    guard of a window that is gone) and whichever tab is in front."""
    from app.base.i18n import t

    path = Path(run_dir) / PAUSE_FILE
    if not path.exists():
        return ""
    if written_by_guard(path):
        return t("На паузе: видеокарта перегрелась; защита от перегрева продолжит обучение, когда "
                 "карта остынет (вкладка «Видеокарта»)",
                 "Paused: the GPU got too hot; the heat guard resumes training once the card has "
                 "cooled (the “GPU” tab)", lang)
    return t(f"На паузе: в папке прогона лежит файл {PAUSE_FILE}; удалите его, и обучение "
             "продолжится",
             f"Paused: the run folder holds a {PAUSE_FILE} file; delete it and training goes on",
             lang)


def pause_notice(guard: HeatGuard, status: GuardStatus | None,
                 lang: str | None = None) -> tuple[str, str]:
    """The tray message (title, text) when the guard pauses a run: the user may be looking
    at another tab, or another program."""
    from app.base.i18n import t

    hot = f"{status.hottest_c:.0f} °C" if status is not None and status.hottest_c is not None \
        else f"≥ {guard.threshold_c:.0f} °C"
    cool = f"{guard.resume_below_c:.0f} °C"
    return (t("Обучение на паузе: видеокарта перегрелась",
              "Training paused: the GPU is too hot", lang),
            t(f"Карта {hot} дольше {decimal_text(guard.hold_s, 0, 'ru')} с (порог {decimal_text(guard.threshold_c, 0, 'ru')} °C). "
              f"Обучение продолжится само, когда она остынет ниже {cool}.",
              f"The card was at {hot} for over {decimal_text(guard.hold_s, 0, 'en')} s (threshold "
              f"{decimal_text(guard.threshold_c, 0, 'en')} °C). Training resumes by itself once it cools below "
              f"{cool}.", lang))


def resumed_text(lang: str | None = None) -> str:
    from app.base.i18n import t

    return t("Защита от перегрева сняла паузу: обучение продолжается",
             "The heat guard lifted its pause: training goes on", lang)
