"""Putting runs in the queue — one run, or a series — from the form or `ternit queue add`.

Each run.json passes the lab's pre-check before it is queued (the trainer's own rules, as
before «Старт»), so a bad value is said now, not at 3 a.m. when its turn comes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..base.i18n import t
from ..runs.manager import RunError, check_config, normalize_config
from .series import expand, values_text
from .store import Item, QueueError, QueueStore, Series

Check = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class Added:
    items: list[Item]
    series: Series | None = None


def add_runs(store: QueueStore, config: dict[str, Any], *, target: str = "any", account: str = "auto",
             vary: list[tuple[str, list[Any]]] | None = None, base: Path | None = None,
             parent_id: str | None = None, check: Check = check_config) -> Added:
    """Queue `config` (one run), or with `vary` every combination of the varied fields as a
    series. Nothing is queued unless every run passes the pre-check. `parent_id`: the run
    whose checkpoint the config continues (the history draws them as one chain)."""
    cfg = normalize_config(config, base)
    combos = expand(cfg, vary) if vary else [(cfg, None)]
    for run_cfg, values in combos:
        try:
            check(run_cfg)
        except RunError as e:
            where = f" ({values_text(values)})" if values else ""
            raise QueueError(t(f"не поставлено в очередь{where}: {e}", f"not queued{where}: {e}")) from e
    series = None
    if vary:
        series = store.add_series(str(cfg.get("name") or "run"), vary)
    items = [store.add(run_cfg, target, account, series_id=series.id if series else None, series_values=values,
                       parent_id=parent_id) for run_cfg, values in combos]
    return Added(items, series)
