"""Finding a run's checkpoints without loading them (the window never imports torch)."""

from __future__ import annotations

import json
from pathlib import Path

LATEST = "latest"  # a one-line text file naming the newest checkpoint (written atomically)


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
    pointer = folder / LATEST
    try:
        named = folder / pointer.read_text(encoding="utf-8").strip()
        if named.name and named.is_file():
            return named
    except OSError:
        pass
    found = sorted(folder.glob("step-*.pt")) if folder.is_dir() else []
    return found[-1] if found else None


def checkpoint_step(path: Path) -> int | None:
    """The step in a name such as step-00001200.pt."""
    stem = Path(path).stem
    if stem.startswith("step-") and stem[5:].isdigit():
        return int(stem[5:])
    return None
