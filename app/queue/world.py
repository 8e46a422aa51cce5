"""The planner's inputs from the real world, and the queue as the list and the timeline show
it: every item with where it will train (or trains, or trained), when it is expected to
start and end, and its state; the machines as rows; the accounts' quota refresh times.

Reads only the lab's state and run folders (no network): the window may ask on every
refresh, `ternit queue list` any time, with or without a runner.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .. import sizing
from ..base import run_status as st
from ..base.i18n import t
from ..kaggle import settings as kaggle_settings
from ..kaggle.store import KaggleStore
from ..runs.registry import Registry, RunNotFound, RunRecord
from . import capacity, estimates, lock, retry
from .plan import LOCAL, Job, Slot, World, kaggle_machine, machine_account, predict, refresh_times
from .store import RUNNING, STARTING, WAITING, Item, QueueStore

log = logging.getLogger(__name__)

MEASURED_TTL_S = 300.0
_measured: dict[str, tuple[float, list[dict[str, Any]]]] = {}


def measured(registry: Registry, fresh: bool = False) -> list[dict[str, Any]]:
    """The lab's measured runs (their speeds refine the estimates), read at most every few
    minutes: reading every run folder at each refresh would slow the window."""
    key = str(registry.runs_root)
    now = time.monotonic()
    hit = _measured.get(key)
    if fresh or hit is None or now - hit[0] > MEASURED_TTL_S:
        try:
            runs = sizing.measured_runs(registry.runs_root, probe=False)
        except OSError:
            log.warning("the measured runs could not be read for the queue's estimates", exc_info=True)
            runs = []
        _measured[key] = (now, runs)
        return runs
    return hit[1]


@dataclass(frozen=True)
class Row:
    """One line of the queue's list."""

    item: Item
    place: int | None          # 1 = next to start (waiting items only)
    machine: str | None        # 'local', 'kaggle:NAME' or None
    start: float | None        # expected (waiting) or actual
    end: float | None          # expected, or actual once ended
    note: str = ""             # why it waits, how it goes, or how it ended
    run_status: str | None = None
    state_text: str = ""       # its state as its run says it, before a runner settles it

    @property
    def label(self) -> str:
        return self.state_text or self.item.label()

    @property
    def expected(self) -> bool:
        return self.item.state in (WAITING, STARTING, RUNNING)


@dataclass(frozen=True)
class Bar:
    """One run on the timeline: its machine's row (and the lane within it, for runs at the
    same time on one Kaggle account), from start to (expected) end."""

    row: int
    machine: str
    start: float
    end: float
    item_id: int
    name: str
    state: str
    lane: int = 0
    lanes: int = 1


@dataclass(frozen=True)
class Timeline:
    now: float
    rows: list[Row]
    machines: list[str]                       # 'local' first, then each account
    refreshes: dict[str, list[float]] = field(default_factory=dict)   # machine -> quota refresh times
    paused: bool = False
    runner: str = ""                          # who drives the queue ("" if nobody)
    who: str = ""                             # the status line: who drives it, or why nobody does

    def row(self, item_id: int) -> Row:
        return next(r for r in self.rows if r.item.id == item_id)

    @property
    def empty(self) -> bool:
        return not any(r.item.pending for r in self.rows)

    def bars(self) -> list[Bar]:
        """The runs that have (or are expected to have) a machine and a time, one row per
        machine, runs overlapping in time in lanes of their row; a bar is at least a minute
        wide, to be seen."""
        index = {m: i for i, m in enumerate(self.machines)}
        placed: dict[str, list[tuple[float, float, int, Row]]] = {}
        for r in sorted(self.rows, key=lambda r: r.start or 0.0):
            if r.machine is None or r.start is None or r.machine not in index:
                continue
            end = max(r.end if r.end is not None else r.start, r.start + 60.0)
            lanes = placed.setdefault(r.machine, [])
            busy = {lane for s, e, lane, _ in lanes if s < end and r.start < e}
            lanes.append((r.start, end, min(set(range(len(busy) + 1)) - busy), r))
        out = []
        for machine, lanes in placed.items():
            count = max(lane for _, _, lane, _ in lanes) + 1
            out += [Bar(index[machine], machine, s, e, r.item.id, r.item.name, r.item.state, lane, count)
                    for s, e, lane, r in lanes]
        return out

    def machine_text(self, machine: str) -> str:
        """A row's label: the machine, and for an account when its quota refreshes next."""
        times = self.refreshes.get(machine) or []
        label = machine_label(machine)
        if times:
            label += " · ↻ " + datetime.fromtimestamp(times[0]).strftime("%d.%m %H:%M")
        return label


