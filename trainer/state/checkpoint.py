"""Checkpoints: everything needed to continue exactly, written atomically.

A checkpoint is written to a temporary file in the same folder, flushed and fsynced, then
renamed into place; only then is the `latest` pointer (a one-line text file naming the
checkpoint) replaced the same way. A process killed at any moment leaves either the old or
the new checkpoint complete, never a half-written file under a checkpoint's name.

Beside each checkpoint lies its SHA-256 (`step-XXXXXXXX.pt.sha256`, in `sha256sum` format,
written before the checkpoint gets its name): a file changed on disk afterwards (a flipped
bit, a bad copy) is refused on load instead of being trained on silently. A checkpoint
written before these files existed has none and is only checked by loading it.

A sharded run (FSDP, trainer/parallel/sharding.py) writes the DCP form instead: a folder
`step-XXXXXXXX.dcp/` (every process's shards, DCP's `.metadata`, and `extra.pt` with the
run's counters from rank 0), written under a hidden temporary name and renamed into place
like a file. Its `.sha256` beside it lists every file inside in `sha256sum` format (check
it with `sha256sum -c` from the checkpoints folder); its own hash, in events and in the
log, is the SHA-256 of that list. `latest` may name either form.
"""

from __future__ import annotations

import errno
import hashlib
import os
import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

# The naming, the hash lists and which checkpoint is newest live in checkpoint_index
# (standard library only, so the lab reads them by the same rule without torch).
from trainer.state.checkpoint_index import (
    DCP_SUFFIX,
    EXTRA,
    HASH_SUFFIX,
    LATEST,
    CheckpointError,
    checkpoint_files,
    damage_text,
    dcp_manifest,
    file_sha256,
    find_damage,
    hash_path,
    identity,
    newest_first,
    resume_path,
)

FORMAT = 1


class SaveError(Exception):
    """A checkpoint that could not be written (disk full, no permission, a file in the way).
    Nothing under a checkpoint's name and no `latest` pointer was touched."""


def checkpoint_dir(run_dir: Path) -> Path:
    return run_dir / "checkpoints"


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
    writer: _Writes | None = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as f:
            writer = _Writes(f)
            torch.save(payload, writer)
            f.flush()
            os.fsync(f.fileno())
        # The hash goes down before the checkpoint gets its name: every named checkpoint has one.
        sha = file_sha256(tmp)
        atomic_write_bytes(hash_path(final), f"{sha}  {final.name}\n".encode())
    # A full disk shows as OSError, or as torch's RuntimeError from its zip writer (which
    # hides the errno; the writer keeps it): either way the half-written file goes.
    except (OSError, RuntimeError) as e:
        for leftover in (tmp, hash_path(final).with_name(f".{hash_path(final).name}.tmp")):
            try:
                leftover.unlink(missing_ok=True)
            except OSError:
                pass
        raise SaveError(_could_not_write(final, (writer.error if writer else None) or e)) from None
    os.replace(tmp, final)
    _fsync_dir(folder)
    atomic_write_bytes(folder / LATEST, (final.name + "\n").encode())
    _prune(folder, keep, final)
    return final, sha


def save_dcp(run_dir: Path, step: int, write_shards: Callable[[Path], None], extra: dict[str, Any] | None,
             keep: int, barrier: Callable[[], None]) -> tuple[Path, str] | None:
    """The DCP form of `save`, called by every process of a sharded run: all write their
    shards (`write_shards(folder)`, DCP's collective save) into a temporary folder; rank
    0 (the one given `extra`) adds extra.pt, writes the manifest beside the final name,
    renames the folder into place, points `latest` at it and prunes. Returns (path,
    sha256) on rank 0, None elsewhere; SaveError on rank 0 if its part failed."""
    folder = checkpoint_dir(run_dir)
    final = folder / f"step-{step:08d}{DCP_SUFFIX}"
    tmp = folder / f".{final.name}.tmp"
    main = extra is not None
    if main:
        folder.mkdir(parents=True, exist_ok=True)
        _remove(tmp)
    barrier()  # the fresh temporary folder exists before anyone writes into it
    write_shards(tmp)
    if not main:
        return None
    writer: _Writes | None = None
    try:
        with open(tmp / EXTRA, "wb") as f:
            writer = _Writes(f)
            torch.save(extra, writer)
            f.flush()
            os.fsync(f.fileno())
        manifest = dcp_manifest(tmp, final.name)
        atomic_write_bytes(hash_path(final), manifest.encode())
        if final.exists():  # the same step saved again (a continued run that made no step)
            _remove(final)
        os.replace(tmp, final)
    except (OSError, RuntimeError) as e:
        _remove(tmp)
        raise SaveError(_could_not_write(final, (writer.error if writer else None) or e)) from None
    _fsync_dir(folder)
    atomic_write_bytes(folder / LATEST, (final.name + "\n").encode())
    _prune(folder, keep, final)
    return final, hashlib.sha256(manifest.encode()).hexdigest()


class _Writes:
    """The file torch.save writes into, keeping the OSError of a failed write: torch's zip
    writer turns it into "enforce fail at inline_container.cc … unexpected pos", errno gone."""

    def __init__(self, f: Any) -> None:
        self.f, self.error = f, None

    def write(self, data: Any) -> int:
        try:
            return self.f.write(data)
        except OSError as e:
            self.error = e
            raise

    def flush(self) -> None:
        self.f.flush()


