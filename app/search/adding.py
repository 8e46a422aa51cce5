"""Starting a search: its row and its Optuna study, from `ternit search add` and from the
form's «Поиск…» alike."""

from __future__ import annotations

import re
from typing import Any

from .space import Dimension
from .store import PRUNERS, Search, SearchError, SearchStore
from .study import create_study, journal_path

TARGETS = ("local", "kaggle", "any")


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-")[:32] or "search"


def create_search(store: SearchStore, config: dict[str, Any], space: list[Dimension], trials: int, *,
                  budget_hours: float | None = None, pruner: str = "median", target: str = "any",
                  seed: int = 0) -> Search:
    """A new search over `config` (a run.json whose data is found): its study is created in
    the row's own transaction, so the queue runner sees the search only once its study exists."""
    if trials < 1:
        raise SearchError("trials < 1")
    if pruner not in PRUNERS or target not in TARGETS:
        raise SearchError(f"pruner {pruner!r} / target {target!r}")
    name = str(config.get("name") or "search")
    account = str((config.get("target") or {}).get("account") or "auto")

    def journal_for(sid: int) -> tuple[str, str]:
        relative = f"searches/{sid}-{_slug(name)}.journal"
        study_name = f"ternit-search-{sid}"
        create_study(journal_path(relative), study_name)
        return relative, study_name

    return store.add(name=name, journal_for=journal_for, config=config, space=space, trials=trials,
                     budget_hours=budget_hours, pruner=pruner, target=target, account=account, seed=seed)
