"""The queue's tables in the lab's state (migration 005): items in order, series, the pause.

Anyone may edit the queue at any time (the window, `ternit queue add/move/remove` in another
terminal); only the runner holding the queue's lock (app/queue/lock.py) moves an item from
waiting to starting. Every change is one SQLite statement or one transaction whose WHERE
names the state it expects, so an edit and the runner's claim never cross: a waiting item
removed as the runner claims it is either removed or claimed, never both.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..base.i18n import t
from ..base.state import StateStore

WAITING, STARTING, RUNNING, DONE, FAILED = "waiting", "starting", "running", "done", "failed"
STATES = (WAITING, STARTING, RUNNING, DONE, FAILED)
PENDING = (WAITING, STARTING, RUNNING)  # the queue is empty when no item is in these
ENDED = (DONE, FAILED)
TARGETS = ("local", "kaggle", "any")
# The start's intent (migration 005 says what each means).
CLAIMED, CREATED, LAUNCHING = "claimed", "created", "launching"

LABELS = {
    WAITING: {"ru": "ждёт", "en": "waiting"},
    STARTING: {"ru": "запускается", "en": "starting"},
    RUNNING: {"ru": "идёт", "en": "running"},
    DONE: {"ru": "готов", "en": "done"},
    FAILED: {"ru": "пропущен", "en": "skipped"},
}


def state_label(state: str, lang: str | None = None) -> str:
    from ..base.i18n import pick

    return pick(LABELS[state], lang) if state in LABELS else state


class QueueError(ValueError):
    """A queue edit that cannot be made: the message says why and what to do."""


@dataclass(frozen=True)
class Item:
    """One queued run (a row of queue_items)."""

    id: int
    position: int
    name: str
    config: dict[str, Any]
    target: str
    account: str
    series_id: int | None
    series_values: dict[str, Any] | None
    state: str
    step: str | None
    machine: str | None
    run_id: str | None
    parent_id: str | None
    attempt: int
    runs: list[str]
    held: bool
    refused: dict[str, str]   # machine kind -> why the lab's pre-check refuses the run there
    message: str | None
    created_at: float
    claimed_at: float | None
    started_at: float | None  # the run's own `start` event's time (its first run's)
    ended_at: float | None    # its last run's `end` event's time
    room_bytes: int | None = None  # failed for room: waits for this much free (migration 006)

    @property
    def pending(self) -> bool:
        return self.state in PENDING

    @property
    def ended(self) -> bool:
        return self.state in ENDED

    @property
    def movable(self) -> bool:
        """Only a waiting run changes its place; a started one has its machine."""
        return self.state == WAITING

    @property
    def removable(self) -> bool:
        """Waiting or ended: a run that has started is stopped first (ternit run stop)."""
        return self.state in (WAITING, DONE, FAILED)

    def label(self, lang: str | None = None) -> str:
        text = state_label(self.state, lang)
        if self.held and self.state == WAITING:
            text = t("отложен", "held", lang)
        return text


@dataclass(frozen=True)
class Series:
    id: int
    name: str
    vary: list[tuple[str, list[Any]]] = field(default_factory=list)
    created_at: float = 0.0

    @property
    def keys(self) -> list[str]:
        return [k for k, _ in self.vary]


def check_target(target: str) -> str:
    if target not in TARGETS:
        raise QueueError(t(f"цель: local, kaggle или any, а не {target!r}",
                           f"the target must be local, kaggle or any, not {target!r}"))
    return target


def _item(r: Any) -> Item:
    return Item(
        id=int(r["id"]), position=int(r["position"]), name=str(r["name"]), config=json.loads(r["config"]),
        target=str(r["target"]), account=str(r["account"]), series_id=r["series_id"],
        series_values=json.loads(r["series_values"]) if r["series_values"] else None,
        state=str(r["state"]), step=r["step"], machine=r["machine"], run_id=r["run_id"], parent_id=r["parent_id"],
        attempt=int(r["attempt"]), runs=list(json.loads(r["runs"] or "[]")), held=bool(r["held"]),
        refused=dict(json.loads(r["refused"] or "{}")), message=r["message"], created_at=float(r["created_at"]), claimed_at=r["claimed_at"],
        started_at=r["started_at"], ended_at=r["ended_at"],
        room_bytes=r["room_bytes"],
    )


class QueueStore(StateStore):
    """The queue over the lab's State (its own connection per thread, as State gives)."""

    # -- reading ----------------------------------------------------------------------------
    def items(self, states: Iterable[str] | None = None) -> list[Item]:
        """Items in queue order (position), all of them or those in `states`."""
        if states is None:
            rows = self.state.query("SELECT * FROM queue_items ORDER BY position, id")
        else:
            wanted = tuple(states)
            marks = ", ".join("?" * len(wanted))
            rows = self.state.query(f"SELECT * FROM queue_items WHERE state IN ({marks}) ORDER BY position, id",
                                    wanted)
        return [_item(r) for r in rows]

    def item(self, item_id: int) -> Item:
        r = self.state.one("SELECT * FROM queue_items WHERE id = ?", (int(item_id),))
        if r is None:
            raise QueueError(t(f"в очереди нет прогона {item_id} (`ternit queue list` покажет очередь)",
                               f"no run {item_id} in the queue (`ternit queue list` shows the queue)"))
        return _item(r)

    def pending(self) -> list[Item]:
        return self.items(PENDING)

    def is_empty(self) -> bool:
        marks = ", ".join("?" * len(PENDING))
        return self.state.one(f"SELECT 1 FROM queue_items WHERE state IN ({marks}) LIMIT 1", PENDING) is None

    def paused(self) -> bool:
        r = self.state.one("SELECT value FROM queue_flags WHERE key = 'paused'")
        return r is not None and r["value"] == "1"

    def series(self, series_id: int) -> Series:
        r = self.state.one("SELECT * FROM queue_series WHERE id = ?", (int(series_id),))
        if r is None:
            raise QueueError(t(f"серии {series_id} нет (её номер печатает `ternit queue add --vary …`)",
                               f"no series {series_id} (`ternit queue add --vary …` prints its number)"))
        vary = [(str(k), list(v)) for k, v in json.loads(r["vary"])]
        return Series(int(r["id"]), str(r["name"]), vary, float(r["created_at"]))

    def series_items(self, series_id: int) -> list[Item]:
        rows = self.state.query("SELECT * FROM queue_items WHERE series_id = ? ORDER BY position, id",
                                (int(series_id),))
        return [_item(r) for r in rows]

    # -- the user's edits ---------------------------------------------------------------------
    def add(self, config: dict[str, Any], target: str = "any", account: str = "auto", *,
            series_id: int | None = None, series_values: dict[str, Any] | None = None,
            parent_id: str | None = None, refused: dict[str, str] | None = None) -> Item:
        """Put a run at the end of the queue."""
        check_target(target)
        now = time.time()
        with self.state.transaction():
            top = self.state.one("SELECT COALESCE(MAX(position), 0) AS p FROM queue_items")
            cur = self.state.execute(
                "INSERT INTO queue_items (position, name, config, target, account, series_id, series_values, "
                "parent_id, refused, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (int(top["p"]) + 1, str(config.get("name") or "run"), json.dumps(config, ensure_ascii=False),
                 target, account or "auto", series_id,
                 json.dumps(series_values, ensure_ascii=False) if series_values is not None else None,
                 parent_id, json.dumps(refused or {}, ensure_ascii=False), now, now))
        return self.item(int(cur.lastrowid or 0))

    def add_series(self, name: str, vary: list[tuple[str, list[Any]]]) -> Series:
        cur = self.state.execute("INSERT INTO queue_series (name, vary, created_at) VALUES (?, ?, ?)",
                                 (name, json.dumps(vary, ensure_ascii=False), time.time()))
        return self.series(int(cur.lastrowid or 0))

    def remove(self, item_id: int) -> Item:
        """Take a waiting or ended item out of the queue (a running one is stopped first)."""
        it = self.item(item_id)
        cur = self.state.execute(
            "DELETE FROM queue_items WHERE id = ? AND state IN (?, ?, ?)", (it.id, WAITING, DONE, FAILED))
        if cur.rowcount == 0:
            raise QueueError(t(
                f"прогон {it.id} уже запущен ({it.run_id or '—'}): сначала остановите его — "
                f"ternit run stop {it.run_id or ''}".rstrip(),
                f"run {it.id} has started ({it.run_id or '—'}): stop it first — "
                f"ternit run stop {it.run_id or ''}".rstrip()))
        return it

    def move(self, item_id: int, to: int) -> list[Item]:
        """Put a waiting item at place `to` (1 = next to start) among the waiting ones."""
        it = self.item(item_id)
        if it.state != WAITING:
            raise QueueError(t(f"прогон {it.id} уже не ждёт ({it.label()}): переставлять можно только ждущие",
                               f"run {it.id} is no longer waiting ({it.label()}): only waiting runs can be moved"))
        with self.state.transaction():
            waiting = [r["id"] for r in self.state.query(
                "SELECT id FROM queue_items WHERE state = ? ORDER BY position, id", (WAITING,))]
            if it.id not in waiting:  # claimed in the meantime
                raise QueueError(t(f"прогон {it.id} только что запущен", f"run {it.id} has just started"))
            waiting.remove(it.id)
            place = max(1, min(int(to), len(waiting) + 1))
            waiting.insert(place - 1, it.id)
            slots = sorted(r["position"] for r in self.state.query(
                f"SELECT position FROM queue_items WHERE id IN ({', '.join('?' * len(waiting))})", waiting))
            for pos, wid in zip(slots, waiting, strict=True):
                self.state.execute("UPDATE queue_items SET position = ?, updated_at = ? WHERE id = ?",
                                   (pos, time.time(), wid))
        return self.items((WAITING,))

    def set_held(self, item_id: int, held: bool) -> Item:
        self.item(item_id)
        self.state.execute("UPDATE queue_items SET held = ?, updated_at = ? WHERE id = ?",
                           (1 if held else 0, time.time(), int(item_id)))
        return self.item(item_id)

    def set_paused(self, paused: bool) -> None:
        self.state.execute("INSERT OR REPLACE INTO queue_flags (key, value) VALUES ('paused', ?)",
                           ("1" if paused else "0",))

    # -- the runner's moves (only the lock's holder makes them) --------------------------------
    def claim(self, item_id: int, machine: str, run_id: str) -> bool:
        """waiting → starting on `machine`, with the run id reserved: False if the item is no
        longer waiting (removed, held or claimed meanwhile)."""
        now = time.time()
        with self.state.transaction():
            it = self.state.one("SELECT runs FROM queue_items WHERE id = ? AND state = ? AND held = 0",
                                (int(item_id), WAITING))
            if it is None:
                return False
            runs = json.loads(it["runs"] or "[]") + [run_id]
            self.state.execute(
                "UPDATE queue_items SET state = ?, step = ?, machine = ?, run_id = ?, runs = ?, claimed_at = ?, "
                "message = NULL, room_bytes = NULL, updated_at = ? WHERE id = ?",
                (STARTING, CLAIMED, machine, run_id, json.dumps(runs), now, now, int(item_id)))
        return True

    def set_step(self, item_id: int, step: str) -> None:
        self.state.execute("UPDATE queue_items SET step = ?, updated_at = ? WHERE id = ?",
                           (step, time.time(), int(item_id)))

    def started(self, item_id: int, message: str | None = None) -> None:
        """starting → running. Its started_at is not set here: it is the run's own `start`
        event's time (`set_times`), whoever sees it — not the time a runner got round to it."""
        self.state.execute(
            "UPDATE queue_items SET state = ?, step = NULL, message = ?, updated_at = ? WHERE id = ?",
            (RUNNING, message, time.time(), int(item_id)))

    def set_times(self, item_id: int, started_at: float | None = None, ended_at: float | None = None) -> None:
        """The times the item's runs themselves gave (the first `start`, the last `end`); a
        started_at once set stays (a continuation's start is not the item's)."""
        self.state.execute(
            "UPDATE queue_items SET started_at = COALESCE(started_at, ?), ended_at = COALESCE(?, ended_at), "
            "updated_at = ? WHERE id = ?", (started_at, ended_at, time.time(), int(item_id)))

    def follow(self, item_id: int, run_id: str) -> None:
        """The item's run went on as the next leg of its chain (Kaggle, another account)."""
        it = self.item(item_id)
        runs = it.runs + ([run_id] if run_id not in it.runs else [])
        self.state.execute("UPDATE queue_items SET run_id = ?, runs = ?, updated_at = ? WHERE id = ?",
                           (run_id, json.dumps(runs), time.time(), it.id))

    def finish(self, item_id: int, state: str, message: str | None = None, ended_at: float | None = None) -> None:
        """→ done or failed; `ended_at` the run's own `end` (now when it has none: never started)."""
        assert state in ENDED, state
        now = time.time()
        self.state.execute(
            "UPDATE queue_items SET state = ?, step = NULL, message = ?, ended_at = ?, room_bytes = NULL, "
            "updated_at = ? WHERE id = ?", (state, message, ended_at or now, now, int(item_id)))

    def retry(self, item_id: int, config: dict[str, Any], parent_id: str | None, message: str, *,
              spend: bool = True, room_bytes: int | None = None) -> None:
        """The failed run goes back to the queue, at its place, as its advice says. `spend`:
        whether this uses up its one retry (app/queue/retry.py says when it does not);
        `room_bytes`: it waits for that much free disk first."""
        self.state.execute(
            "UPDATE queue_items SET state = ?, step = NULL, machine = NULL, run_id = NULL, config = ?, parent_id = ?, "
            "attempt = attempt + ?, message = ?, room_bytes = ?, updated_at = ? WHERE id = ?",
            (WAITING, json.dumps(config, ensure_ascii=False), parent_id, 1 if spend else 0, message, room_bytes,
             time.time(), int(item_id)))

    def set_message(self, item_id: int, message: str | None) -> None:
        self.state.execute("UPDATE queue_items SET message = ?, updated_at = ? WHERE id = ?",
                           (message, time.time(), int(item_id)))

    def unclaim(self, item_id: int, message: str) -> None:
        """A start that could not begin (nothing was created): back to waiting, said why."""
        it = self.item(item_id)
        runs = [r for r in it.runs if r != it.run_id]
        self.state.execute(
            "UPDATE queue_items SET state = ?, step = NULL, machine = NULL, run_id = NULL, runs = ?, message = ?, "
            "updated_at = ? WHERE id = ?", (WAITING, json.dumps(runs), message, time.time(), it.id))
