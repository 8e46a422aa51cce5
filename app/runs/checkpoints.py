"""Finding a run's checkpoints without loading them (the window never imports torch).

The trainer writes beside each checkpoint its SHA-256 (`step-XXXXXXXX.pt.sha256`, in
`sha256sum` format, trainer/checkpoint.py); continuing and exporting check a checkpoint
against it here, and pass over one that changed on disk, saying so.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..i18n import t

LATEST = "latest"  # a one-line text file naming the newest checkpoint (written atomically)
HASH_SUFFIX = ".sha256"
NAME = re.compile(r"step-\d{8}\.pt")  # all `latest` may name: a file in its own folder


def latest_checkpoint(run_dir: Path) -> Path | None:
    """RUN_DIR's newest complete checkpoint: the one `checkpoints/latest` names, else the
    highest step-*.pt (a half-written one is a hidden .tmp file, never matched). A Kaggle
    run's checkpoints may instead sit in its downloaded outputs/ (any depth)."""
    run_dir = Path(run_dir)
    found = _in_folder(run_dir / "checkpoints")
    if found is not None:
        return found
    outputs = run_dir / "outputs"
    if outputs.is_dir():
        folders = sorted({p.parent for p in outputs.rglob("step-*.pt")})
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
    if isinstance(resume, str) and resume and Path(resume).is_file():
        return Path(resume)
    return None


def _in_folder(folder: Path) -> Path | None:
    named = _pointed(folder)
    if named is not None:
        return named
    found = sorted(folder.glob("step-*.pt")) if folder.is_dir() else []
    return found[-1] if found else None


def _pointed(folder: Path) -> Path | None:
    """What `latest` names, if it is readable and names a step file in `folder` (a damaged
    pointer, or one naming a path elsewhere, is passed over as missing)."""
    try:
        name = (folder / LATEST).read_bytes().decode("utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return folder / name if NAME.fullmatch(name) and (folder / name).is_file() else None


def damage(path: Path) -> str | None:
    """Why a checkpoint is not what the trainer wrote (its SHA-256 differs from the one
    stored beside it), in the trainer's words; None when it matches or has no stored hash."""
    path = Path(path)
    stored = path.with_name(path.name + HASH_SUFFIX)
    try:
        recorded = stored.read_text(encoding="ascii").split()[0]
    except FileNotFoundError:
        return None
    except (OSError, ValueError, IndexError):
        return t(f"{stored.name} не читается", f"{stored.name} cannot be read")
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    except OSError as e:
        return t(f"{path.name} не читается ({type(e).__name__})", f"{path.name} cannot be read ({type(e).__name__})")
    if h.hexdigest() == recorded:
        return None
    return t(f"{path.name}: SHA-256 не совпадает с записанным при сохранении (файл изменился на диске)",
             f"{path.name}: SHA-256 differs from the one written with it (the file changed on disk)")


@dataclass
class Checked:
    """The checkpoint to go on from, and the newer ones passed over as damaged."""

    path: Path | None
    skipped: list[str] = field(default_factory=list)  # one line per damaged checkpoint


def intact_checkpoint(run_dir: Path, at_step: int | None = None) -> Checked:
    """The newest checkpoint of RUN_DIR that matches its stored hash (the one `latest`
    names first), or the one at `at_step` exactly (`--from-step N`, which must be intact)."""
    folder = Path(run_dir) / "checkpoints"
    files = sorted(folder.glob("step-*.pt"), reverse=True) if folder.is_dir() else []
    if at_step is not None:
        files = [p for p in files if checkpoint_step(p) == at_step]
    else:
        named = _pointed(folder)
        files = ([named] if named else []) + [p for p in files if p != named]
    skipped = []
    for p in files:
        wrong = damage(p)
        if wrong is None:
            return Checked(p, skipped)
        skipped.append(wrong)
    return Checked(None, skipped)


def checkpoint_step(path: Path) -> int | None:
    """The step in a name such as step-00001200.pt."""
    stem = Path(path).stem
    if stem.startswith("step-") and stem[5:].isdigit():
        return int(stem[5:])
    return None