NO_ROOM = {errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", errno.ENOSPC)}


def _could_not_write(final: Path, error: BaseException) -> str:
    """Why a checkpoint could not be written, a full disk named as one."""
    if isinstance(error, OSError) and error.errno in NO_ROOM:
        return (f"could not write checkpoint {final}: the disk holding it is full ({os.strerror(error.errno)}): "
                "free disk space")
    return (f"could not write checkpoint {final} ({type(error).__name__}: {error}): "
            "free disk space, make the run folder writable or move away what is in the way")


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _prune(folder: Path, keep: int, newest: Path) -> None:
    ckpts = checkpoint_files(folder)
    for old in ckpts[:-keep]:
        if old != newest:
            _remove(old)
            hash_path(old).unlink(missing_ok=True)
    for stale in folder.glob(".step-*.tmp"):  # left by a process killed mid-save
        _remove(stale)
    for orphan in [*folder.glob(f"step-*.pt{HASH_SUFFIX}"), *folder.glob(f"step-*.dcp{HASH_SUFFIX}")]:
        if not orphan.with_name(orphan.name.removesuffix(HASH_SUFFIX)).exists():  # never got its name
            orphan.unlink(missing_ok=True)


def damage(path: Path) -> str | None:
    """Why `path` differs from what was written (None: it matches its stored SHA-256, or
    it is an older checkpoint with no hash beside it, checked only by loading)."""
    found = find_damage(path)
    return damage_text(found) if found else None


def candidates(run_dir: Path) -> tuple[list[Path], list[str]]:
    """RUN_DIR's checkpoints in the order `--resume latest` tries them: the one `latest`
    names, then every other step file newest first; and what was wrong with the pointer."""
    return newest_first(checkpoint_dir(run_dir))


def resolve(run_dir: Path, spec: str) -> Path:
    """A path to a checkpoint file (`--resume PATH`); `latest` goes through `load_latest`."""
    return resume_path(spec)


def earlier_intact(path: Path) -> Path | None:
    """The newest checkpoint in the same folder older than `path` that was checked and is
    intact (its hash matches and it loads), if any."""
    for p in checkpoint_files(path.parent)[::-1]:
        if p.name < path.name and _problem(p) is None:
            return p
    return None


def _problem(path: Path) -> str | None:
    try:
        _load_checked(path)
    except CheckpointError as e:
        return str(e)
    return None


def _load_checked(path: Path) -> dict[str, Any]:
    """The checkpoint's payload after its hash check; for a DCP folder, its `extra.pt`
    only (the counters, config, RNG: `"sharded": True`); its tensors are read by the
    trainer (trainer.parallel.sharding) or by `load`."""
    wrong = damage(path)
    if wrong:
        raise CheckpointError(f"checkpoint {path} is damaged: {wrong}")
    try:
        payload = torch.load(path / EXTRA if path.is_dir() else path, map_location="cpu", weights_only=True)
    except Exception as e:  # a truncated or corrupted file raises many kinds of errors
        raise CheckpointError(f"checkpoint {path} is damaged ({type(e).__name__}: {e})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not a Ternit Lab checkpoint (format {FORMAT})")
    return payload


def load(path: Path, whole: bool = True) -> dict[str, Any]:
    """Load a checkpoint after checking it against its stored hash; a damaged one is refused
    with the newest earlier checkpoint that was checked and found intact, if any. A DCP
    checkpoint comes with its whole state unless `whole` is False (the sharded trainer
    reads its shards itself)."""
    try:
        payload = _load_checked(path)
    except CheckpointError as e:
        earlier = earlier_intact(path)
        offer = f"; the earlier checkpoint {earlier} is intact: use it instead" if earlier else ""
        raise CheckpointError(f"{e}{offer}") from None
    if payload.get("sharded") and whole:
        return with_tensors(path, payload)
    return payload


def with_tensors(path: Path, payload: dict[str, Any]) -> dict[str, Any]:
    """A DCP checkpoint's payload completed with its whole model and optimizer state read
    into this process (as a .pt checkpoint holds them): one process continuing a sharded
    run, or the export. Collective when a process group is up (every rank calls it)."""
    from trainer.state.dcp import read_dcp_whole

    try:
        model, optimizer = read_dcp_whole(path, payload["optimizer_names"])
    except Exception as e:  # noqa: BLE001 — DCP raises many kinds for a bad folder
        raise CheckpointError(f"checkpoint {path} is damaged ({type(e).__name__}: {str(e)[:300]})") from None
    return {**payload, "model": model, "optimizer": optimizer}


def load_latest(run_dir: Path) -> tuple[Path, dict[str, Any], list[str]]:
    """`--resume latest`: the newest intact checkpoint of RUN_DIR, its payload, and what was
    passed over on the way (a damaged pointer, damaged files) for the run to say."""
    found, notes = candidates(run_dir)
    if not found:
        raise CheckpointError(f"{run_dir} has no checkpoint yet (no checkpoints/latest): start it without --resume")
    for path in found:
        try:
            payload = _load_checked(path)
        except CheckpointError as e:
            notes.append(str(e))
            continue
        foreign = identity(path, payload).problem
        if foreign:  # another run's step under this run's name: passed over like a damaged one
            notes.append(f"checkpoint {path} is not this run's: {foreign}")
            continue
        return path, payload, notes
    raise CheckpointError(
        f"no intact checkpoint in {checkpoint_dir(run_dir)}: " + "; ".join(notes)
        + ": start it again without --resume"
    )


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
