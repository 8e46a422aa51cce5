"""Finding a run's checkpoints without loading them (the window never imports torch).

Both forms the trainer writes: a file `step-XXXXXXXX.pt` with its SHA-256 beside it
(`.pt.sha256`), and a sharded run's folder `step-XXXXXXXX.dcp/` with the list of its
files' SHA-256 beside it (`.dcp.sha256`). The naming, the check against what was stored
and the order newest first are trainer/checkpoint_index.py's, the one rule both sides
use; continuing and exporting pass over a checkpoint that changed on disk, saying so here
in the interface language.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from trainer.checkpoint_index import (
    NAME,
    Damage,
    checkpoint_files,
    checkpoint_step,
    find_damage,
    is_checkpoint,
    newest_first,
    read_pointer,
)

from ..base.i18n import t

__all__ = ["Checked", "checkpoint_step", "damage", "intact_checkpoint", "is_checkpoint",
           "checkpoint_steps", "latest_checkpoint", "usable_checkpoint"]


def latest_checkpoint(run_dir: Path) -> Path | None:
    """RUN_DIR's newest complete checkpoint: the one `checkpoints/latest` names, else the
    highest step-*.pt or step-*.dcp (a half-written one has a hidden .tmp name, never
    matched). A Kaggle run's checkpoints may instead sit in its downloaded outputs/ (any depth)."""
    run_dir = Path(run_dir)
    found = _in_folder(run_dir / "checkpoints")
    if found is not None:
        return found
    outputs = run_dir / "outputs"
    if outputs.is_dir():
        folders = sorted({p.parent for p in outputs.rglob("step-*") if NAME.fullmatch(p.name)})
        best = [c for c in (_in_folder(f) for f in folders) if c is not None]
        if best:
            return max(best, key=lambda p: (checkpoint_step(p) or -1, str(p)))
    return None


def usable_checkpoint(run_dir: Path) -> Path | None:
    """The checkpoint «Продолжить» starts from: the run's own newest, else the one the run
    itself started from (run.json's resume_from) — a continuation killed or failed before
    it saved its first checkpoint still has its chain's latest weights to go on from."""
    run_dir = Path(run_dir)
    own = latest_checkpoint(run_dir)
    if own is not None:
        return own
    try:
        config = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    resume = config.get("resume_from") if isinstance(config, dict) else None
    if isinstance(resume, str) and resume and is_checkpoint(Path(resume)):
        return Path(resume)
    return None


def _in_folder(folder: Path) -> Path | None:
    named, _problem = read_pointer(folder)  # a damaged pointer is passed over as missing
    if named is not None:
        return named
    found = [p for p in checkpoint_files(folder) if is_checkpoint(p)]
    return found[-1] if found else None


def damage(path: Path) -> str | None:
    """Why a checkpoint is not what the trainer wrote (a file's SHA-256 differs from the
    one stored beside it), in the interface language; None when it matches or has no
    stored hash (an older .pt checkpoint)."""
    found = find_damage(Path(path))
    return None if found is None else _said(Path(path).name, found)


def _said(name: str, d: Damage) -> str:
    ru, en = {
        "hash_unreadable": (f"{d.file} не читается", f"{d.file} cannot be read"),
        "hash_missing": (f"нет списка SHA-256 {d.file}", f"its SHA-256 list {d.file} is missing"),
        "unreadable": (f"{d.file} не читается", f"{d.file} cannot be read"),
        "changed": (f"SHA-256 {d.file} не совпадает с записанным при сохранении (файл изменился на диске)",
                    f"the SHA-256 of {d.file} differs from the one written with it (the file changed on disk)"),
        "missing": (f"нет файла {d.file} (папка неполная)", f"{d.file} is missing (the folder is incomplete)"),
        "added": (f"лишний файл {d.file}", f"{d.file} was not written with it"),
        "list": ("список файлов не тот, что записан при сохранении",
                 "its file list differs from the one written with it"),
    }[d.kind]
    return t(f"{name}: {ru}", f"{name}: {en}")


@dataclass
class Checked:
    """The checkpoint to go on from, and the newer ones passed over as damaged."""

    path: Path | None
    skipped: list[str] = field(default_factory=list)  # one line per damaged checkpoint


def intact_checkpoint(run_dir: Path, at_step: int | None = None) -> Checked:
    """The newest checkpoint of RUN_DIR that matches its stored hash (the one `latest`
    names first), or the one at `at_step` exactly (`--from-step N`, which must be intact)."""
    folder = Path(run_dir) / "checkpoints"
    if at_step is not None:
        files = [p for p in checkpoint_files(folder)[::-1] if checkpoint_step(p) == at_step]
    else:
        files, _notes = newest_first(folder)
    skipped = []
    for p in files:
        if not is_checkpoint(p):  # a file named like a folder, or the other way
            continue
        wrong = damage(p)
        if wrong is None:
            return Checked(p, skipped)
        skipped.append(wrong)
    return Checked(None, skipped)


def checkpoint_steps(run_dir: Path) -> list[int]:
    """The steps RUN_DIR has checkpoints at, both forms (`--from-step`'s choices)."""
    steps = (checkpoint_step(p) for p in checkpoint_files(Path(run_dir) / "checkpoints"))
    return sorted({s for s in steps if s is not None})
