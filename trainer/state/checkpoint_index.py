"""Which checkpoints a run folder holds, whether each is what was written, which is newest:
the standard library only, so the lab (app/, which never imports torch) reads them by the
same rule as the trainer (trainer/state/checkpoint.py, which writes and loads them).

Two forms: a file `step-XXXXXXXX.pt` with `step-XXXXXXXX.pt.sha256` beside it (one
`sha256sum` line), and a folder `step-XXXXXXXX.dcp/` (a sharded run's torch.distributed
.checkpoint shards, `.metadata` and `extra.pt`) with `step-XXXXXXXX.dcp.sha256` beside it
listing every file inside (`sha256sum -c` checks it from the checkpoints folder); such a
checkpoint's own hash is the SHA-256 of that list. `latest` names either form.

A checkpoint's payload holds its step and (since issue 24) the id of the run that wrote it
(`run_id`); `read_payload` reads those parts without torch, so a file whose content
disagrees with its name or with the run folder it lies in is told apart by the same rule
(`identity_problem`) on both sides.
"""

from __future__ import annotations

import hashlib
import io
import pickle
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LATEST = "latest"
HASH_SUFFIX = ".sha256"
DCP_SUFFIX = ".dcp"
EXTRA = "extra.pt"  # inside a DCP folder: the payload without the model and optimizer
# What `latest` may name: a checkpoint in the same folder, nothing else (no path).
NAME = re.compile(r"step-\d{8}\.(pt|dcp)")
CHECKPOINTS = "checkpoints"
KERNEL_RUN_DIR = "run"  # the run folder inside a Kaggle kernel (resources/kaggle_kernel.py.tmpl)


class CheckpointError(ValueError):
    """A checkpoint that cannot be used: the message says why and what to use instead."""


def is_dcp(path: Path) -> bool:
    return Path(path).name.endswith(DCP_SUFFIX)


def is_checkpoint(path: Path) -> bool:
    """A checkpoint of either form that exists: a step-*.pt file or a step-*.dcp folder
    (under any name: `--resume PATH`, `ternit export PATH`)."""
    path = Path(path)
    return path.is_dir() if is_dcp(path) else path.is_file()


def hash_path(path: Path) -> Path:
    """The file beside a checkpoint that holds its SHA-256 (or, for a DCP folder, its list)."""
    return path.with_name(path.name + HASH_SUFFIX)


def file_sha256(path: Path) -> str:
    """A checkpoint file's SHA-256; for a DCP folder, that of its manifest (dcp_manifest)."""
    if path.is_dir():
        return hashlib.sha256(dcp_manifest(path).encode()).hexdigest()
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def dcp_manifest(folder: Path, name: str | None = None) -> str:
    """`sha256sum` lines for every file in a DCP folder, names relative to its parent
    (under `name`: the folder's final name while it is still the temporary one)."""
    lines = []
    for f in sorted(p for p in folder.rglob("*") if p.is_file()):
        lines.append(f"{file_sha256(f)}  {name or folder.name}/{f.relative_to(folder).as_posix()}\n")
    return "".join(lines)


def checkpoint_step(path: Path) -> int | None:
    """The step in a name such as step-00001200.pt or step-00001200.dcp."""
    stem = Path(path).stem
    if stem.startswith("step-") and stem[5:].isdigit():
        return int(stem[5:])
    return None


def checkpoint_files(folder: Path) -> list[Path]:
    """Every named checkpoint in `folder`, both forms, in step order (oldest first)."""
    if not folder.is_dir():
        return []
    return sorted((p for p in folder.glob("step-*") if NAME.fullmatch(p.name)), key=lambda p: p.name)


def read_pointer(folder: Path) -> tuple[Path | None, str | None]:
    """The checkpoint `latest` names, and what is wrong with the pointer (if anything).
    Only a checkpoint inside `folder` is followed, never a path elsewhere."""
    pointer = folder / LATEST
    try:
        name = pointer.read_bytes().decode("utf-8").strip()
    except FileNotFoundError:
        return None, None
    except (OSError, UnicodeDecodeError) as e:
        return None, f"{pointer} cannot be read ({type(e).__name__})"
    if not NAME.fullmatch(name):
        return None, f"{pointer} does not name a checkpoint file in {folder.name}/ ({name[:40]!r})"
    if not is_checkpoint(folder / name):
        return None, f"{pointer} names {name}, which does not exist"
    return folder / name, None


