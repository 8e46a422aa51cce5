"""The run history as the window's table shows it (and `ternit run list` prints it)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..base import run_status as st
from ..base.i18n import current_language, t
from .checkpoints import latest_checkpoint, usable_checkpoint
from .failure import shown_message
from .registry import Registry, RunRecord


@dataclass
class HistoryRow:
    id: str
    name: str
    status: str             # the code (status.STATUSES)
    status_label: str       # shown, in the interface language
    where: str              # "этот ПК · GPU 0", "Kaggle · alice", ...
    steps: str              # "1200 / 20000"
    last_step: int | None
    steps_to: int | None
    best_val_loss: float | None
    tokens_seen: int | None
    params: int | None
    leg: int
    chain_id: str
    parent_id: str | None
    created: str            # local time, "2026-11-29 23:41"
    folder: str
    kernel_ref: str | None
    message: str | None
    can_stop: bool
    can_continue: bool      # has a checkpoint to go on from (its own or the one it
                            # started from) and is not running
    can_export: bool = False  # has a checkpoint of its own


def where_label(rec: RunRecord, lang: str | None = None) -> str:
    lang = lang or current_language()
    if rec.target_kind == "kaggle":
        acct = rec.target_account or "auto"
        leg = t(f" · этап {rec.leg}", f" · leg {rec.leg}", lang) if rec.leg > 1 else ""
        return f"Kaggle · {acct}{leg}"
    gpu = (rec.target_gpu or "auto").lower()
    device = {"cpu": "CPU", "auto": t("авто", "auto", lang)}.get(gpu, f"GPU {gpu}")
    return t(f"этот ПК · {device}", f"this PC · {device}", lang)



def row(rec: RunRecord, lang: str | None = None) -> HistoryRow:
    lang = lang or current_language()
    missing = not rec.path.is_dir()  # deleted or moved by hand: nothing left to act on
    last = rec.last_step
    steps = f"{last if last is not None else 0} / {rec.steps_to}" if rec.steps_to else str(last or 0)
    # «Остановить» on Kaggle ends the chain, not the running leg: said in the row, and the
    # button is done (asking twice changes nothing).
    stopping = rec.target_kind == "kaggle" and rec.active and rec.stop_requested_at is not None
    label = st.label(rec.status, lang) + (t(" · остановка запрошена", " · stop asked", lang) if stopping else "")
    return HistoryRow(
        id=rec.id,
        name=rec.name,
        status=rec.status,
        status_label=t("папка удалена", "folder deleted", lang) if missing else label,
        where=where_label(rec, lang),
        steps=steps,
        last_step=last,
        steps_to=rec.steps_to,
        best_val_loss=rec.best_val_loss,
        tokens_seen=rec.tokens_seen,
        params=rec.params,
        leg=rec.leg,
        chain_id=rec.chain_id,
        parent_id=rec.parent_id,
        created=time.strftime("%Y-%m-%d %H:%M", time.localtime(rec.created_at)),
        folder=rec.folder,
        kernel_ref=rec.kaggle_kernel_ref,
        message=shown_message(rec.last_message, lang),
        can_stop=rec.active and not stopping,
        can_continue=not missing and not rec.active and usable_checkpoint(rec.path) is not None,
        can_export=not missing and latest_checkpoint(rec.path) is not None,
    )


def history(
    registry: Registry,
    limit: int | None = None,
    lang: str | None = None,
    cache: dict[str, tuple[tuple[float, str, bool], HistoryRow]] | None = None,
) -> list[HistoryRow]:
    """Newest first. With `cache` (kept by the caller between calls), rows whose run has
    not changed since are reused: the window refreshes the table on every poll that
    brought events, and a row costs file reads (the checkpoint pointer)."""
    lang = lang or current_language()  # once: it may read the settings file
    out = []
    for rec in registry.list_runs(limit):
        key = (rec.updated_at, lang, rec.path.is_dir())  # a folder deleted by hand changes no row
        hit = cache.get(rec.id) if cache is not None else None
        if hit is not None and hit[0] == key:
            out.append(hit[1])
            continue
        r = row(rec, lang)
        if cache is not None:
            cache[rec.id] = (key, r)
        out.append(r)
    return out
