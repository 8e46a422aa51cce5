"""What the history calls each run, so that runs of one name can be told apart: «nc-stop»
twice reads «nc-stop #1» and «nc-stop #2», numbered in the order they were created, and a
run started after a failed one of the same name says it is a retry («nc-stop #2 · повтор»).
A name used once stays as it is. Plain Python: ui/runs/history.py shows what this says."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..base import run_status as st
from ..base.i18n import t


def base_name(row: Any, lang: str | None = None) -> str:
    """The run's name with its Kaggle leg («этап 2»), as the history always showed it."""
    return row.name + (t(f" (этап {row.leg})", f" (leg {row.leg})", lang) if row.leg > 1 else "")


def display_names(rows: Sequence[Any], lang: str | None = None) -> dict[str, str]:
    """Run id → the name the history shows; `rows` newest first (app.runs' HistoryRow)."""
    oldest_first = list(reversed(rows))
    groups: dict[str, list[Any]] = {}
    for row in oldest_first:
        groups.setdefault(base_name(row, lang), []).append(row)
    out: dict[str, str] = {}
    for name, same in groups.items():
        if len(same) == 1:
            out[same[0].id] = name
            continue
        for k, row in enumerate(same, start=1):
            text = f"{name} #{k}"
            if k > 1 and same[k - 2].status == st.FAILED:
                text += t(" · повтор", " · retry", lang)
            out[row.id] = text
    return out
