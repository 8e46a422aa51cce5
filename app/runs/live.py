"""A training run's live speed and time left, from its events: tokens/s, time per step,
and the time to «Шагов до» or to «Лимит, мин», whichever comes first (on Kaggle, which
leg ends there and what continues it).

Computed once here; the window's banner and `ternit run … --wait` both print `text()`.
Plain Python, fed one event at a time (`feed`), so a reader that already has the events
(the CLI's follower) and one that polls the file (`LiveFollower`, the window) agree.
"""

from __future__ import annotations

import os
import statistics
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base.i18n import t
from ..base.numbers import counted, decimal_text, duration_text, int_text
from .events import EventTail

RECENT_STEPS = 50  # the speed is the last steps' (a run's first steps are slow warm-up)
SEED_BYTES = 256 * 1024  # what a new follower reads of a long events file: its tail


@dataclass
class LiveProgress:
    """What the events of one run (one leg) say so far."""

    steps_to: int | None = None
    limit_min: float | None = None
    started_at: float | None = None  # unix time of the (latest) start event
    step: int | None = None
    tokens_per_s: float | None = None
    kaggle_leg: int | None = None  # on Kaggle: this leg's number and account
    kaggle_account: str | None = None
    next_account: str | None = None  # who continues after the limit ("auto": the lab picks)
    no_next_leg: bool = False  # «Остановить» asked on Kaggle: this leg is the last
    _times: deque = field(default_factory=lambda: deque(maxlen=RECENT_STEPS))  # (step, unix time)
    _step_ms: deque = field(default_factory=lambda: deque(maxlen=RECENT_STEPS))
    # (step_ms, tokens of that step) of the same recent steps: the banner's one pair
    _pairs: deque = field(default_factory=lambda: deque(maxlen=RECENT_STEPS))

    def feed(self, ev: dict[str, Any]) -> None:
        kind = ev.get("event")
        if kind == "start":
            training = (ev.get("config") or {}).get("training") or {}
            self.steps_to = _number(training.get("steps_to"), int) or self.steps_to
            self.limit_min = _number(training.get("limit_min"), float) or self.limit_min
            self.started_at = _number(ev.get("time"), float)
            self._times.clear()  # a leg resumed in place: its own pace from here
            self._step_ms.clear()
            self._pairs.clear()
        elif kind == "step":
            step, when = _number(ev.get("step"), int), _number(ev.get("time"), float)
            if step is None:
                return
            self.step = step
            self.tokens_per_s = _number(ev.get("tokens_per_s"), float) or self.tokens_per_s
            if when is not None:
                self._times.append((step, when))
            ms = _number(ev.get("step_ms"), float)
            if ms:
                self._step_ms.append(ms)
                if self.tokens_per_s:  # the trainer's rate of this very step: its tokens
                    self._pairs.append((ms, _number(ev.get("tokens_per_s"), float) or 0.0))

    def measured_pair(self) -> tuple[float, float, int] | None:
        """(tokens/s, ms/step, over how many steps): both from the same recent steps — the
        median step time, and the tokens of a median step over it — so that tokens/s × ms/step
        is the tokens of a step. None before a step with both figures."""
        pairs = [(ms, tps * ms / 1000) for ms, tps in self._pairs if tps > 0]
        if not pairs:
            return None
        ms = statistics.median(ms for ms, _ in pairs)
        tokens = statistics.median(tok for _, tok in pairs)
        return tokens / (ms / 1000), ms, len(pairs)

    def step_ms(self) -> float | None:
        """The median time of one training step, as the trainer measured it."""
        return statistics.median(self._step_ms) if self._step_ms else None

    def seconds_per_step(self) -> float | None:
        """Wall-clock pace over the recent steps (evaluations and checkpoints included),
        else the trainer's step time."""
        if len(self._times) >= 2:
            (s0, t0), (s1, t1) = self._times[0], self._times[-1]
            if s1 > s0 and t1 >= t0:
                return (t1 - t0) / (s1 - s0)
        ms = self.step_ms()
        return ms / 1000 if ms else None

    def text(self, now: float | None = None) -> str:
        """One line: speed, step time, and what ends the run (or the leg) when; "" before
        the first step."""
        if self.step is None:
            return ""
        now = time.time() if now is None else now
        parts = []
        pair = self.measured_pair()
        if pair:
            tps, ms, n = pair
            shown_ru, shown_en = (decimal_text(ms, 0 if ms >= 10 else 1, lang) for lang in ("ru", "en"))
            over = (("шагу", "шагам", "шагам"), ("step", "steps"))
            parts.append(t(f"{int_text(round(tps), 'ru')} ток/с · {shown_ru} мс/шаг (медиана по последним "
                           f"{counted(n, *over, 'ru')})",
                           f"{int_text(round(tps), 'en')} tok/s · {shown_en} ms/step (median of the last "
                           f"{counted(n, *over, 'en')})"))
        end = self._end_text(now)
        if end:
            parts.append(end)
        return " · ".join(parts)

    def _end_text(self, now: float) -> str:
        pace = self.seconds_per_step()
        to_steps = (self.steps_to - self.step) * pace if pace and self.steps_to and self.step is not None else None
        to_limit = None
        if self.limit_min and self.started_at is not None:
            to_limit = max(0.0, self.limit_min * 60 - (now - self.started_at))
        if to_steps is not None and (to_limit is None or to_steps <= to_limit):
            return t(f"до шага {int_text(self.steps_to)} ≈{duration_text(to_steps)}",
                     f"≈{duration_text(to_steps)} to step {int_text(self.steps_to)}")
        if to_limit is None:
            return ""
        at = self.step + int(to_limit / pace) if pace and self.step is not None else None
        where = t(f" на шаге ≈{int_text(at)}", f" at step ≈{int_text(at)}") if at is not None else ""
        if self.kaggle_leg is None:
            return t(f"лимит через {duration_text(to_limit)}{where}, раньше «Шагов до»",
                     f"the limit stops it in {duration_text(to_limit)}{where}, before “Steps to”")
        who = self.kaggle_account or "?"
        if self.no_next_leg:  # the banner's status says the same: no contradiction under it
            return t(f"этап {self.kaggle_leg} ({who}) кончится по лимиту через {duration_text(to_limit)}{where}; "
                     "продолжения не будет (остановка запрошена)",
                     f"leg {self.kaggle_leg} ({who}) ends at its limit in {duration_text(to_limit)}{where}; "
                     "no next leg (a stop was asked)")
        nxt = self.next_account or "auto"
        # The runner continues a quota-cut leg on the account asked for while it has quota,
        # else on one Auto picks (app.kaggle.chain, LegPlanning._continue).
        then = (t("дальше — этап {n} на аккаунте с квотой (Авто)", "then leg {n} on an account with quota (Auto)")
                if nxt == "auto" else t("дальше — этап {n} на {a} (нет квоты — Авто)",
                                        "then leg {n} on {a} (no quota: Auto)"))
        return (t(f"этап {self.kaggle_leg} ({who}) кончится по лимиту через {duration_text(to_limit)}{where}; ",
                  f"leg {self.kaggle_leg} ({who}) ends at its limit in {duration_text(to_limit)}{where}; ")
                + then.format(n=self.kaggle_leg + 1, a=nxt))


