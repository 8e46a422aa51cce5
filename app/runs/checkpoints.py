"""Finding a run's checkpoints without loading them (the window never imports torch)."""

from __future__ import annotations

from pathlib import Path

LATEST = "latest"  # a one-line text file naming the newest checkpoint (written atomically)


def latest_checkpoint(run_dir: Path) -> Path | None:
    """RUN_DIR's newest complete checkpoint: the one `checkpoints/latest` names, else the
    highest step-*.pt (a half-written one is a hidden .tmp file, never matched)."""
    folder = Path(run_dir) / "checkpoints"
    pointer = folder / LATEST
    try:
        named = folder / pointer.read_text(encoding="utf-8").strip()
        if named.name and named.is_file():
            return named
    except OSError:
        pass
    found = sorted(folder.glob("step-*.pt"))
    return found[-1] if found else None


def checkpoint_step(path: Path) -> int | None:
    """The step in a name such as step-00001200.pt."""
    stem = Path(path).stem
    if stem.startswith("step-") and stem[5:].isdigit():
        return int(stem[5:])
    return None
