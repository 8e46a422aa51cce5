"""Finding a run's checkpoints without loading them (the window never imports torch).

Both forms the trainer writes: a file `step-XXXXXXXX.pt` with its SHA-256 beside it
(`.pt.sha256`), and a sharded run's folder `step-XXXXXXXX.dcp/` with the list of its
files' SHA-256 beside it (`.dcp.sha256`). The naming, the check against what was stored,
what a checkpoint's content says it is and the order newest first are
trainer/state/checkpoint_index.py's, the one rule both sides use.

`choose_checkpoint` is the one choice of a run's checkpoint for every command that uses
one — `ternit sample`/`eval`, `ternit export`, `ternit run continue` and the window's
«Текст», «Экспорт весов» and «Продолжить»: the newest that is what the trainer wrote, and
what it passed over on the way (a `latest` pointer that names nothing usable, a file that
changed on disk, another run's checkpoint under this run's name), said in the interface
language. `latest_checkpoint` and `usable_checkpoint` only tell, cheaply and unchecked,
where the newest is (the history's buttons, a failure's advice).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from trainer.state.checkpoint_index import (
    LATEST,
    NAME,
    CheckpointError,
    Damage,
    Identity,
    checkpoint_files,
    checkpoint_step,
    find_damage,
    hash_path,
    identity,
    is_checkpoint,
    newest_first,
    read_payload,
    read_pointer,
)

from ..base.i18n import t

__all__ = ["Choice", "checkpoint_step", "checkpoint_steps", "choose_checkpoint", "damage", "earlier_sound",
           "inspect_checkpoint",
           "is_checkpoint", "latest_checkpoint", "usable_checkpoint"]


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
    return latest_checkpoint(run_dir) or _started_from(run_dir)


def _in_folder(folder: Path) -> Path | None:
    named, _problem = read_pointer(folder)  # a damaged pointer is passed over as missing
    if named is not None:
        return named
    found = [p for p in checkpoint_files(folder) if is_checkpoint(p)]
    return found[-1] if found else None


def damage(path: Path) -> str | None:
    """Why a checkpoint is not what the trainer wrote (a file's SHA-256 differs from the
    one stored beside it), in the interface language; None when it matches or has no
    stored hash (an older .pt checkpoint). A .pt file's verdict is remembered while it and
    its hash file keep their size and time (the window's «Текст» asks at every click)."""
    path = Path(path)
    key = _stamp(path)
    if key is not None and key in _verdicts:
        found = _verdicts[key]
    else:
        found = find_damage(path)
        if key is not None:
            _verdicts[key] = found
    return None if found is None else _said(path.name, found)


_verdicts: dict[tuple, Damage | None] = {}


def _stamp(path: Path) -> tuple | None:
    """What identifies a .pt checkpoint's bytes and its hash file's cheaply; None for a DCP
    folder (its files change without the folder's time) or a file that cannot be read."""
    if path.is_dir():
        return None
    try:
        f, h = path.stat(), hash_path(path).stat()
    except OSError:
        return None
    # A file times its writes coarsely (a few ms): one written just now is not remembered,
    # so a change within the same tick is never mistaken for the bytes checked before.
    if time.time() - max(f.st_mtime, f.st_ctime, h.st_mtime, h.st_ctime) < STABLE_S:
        return None
    return (str(path.resolve()), f.st_size, f.st_mtime_ns, f.st_ctime_ns, f.st_ino, h.st_size, h.st_mtime_ns)


STABLE_S = 2.0


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
class Choice:
    """The checkpoint a command goes on from (None: none is usable), what was passed over on
    the way and what else to say, each one line in the interface language."""

    path: Path | None
    passed_over: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def said(self) -> list[str]:
        """Everything to tell the user about this choice, in order."""
        out = list(self.notes)
        if self.passed_over and self.path is not None:
            out.insert(0, t(f"Пропущено: {'; '.join(self.passed_over)}; взят {self.path.name}.",
                            f"Passed over: {'; '.join(self.passed_over)}; using {self.path.name}."))
        return out


def choose_checkpoint(run_dir: Path, at_step: int | None = None) -> Choice:
    """The one choice of RUN_DIR's checkpoint for every command: the one `latest` names,
    else the newest step file, each taken only when it matches the hash stored beside it
    and its content is the step its name says of this run; then a Kaggle run's downloaded
    outputs; then the checkpoint the run itself started from (run.json's resume_from: a
    continuation that failed before its first save). With `at_step`, only that step's
    (`--from-step`). What is passed over is said, never skipped silently."""
    run_dir = Path(run_dir)
    folder = run_dir / "checkpoints"
    choice = Choice(None)
    if at_step is not None:
        files = [p for p in checkpoint_files(folder)[::-1] if checkpoint_step(p) == at_step]
        return _first_sound(files, choice)
    files, pointer_notes = newest_first(folder)
    choice.passed_over += [_pointer_said(note) for note in pointer_notes if files]
    if _first_sound(files, choice).path is not None:
        return choice
    for outputs_folder in _output_folders(run_dir):
        more, _ = newest_first(outputs_folder)
        if _first_sound(more, choice).path is not None:
            return choice
    started = _started_from(run_dir)
    if started is not None and _first_sound([started], choice).path is not None:
        choice.notes.append(t(f"У прогона нет своего чекпоинта: берётся тот, с которого он начал ({started}).",
                              f"The run has no checkpoint of its own: using the one it started from ({started})."))
    return choice


def inspect_checkpoint(path: Path) -> Choice:
    """A checkpoint named by its path (`ternit sample FILE`, `ternit export FILE`): the same
    checks as `choose_checkpoint`, nothing chosen instead. A damaged one comes back with
    no path and why; one whose content disagrees with its name or folder comes back with
    its path and a note naming what it really is."""
    path = Path(path)
    wrong = damage(path)
    if wrong:
        return Choice(None, [wrong])
    seen = _content(path)
    if seen.unreadable:
        return Choice(None, [seen.unreadable])
    return Choice(path, notes=[x for x in (seen.foreign, seen.note) if x])  # another's: named, not refused


def earlier_sound(path: Path) -> Path | None:
    """The newest checkpoint in `path`'s folder older than it that is intact and its run's
    (what to use instead of a damaged one named by its path)."""
    older = [p for p in checkpoint_files(Path(path).parent)[::-1] if p.name < Path(path).name]
    return _first_sound(older, Choice(None)).path


def _first_sound(files: list[Path], choice: Choice) -> Choice:
    """The first of `files` that is intact and this run's, set as `choice.path`; the others
    before it added to what was passed over."""
    for p in files:
        if not is_checkpoint(p):  # a file named like a folder, or the other way
            continue
        wrong = damage(p)
        if wrong is None:
            seen = _content(p)
            wrong = seen.foreign or seen.unreadable
            if seen.note:
                choice.notes.append(seen.note)
        if wrong is None:
            choice.path = p
            return choice
        choice.passed_over.append(wrong)
    return choice


@dataclass(frozen=True)
class _Content:
    """What a checkpoint whose bytes match its stored hash holds: `foreign` (another run's
    or another step's, against its name and folder) or `unreadable` (cut short, with no
    hash vouching for it), each said; else `note`, something to say about it, or nothing."""

    foreign: str | None = None
    unreadable: str | None = None
    note: str | None = None


def _content(path: Path) -> _Content:
    """Its content unreadable without torch is damage only when no hash vouches for it (an
    older file cut short); a hashed one is what the trainer wrote, and the trainer's own
    load checks it."""
    try:
        who = identity(path, read_payload(path))
    except CheckpointError as e:
        if hash_path(path).is_file():
            return _Content(note=t(f"{path.name}: содержимое не прочитать без torch, его шаг и прогон не проверены",
                                   f"{path.name}: its content cannot be read without torch; its step and run are not checked"))
        return _Content(unreadable=t(f"{path.name}: не читается ({e})", f"{path.name}: cannot be read ({e})"))
    if who.mismatch:
        return _Content(foreign=_identity_said(who))
    return _Content(note=_identity_said(who))


def _identity_said(who: Identity) -> str | None:
    if who.mismatch == "step":
        whose = t(f" прогона {who.run_id}", f" of run {who.run_id}") if who.run_id else ""
        return t(f"{who.name}: внутри шаг {who.step}{whose}, а не шаг {who.named_step}, как в имени файла "
                 "(чужой чекпоинт или копия, положенная вручную)",
                 f"{who.name} holds step {who.step}{whose}, not the step {who.named_step} its name says "
                 "(another run's checkpoint, or a copy put there by hand)")
    if who.mismatch == "run":
        return t(f"{who.name}: записан прогоном {who.run_id}, а лежит в папке прогона {who.owner}",
                 f"{who.name} was written by run {who.run_id}, but lies in run {who.owner}'s folder")
    if who.unchecked:
        return t(f"{who.name} записан до того, как чекпоинты стали хранить свой прогон: проверен его шаг, "
                 "но не прогон",
                 f"{who.name} was written before checkpoints carried their run: its step is checked, its run is not")
    return None


def _pointer_said(problem: str) -> str:
    return t(f"указатель {LATEST} не годится ({problem})", f"the {LATEST} pointer is not usable ({problem})")


def _output_folders(run_dir: Path) -> list[Path]:
    """A Kaggle run's downloaded checkpoint folders (outputs/…/checkpoints), newest step first."""
    outputs = run_dir / "outputs"
    if not outputs.is_dir():
        return []
    folders = {p.parent for p in outputs.rglob("step-*") if NAME.fullmatch(p.name)}
    return sorted(folders, key=lambda f: max((checkpoint_step(p) or -1 for p in checkpoint_files(f)), default=-1),
                  reverse=True)


def _started_from(run_dir: Path) -> Path | None:
    try:
        config = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    resume = config.get("resume_from") if isinstance(config, dict) else None
    return Path(resume) if isinstance(resume, str) and resume and is_checkpoint(Path(resume)) else None


def checkpoint_steps(run_dir: Path) -> list[int]:
    """The steps RUN_DIR has checkpoints at, both forms (`--from-step`'s choices)."""
    steps = (checkpoint_step(p) for p in checkpoint_files(Path(run_dir) / "checkpoints"))
    return sorted({s for s in steps if s is not None})
