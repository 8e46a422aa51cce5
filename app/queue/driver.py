"""The window's side of the queue, headless: the window drives the queue while it is open
(unless another runner, e.g. `ternit queue run`, already does: then it only shows it, and
takes over when that one ends), puts the form's run or a series in it, edits it, and says
what changed.

It announces (`QueueDriver.events`, the pattern of app/window/events.py): `changed(timeline)`
— the queue as it is now, after a round or an edit — and `news(title, text)` — a tray
message. ui/queue/tab.py and the window subscribe. `tick()` and `add()` run in a worker
thread (a Kaggle start uploads and pushes; the pre-check is a child process); `refresh()`,
called in the window's thread after them, announces.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from dataclasses import dataclass
from typing import Any

from ..base.i18n import t
from ..base.numbers import parse_number
from ..base.state import StateError
from ..form import fields as F
from ..runs.manager import RunManager
from ..window.events import Event
from .adding import Added, add_runs
from .lock import RunnerBusy
from .runner import QueueRunner
from .series import MAX_RUNS, Results, results
from .store import DONE, FAILED, QueueError
from .world import Timeline

log = logging.getLogger(__name__)

TICK_S = 2.0  # how often the window's runner looks at the queue
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
        raise QueueError(t("перечислите значения через «;» или пробел", "list the values separated by «;» or spaces"))
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


class QueueDriver:
    def __init__(self, runs: RunManager) -> None:
        self.events = QueueEvents()
        self.runner = QueueRunner(runs, t("окно лаборатории", "the lab's window"), poll_runs=False)
        self.store = self.runner.store
        self.planner = self.runner.planner
        self.other_runner = ""  # who drives the queue when the window does not
        self._seen: dict[int, tuple[str, int]] | None = None
        self._pending = False
        self._round = threading.Lock()  # held while a round runs (in its worker thread)

    # -- driving ---------------------------------------------------------------------------
    @property
    def driving(self) -> bool:
        return self.runner.lock.held

    def take(self) -> bool:
        """Drive the queue if no other runner does (finishing what a killed one began)."""
        if self.driving:
            return True
        try:
            self.runner.start()
        except RunnerBusy as e:
            self.other_runner = str(e)
            return False
        self.other_runner = ""
        return True

    def tick(self) -> Timeline | None:
        """One round of the runner (worker thread), and the queue as it then is — computed
        here, off the window's thread (its estimates read the measured runs' folders). A
        failure is logged and tried again at the next round; the queue stays as it was."""
        try:
            with self._round:
                if self.take():
                    self.runner.tick()
                return self.timeline()
        except (StateError, sqlite3.Error, OSError) as e:
            log.warning("the queue's round did not finish: %s", e)
        except Exception:  # noqa: BLE001 - the window keeps going; the next round retries
            log.exception("the queue's round failed")
        return None

    def close(self, wait_s: float = 10.0) -> None:
        """The window closes: the queue stays as it is; the next runner carries on. A round
        still starting a run (a Kaggle upload) keeps the queue until it ends or the process
        does — never two runners on one start."""
        if self._round.acquire(timeout=wait_s):
            try:
                self.runner.close()
            finally:
                self._round.release()
        else:
            log.info("the queue's round is still starting a run: the queue is let go when it ends")

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
        return results(self.store, self.runner.registry, series_id)

    def who_drives(self) -> str:
        if self.driving:
            return t("очередь ведёт это окно", "this window drives the queue")
        return self.other_runner or t("очередь никто не ведёт", "nobody drives the queue")

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
            return t(f"В очереди серия {added.series.id} ({keys}): {len(added.items)} прогонов",
                     f"Series {added.series.id} ({keys}) queued: {len(added.items)} runs")
        it = added.items[0]
        return t(f"В очереди: {it.name} (№ {it.id})", f"Queued: {it.name} (no. {it.id})")

    @staticmethod
    def series_count(values: list[list[Any]]) -> str:
        n = 1
        for v in values:
            n *= max(1, len(v))
        if n > MAX_RUNS:
            return t(f"{n} прогонов — больше {MAX_RUNS}", f"{n} runs — more than {MAX_RUNS}")
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