def newest_first(folder: Path) -> tuple[list[Path], list[str]]:
    """The checkpoints of a checkpoints folder in the order a continuation tries them: the
    one `latest` names, then every other newest first; and what was wrong with the pointer."""
    named, problem = read_pointer(folder)
    files = checkpoint_files(folder)[::-1]
    notes = [problem] if problem else []
    if named is None and files and not problem:
        notes.append(f"{folder / LATEST} is missing")
    return ([named] if named else []) + [p for p in files if p != named], notes


@dataclass(frozen=True)
class Damage:
    """How a checkpoint differs from what was written, for each side to say in its words.

    kind: "hash_unreadable" (the hash file), "hash_missing" (a DCP folder without its list),
    "unreadable" (the checkpoint itself), "changed" (`file`'s SHA-256 is `have`, not
    `want`), "missing" / "added" (`file` in the list and not in the folder, or the other
    way), "list" (the lists differ otherwise)."""

    kind: str
    file: str
    have: str = ""
    want: str = ""


def find_damage(path: Path) -> Damage | None:
    """Why `path` differs from what was written (None: it matches its stored hash, or it is
    an older .pt checkpoint with no hash beside it, checked only by loading)."""
    path = Path(path)
    stored = hash_path(path)
    try:
        recorded = stored.read_text(encoding="utf-8")
        want = recorded.split()[0] if not path.is_dir() else ""
    except FileNotFoundError:
        return Damage("hash_missing", stored.name) if path.is_dir() else None
    except (OSError, UnicodeDecodeError, IndexError):
        return Damage("hash_unreadable", stored.name)
    try:
        if path.is_dir():
            return _dcp_damage(path, recorded)
        have = file_sha256(path)
    except OSError as e:
        return Damage("unreadable", f"{path.name} ({type(e).__name__})")
    return None if have == want else Damage("changed", path.name, have, want)


def _dcp_damage(folder: Path, recorded: str) -> Damage | None:
    actual = dcp_manifest(folder)
    if actual == recorded:
        return None
    want = dict(reversed(line.split("  ", 1)) for line in recorded.splitlines() if "  " in line)
    have = dict(reversed(line.split("  ", 1)) for line in actual.splitlines() if "  " in line)
    for name in sorted(set(want) | set(have)):
        if name not in have:
            return Damage("missing", name)
        if name not in want:
            return Damage("added", name)
        if want[name] != have[name]:
            return Damage("changed", name, have[name], want[name])
    return Damage("list", folder.name)


def damage_text(d: Damage) -> str:
    """The damage in the trainer's words (English: trainer/ has no interface texts)."""
    return {
        "hash_unreadable": f"its hash file {d.file} cannot be read",
        "hash_missing": f"its hash file {d.file} is missing",
        "unreadable": f"{d.file} cannot be read",
        "changed": f"the SHA-256 of {d.file} is {d.have[:12]}…, not the {d.want[:12]}… written with it: "
                   "the file changed on disk",
        "missing": f"{d.file} is missing: the folder is incomplete",
        "added": f"{d.file} was not written with it",
        "list": "its file list differs from the one written with it",
    }[d.kind]


