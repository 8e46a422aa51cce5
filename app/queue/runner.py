"""The runner: the one process that drives the queue (`ternit queue run`, started detached by
the window when the queue has work: app/queue/detach.py) — settles the runs that ended (a
failed one continued or retried as the one retry policy says, app/queue/retry.py, or skipped
and said), and starts what the planner says can start now, through RunManager like «Старт».
It keeps going while the queue has work (`needs_runner`) and ends when it has none.

Exactly one runner per queue (app/queue/lock.py). Starting an item is three side effects —
reserve the run's id, create its folder and row, spawn its trainer or push its Kaggle leg —
and before each the item's `step` records what is about to happen. A runner killed at any
moment (`kill -9`, a power cut) is reconciled by the next one at its start:
- claimed, no run row:   the run is created with the reserved id (no second run);
- created, or claimed with the row there: the run is launched;
- launching:  a local run whose trainer started (a `start` event, or a live process training
  its folder) is followed as it is; a Kaggle run whose leg is recorded is left to the Kaggle
  side, which asks Kaggle before any second push (app/kaggle/push.py); otherwise launched.
Nothing is started twice and no item is lost.
"""

from __future__ import annotations

import copy
import logging
import os
import re
import shutil
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..base import run_status as st
from ..base.i18n import in_language, t
from ..base.numbers import format_value, loss_text
from ..base.state import StateError
from ..base.state_faults import holder_text, locked
from ..base.stored_text import both, both_of, shown
from ..kaggle.accounts import Accounts
from ..kaggle.settings import load as kaggle_settings
from ..runs.events import read_events
from ..runs.failure import shown_message
from ..runs.manager import RunManager
from ..runs.precheck import RunError
from ..runs.registry import RunNotFound, RunRecord
from . import faults, retry
from .lock import RunnerLock
from .plan import LOCAL, Slot, startable
from .store import (
    CREATED,
    DONE,
    FAILED,
    LAUNCHING,
    RUNNING,
    STARTING,
    WAITING,
    Item,
    QueueStore,
)
from .trials import Trials, searching
from .world import Planner, damaged_note, machine_label, measured

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class QueueEvent:
    """What the runner did that a person may want to hear of (a tray message, a CLI line)."""

    kind: str                 # started | ended | retry | failed | empty | waiting | let_go
    item: Item | None
    text: str

    def title(self, lang: str | None = None) -> str:
        if self.kind == "empty":
            return t("Очередь пуста", "The queue is empty", lang)
        if self.kind == "waiting":
            return t("Очередь ждёт файл состояния", "The queue waits for the state file", lang)
        if self.kind == "let_go":
            return t("Очередь отпущена", "The queue was let go", lang)
        name = self.item.name if self.item else ""
        word = {"started": t("запущен", "started", lang), "ended": t("готов", "done", lang),
                "retry": t("повтор", "retry", lang), "failed": t("пропущен", "skipped", lang)}[self.kind]
        return t(f"Очередь: {name} — {word}", f"Queue: {name} — {word}", lang)

    @property
    def notify(self) -> bool:
        """Whether it deserves a tray message (a start or a wait does not)."""
        return self.kind not in ("started", "waiting")


Listener = Callable[[QueueEvent], None]


