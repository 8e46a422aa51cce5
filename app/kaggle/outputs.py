"""The end of a leg: its outputs downloaded, the events folded into the run, the checkpoint's
SHA-256 checked against its event and copied into the run folder, the run's status said;
a leg that the account's quota cut short before «Шагов до» goes on as the next leg of the
chain (app/kaggle/chain.py). LegOutputs is a part of KaggleRuns (app/kaggle/runner.py).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from pathlib import Path
from typing import Any

from trainer.state.checkpoint_index import (
    file_sha256,
    find_damage,
    hash_path,
    is_checkpoint,
    is_dcp,
)

from ..base import run_status as st
from ..base.atomic import fsync_file
from ..base.atomic import write_text as atomic_write_text
from ..base.i18n import t
from . import follow
from .chain import leg_allotment


class LegOutputs:
    """Downloading and settling a leg's outputs (a part of KaggleRuns)."""

    registry: Any
    store: Any
    accounts: Any

    def _finish(self, leg: dict[str, Any]) -> str | None:
        run_id = leg["run_id"]
        run_dir = Path(leg["run_dir"])
        client = self.accounts.client(leg["account"])
        out = run_dir / "outputs"
        sink = follow.RunSink(run_dir)
        for _attempt in range(2):  # a checkpoint damaged on the way is downloaded once more
            client.output(leg["kernel_ref"], out)
            sink.reconcile(out / "run" / follow.EVENTS)
            events = follow.read_events(run_dir / follow.EVENTS)
            ckpt_msg, ckpt_path, ckpt_sha = take_checkpoint(run_dir, out, events)
            if ckpt_path or not ckpt_msg:
                break
        end = next((e for e in reversed(events) if e.get("event") == "end"), None)
        error = next((e for e in reversed(events) if e.get("event") == "error"), None)
        last_step = max((e.get("step", 0) for e in events if isinstance(e.get("step"), int)), default=None)
        kernel_status = leg.get("kernel_status") or ""
        reason = end.get("reason") if end else None
        changes: dict[str, Any] = dict(state="done", ended_at=time.time(), end_reason=reason,
                                       last_step=last_step, checkpoint_path=ckpt_path, checkpoint_sha256=ckpt_sha)
        next_id = None
        if reason == "steps_reached":
            status, message = st.FINISHED, (end or {}).get("message") or ""
        elif reason == "stopped":
            status, message = st.STOPPED, (end or {}).get("message") or ""
        elif reason == "error" or error is not None:
            e = error or {}
            status = st.FAILED
            message = t(f"ошибка обучения: {e.get('message', '')}. Совет: {e.get('advice', '')}",
                        f"training failed: {e.get('message', '')}. Advice: {e.get('advice', '')}")
        elif reason == "time_limit":
            status, message = st.TIME_LIMIT, (end or {}).get("message") or ""
        elif kernel_status.startswith("CANCEL"):
            status, message = st.STOPPED, t("сессию Kaggle остановили", "the Kaggle session was stopped")
        else:
            status = st.FAILED
            tail = _log_tail(run_dir / follow.LOG)
            said = (leg.get("message") or "").strip().rstrip(".")  # Kaggle's failure message
            message = t(f"ядро завершилось ({kernel_status}) без события end тренера"
                        f"{': ' + said if said else ''}. Последние строки журнала: {tail}",
                        f"the kernel ended ({kernel_status}) without the trainer's end event"
                        f"{': ' + said if said else ''}. Last log lines: {tail}")
        if ckpt_msg:
            message = f"{message} {ckpt_msg}".strip()
        changes["message"] = message
        if status == st.TIME_LIMIT and ckpt_path and not leg.get("stop_requested_at"):
            rec = self.registry.get(run_id)
            training = rec.config().get("training") or {}
            steps_to = training.get("steps_to")
            # Only a leg that the account's quota cut short goes on elsewhere; at the run's
            # own «Лимит, мин» it stops, as the field promises (the user continues it).
            cut_by_quota = float(leg.get("limit_min") or 0.0) < leg_allotment(leg, rec.config()) - 1e-6
            if isinstance(steps_to, int) and (last_step or 0) < steps_to and cut_by_quota:
                next_id, note = self._continue(rec, leg, Path(ckpt_path))
                message = f"{message}. {note}"
                changes["message"] = message
                changes["next_run_id"] = next_id
        self.store.update_leg(run_id, **changes)
        with contextlib.suppress(Exception):  # fold the events in first: the status message stays last
            self.registry.ingest(run_id)
        self._status(run_id, status, message)
        return next_id


def take_checkpoint(run_dir: Path, out: Path, events: list[dict[str, Any]]) -> tuple[str, str | None, str | None]:
    """Copy the newest checkpoint the events name into RUN_DIR/checkpoints, hash-checked:
    a step-*.pt file, or a sharded run's step-*.dcp folder with its list of SHA-256s (the
    event's hash is that of the list, trainer/state/checkpoint_index.py)."""
    ckpts = [e for e in events if e.get("event") == "checkpoint" and e.get("sha256")]
    if not ckpts:
        return "", None, None
    last = ckpts[-1]
    name = Path(str(last.get("path", ""))).name
    src = out / "run" / "checkpoints" / name
    dst_dir = run_dir / "checkpoints"
    dst = dst_dir / name
    if is_checkpoint(dst) and file_sha256(dst) == last["sha256"]:
        return "", str(dst), last["sha256"]
    if not is_checkpoint(src) or (is_dcp(src) and not hash_path(src).is_file()):
        return t(f"Чекпоинт {name} не пришёл в результатах ядра.",
                 f"Checkpoint {name} is missing from the kernel's outputs."), None, None
    got = file_sha256(src)
    if got != last["sha256"] or (is_dcp(src) and find_damage(src) is not None):
        return t(f"Чекпоинт {name} повреждён при скачивании (SHA-256 не совпал); он оставлен в outputs/.",
                 f"Checkpoint {name} was damaged in the download (SHA-256 mismatch); it is left in outputs/."), None, None
    dst_dir.mkdir(parents=True, exist_ok=True)
    tmp = dst_dir / f".{name}.tmp"
    if is_dcp(src):
        _copy_folder(src, tmp)
        # The trainer's own list goes beside it before the name, as the trainer writes it.
        atomic_write_text(hash_path(dst), hash_path(src).read_text(encoding="utf-8"))
        if dst.exists():  # an earlier copy that no longer matches
            shutil.rmtree(dst, ignore_errors=True)
    else:
        shutil.copyfile(src, tmp)
        fsync_file(tmp)
        # The hash the trainer would have stored beside it (sha256sum format), before the name:
        # a continuation checks the copy against it like any local checkpoint.
        atomic_write_text(hash_path(dst), f"{got}  {name}\n")
    os.replace(tmp, dst)
    atomic_write_text(dst_dir / "latest", name + "\n")
    return "", str(dst), got


def _copy_folder(src: Path, tmp: Path) -> None:
    """A DCP folder copied under its temporary name, every file flushed to disk."""
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(src, tmp)
    for f in tmp.rglob("*"):
        if f.is_file():
            fsync_file(f)


def _log_tail(path: Path, lines: int = 5) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    keep = [ln for ln in text.splitlines() if ln.strip() and not follow.is_event_line(ln)]
    return " | ".join(keep[-lines:])[-800:]
