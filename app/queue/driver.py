"""The window's side of the queue, headless: the window never drives the queue. When items
wait (or runs are to be followed) and no runner holds `queue.lock`, it starts the detached
runner (app/queue/detach.py, the one `ternit queue run` starts) and from then on only shows
and edits the queue; closing or killing the window changes nothing for it. It puts the
form's run or a series in the queue, edits it, says what changed, and says who drives it.

It announces (`QueueDriver.events`, the pattern of app/window/events.py): `changed(timeline)`
— the queue as it is now, after a look or an edit — and `news(title, text)` — a tray
message. ui/queue/tab.py and the window subscribe. `tick()` and `add()` run in a worker
thread (the estimates read the measured runs' folders; the pre-check is a child process);
`refresh()`, called in the window's thread after them, announces.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from dataclasses import dataclass
from typing import Any

from ..base.announcement import Event
from ..base.i18n import quoted, t
from ..base.numbers import counted, parse_number, plural_ru
from ..base.state import StateError
from ..form import fields as F
from ..runs.awake import awake_line
from ..runs.manager import RunManager
from ..runs.registry import RunRecord
from . import detach, lock
from .adding import Added, add_runs
from .runner import needs_runner
from .series import MAX_RUNS, Results, results
from .store import DONE, FAILED, WAITING, QueueError, QueueStore
from .world import Planner, Timeline, runner_line

log = logging.getLogger(__name__)

TICK_S = 2.0  # how often the window looks at the queue
RESTART_S = 20.0  # a runner the window started that ended at once is started again after this
VARY_KINDS = ("int", "float")


@dataclass(frozen=True)
class SeriesField:
    """A form field a series can vary: its name in the form, its run.json key, its label."""

    name: str
    key: str
    label: str
    kind: str


def series_fields() -> list[SeriesField]:
    """The form's numeric fields that go to run.json, in the form's order."""
    return [SeriesField(f.name, str(f.path), f.label_text(), f.kind) for f in F.FIELDS
            if f.path and f.kind in VARY_KINDS]


def parse_values(text: str, kind: str) -> list[int | float]:
    """«0,001; 0,0003» or "0.001 0.0003" → the values (separated by «;», else by spaces, so
    that a decimal comma stays a decimal comma), each read as the form reads a number."""
    parts = [p.strip() for p in (text.split(";") if ";" in text else text.split()) if p.strip()]
    if not parts:
        raise QueueError(t("перечислите значения через «;» или пробел", "list the values separated by “;” or spaces"))
    try:
        values = [parse_number(p, kind) for p in parts]
    except ValueError as e:
        raise QueueError(str(e)) from None
    if len(set(values)) != len(values):
        raise QueueError(t("одно значение указано дважды", "a value is listed twice"))
    return values


def queue_target(config: dict[str, Any]) -> tuple[str, str]:
    """Where «В очередь» sends the form's run: the form's own machine (this PC, or Kaggle
    with its account or «Авто»)."""
    target = config.get("target") or {}
    if target.get("kind") == "kaggle":
        return "kaggle", str(target.get("account") or "auto")
    return "local", "auto"


class QueueEvents:
    """- `changed(timeline)`: the queue, its prediction and who drives it, as they are now;
    - `news(title, text)`: a run skipped or retried, the queue emptied (a tray message)."""

    def __init__(self) -> None:
        self.changed = Event("queue.changed")
        self.news = Event("queue.news")


@dataclass(frozen=True)
class CloseQuestion:
    """What the window asks when it closes with work going on without it."""

    text: str
    detail: str
    waiting: int          # queued runs that will start without the window


class QueueDriver:
    def __init__(self, runs: RunManager, start_runner: bool = True) -> None:
        self.events = QueueEvents()
        self.registry = runs.registry
        self.store = QueueStore(self.registry.state)
        self.planner = Planner(self.store, self.registry)
        self.start_runner = start_runner  # off for --snapshot: a picture starts nothing
        self.started: Any = None  # the runner this window started last (a Popen)
        self._started_mono = float("-inf")
        self._seen: dict[int, tuple[str, int]] | None = None
        self._pending = False

    # -- the runner ----------------------------------------------------------------------------
    def ensure_runner(self) -> bool:
        """Start the detached runner when the queue has work and nobody drives it (True when
        it was started now). One that ended at once (its log says why) is tried again later."""
        alive = self.started is not None and self.started.poll() is None  # poll() reaps one that ended
        if not self.start_runner or alive or lock.is_held() or not needs_runner(self.store):
            return False
        if time.monotonic() - self._started_mono < RESTART_S:
            return False
        self._started_mono = time.monotonic()
        self.started = detach.spawn()
        log.info("queue: the window started the queue runner (process %s)", self.started.pid)
        return True

    def tick(self) -> Timeline | None:
        """A look (worker thread): the runner started if it is needed, and the queue as it
        then is — computed here, off the window's thread. A failure is logged and tried again
        at the next look."""
        try:
            self.ensure_runner()
            return self.timeline()
        except (StateError, sqlite3.Error, OSError) as e:
            log.warning("the queue could not be read: %s", e)
        except Exception:  # noqa: BLE001 - the window keeps going; the next look retries
            log.exception("the queue's look failed")
        return None

    def close_question(self, running: list[RunRecord]) -> CloseQuestion | None:
        """What to ask as the window closes: a run training here and the queued runs that will
        start without the window; None when neither (nothing to ask)."""
        waiting = [it for it in self.store.items((WAITING,)) if not it.held] if not self.store.paused() else []
        if not running and not waiting:
            return None
        n = len(waiting)
        queued_ru = f"в очереди ещё {n} — {'он начнётся' if n == 1 else 'они начнутся'} без окна"
        queued_en = f"{n} more queued — {'it starts' if n == 1 else 'they start'} without the window"
        if running:
            names = ", ".join(quoted(r.name) for r in running)
            text = t(f"Обучение {names} идёт" + (f"; {queued_ru}." if n else "."),
                     f"{names} is training" + (f"; {queued_en}." if n else "."))
        else:
            text = t(f"В очереди {n} {plural_ru(n, 'прогон', 'прогона', 'прогонов')} — "
                     f"{'он начнётся' if n == 1 else 'они начнутся'} без окна.",
                     f"{n} queued run{'s' if n != 1 else ''} — {'it starts' if n == 1 else 'they start'} "
                     "without the window.")
        detail = t("Окно можно закрыть: обучение и очередь идут в своих процессах, ПК не уснёт, пока они "
                   "работают. «Приостановить очередь» — новые прогоны не начнутся; «Остановить и закрыть» "
                   "сохранит чекпоинт идущего обучения.",
                   "The window may close: training and the queue go on in their own processes, and the PC "
                   "does not sleep while they work. “Pause the queue”: no new run starts; “Stop and close” "
                   "saves a checkpoint of the training run.")
        return CloseQuestion(text, detail, n)

    # -- showing -----------------------------------------------------------------------------
    def timeline(self) -> Timeline:
        return self.planner.timeline()

    def refresh(self, tl: Timeline | None = None) -> Timeline:
        """Announce the queue as it is now (`tl`, when a round just computed it), and what
        changed since the last look."""
        tl = tl if tl is not None else self.timeline()
        self.events.changed.emit(tl)
        for title, text in self.news(tl):
            self.events.news.emit(title, text)
        return tl

    def news(self, tl: Timeline) -> list[tuple[str, str]]:
        """Tray messages for what changed since the last look, whoever drives the queue: a
        run skipped, a run retried, the queue emptied. (A run's own end is the history's
        message, RunEnded.)"""
        now = {r.item.id: (r.item.state, r.item.attempt) for r in tl.rows}
        items = {r.item.id: r.item for r in tl.rows}
        pending = not tl.empty
        out: list[tuple[str, str]] = []
        if self._seen is not None:
            for item_id, (state, attempt) in now.items():
                was = self._seen.get(item_id)
                if was is None:
                    continue
                it = items[item_id]
                if state == FAILED and was[0] != FAILED:
                    out.append((t(f"Очередь: {it.name} — пропущен", f"Queue: {it.name} — skipped"), it.message or ""))
                elif attempt > was[1]:
                    out.append((t(f"Очередь: {it.name} — повтор", f"Queue: {it.name} — retry"), it.message or ""))
            if self._pending and not pending:
                done = sum(1 for it in items.values() if it.state == DONE)
                out.append((t("Очередь пуста", "The queue is empty"),
                            t(f"Все прогоны очереди завершились (готово: {done}).",
                              f"Every queued run has ended ({done} done).")))
        self._seen, self._pending = now, pending
        return out

    def series_results(self, series_id: int) -> Results:
        return results(self.store, self.registry, series_id)

    def awake_line(self) -> str:
        """Whether the PC is kept awake now, and by whom: the trainers here, this runner (the
        monitor's line)."""
        note = lock.current_holder()
        return awake_line(self.registry, note.awake if note is not None else None)

    def who_drives(self, tl: Timeline | None = None) -> str:
        """The status line: who drives the queue (its pid, since when) or why nobody does."""
        return tl.who if tl is not None else runner_line(self.store)

    # -- the user's edits ------------------------------------------------------------------
    def add(self, config: dict[str, Any], target: str | None = None, account: str | None = None,
            vary: list[tuple[str, list[Any]]] | None = None, parent_id: str | None = None) -> Added:
        """The form's run (or a series of it) at the end of the queue; `target` "any" lets
        it go wherever frees first (default: the form's machine). Pre-checks each run (a
        child process each): call it off the window's thread."""
        default_target, default_account = queue_target(config)
        if target == "any":
            default_account = "auto"
        return add_runs(self.store, config, target=target or default_target, account=account or default_account,
                        vary=vary, parent_id=parent_id)

    @staticmethod
    def added_text(added: Added) -> str:
        if added.series is not None:
            keys = ", ".join(k for k, _ in added.series.vary)
            return t(f"В очереди серия {added.series.id} ({keys}): {counted(len(added.items), ('прогон', 'прогона', 'прогонов'), ('run', 'runs'), 'ru')}",
                     f"Series {added.series.id} ({keys}) queued: {counted(len(added.items), ('прогон', 'прогона', 'прогонов'), ('run', 'runs'), 'en')}")
        it = added.items[0]
        return t(f"В очереди: {it.name} (№ {it.id})", f"Queued: {it.name} (no. {it.id})")

    @staticmethod
    def series_count(values: list[list[Any]]) -> str:
        n = 1
        for v in values:
            n *= max(1, len(v))
        if n > MAX_RUNS:
            return t(f"{counted(n, ('прогон', 'прогона', 'прогонов'), ('run', 'runs'), 'ru')} — больше {MAX_RUNS}", f"{counted(n, ('прогон', 'прогона', 'прогонов'), ('run', 'runs'), 'en')} — more than {MAX_RUNS}")
        return t(f"будет прогонов: {n}", f"runs: {n}")

    def remove(self, item_id: int) -> str:
        it = self.store.remove(item_id)
        self.refresh()
        return t(f"Убран из очереди: {it.name}", f"Taken out of the queue: {it.name}")

    def move(self, item_id: int, by: int) -> str:
        """Up (by −1) or down (+1) among the waiting runs."""
        waiting = [it.id for it in self.store.items(("waiting",))]
        if item_id not in waiting:
            raise QueueError(t("переставлять можно только ждущие прогоны", "only waiting runs can be moved"))
        self.store.move(item_id, waiting.index(item_id) + 1 + by)
        self.refresh()
        return ""

    def hold(self, item_id: int, held: bool) -> str:
        it = self.store.set_held(item_id, held)
        self.refresh()
        return f"{it.name}: {it.label()}"

    def set_paused(self, paused: bool) -> str:
        self.store.set_paused(paused)
        self.refresh()
        return t("Очередь приостановлена: идущие прогоны идут, новые не начинаются",
                 "The queue is paused: running runs go on, no new one starts") if paused else \
            t("Очередь продолжается", "The queue goes on")



def anywhere_text(has_card: bool, lang: str | None = None) -> str:
    """The «куда освободится раньше» choice as this PC has it: this PC or Kaggle with a card;
    without one Kaggle only (app/queue/estimates.py: the CPU takes only a run queued for it)."""
    if has_card:
        return t("Куда освободится раньше: этот ПК или Kaggle", "Wherever frees first: this PC or Kaggle", lang)
    return t("Куда освободится раньше: аккаунты Kaggle (у этого ПК нет видеокарты NVIDIA)",
             "Wherever frees first: the Kaggle accounts (this PC has no NVIDIA card)", lang)