class QueueRunner:
    """Drives the queue. `start()` takes the lock and reconciles; `tick()` does one round."""

    def __init__(self, manager: RunManager, program: str, *, clock: Callable[[], float] = time.time) -> None:
        self.manager = manager
        self.registry = manager.registry
        self.store = QueueStore(self.registry.state)
        self.planner = Planner(self.store, self.registry, clock=clock)
        self.lock = RunnerLock(program)
        self.clock = clock
        self.failed: list[int] = []  # items this runner skipped
        self._listeners: list[Listener] = []
        self._quota_checked = 0.0
        self._was_empty = True
        self.trials = Trials(self.store, manager)  # the searches' trials (app/search/)
        # The local runs this runner saw training at its last round: one of them found gone
        # died under it (its own failure); one never seen went down with the machine (retry.py).
        self._watched: set[str] = set()
        self._booted = retry.boot_time()
        # Another program holding the state file's write lock past a command's wait: the
        # runner says so (`trouble`), waits LOCK_BACKOFF_S (doubling) and tries again, and
        # first finishes any start the interrupted round left half-done (reconcile).
        self.trouble = ""
        self._backoff_s = 0.0
        self._retry_at = 0.0
        self._reconcile = False
        # The state file this runner drives (device, inode): a file deleted or set aside
        # under it is no longer the lab's, and the runner lets go (`gone` says why).
        self._identity: tuple[int, int] | None = None
        self.gone = ""
        # Why each ready item cannot be placed anywhere as the lab is now (an account that
        # is not there, no working key): when that is all that waits, `drive` ends.
        self.stuck: list[str] = []

    def add_listener(self, fn: Listener) -> None:
        self._listeners.append(fn)

    def _say(self, events: list[QueueEvent]) -> list[QueueEvent]:
        for ev in events:
            for fn in list(self._listeners):
                fn(ev)
        return events

    # -- holding the queue ------------------------------------------------------------------------
    def start(self) -> list[QueueEvent]:
        """Take the queue (RunnerBusy names the runner that has it) and finish every start
        a killed runner left half-done."""
        if self.gone:
            raise StateError(self.gone)
        self.lock.acquire()
        self._identity = _identity(self.registry.state.path)
        try:
            self._was_empty = self.store.is_empty()
            return self._say(self.reconcile())
        except (StateError, sqlite3.OperationalError) as e:
            if not locked(e):
                raise
            self._reconcile = True
            return self._say(self._locked(e))

    def close(self) -> None:
        self.lock.release()

    def reconcile(self) -> list[QueueEvent]:
        events: list[QueueEvent] = []
        for it in self.store.items((STARTING,)):
            log.info("queue: finishing the start of item %s (step %s, run %s)", it.id, it.step, it.run_id)
            events += self._finish_start(it)
        return events

    # -- one round ----------------------------------------------------------------------------------
    def tick(self) -> list[QueueEvent]:
        """Settle what ended, then start what can start now. Blocks while a Kaggle leg is
        uploaded and pushed. A state file write-locked by another program is waited out,
        never a reason to stop."""
        if self.gone:
            return []
        assert self.lock.held, "start() first"
        if self._lets_go():
            return self._say([QueueEvent("let_go", None, self.gone)])
        if time.monotonic() < self._retry_at:
            return []
        try:
            events = self.reconcile() if self._reconcile else []
            self._reconcile = False
            events += self._round()
        except (StateError, sqlite3.OperationalError) as e:
            if not locked(e):
                raise
            self._reconcile = True  # a start may have stopped between its steps
            return self._say(self._locked(e))
        if self.trouble:
            log.info("queue: the state file is free again; the queue goes on")
            self.lock.annotate(waiting=None)
        self.trouble, self._backoff_s = "", 0.0
        return self._say(events)

    def _round(self) -> list[QueueEvent]:
        self.manager.poll()
        events = self._settle()
        self.trials.tick()  # a search told of its ended trials, its next one asked (before the starts)
        if not self.store.paused():
            events += self._start_ready()
        self._watched = {r.id for r in self.registry.active() if r.target_kind == "local"}
        empty = self.store.is_empty()
        if empty and not self._was_empty:
            events.append(QueueEvent("empty", None, t("Все прогоны очереди завершились.", "Every queued run has ended.")))
        self._was_empty = empty
        return events

    def _locked(self, exc: BaseException) -> list[QueueEvent]:
        """The round met another program's write lock: wait (doubling up to LOCK_BACKOFF_MAX_S)
        and try again, said in one line."""
        self._backoff_s = min(max(self._backoff_s * 2, LOCK_BACKOFF_S), LOCK_BACKOFF_MAX_S)
        self._retry_at = time.monotonic() + self._backoff_s
        path = self.registry.state.path
        self.trouble = t(
            f"файл состояния {path} занят ({holder_text(path)}); очередь ждёт и попробует снова через "
            f"{format_value(self._backoff_s, 'ru')} с",
            f"the state file {path} is locked ({holder_text(path)}); the queue waits and tries again in "
            f"{format_value(self._backoff_s, 'en')} s")
        log.warning("queue: %s (%s)", self.trouble, exc)
        self.lock.annotate(waiting=self.trouble)  # the window's queue line says it (world.runner_line)
        return [QueueEvent("waiting", None, self.trouble)]

    def _lets_go(self) -> bool:
        """Whether the state file this runner drives is still the lab's (same device and
        inode at its path); if not, the runner lets the queue go, once, and says why."""
        path = self.registry.state.path
        if self._identity is None or _identity(path) == self._identity:
            return False
        self.gone = t(
            f"файл состояния {path} удалён или заменён, пока очередь шла: этот процесс больше не ведёт "
            "очередь (идущие прогоны идут); новую очередь ведёт следующий запуск: ternit queue run",
            f"the state file {path} was deleted or replaced while the queue ran: this process no longer "
            "drives the queue (running runs go on); the next start drives the new one: ternit queue run")
        log.warning("queue: %s", self.gone)
        self.lock.release()
        return True

    def _start_ready(self) -> list[QueueEvent]:
        events: list[QueueEvent] = []
        self.stuck = []
        for it in self.store.items((WAITING,)):
            if it.damaged:  # it alone fails; the rest go on
                self.store.finish(it.id, FAILED, damaged_note(it))
                self.failed.append(it.id)
                events.append(QueueEvent("failed", self.store.item(it.id), damaged_note(it)))
        waiting = [it for it in self.store.items((WAITING,)) if it.ready and self._room_for(it)]
        if not waiting:
            return events
        if any(it.target != "local" for it in waiting):
            self._refresh_quota()
        _, slots = self.planner.plan(self.clock(), only={it.id for it in waiting})
        by_item = {it.id: it for it in waiting}
        self.stuck = [f"{by_item[s.item_id].name}: {s.reason}" for s in slots
                      if s.start is None and not s.never and s.item_id in by_item]
        if len(self.stuck) < len([it for it in self.store.items((WAITING,)) if it.ready]):
            self.stuck = []  # something else may still start (one waits for room, another has a place)
        by_id = {it.id: it for it in waiting}
        for slot in slots:
            if slot.never:
                self.store.finish(slot.item_id, FAILED, slot.reason)
                self.failed.append(slot.item_id)
                events.append(QueueEvent("failed", self.store.item(slot.item_id), slot.reason))
        for slot in startable(slots, self.clock()):
            events += self._start(by_id[slot.item_id], slot)
        return events

    def _room_for(self, it: Item) -> bool:
        """Whether an item that failed for room has it now; its line says how much while not."""
        ok, text = retry.has_room(self.registry.runs_root, it.room_bytes)
        if not ok and text != it.message:
            self.store.set_message(it.id, text)
        return ok

    def _refresh_quota(self) -> None:
        """Ask Kaggle for every account's quota, at most every few polls of the Kaggle side."""
        every = max(4 * kaggle_settings().poll_s, 0.2)
        if time.monotonic() - self._quota_checked < every:
            return
        self._quota_checked = time.monotonic()
        store = self.planner.kaggle
        if not store.accounts():
            return
        for result in Accounts(store).check_all():
            if not result.ok:
                log.info("queue: the quota of %s was not refreshed: %s", result.username, result.message)

    # -- starting ----------------------------------------------------------------------------------
    def _start(self, it: Item, slot: Slot) -> list[QueueEvent]:
        run_id = self.registry.reserve_run_id(it.name)
        if not self.store.claim(it.id, slot.machine or LOCAL, run_id):
            shutil.rmtree(self.registry.runs_root / run_id, ignore_errors=True)  # removed or held meanwhile
            return []
        faults.point("claimed")
        return self._finish_start(self.store.item(it.id), slot.reason)

    def _finish_start(self, it: Item, note: str = "") -> list[QueueEvent]:
        """Carry an item from its recorded step to running (the start, or its reconcile)."""
        assert it.run_id is not None
        rec = self._row(it.run_id)
        if rec is None:
            rec = self._create(it)
            if rec is None:
                return [QueueEvent("failed", self.store.item(it.id), self.store.item(it.id).message or "")]
        if rec.ended:
            pass  # stopped by the user before it started (or it already ran): nothing to launch
        elif it.step != LAUNCHING or not self._launched(rec):
            self.store.set_step(it.id, LAUNCHING)
            faults.point("launching")
            try:
                self.manager.launch(rec.id)
            except RunError as e:  # the run is marked failed; settling retries or skips it
                log.info("queue: item %s did not start: %s", it.id, e)
        self.store.started(it.id, note or None)
        it = self.store.item(it.id)
        return [QueueEvent("started", it, t(f"{it.name}: {machine_label(it.machine)}, прогон {it.run_id}",
                                            f"{it.name}: {machine_label(it.machine)}, run {it.run_id}"))]

    def _create(self, it: Item) -> RunRecord | None:
        try:
            rec = self.manager.create(run_config(it), parent_id=it.parent_id, run_id=it.run_id)
        except (RunError, ValueError, OSError) as e:  # the trainer's check refused it: no retry helps
            shutil.rmtree(self.registry.runs_root / str(it.run_id), ignore_errors=True)
            self.store.finish(it.id, FAILED, str(e))
            self.failed.append(it.id)
            return None
        self.store.set_step(it.id, CREATED)
        faults.point("created")
        return rec

    def _launched(self, rec: RunRecord) -> bool:
        """Whether the launch recorded as begun did happen (see the module's note)."""
        if rec.status in st.ENDED:
            return True
        if rec.target_kind == "kaggle":
            return self.planner.kaggle.leg(rec.id) is not None
        if rec.status != st.CREATED:
            return True
        proc = trainer_process(rec)
        started = any(e.get("event") == "start" for e in read_events(rec.events_path))
        if proc is None and not started:
            return False
        # The trainer runs (or ran) but the row never heard: let the poll follow it.
        self.registry.update(rec.id, status=st.STARTING, pid=proc.pid if proc else None,
                             pid_started_at=proc.create_time() if proc else None,
                             started_at=rec.started_at or time.time())
        return True

    def _row(self, run_id: str) -> RunRecord | None:
        try:
            return self.registry.get(run_id)
        except RunNotFound:
            return None

    # -- settling ------------------------------------------------------------------------------------
    def _settle(self) -> list[QueueEvent]:
        events: list[QueueEvent] = []
        for it in self.store.items((RUNNING,)):
            rec = self._row(it.run_id or "")
            if rec is None:
                self.store.finish(it.id, FAILED, both(f"прогон {it.run_id} удалён из истории",
                                                      f"run {it.run_id} was deleted from the history"))
                events.append(QueueEvent("failed", self.store.item(it.id), ""))
                continue
            while not rec.active and (nxt := self.manager.next_leg(rec.id)) is not None:
                self.store.follow(it.id, nxt.id)  # the chain went on to another account
                rec = nxt
            if it.started_at is None:
                self.store.set_times(it.id, started_at=self._started_at(it))
            if rec.active:
                continue
            measured(self.registry, fresh=True)  # its speed refines the next estimates
            if rec.status == st.FAILED:
                events += self._failed(self.store.item(it.id), rec)
            else:
                # Stored in both languages: the list is read later, perhaps in the other one.
                self.store.finish(it.id, DONE, both_of(st.LABELS.get(rec.status) or {"ru": rec.status, "en": rec.status}),
                                  ended_at=rec.ended_at)
                events.append(QueueEvent("ended", self.store.item(it.id), _ended_text(rec)))
        return events

    def _started_at(self, it: Item) -> float | None:
        """The item's start: its first run's own `start` event (None before it has one)."""
        rec = self._row(it.runs[0]) if it.runs else None
        if rec is None:
            return None
        return next((float(e["time"]) for e in read_events(rec.events_path)
                     if e.get("event") == "start" and isinstance(e.get("time"), (int, float))), None)

    def _failed(self, it: Item, rec: RunRecord) -> list[QueueEvent]:
        f = self.manager.failure(rec.id)
        how = retry.verdict(rec, f, rec.id in self._watched, self._booted, retry.free_bytes(rec.path))
        if how != retry.SPEND and f is not None and (cfg := self._continuation(it, rec, f)) is not None:
            step = _checkpoint_step(f.checkpoint)
            # Stored in both languages: the list is read later, perhaps in the other one.
            text = both(*(retry.continued_text(how, f.checkpoint, step, lang) for lang in ("ru", "en")))
            room = retry.room_needed(rec) if how == retry.ROOM else None
            log.info("queue: item %s: %s", it.id, shown(text))
            self.store.retry(it.id, cfg, rec.id if cfg.get("resume_from") else None, text, spend=False,
                             room_bytes=room)
            return [QueueEvent("retry", self.store.item(it.id), shown(text))]
        # The advice in each language (the runner's is not the reader's).
        ru, en = ((in_language(f.advice, lang) if f is not None else (shown_message(rec.last_message, lang) or ""))
                  for lang in ("ru", "en"))
        if it.attempt == 1 and f is not None and f.can_retry:
            cfg = self._continuation(it, rec, f)
            if cfg is not None:
                parent = rec.id if cfg.get("resume_from") else None
                # Stored in both languages: the list is read later, perhaps in the other one.
                stored = both(f"{f.retry_label('ru') or 'Повторить'} (один раз): {ru}",
                              f"{f.retry_label('en') or 'Retry'} (once): {en}")
                self.store.retry(it.id, cfg, parent, stored)
                return [QueueEvent("retry", self.store.item(it.id), shown(stored))]
        stored = both(f"пропущен, очередь идёт дальше: {ru}", f"skipped, the queue goes on: {en}")
        self.store.finish(it.id, FAILED, stored, ended_at=rec.ended_at)
        self.failed.append(it.id)
        return [QueueEvent("failed", self.store.item(it.id), shown(stored))]

    def _continuation(self, it: Item, rec: RunRecord, f: Any) -> dict[str, Any] | None:
        """The failed run's config as its failure continues it, on the item's own target; none
        for a search's trial whose searched values it would change (app/queue/trials.py)."""
        try:
            cfg = f.retry_config(rec.config())
        except (OSError, ValueError):
            return None
        if not self.trials.retry_allowed(it.id, cfg):
            return None  # a trial is measured at its searched values: it ends failed instead
        cfg["target"] = copy.deepcopy(it.config.get("target") or {})
        return cfg

    # -- driving (the command line) ------------------------------------------------------------------
    def drive(self, stop: Callable[[], bool] = lambda: False, poll_s: float = 0.5,
              until_empty: bool = True) -> None:
        """Tick until the queue is empty (or nothing more can happen: paused, or only held
        items left) or `stop()` says so."""
        while not stop():
            self.tick()
            if self.gone:
                return
            if until_empty and not self.trouble and self._idle():
                return
            time.sleep(poll_s)

    def _idle(self) -> bool:
        """Nothing runs and nothing more will start by itself: no work for a runner, or only
        items none of which can go anywhere there is (`stuck`: a round found no machine that
        could ever take them as the lab is now)."""
        return not needs_runner(self.store) or bool(self.stuck) and not any(
            it.state in (STARTING, RUNNING) for it in self.store.pending())


