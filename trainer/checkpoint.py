"""Checkpoints: everything needed to continue exactly, written atomically.

A checkpoint is written to a temporary file in the same folder, flushed and fsynced, then
renamed into place; only then is the `latest` pointer (a one-line text file naming the
checkpoint) replaced the same way. A process killed at any moment leaves either the old or
the new checkpoint complete, never a half-written file under a checkpoint's name.
"""

from __future__ import annotations

import hashlib
import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

FORMAT = 1
LATEST = "latest"


class CheckpointError(ValueError):
    """A checkpoint that cannot be used: the message says why and what to use instead."""


class SaveError(Exception):
    """A checkpoint that could not be written (disk full, no permission, a file in the way).
    Nothing under a checkpoint's name and no `latest` pointer was touched."""


def checkpoint_dir(run_dir: Path) -> Path:
    return run_dir / "checkpoints"


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # not possible on Windows; rename is still atomic there
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def save(run_dir: Path, step: int, payload: dict[str, Any], keep: int) -> tuple[Path, str]:
    """Write step-XXXXXXXX.pt atomically, point `latest` at it, prune old ones; returns (path, sha256)."""
    folder = checkpoint_dir(run_dir)
    final = folder / f"step-{step:08d}.pt"
    tmp = folder / f".{final.name}.tmp"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as f:
            torch.save(payload, f)
            f.flush()
            os.fsync(f.fileno())
    # A full disk shows as OSError, or as torch's RuntimeError from its zip writer (which
    # hides the errno): either way the half-written file goes, so it fills nothing more.
    except (OSError, RuntimeError) as e:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        raise SaveError(
            f"could not write checkpoint {final} ({type(e).__name__}: {e}): "
            "free disk space, make the run folder writable or move away what is in the way"
        ) from None
    os.replace(tmp, final)
    _fsync_dir(folder)
    atomic_write_bytes(folder / LATEST, (final.name + "\n").encode())
    _prune(folder, keep, final)
    return final, file_sha256(final)


def _prune(folder: Path, keep: int, newest: Path) -> None:
    ckpts = sorted(folder.glob("step-*.pt"))
    for old in ckpts[:-keep]:
        if old != newest:
            old.unlink(missing_ok=True)
    for stale in folder.glob(".step-*.tmp"):  # left by a process killed mid-save
        stale.unlink(missing_ok=True)


def resolve(run_dir: Path, spec: str) -> Path:
    """`latest` (RUN_DIR's own latest checkpoint) or a path to a checkpoint file."""
    if spec != LATEST:
        path = Path(spec)
        if not path.is_file():
            raise CheckpointError(f"checkpoint {path} does not exist")
        return path
    pointer = checkpoint_dir(run_dir) / LATEST
    if not pointer.is_file():
        raise CheckpointError(f"{run_dir} has no checkpoint yet (no checkpoints/latest): start it without --resume")
    return checkpoint_dir(run_dir) / pointer.read_text(encoding="utf-8").strip()


def earlier_than(path: Path) -> Path | None:
    """The newest checkpoint in the same folder older than `path`, if any."""
    older = [p for p in sorted(path.parent.glob("step-*.pt")) if p.name < path.name]
    return older[-1] if older else None


def load(path: Path) -> dict[str, Any]:
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # a truncated or corrupted file raises many kinds of errors
        earlier = earlier_than(path)
        offer = f"; the earlier checkpoint {earlier} is intact: --resume {earlier}" if earlier else ""
        raise CheckpointError(f"checkpoint {path} is damaged ({type(e).__name__}: {e}){offer}") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not a Ternit Lab checkpoint (format {FORMAT})")
    return payload


def rng_state() -> dict[str, Any]:
    py = random.getstate()
    np_state = np.random.get_state()
    state = {
        "python": [py[0], list(py[1]), py[2]],
        "numpy": [np_state[0], torch.from_numpy(np_state[1].astype(np.int64)), *np_state[2:]],
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    py = state["python"]
    random.setstate((py[0], tuple(py[1]), py[2]))
    np_state = state["numpy"]
    np.random.set_state((np_state[0], np_state[1].numpy().astype(np.uint32), *np_state[2:]))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        cuda_states = state["cuda"]
        if len(cuda_states) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all(cuda_states)


def _tensor_bytes(t: torch.Tensor) -> bytes:
    return t.detach().to("cpu").contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def state_sha256(model_state: dict[str, torch.Tensor], optim_state: dict[str, Any]) -> str:
    """SHA-256 over the model and optimizer tensors in a fixed order, raw bytes."""
    h = hashlib.sha256()
    for name in sorted(model_state):
        h.update(name.encode())
        h.update(_tensor_bytes(model_state[name]))
    for idx in sorted(optim_state["state"]):
        for key in sorted(optim_state["state"][idx]):
            value = optim_state["state"][idx][key]
            h.update(f"{idx}.{key}".encode())
            h.update(_tensor_bytes(value) if torch.is_tensor(value) else repr(value).encode())
    return h.hexdigest()
