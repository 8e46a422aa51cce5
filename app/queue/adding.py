"""Putting runs in the queue — one run, or a series — from the form or `ternit queue add`.

Each run.json passes the lab's one pre-check (app/runs/precheck.py: the trainer's own rules,
its data and checkpoint checks, the plan for the machine) before it is queued — for each
kind of machine its target allows — so a bad value is said now, not at 3 a.m. when its turn
comes; the run is created later, when it starts, through the same pre-check again.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..base.i18n import t
from ..runs.precheck import RunError, normalize_config, precheck
from .series import distinct, expand, values_text
from .store import Item, QueueError, QueueStore, Series, check_target

Check = Callable[[dict[str, Any]], object]  # raises RunError when it refuses
KINDS = {"local": ("local",), "kaggle": ("kaggle",), "any": ("local", "kaggle")}


@dataclass(frozen=True)
class Added:
    items: list[Item]
    series: Series | None = None


def refusals(config: dict[str, Any], target: str, check: Check = precheck) -> dict[str, str]:
    """Why the lab's pre-check refuses the run on each kind of machine its target allows
    (the Kaggle session's cap on «Лимит, мин» holds there only, …); empty: none refuses."""
    out = {}
    for kind in KINDS[target]:
        cfg = copy.deepcopy(config)
        cfg.setdefault("target", {})["kind"] = kind
        try:
            check(cfg)
        except RunError as e:
            out[kind] = str(e)
    return out


def check_account(store: QueueStore, target: str, account: str) -> None:
    """A run queued for a named Kaggle account needs that account in the lab: refused now,
    not left waiting all night for an account that is not there."""
    if target == "local" or account in ("", "auto"):
        return
    from ..kaggle.store import KaggleStore

    if KaggleStore(store.state).account(account) is None:
        raise QueueError(t(f"аккаунта Kaggle {account} в лаборатории нет: добавьте его — ternit kaggle add-account "
                           f"--username {account} — или ставьте на auto",
                           f"there is no Kaggle account {account} in the lab: add it — ternit kaggle add-account "
                           f"--username {account} — or queue it for auto"))


def add_runs(store: QueueStore, config: dict[str, Any], *, target: str = "any", account: str = "auto",
             vary: list[tuple[str, list[Any]]] | None = None, base: Path | None = None,
             parent_id: str | None = None, check: Check = precheck) -> Added:
    """Queue `config` (one run), or with `vary` every combination of the varied fields as a
    series. Nothing is queued unless every run passes the pre-check on a machine its target
    allows (where it is refused, the planner does not send it). `parent_id`: the run whose
    checkpoint the config continues (the history draws them as one chain)."""
    check_target(target)
    check_account(store, target, account)
    cfg = normalize_config(config, base)
    vary = distinct(vary) if vary else vary
    combos = expand(cfg, vary) if vary else [(cfg, None)]
    verdicts = []
    for run_cfg, values in combos:
        refused = refusals(run_cfg, target, check)
        if len(refused) == len(KINDS[target]):
            where = f" ({values_text(values)})" if values else ""
            why = "; ".join(dict.fromkeys(refused.values()))
            raise QueueError(t(f"не поставлено в очередь{where}: {why}", f"not queued{where}: {why}"))
        verdicts.append(refused)
    series = None
    if vary:
        series = store.add_series(str(cfg.get("name") or "run"), vary)
    items = [store.add(run_cfg, target, account, series_id=series.id if series else None, series_values=values,
                       parent_id=parent_id, refused=refused)
             for (run_cfg, values), refused in zip(combos, verdicts, strict=True)]
    return Added(items, series)