def needs_runner(store: QueueStore) -> bool:
    """Whether the queue has work for a runner: a run to follow, or one that may start (not
    paused, not held, not damaged), or a search going on. The runner ends when it has none;
    the window starts one when it has."""
    pending = store.pending()
    if any(it.state in (STARTING, RUNNING) for it in pending):
        return True
    if searching(store) and not store.paused():  # a search asks its next trial only from a runner
        return True
    return bool(pending) and not store.paused() and any(it.ready for it in pending)


def _checkpoint_step(path: str | None) -> int | None:
    m = re.search(r"step-(\d+)", Path(path).name) if path else None
    return int(m.group(1)) if m else None


LOCK_BACKOFF_S = 0.5   # the first wait after a round met a locked state file; it doubles
LOCK_BACKOFF_MAX_S = 30.0


def _identity(path: os.PathLike[str] | str) -> tuple[int, int] | None:
    """The file at `path` as the system knows it (device, inode; on Windows the volume and
    the file's index), or None when nothing is there."""
    try:
        s = os.stat(path)
    except OSError:
        return None
    return (s.st_dev, s.st_ino)


def run_config(it: Item) -> dict[str, Any]:
    """The item's run.json with the machine the runner chose written into its target."""
    cfg = copy.deepcopy(it.config)
    target = cfg.setdefault("target", {})
    if target is None:
        target = cfg["target"] = {}
    if not isinstance(target, dict):  # the run's creation says so and the item alone fails
        raise ValueError(t(f"run.json: target должен быть объектом, а не {target!r}",
                           f"run.json: target must be an object, not {target!r}"))
    if it.machine == LOCAL:
        target["kind"] = "local"
    else:
        target["kind"] = "kaggle"
        target["account"] = (it.machine or "").partition(":")[2] or "auto"
    return cfg


def trainer_process(rec: RunRecord) -> Any:
    """A live process training this run's folder (`python -m trainer --run FOLDER`), if any
    (a psutil.Process)."""
    import psutil  # here: the window's first frame asks no process (app/runs/process.py)

    folder = str(rec.path)
    for p in psutil.process_iter(["cmdline"]):
        try:
            cmd = p.info.get("cmdline") or []
            if folder in cmd and "trainer" in cmd and p.status() != psutil.STATUS_ZOMBIE:
                return p
        except (psutil.Error, OSError):  # gone meanwhile, or not ours to read
            continue
    return None


def _ended_text(rec: RunRecord) -> str:
    steps = f"{rec.last_step}/{rec.steps_to}" if rec.steps_to else str(rec.last_step or 0)
    if rec.best_val_loss is None:
        return st.label(rec.status) + t(f": шаг {steps}, проверки ещё не было", f": step {steps}, no evaluation yet")
    best = loss_text(rec.best_val_loss)
    return st.label(rec.status) + t(f": шаг {steps}, лучшая val loss {best}", f": step {steps}, best val loss {best}")