class LiveFollower:
    """The window's side: follows one run's events file on each tick (its tail only, for a
    long run) and keeps a LiveProgress for it."""

    def __init__(self) -> None:
        self.run_id: str | None = None
        self.progress = LiveProgress()
        self._tail: EventTail | None = None

    def text_for(self, rec: Any, now: float | None = None) -> str:
        """The live line for a RunRecord; "" once it is no longer going."""
        if not rec.active:
            self.run_id, self._tail = None, None
            return ""
        if rec.id != self.run_id:
            self.run_id = rec.id
            self.progress = self.progress_of(rec)
            self._tail = EventTail(rec.events_path, _seed_offset(rec.events_path))
        for ev in self._tail.read() if self._tail else []:
            self.progress.feed(ev)
        # A stop asked while it runs: on Kaggle the leg goes on to its limit, with no next one.
        self.progress.no_next_leg = rec.target_kind == "kaggle" and bool(getattr(rec, "stop_requested_at", None))
        return self.progress.text(now)


    @staticmethod
    def progress_of(rec: Any) -> LiveProgress:
        """A LiveProgress for a RunRecord, before its events (a Kaggle leg: its number and
        account, and who continues it)."""
        progress = LiveProgress(steps_to=rec.steps_to, started_at=rec.started_at)
        if rec.target_kind == "kaggle":
            progress.kaggle_leg, progress.kaggle_account = rec.leg, rec.target_account
            progress.next_account = _next_account(rec)
        return progress


def _next_account(rec: Any) -> str:
    """Who continues a Kaggle run after this leg's limit: the account asked for in
    run.json, or "auto" (the lab picks a free one then)."""
    try:
        account = ((rec.config().get("target") or {}).get("account")) or "auto"
    except (OSError, ValueError):
        return "auto"
    return str(account)


def _seed_offset(path: Path) -> int:
    """Where a new follower starts reading: the whole file if small, else its last
    SEED_BYTES (the first, partial line is skipped as torn)."""
    try:
        size = os.path.getsize(path)
    except OSError:
        return 0
    return max(0, size - SEED_BYTES)


def _number(value: Any, kind: type) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return kind(value)
