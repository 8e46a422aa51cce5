"""A run's metrics as a table (`ternit run metrics ID --csv`, the history's «Метрики в
CSV…»): one row per training step, its evaluation (if one was made at that step) in the
same row; a continued run with its ancestors first, as the loss plot draws them.

A leg that starts from an earlier step than the rows reach (a continuation from an older
checkpoint, a resume in place after the last checkpoint) replaces the later rows, so each
step appears once, as the training that went on made it. Numbers are written as Python
writes them (a dot, no thousands separator), whatever the interface language: the file is
for other programs.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import Any

from .events import Event, iter_events
from .registry import Registry, RunRecord

COLUMNS = ("run_id", "step", "time", "loss", "lr", "tokens_seen", "tokens_per_s", "step_ms",
           "val_loss", "val_ci95_low", "val_ci95_high", "mem_alloc_mb", "mem_peak_mb")
_FROM_STEP = ("time", "loss", "lr", "tokens_seen", "tokens_per_s", "step_ms", "mem_alloc_mb", "mem_peak_mb")


def metrics_rows(records: list[RunRecord]) -> list[dict[str, Any]]:
    """The rows of these runs (oldest first), in step order."""
    rows: dict[int, dict[str, Any]] = {}
    for rec in records:
        for ev in iter_events(rec.events_path):
            _fold(rows, rec.id, ev)
    return [rows[k] for k in sorted(rows)]


def _fold(rows: dict[int, dict[str, Any]], run_id: str, ev: Event) -> None:
    step = ev.get("step")
    if not isinstance(step, int):
        return
    kind = ev.get("event")
    if kind == "start":  # this leg goes on from `step`: what lay beyond it is redone
        for later in [k for k in rows if k > step]:
            del rows[later]
    elif kind == "step":
        row = {"run_id": run_id, "step": step, **{k: ev.get(k) for k in _FROM_STEP}}
        rows[step] = row
    elif kind == "eval" and step in rows:
        ci = ev.get("val_ci95")
        ci = ci if isinstance(ci, list) and len(ci) == 2 else [None, None]
        rows[step].update(val_loss=ev.get("val_loss"), val_ci95_low=ci[0], val_ci95_high=ci[1])


def run_metrics(registry: Registry, run_id: str, with_parents: bool = True) -> list[dict[str, Any]]:
    records = registry.lineage(run_id) if with_parents else [registry.get(run_id)]
    return metrics_rows(records)


def _cell(value: Any) -> str:
    if value is None or isinstance(value, bool):
        return ""
    if isinstance(value, float):
        return "" if not math.isfinite(value) else repr(value)
    return str(value)


def to_csv(rows: list[dict[str, Any]]) -> str:
    """The rows as CSV text with a header line (empty cells where a value is missing)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    for row in rows:
        w.writerow([_cell(row.get(c)) for c in COLUMNS])
    return buf.getvalue()


def write_csv(rows: list[dict[str, Any]], path: Path | str) -> None:
    """Written whole or not at all (a temporary file renamed over `path`)."""
    from ..base.atomic import write_text

    write_text(Path(path), to_csv(rows))


def save_metrics(registry: Registry, run_id: str, path: Path | str, with_parents: bool = True) -> tuple[bool, str]:
    """Write the run's table to `path` (CSV): (whether it was written, the line to show,
    in the interface language). The CLI's --out and the history's «Метрики в CSV…»."""
    from ..base.i18n import t
    from ..base.numbers import plural_ru

    rows = run_metrics(registry, run_id, with_parents)
    try:
        write_csv(rows, path)
    except OSError as e:
        why = e.strerror or str(e)
        return False, t(f"Не удалось записать {path} ({why}): выберите другое место.",
                        f"Could not write {path} ({why}): choose another place.")
    return True, t(f"Метрики записаны: {len(rows)} {plural_ru(len(rows), 'строка', 'строки', 'строк')} → {path}", f"Metrics written: {len(rows)} rows → {path}")