def machine_label(machine: str | None) -> str:
    if machine is None:
        return "—"
    if machine == LOCAL:
        return t("этот ПК", "this PC")
    return f"Kaggle {machine_account(machine)}"


class Planner:
    """Builds the World and the jobs over one state; `timeline()` for views, `plan()` for the
    runner (the same predict, so the list shows what the runner will do)."""

    def __init__(self, store: QueueStore, registry: Registry, kaggle: KaggleStore | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.registry = registry
        self.kaggle = kaggle or KaggleStore(registry.state)
        self.clock = clock
        self._jobs: dict[tuple[Any, ...], Job] = {}

    # -- the world ----------------------------------------------------------------------------
    def jobs(self, items: list[Item]) -> list[Job]:
        return [self._job(it, it.target) for it in items]

    def _job(self, it: Item, target: str) -> Job:
        """The estimates of one run: the same config over the same measured runs gives the
        same answer, so it is asked once (the window refreshes often, the runner ticks)."""
        runs = measured(self.registry)
        key = (it.id, json.dumps(it.config, sort_keys=True), target, it.account, id(runs))
        hit = self._jobs.get(key)
        if hit is None:
            if len(self._jobs) > 512:
                self._jobs.clear()
            hit = self._jobs[key] = estimates.job(it.id, it.config, target, it.account, runs, refused=it.refused)
        return hit

    def world(self, now: float, running: list[Item]) -> World:
        fits = {it.run_id: self._fit_seconds(it) for it in running if it.run_id}
        local_free = now
        for rec in self.registry.active():
            if rec.target_kind == "local":
                local_free = max(local_free, expected_end(rec, now, fits.get(rec.id)))

        def leg_end(leg: dict[str, Any]) -> float | None:
            try:
                rec = self.registry.get(leg["run_id"])
            except RunNotFound:
                return None
            return expected_end(rec, now, fits.get(rec.id))

        margin_min = kaggle_settings.load().margin_min
        accounts = capacity.kaggle_accounts(self.kaggle, now, leg_end, margin_min)
        return World(now, margin_min * 60.0, local_free, accounts)

    def _fit_seconds(self, it: Item) -> float | None:
        kind = "kaggle" if it.machine and it.machine != LOCAL else "local"
        f = self._job(it, kind)
        fit = f.kaggle if kind == "kaggle" else f.local
        return fit.seconds if fit is not None else None

    def plan(self, now: float | None = None, only: set[int] | None = None) -> tuple[list[Item], list[Slot]]:
        """The waiting items (not held; of `only`, when given: those that may start now) and
        their slots, in queue order."""
        now = self.clock() if now is None else now
        waiting = [it for it in self.store.items((WAITING,)) if not it.held and (only is None or it.id in only)]
        running = self.store.items((STARTING, RUNNING))
        return waiting, predict(self.jobs(waiting), self.world(now, running))

    # -- the view -----------------------------------------------------------------------------
    def timeline(self, now: float | None = None) -> Timeline:
        now = self.clock() if now is None else now
        items = self.store.items()
        running = [it for it in items if it.state in (STARTING, RUNNING)]
        waiting = [it for it in items if it.state == WAITING and not it.held]
        world = self.world(now, running)
        slots = {s.item_id: s for s in predict(self.jobs(waiting), world)}
        rows, place = [], 0
        for it in items:
            if it.state == WAITING:
                place += 1
            rows.append(self._row(it, slots.get(it.id), place if it.state == WAITING else None, now))
        machines = [LOCAL] + [kaggle_machine(a.username) for a in world.accounts]
        refreshes = {kaggle_machine(a.username): refresh_times(a, now - 1.0, now + 14 * 86400.0)
                     for a in world.accounts}
        note = lock.current_holder()
        return Timeline(now, rows, machines, refreshes, self.store.paused(), _holder_text(note),
                        runner_line(self.store, note))

    def _row(self, it: Item, slot: Slot | None, place: int | None, now: float) -> Row:
        rec = self._run(it.run_id)
        status = rec.status if rec else None
        if it.state == WAITING:
            if it.held:
                return Row(it, place, None, None, None, t("отложен: очередь его обходит", "held: the queue passes it by"))
            room, room_note = retry.has_room(self.registry.runs_root, it.room_bytes)
            if slot is None or not room:
                return Row(it, place, None, None, None, room_note or it.message or "")
            return Row(it, place, slot.machine, slot.start, slot.end, slot.reason, status)
        if it.state in (STARTING, RUNNING):
            start = it.started_at or (rec.started_at if rec else None) or it.claimed_at
            if rec is not None and not rec.active:  # ended while no runner looked: said as it is
                return Row(it, None, it.machine, start, rec.ended_at, "", status, _settled_label(rec))
            if rec is not None and _trainer_gone(rec):
                return Row(it, None, it.machine, start, None, "", status,
                           t("прерван — продолжится при запуске очереди", "interrupted — goes on when the queue runs"))
            end = expected_end(rec, now, self._fit_seconds(it)) if rec else None
            return Row(it, None, it.machine, start, end, it.message or (rec.last_message if rec else "") or "", status)
        note = it.message or ""
        return Row(it, None, it.machine, it.started_at, it.ended_at, note, status)

    def _run(self, run_id: str | None) -> RunRecord | None:
        if not run_id:
            return None
        try:
            return self.registry.get(run_id)
        except RunNotFound:
            return None


def expected_end(rec: RunRecord, now: float, fit_seconds: float | None = None) -> float:
    """When a run going now is expected to end: from its start and the estimate, else from
    its progress; never before now."""
    end = None
    started = rec.started_at or rec.created_at
    if fit_seconds is not None:
        end = started + fit_seconds
    elif rec.steps_to and rec.last_step and now > started:
        done = max(rec.last_step / rec.steps_to, 0.01)
        end = started + (now - started) / done
    return max(end if end is not None else now + 60.0, now + 1.0)


def _settled_label(rec: RunRecord) -> str:
    """A queued run that ended, as its own row says («завершён», «ошибка», …)."""
    if rec.status == st.FAILED:
        return t("ошибка — очередь решит при запуске", "failed — the queue decides when it runs")
    return t("завершён", "finished") if rec.status == st.FINISHED else st.label(rec.status)


def _trainer_gone(rec: RunRecord) -> bool:
    """A local run the history calls training whose trainer process is gone (no runner has
    looked since: a reboot, both killed)."""
    if rec.target_kind != "local" or rec.status not in st.LOCAL_ACTIVE:
        return False
    from ..runs.process import is_alive

    return not is_alive(rec.pid, rec.pid_started_at)


def _holder_text(note: lock.Note | None) -> str:
    if note is None:
        return ""
    since = datetime.fromtimestamp(note.since).strftime("%d.%m %H:%M")
    return t(f"процесс {note.pid} ({note.program}), с {since}", f"process {note.pid} ({note.program}), since {since}")


def runner_line(store: QueueStore, note: lock.Note | None | bool = True) -> str:
    """Who drives the queue (its pid, since when), or why nobody does: empty, paused, every
    waiting run held, or waiting for the next logon (autostart) or a `ternit queue run`.
    `note`: the lock's holder if already read (True: read it here)."""
    if note is True:
        note = lock.current_holder()
    if isinstance(note, lock.Note):
        return t(f"очередь ведёт {_holder_text(note)}", f"the queue is driven by {_holder_text(note)}")
    pending = store.pending()
    if not pending:
        return t("очередь никто не ведёт: она пуста", "nobody drives the queue: it is empty")
    if store.paused():
        return t("очередь никто не ведёт: она приостановлена", "nobody drives the queue: it is paused")
    if all(it.held for it in pending):
        return t("очередь никто не ведёт: все ждущие прогоны отложены",
                 "nobody drives the queue: every waiting run is held")
    from . import autostart

    if autostart.status().installed:
        return t("очередь никто не ведёт сейчас: её продолжит вход в систему (автозапуск) или ternit queue run",
                 "nobody drives the queue now: the next logon (autostart) or ternit queue run carries it on")
    return t("очередь никто не ведёт: ternit queue run или окно лаборатории её продолжат",
             "nobody drives the queue: ternit queue run or the lab's window carries it on")
