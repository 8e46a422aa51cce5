"""Run folders: ids, layout and atomic writes.

A run folder (shared/DESIGN.md) is `runs/<run-id>/` with run.json, events.jsonl,
trainer.log, checkpoints/ and outputs/. The folder is the truth for what happened; the
SQLite registry is only the index the history reads fast.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from ..base import atomic

RUN_JSON = "run.json"
EVENTS = "events.jsonl"
LOG = "trainer.log"
CHECKPOINTS = "checkpoints"
OUTPUTS = "outputs"
STOP_FILE = "STOP"


def atomic_write_text(path: Path, text: str) -> None:
    """Write so that a crash leaves either the old file or the new one, never half of one."""
    atomic.write_text(path, text)


def atomic_write_json(path: Path, data: Any) -> None:
    atomic.write_json(path, data)



def read_json(path: Path) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def slug(name: str) -> str:
    """A folder-safe, readable form of a run name (Cyrillic letters kept)."""
    s = re.sub(r"[^\w.-]+", "-", name.strip().lower(), flags=re.UNICODE).strip("-._")
    return s[:40] or "run"


def new_run_id(name: str, runs_root: Path, now: float | None = None) -> str:
    """A sortable, readable id such as `20261129-2341-demo-27m` (`-2`, `-3`... on a clash).

    The folder is created here (mkdir without exist_ok), so two starts in the same minute
    never share a folder even from two processes.
    """
    stamp = time.strftime("%Y%m%d-%H%M", time.localtime(time.time() if now is None else now))
    base = f"{stamp}-{slug(name)}"
    runs_root.mkdir(parents=True, exist_ok=True)
    n = 1
    while True:
        run_id = base if n == 1 else f"{base}-{n}"
        try:
            (runs_root / run_id).mkdir()
            return run_id
        except FileExistsError:
            n += 1


def folder_gone(folder: Path | str) -> str | None:
    """What to say when a run's folder was deleted or moved by hand (None while it is there)."""
    from ..base.i18n import t

    if Path(folder).is_dir():
        return None
    return t(f"Папки прогона нет: {folder} — её удалили или переместили. Верните её на место, "
             "чтобы продолжить прогон или взять его веса.",
             f"The run's folder is gone: {folder} — it was deleted or moved. Put it back to continue "
             "the run or take its weights.")


def make_layout(folder: Path) -> None:
    (folder / CHECKPOINTS).mkdir(parents=True, exist_ok=True)
    (folder / OUTPUTS).mkdir(parents=True, exist_ok=True)
