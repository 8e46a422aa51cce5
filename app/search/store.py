"""The search's tables in the lab's state (migration 008): searches and the lab's record of
each trial beside the Optuna study (app/search/study.py)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from ..base.i18n import t
from ..base.state import StateStore
from .space import Dimension

RUNNING, STOPPING, DONE, STOPPED = "running", "stopping", "done", "stopped"
SEARCH_ACTIVE = (RUNNING, STOPPING)
# A trial's state, as `ternit search show` names it.
WAITING, TRIAL_RUNNING, COMPLETE, PRUNED, FAILED = "waiting", "running", "complete", "pruned", "failed"
TRIAL_ENDED = (COMPLETE, PRUNED, FAILED)
PRUNERS = ("median", "halving", "none")

LABELS = {
    WAITING: ("ждёт", "waiting"), TRIAL_RUNNING: ("идёт", "running"), COMPLETE: ("готов", "complete"),
    PRUNED: ("отсечён", "pruned"), FAILED: ("не удался", "failed"),
    RUNNING: ("идёт", "running"), STOPPING: ("останавливается", "stopping"), DONE: ("готов", "done"),
    STOPPED: ("остановлен", "stopped"),
}


class SearchError(ValueError):
    """A search that cannot be found or changed: the message says why."""


def label(state: str) -> str:
    ru, en = LABELS.get(state, (state, state))
    return t(ru, en)


@dataclass(frozen=True)
class Search:
    id: int
    name: str
    study_name: str
    journal: str
    config: dict[str, Any]
    space: list[Dimension]
    trials: int
    budget_hours: float | None
    pruner: str
    target: str
    account: str
    seed: int
    state: str
    message: str | None
    created_at: float

    @property
    def active(self) -> bool:
        return self.state in SEARCH_ACTIVE

    @property
    def keys(self) -> list[str]:
        return [d.key for d in self.space]


@dataclass(frozen=True)
class Trial:
    search_id: int
    number: int
    params: dict[str, Any]
    item_id: int | None
    state: str
    reported_step: int | None
    prune_at: float | None
    val_loss: float | None
    val_low: float | None
    val_high: float | None
    run_id: str | None
    told: bool
    message: str | None

    @property
    def ended(self) -> bool:
        return self.state in TRIAL_ENDED


def _search(r: Any) -> Search:
    return Search(r["id"], r["name"], r["study_name"], r["journal"], json.loads(r["config"]),
                  [Dimension.from_json(x) for x in json.loads(r["space"])], r["trials"], r["budget_hours"],
                  r["pruner"], r["target"], r["account"], r["seed"], r["state"], r["message"], r["created_at"])


def _trial(r: Any) -> Trial:
    return Trial(r["search_id"], r["number"], json.loads(r["params"]), r["item_id"], r["state"], r["reported_step"],
                 r["prune_at"], r["val_loss"], r["val_low"], r["val_high"], r["run_id"], bool(r["told"]), r["message"])


_TRIAL_COLUMNS = {"item_id", "state", "reported_step", "prune_at", "val_loss", "val_low", "val_high", "run_id",
                  "told", "message"}


class SearchStore(StateStore):
    def add(self, *, name: str, journal_for: Any, config: dict[str, Any], space: list[Dimension], trials: int,
            budget_hours: float | None, pruner: str, target: str, account: str, seed: int) -> Search:
        """A new search; `journal_for(id)` names its journal (relative) and study once its id is known."""
        now = time.time()
        with self.state.transaction():
            cur = self.state.execute(
                "INSERT INTO searches (name, study_name, journal, config, space, trials, budget_hours, pruner, "
                "target, account, seed, created_at, updated_at) VALUES (?, '', '', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (name, json.dumps(config, ensure_ascii=False), json.dumps([d.as_json() for d in space]), trials,
                 budget_hours, pruner, target, account, seed, now, now))
            sid = int(cur.lastrowid or 0)
            journal, study_name = journal_for(sid)
            self.state.execute("UPDATE searches SET journal = ?, study_name = ? WHERE id = ?", (journal, study_name, sid))
        return self.search(sid)

    def search(self, search_id: int) -> Search:
        r = self.state.one("SELECT * FROM searches WHERE id = ?", (search_id,))
        if r is None:
            raise SearchError(t(f"поиска {search_id} нет (`ternit search list` покажет поиски)",
                                f"no search {search_id} (`ternit search list` shows the searches)"))
        return _search(r)

    def searches(self, states: tuple[str, ...] | None = None) -> list[Search]:
        rows = self.state.execute("SELECT * FROM searches ORDER BY id").fetchall()
        found = [_search(r) for r in rows]
        return [s for s in found if states is None or s.state in states]

    def set_state(self, search_id: int, state: str, message: str | None = None, expect: tuple[str, ...] = ()) -> bool:
        where = f" AND state IN ({', '.join('?' * len(expect))})" if expect else ""
        cur = self.state.execute(f"UPDATE searches SET state = ?, message = COALESCE(?, message), updated_at = ? "
                                 f"WHERE id = ?{where}", (state, message, time.time(), search_id, *expect))
        return cur.rowcount > 0

    def trials(self, search_id: int) -> list[Trial]:
        rows = self.state.execute("SELECT * FROM search_trials WHERE search_id = ? ORDER BY number", (search_id,))
        return [_trial(r) for r in rows.fetchall()]

    def trial(self, search_id: int, number: int) -> Trial | None:
        r = self.state.one("SELECT * FROM search_trials WHERE search_id = ? AND number = ?", (search_id, number))
        return _trial(r) if r is not None else None

    def trial_of_item(self, item_id: int) -> tuple[Search, Trial] | None:
        r = self.state.one("SELECT * FROM search_trials WHERE item_id = ?", (item_id,))
        if r is None:
            return None
        tr = _trial(r)
        return self.search(tr.search_id), tr

    def add_trial(self, search_id: int, number: int, params: dict[str, Any]) -> Trial:
        now = time.time()
        self.state.execute("INSERT OR IGNORE INTO search_trials (search_id, number, params, created_at, updated_at) "
                           "VALUES (?, ?, ?, ?, ?)", (search_id, number, json.dumps(params, ensure_ascii=False), now, now))
        found = self.trial(search_id, number)
        assert found is not None
        return found

    def set_trial(self, search_id: int, number: int, **changes: Any) -> None:
        bad = set(changes) - _TRIAL_COLUMNS
        if bad:
            raise ValueError(f"cannot set {sorted(bad)} on a trial")
        changes["updated_at"] = time.time()
        sets = ", ".join(f"{k} = ?" for k in changes)
        self.state.execute(f"UPDATE search_trials SET {sets} WHERE search_id = ? AND number = ?",
                           (*changes.values(), search_id, number))
