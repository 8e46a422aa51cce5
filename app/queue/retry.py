"""The queue's one retry policy: what a queued run's failure costs it.

Each item has one retry. Whether a failure spends it is decided here, once:
- **lost with its machine** — a run on this PC whose trainer is gone with no `end` event
  while no runner watched it: a runner that first looked found it so (the runner went down
  with it: a power cut, a reboot, both killed at once), or the trainer started before the
  PC's current boot. `FREE`: continued from its latest verified checkpoint (the vanished
  run's continuation, `Failure.retry_config`); with no checkpoint yet it starts again and
  says so. Two power cuts in one night still finish it.
- **stopped by a full disk** (its `error` says so, or it vanished from a disk left with no
  room, where the `error` could not be written) — `ROOM`: it waits at its place until the disk holding the
  lab's runs has room for it (checked each round, the free space and what it needs in its
  line), then continues as above. Not spent either.
- **its own failure** — out of memory, NaN, a traceback, a trainer that died while a runner
  watched it, a Kaggle kernel that ended without a result: `SPEND` (once, as its advice
  says; then it is skipped).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ..base import run_status as st
from ..base.i18n import t
from ..base.numbers import bytes_text
from ..runs.checkpoints import usable_checkpoint
from ..runs.events import read_events
from ..runs.failure import VANISHED, Failure
from ..runs.registry import RunRecord

FREE, ROOM, SPEND = "free", "room", "spend"
MARGIN_BYTES = 64 << 20  # the events, the log and the next checkpoint's temporary file's slack
STATE_BYTES_PER_WEIGHT = 12  # a checkpoint with no file yet: fp32 weights and Adam's two moments


def boot_time() -> float | None:
    import psutil  # here: the window's first frame asks no process

    try:
        return float(psutil.boot_time())
    except (psutil.Error, OSError):
        return None


def lost_with_machine(rec: RunRecord, watched: bool, booted: float | None) -> bool:
    """Whether a local run's trainer went with its machine (see the module's note)."""
    if rec.target_kind != "local" or rec.status != st.FAILED or rec.end_reason != VANISHED:
        return False
    if booted is not None and rec.pid_started_at is not None and rec.pid_started_at < booted:
        return True
    return not watched


def verdict(rec: RunRecord, failure: Failure | None, watched: bool, booted: float | None = None,
            free: int | None = None) -> str:
    """FREE, ROOM or SPEND for a failed run (`watched`: the runner deciding saw its trainer
    alive in an earlier round; `free`: the bytes free on its disk now). A trainer that went
    without a word on a disk with no room left could not write its `error`: room, too."""
    if failure is not None and failure.no_room:
        return ROOM
    if rec.end_reason == VANISHED and free is not None and free < MARGIN_BYTES:
        return ROOM
    if lost_with_machine(rec, watched, booted):
        return FREE
    return SPEND


def _size(path: Path) -> int:
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return path.stat().st_size


def room_needed(rec: RunRecord) -> int:
    """What a run that failed for room needs free to go on: its checkpoint twice over (the new
    one is written beside the old before the old goes) and a margin; without a checkpoint,
    the state its weights make (from its `start` event), twice over."""
    try:
        ckpt = usable_checkpoint(rec.path)
        if ckpt is not None:
            return 2 * _size(ckpt) + MARGIN_BYTES
    except OSError:
        pass
    start = next((e for e in read_events(rec.events_path) if e.get("event") == "start"), {})
    params = start.get("params")
    weights = int(params) if isinstance(params, (int, float)) and not isinstance(params, bool) else 0
    return 2 * STATE_BYTES_PER_WEIGHT * weights + MARGIN_BYTES


def free_bytes(folder: Path) -> int | None:
    try:
        return int(shutil.disk_usage(folder).free)
    except OSError:
        return None


def room_text(free: int | None, need: int) -> str:
    """The waiting item's line: «диск заполнен: свободно 120 МиБ, нужно 300 МиБ»."""
    have = bytes_text(free) if free is not None else "?"
    return t(f"диск заполнен: свободно {have}, нужно {bytes_text(need)} — продолжится, когда место появится",
             f"the disk is full: {have} free, {bytes_text(need)} needed — it goes on once there is room")


def has_room(folder: Path, need: int | None) -> tuple[bool, str]:
    """Whether `need` bytes are free in `folder` now, and the line to show while they are not."""
    if not need:
        return True, ""
    free = free_bytes(folder)
    if free is not None and free >= need:
        return True, ""
    return False, room_text(free, need)


def continued_text(verdict_: str, checkpoint: str | None, step: int | None, lang: str | None = None) -> str:
    """What the item's line says once it is back in line without spending its retry, in `lang`."""
    if verdict_ == ROOM:
        head = t("остановлен: диск заполнен", "stopped: the disk is full", lang)
    else:
        head = t("прерван вместе с компьютером", "lost with the computer", lang)
    if checkpoint:
        where = t(f"продолжится с чекпоинта (шаг {step})", f"continues from its checkpoint (step {step})", lang) \
            if step is not None else t("продолжится с чекпоинта", "continues from its checkpoint", lang)
    else:
        where = t("чекпоинта ещё не было — начнётся заново", "no checkpoint yet — it starts again", lang)
    return t(f"{head}; {where}; повтор не потрачен", f"{head}; {where}; its retry is not spent", lang)