# ---- what a checkpoint holds, read without torch ------------------------------------------------
class _Opaque:
    """What a torch object (a tensor, a storage) of the payload reads as here: nothing is
    called, nothing is rebuilt; the small values around the tensors (step, run id, config)
    are what this reader is for."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __setstate__(self, state: Any) -> None:
        pass


class _StateDict(dict):
    """A state dict's OrderedDict: its `_metadata` attribute (set by pickle's BUILD) dropped."""

    def __setstate__(self, state: Any) -> None:
        pass


# The only real objects the reader makes: plain containers, and bytes as pickle's protocol 2
# spells them (`_codecs.encode`). Any other global (torch's tensor rebuilders, storages,
# anything a crafted file names) becomes an _Opaque, never a call.
_SAFE_GLOBALS = {("collections", "OrderedDict"): _StateDict, ("builtins", "set"): set,
                 ("builtins", "frozenset"): frozenset, ("builtins", "complex"): complex,
                 ("_codecs", "encode"): lambda text, encoding="utf-8": str(text).encode(encoding)}


class _PayloadReader(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        return _SAFE_GLOBALS.get((module, name), _Opaque)

    def persistent_load(self, pid: Any) -> Any:  # a tensor's storage, kept in its own record
        return _Opaque()


def read_payload(path: Path) -> dict[str, Any]:
    """A checkpoint's payload without its tensors (they read as opaque placeholders): its
    step, run id, config, data ids. Standard library only: a .pt file is a zip archive
    whose `data.pkl` holds everything but the tensors' bytes; a DCP folder's is `extra.pt`.
    CheckpointError when it is not such a file."""
    path = Path(path)
    target = path / EXTRA if path.is_dir() else path
    try:
        with zipfile.ZipFile(target) as z:
            name = next((n for n in z.namelist() if n.endswith("/data.pkl") or n == "data.pkl"), None)
            if name is None:
                raise CheckpointError(f"{path} is not a Ternit Lab checkpoint (no data.pkl inside)")
            payload = _PayloadReader(io.BytesIO(z.read(name))).load()
    except CheckpointError:
        raise
    except Exception as e:  # zipfile and pickle raise many kinds for a damaged file
        raise CheckpointError(f"checkpoint {path} cannot be read ({type(e).__name__}: {e})") from None
    if not isinstance(payload, dict):
        raise CheckpointError(f"{path} is not a Ternit Lab checkpoint")
    return payload


def folder_run_id(path: Path) -> str | None:
    """The run a checkpoint's place says it belongs to: the folder that holds its
    `checkpoints/` folder (a Kaggle leg's downloaded `outputs/run/checkpoints/` belongs to
    the run folder above `outputs/`); None for a file elsewhere (a copy the user made)."""
    folder = Path(path).absolute().parent
    if folder.name != CHECKPOINTS:
        return None
    run = folder.parent
    if run.name == KERNEL_RUN_DIR and run.parent.name == "outputs":
        run = run.parent.parent
    return run.name or None


@dataclass(frozen=True)
class Identity:
    """Whose and which step a checkpoint's content says it is, against its name and place.

    mismatch: "" (it agrees), "step" (it holds `step`, its name says `named_step`) or "run"
    (written by run `run_id`, it lies in run `owner`'s folder); `unchecked`: it carries
    no run id (written before checkpoints did), so only its step was checked."""

    name: str
    mismatch: str
    step: int | None
    named_step: int | None
    run_id: str | None
    owner: str | None
    unchecked: bool

    @property
    def problem(self) -> str | None:
        """The mismatch in the trainer's words (English), or None."""
        name = self.name
        whose = f" of run {self.run_id}" if self.run_id else ""
        if self.mismatch == "step":
            return f"{name} holds step {self.step}{whose}, not the step {self.named_step} its name says"
        if self.mismatch == "run":
            return f"{name} was written by run {self.run_id}, not by run {self.owner} whose folder it lies in"
        return None

    @property
    def note(self) -> str | None:
        if not self.unchecked:
            return None
        return ("it was written before checkpoints carried their run's id (or on Kaggle by a lab from before): "
                "its step is checked, its run is not")


def identity(path: Path, payload: dict[str, Any]) -> Identity:
    """Whether the payload read from `path` is the step its name says, of the run whose
    folder it lies in (`read_payload` without torch, or the trainer's torch.load)."""
    path = Path(path)
    named = checkpoint_step(path) if NAME.fullmatch(path.name) else None
    step = payload.get("step") if isinstance(payload.get("step"), int) else None
    run_id = payload.get("run_id") if isinstance(payload.get("run_id"), str) else None
    owner = folder_run_id(path)
    mismatch = ""
    # A Kaggle kernel's own folder is "run": a leg pushed without --run-id (by a lab from
    # before it) wrote that name, which says nothing of the lab's run: not checked, not refused.
    kernel_named = run_id == KERNEL_RUN_DIR and owner != KERNEL_RUN_DIR
    if named is not None and step is not None and step != named:
        mismatch = "step"
    elif run_id and owner is not None and run_id != owner and not kernel_named:
        mismatch = "run"
    unchecked = not mismatch and ("run_id" not in payload or kernel_named)
    return Identity(path.name, mismatch, step, named, run_id, owner, unchecked=unchecked)


def resume_path(spec: str) -> Path:
    """The checkpoint `--resume PATH` or run.json's resume_from names: a step-*.pt file or a
    sharded run's step-*.dcp folder that is there."""
    path = Path(spec)
    if not is_checkpoint(path):
        raise CheckpointError(f"checkpoint {path} does not exist: name one that does (resume_from), "
                              "or start without it")
    return path
