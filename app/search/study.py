"""One Optuna study per search, in a journal file: `searches/<id>-<name>.journal` under the
lab's data folder (the table keeps it relative to that folder: a lab moved with TERNIT_HOME or
copied to another disk still finds it).

Why the journal file and not Optuna's RDB storage on SQLite (docs/SEARCH.md says it at
length): the study is one append-only file of JSON lines, which Optuna replays; it has no
schema, so no `optuna storage upgrade` after a version bump, and no second SQLite database
beside the lab's state (RDB storage creates its tables with alembic in a file of its own,
and a killed process can leave SQLAlchemy's connection pool and the lab's own lock on two
files). Its writes are serialised by a lock file (`JournalFileOpenLock`, which Windows
supports; the default symlink lock needs a privilege there), taken only while a line is
appended and fsynced; a lock left by a killed writer is broken after its grace period. Only
the queue runner (one per lab, by its OS lock) writes a running search's study, and
`ternit search add` writes a new one before the runner can see it.

A power cut mid-append can leave a last line without its newline; Optuna then refuses the
file once another line follows it. `open_storage(…, repair=True)` (the writer's opening)
cuts such a tail back to the last whole line first: that line's operation was never
acknowledged to the lab, which reconciles as after any kill (app/search/driver.py).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..base import paths

GRACE_S = 30          # a lock file older than this is a killed writer's: broken
STARTUP_TRIALS = 3    # the median pruner waits for this many complete trials
TPE_STARTUP = 5       # trials the TPE sampler draws at random before it models the rest


def journal_path(relative: str) -> Path:
    return paths.data_dir() / relative


def storage_text(path: Path) -> str:
    """What `ternit search show --json` names as the storage: `journal:PATH`."""
    return f"journal:{path}"


def repair_tail(path: Path) -> bool:
    """Cut a torn last line (no newline) off the journal; whether it had one."""
    try:
        with open(path, "rb+") as f:
            size = f.seek(0, os.SEEK_END)
            if size == 0:
                return False
            f.seek(max(0, size - 1))
            if f.read(1) == b"\n":
                return False
            keep = 0
            pos = size
            while pos > 0 and not keep:
                start = max(0, pos - (1 << 16))
                f.seek(start)
                chunk = f.read(pos - start)
                nl = chunk.rfind(b"\n")
                if nl >= 0:
                    keep = start + nl + 1
                pos = start
            f.truncate(keep)
            f.flush()
            os.fsync(f.fileno())
            return True
    except FileNotFoundError:
        return False


def open_storage(path: Path, repair: bool = False) -> Any:
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend, JournalFileOpenLock

    path.parent.mkdir(parents=True, exist_ok=True)
    if repair:
        repair_tail(path)
    backend = JournalFileBackend(str(path), lock_obj=JournalFileOpenLock(str(path), grace_period=GRACE_S))
    return JournalStorage(backend)


def quiet() -> None:
    """Optuna logs every trial at INFO to stderr; the lab says what it wants itself."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)


def make_pruner(kind: str) -> Any:
    import optuna

    if kind == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=STARTUP_TRIALS, n_warmup_steps=0)
    if kind == "halving":
        return optuna.pruners.SuccessiveHalvingPruner()
    return optuna.pruners.NopPruner()


def make_sampler(seed: int, asked: int) -> Any:
    """TPE seeded by the search's seed and how many trials were asked before: the next trial's
    values are a function of the study's history, the same after a restart as without one."""
    import optuna

    return optuna.samplers.TPESampler(seed=seed + asked, n_startup_trials=TPE_STARTUP)


def create_study(path: Path, study_name: str) -> None:
    import optuna

    quiet()
    optuna.create_study(study_name=study_name, storage=open_storage(path), direction="minimize")


def load_study(path: Path, study_name: str, pruner: str = "none", seed: int = 0, asked: int = 0,
               repair: bool = False) -> tuple[Any, Any]:
    """(the study, its storage): the storage is the lab's own object, whose public BaseStorage
    methods report a trial's evaluations by its number (app/search/driver.py)."""
    import optuna

    quiet()
    storage = open_storage(path, repair)
    study = optuna.load_study(study_name=study_name, storage=storage, sampler=make_sampler(seed, asked),
                              pruner=make_pruner(pruner))
    return study, storage
