"""RunManager: what the window and `ternit run` do with runs — start, follow, stop,
continue, retry — over the Registry.

The window calls `poll()` from a timer (every ~0.5 s); the CLI's `--wait` calls `wait()`,
which does the same in a loop. Nothing here blocks for long, nothing imports torch.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base import run_status as st
from ..base.i18n import t
from ..base.numbers import loss_text
from . import kaggle_bridge, tensorboard
from . import process as proc
from .checkpoints import usable_checkpoint
from .continuing import (
    ContinueCheck,
    ContinueError,
    check_continue,
    continue_config,
    refuse_running,
)
from .events import Event, EventTail, read_events
from .failure import VANISHED_MESSAGE, Failure, failure_from_events, kaggle_failed, vanished
from .files import STOP_FILE
from .history import HistoryRow, history
from .precheck import RunError, load_config, normalize_config, precheck
from .registry import Registry, RunNotFound, RunRecord
from .series import LossSeries, loss_series

STOP_GRACE_S = 60.0  # after STOP, how long the trainer may take to save before SIGTERM


@dataclass
class RunUpdate:
    """What one poll found for one run: its row now and the events that arrived."""

    run: RunRecord
    events: list[Event] = field(default_factory=list)
    status_changed: bool = False


@dataclass
class RunEnded:
    """Handed to listeners when a run ends, fails or hits its limit (tray message)."""

    run: RunRecord
    failure: Failure | None = None
    next_leg: RunRecord | None = None  # a Kaggle run's next leg, started by the lab itself

    @property
    def status(self) -> str:
        return self.run.status

    def title(self, lang: str | None = None) -> str:
        return f"{self.run.name}: {st.label(self.run.status, lang)}"

    def text(self, lang: str | None = None) -> str:
        r = self.run
        if self.failure is not None:
            return self.failure.advice
        step = f"{r.last_step}/{r.steps_to}" if r.steps_to else str(r.last_step or 0)
        best = loss_text(r.best_val_loss, lang)
        if r.status == st.TIME_LIMIT and self.next_leg is not None:
            return t(
                f"Остановлен по лимиту на шаге {step}; обучение продолжается с чекпоинта на аккаунте "
                f"{self.next_leg.target_account or '—'} (этап {self.next_leg.leg}). Лучшая val loss {best}.",
                f"Stopped by the limit at step {step}; training goes on from the checkpoint on account "
                f"{self.next_leg.target_account or '—'} (leg {self.next_leg.leg}). Best val loss {best}.",
                lang,
            )
        if r.status == st.TIME_LIMIT:
            return t(
                f"Остановлен по лимиту на шаге {step}; чекпоинт сохранён — можно продолжить. Лучшая val loss {best}.",
                f"Stopped by the limit at step {step}; the checkpoint is saved — it can be continued. Best val loss {best}.",
                lang,
            )
        return t(f"Шаг {step}, лучшая val loss {best}.", f"Step {step}, best val loss {best}.", lang)


Listener = Callable[[RunEnded], None]


class RunManager:
    """Runs on this PC and on Kaggle, through one history.

    Creating a manager re-attaches: runs that were going when the lab closed are
    followed again if their process still lives, and settled from their events (or
    marked failed: "the trainer process disappeared") if it does not.
    """

    def __init__(
        self,
        registry: Registry | None = None,
        *,
        gpu_count: int | None = None,
        stop_grace_s: float = STOP_GRACE_S,
    ) -> None:
        self.registry = registry if registry is not None else Registry()
        self.gpu_count = gpu_count
        self.stop_grace_s = stop_grace_s
        self._listeners: list[Listener] = []
        self._terminated: set[str] = set()
        self._following: dict[str, str] = {}  # run id -> status last seen while active
        self._rows: dict = {}  # history rows by run id, reused while the run is unchanged
        self.adopted = self.registry.adopt_folders()  # folders the index lost (see Registry)
        self.reattach()

    # ---- listeners -----------------------------------------------------------------
    def add_listener(self, fn: Listener) -> None:
        """`fn(RunEnded)` is called (from poll) when a run ends, fails or hits its limit."""
        self._listeners.append(fn)

    def _notify(self, rec: RunRecord) -> None:
        nxt = self._next_leg(rec)
        if nxt is not None and nxt.status == st.FAILED:  # created, but it could not start anywhere
            nxt = None
        ended = RunEnded(rec, self.failure(rec.id) if rec.status == st.FAILED else None, nxt)
        for fn in list(self._listeners):
            fn(ended)

    # ---- starting ------------------------------------------------------------------
    def create(
        self,
        config: dict[str, Any] | str | Path,
        *,
        target: str | None = None,
        account: str | None = None,
        gpu: str | None = None,
        parent_id: str | None = None,
        notes: list[str] | None = None,
        run_id: str | None = None,
    ) -> RunRecord:
        """A run folder and history row for `config`, not started yet, once `precheck`
        passed it (RunError, with nothing created, when not). `target`, `account` and `gpu`
        override the config's target.kind/account/gpu; what the check wants said goes to
        `notes`; `run_id` is an id reserved before (Registry.reserve_run_id)."""
        raw, base = load_config(config)
        for key, value in (("kind", target), ("account", account), ("gpu", gpu)):
            if value:
                raw.setdefault("target", {})[key] = value
        cfg = normalize_config(raw, base)
        said = precheck(cfg)  # the trainer's own verdict, before a folder or row exists
        if notes is not None:
            notes.extend(said)
        return self.registry.create_run(cfg, parent_id=parent_id, run_id=run_id)

    def start(
        self,
        config: dict[str, Any] | str | Path,
        *,
        target: str | None = None,
        account: str | None = None,
        gpu: str | None = None,
        parent_id: str | None = None,
        stop_at_step: int | None = None,
    ) -> RunRecord:
        """Create a run and start it: locally as a detached trainer process, or on Kaggle
        through app.kaggle.runner. Returns the row (status starting/uploading/...)."""
        rec = self.create(config, target=target, account=account, gpu=gpu, parent_id=parent_id)
        return self.launch(rec.id, stop_at_step=stop_at_step)

    def launch(self, run_id: str, *, stop_at_step: int | None = None, resume: str | None = None) -> RunRecord:
        """Start an existing run (created, or a time-limited one resumed in place with
        resume="latest")."""
        rec = self.registry.get(run_id)
        if rec.target_kind == "kaggle":  # its run.json was checked by create()
            try:
                kaggle_bridge.start(self.registry, rec.id, account=rec.target_account or "auto")
            except Exception as e:  # the Kaggle side's errors say what to do; keep their words
                if self.registry.get(rec.id).kaggle_kernel_ref:  # a kernel exists: the row says its end
                    self.registry.set_status(rec.id, st.FAILED, str(e))
                else:  # refused before anything runs on Kaggle: no run is left behind
                    self.registry.discard(rec.id)
                raise RunError(str(e)) from e
            return self.registry.get(rec.id)
        (rec.path / STOP_FILE).unlink(missing_ok=True)
        absent = proc.absent_cards(rec.target_gpu or "auto")  # a card gone since the run was made
        if absent:
            self.registry.set_status(rec.id, st.FAILED, absent)
            raise RunError(absent)
        try:
            plan = proc.plan_launch(
                rec.path, rec.target_gpu or "auto", gpu_count=self.gpu_count,
                resume=resume, stop_at_step=stop_at_step,
            )
            pid, started = proc.spawn(plan, rec.path)
        except (OSError, ValueError) as e:
            self.registry.set_status(rec.id, st.FAILED, f"could not start the trainer: {e}")
            raise RunError(t(f"Не удалось запустить обучение: {e}", f"Could not start the trainer: {e}")) from e
        return self.registry.update(
            rec.id, status=st.STARTING, pid=pid, pid_started_at=started, started_at=time.time(),
            ended_at=None, end_reason=None, stop_requested_at=None, last_message=plan.note,
        )

    # ---- stopping ------------------------------------------------------------------
    def stop(self, run_id: str) -> RunRecord:
        """Ask the trainer to save and exit (RUN_DIR/STOP; SIGTERM after a grace period).
        The status is "stopping" (shown as "saving…") until the `end` event arrives."""
        rec = self.registry.get(run_id)
        if rec.ended:
            return rec
        if rec.target_kind == "kaggle":
            kaggle_bridge.stop(self.registry, rec.id)
            return self.registry.update(rec.id, stop_requested_at=time.time())
        if rec.status == st.CREATED:
            return self.registry.set_status(rec.id, st.STOPPED, t("остановлен до запуска", "stopped before it started"))
        (rec.path / STOP_FILE).touch()
        return self.registry.update(rec.id, status=st.STOPPING, stop_requested_at=time.time())

    # ---- following -----------------------------------------------------------------
    def reattach(self) -> list[RunRecord]:
        """Settle or resume following every run the history says is going. Kaggle's
        runner is not polled here (no network on the way to the first window)."""
        return [u.run for u in self.poll(kaggle=False)]

    def poll(self, kaggle: bool = True) -> list[RunUpdate]:
        """Read what every active run appended; settle runs whose process is gone.

        Returns one RunUpdate per run that is active, or was at the last poll (a run that
        another process — the CLI, the Kaggle runner — ended in between is reported too).
        Listeners hear of every run that ended.
        """
        active = self.registry.active()
        if kaggle and any(r.target_kind == "kaggle" for r in active):
            kaggle_bridge.poll(self.registry)
            active = self.registry.active()
        ids = {r.id for r in active}
        updates = [self._poll_one(rec) for rec in active]
        for run_id, seen in list(self._following.items()):
            if run_id not in ids:
                try:
                    rec = self.registry.get(run_id)
                except RunNotFound:
                    self._following.pop(run_id)
                    continue
                before = RunRecord(**{**rec.__dict__, "status": seen})
                updates.append(self._poll_one(before))
        for u in updates:
            if u.run.active:
                self._following[u.run.id] = u.run.status
            else:
                self._following.pop(u.run.id, None)
                if u.status_changed and u.run.ended:
                    tensorboard.write_quietly(u.run)  # local and Kaggle runs alike: from events.jsonl
                    self._notify(u.run)
        return updates

    def _poll_one(self, before: RunRecord) -> RunUpdate:
        events = self.registry.ingest(before.id)
        rec = self.registry.get(before.id)
        if rec.target_kind == "local" and rec.status in st.LOCAL_ACTIVE:
            if not proc.is_alive(rec.pid, rec.pid_started_at):
                # The process is gone: read what it wrote last, then settle.
                events += self.registry.ingest(rec.id)
                rec = self.registry.get(rec.id)
                if rec.status in st.LOCAL_ACTIVE:
                    rec = self._settle_vanished(rec)
            elif rec.status == st.STOPPING and rec.id not in self._terminated:
                if rec.stop_requested_at and time.time() - rec.stop_requested_at > self.stop_grace_s:
                    self._terminated.add(rec.id)
                    proc.terminate(rec.pid, rec.pid_started_at)
        return RunUpdate(rec, events, rec.status != before.status)

    def _settle_vanished(self, rec: RunRecord) -> RunRecord:
        tail = _log_tail(rec.log_path)
        message = f"{VANISHED_MESSAGE}" + (f" (last line of trainer.log: {tail})" if tail else "")
        return self.registry.update(
            rec.id, status=st.FAILED, end_reason="vanished", ended_at=time.time(), last_message=message
        )

    def wait(
        self,
        run_id: str,
        on_event: Callable[[Event], None] | None = None,
        poll_s: float = 0.5,
        timeout: float | None = None,
        follow_chain: bool = True,
        on_trouble: Callable[[str], None] | None = None,
        on_status: Callable[[RunRecord], None] | None = None,
    ) -> RunRecord:
        """Follow one run until it ends (or `timeout` s pass); `on_event` sees each event,
        `on_status` the row at every poll (app/runs/status_echo.py prints its changes).

        With `follow_chain`, a Kaggle run that ends by its limit and goes on as the next
        leg of its chain (on another account) is followed into that leg; the last leg's
        row is returned.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        rec = self.registry.get(run_id)
        # The followed run's events are read from its own file, not from poll()'s updates:
        # the registry's read position is shared (a Kaggle follower thread folds a leg's
        # events in by itself), so what a poll hands out can miss a leg's events.
        tail = EventTail(rec.events_path, rec.events_offset)

        def deliver() -> None:
            if on_event is not None:
                for ev in tail.read():
                    on_event(ev)

        while True:
            try:
                self.poll()
            except sqlite3.Error as e:
                # The state file cannot take the run's news (a full disk): the run goes on,
                # its events are still shown from its own file, and the row catches up once
                # there is room again.
                if on_trouble is not None:
                    on_trouble(state_write_failed(e))
            deliver()
            rec = self.registry.get(run_id)
            if on_status is not None:
                on_status(rec)
            if not rec.active and follow_chain:
                nxt = self._next_leg(rec)
                if nxt is not None:
                    deliver()  # this leg's last lines, written before its status changed
                    run_id = nxt.id
                    tail = EventTail(nxt.events_path)  # the whole next leg
                    continue
            if not rec.active or (deadline is not None and time.monotonic() >= deadline):
                deliver()  # what the run wrote last, after its status changed
                return rec
            # Our own child: wake the moment it exits; otherwise a plain poll interval.
            proc.wait_exit(rec.pid if rec.target_kind == "local" else None, poll_s)

    def next_leg(self, run_id: str) -> RunRecord | None:
        """The leg the Kaggle runner started itself when this run hit its limit (None if
        none): the window follows the chain into it."""
        return self._next_leg(self.registry.get(run_id))

    def _next_leg(self, rec: RunRecord) -> RunRecord | None:
        """The leg the Kaggle runner started itself when `rec` hit its limit."""
        if rec.target_kind != "kaggle" or rec.status != st.TIME_LIMIT:
            return None
        since = rec.started_at or rec.created_at
        legs = [c for c in self.registry.children(rec.id) if c.target_kind == "kaggle" and c.created_at >= since]
        return legs[-1] if legs else None

    # ---- reading -------------------------------------------------------------------
    def history(self, limit: int | None = None, lang: str | None = None) -> list[HistoryRow]:
        """The history table's rows, newest first."""
        return history(self.registry, limit, lang, self._rows)

    def series(self, run_id: str, with_parents: bool = True) -> LossSeries:
        """The loss plot's data for a run (with the runs it continues)."""
        return loss_series(self.registry, run_id, with_parents)

    # ---- continuing and retrying ---------------------------------------------------
    def continue_config(
        self, run_id: str, steps_to: int | None = None, *,
        from_step: int | None = None, notes: list[str] | None = None,
    ) -> dict[str, Any]:
        """The run.json for «Продолжить»: resume_from = the parent's newest intact checkpoint
        (or the one at `from_step`), the parent's model (locked), data and training from
        the parent. Damaged checkpoints passed over are said in `notes`."""
        return continue_config(self.registry, run_id, steps_to, from_step=from_step, notes=notes)

    def check_continue(self, run_id: str, config: dict[str, Any]) -> ContinueCheck:
        return check_continue(self.registry, run_id, config)

    def start_continue(
        self,
        run_id: str,
        config: dict[str, Any] | None = None,
        *,
        steps_to: int | None = None,
        stop_at_step: int | None = None,
        from_step: int | None = None,
        notes: list[str] | None = None,
    ) -> RunRecord:
        """Start a continuation of `run_id` as a new run (parent set, next leg of its chain)."""
        refuse_running(self.registry.get(run_id))
        cfg = config if config is not None else self.continue_config(run_id, steps_to, from_step=from_step, notes=notes)
        if not cfg.get("resume_from"):
            raise ContinueError(t("В продолжении нет resume_from (чекпоинта).", "A continuation needs resume_from (a checkpoint)."))
        check = self.check_continue(run_id, cfg)
        if check.model_changed:
            raise ContinueError(check.warning or "model changed")
        return self.start(cfg, parent_id=run_id, stop_at_step=stop_at_step)

    def failure(self, run_id: str) -> Failure | None:
        """Why a failed run failed and what to do (None if it did not fail)."""
        rec = self.registry.get(run_id)
        if rec.status != st.FAILED:
            return None
        try:
            config = rec.config()
        except (OSError, ValueError):
            config = {}
        f = failure_from_events(read_events(rec.events_path), config)
        if f is None:
            # No error event: the process vanished, or the lab could not start it (then
            # the row's message says why). A continuation that died before its first
            # checkpoint goes on from the one it started from.
            ckpt = usable_checkpoint(rec.path)
            if rec.target_kind == "kaggle":  # no local process: the kernel or the start failed
                return kaggle_failed(rec.last_step, str(ckpt) if ckpt else None, rec.last_message or "",
                                     pushed=bool(rec.kaggle_kernel_ref))
            f = vanished(rec.last_step, str(ckpt) if ckpt else None, _log_tail(rec.log_path) or None)
            if rec.last_message and not rec.last_message.startswith(VANISHED_MESSAGE):
                f.message = rec.last_message
        return f

    def retry_config(self, run_id: str) -> dict[str, Any]:
        """The failed run's config changed as its advice says ("retry with batch N")."""
        rec = self.registry.get(run_id)
        f = self.failure(run_id)
        if f is None:
            raise RunError(t(f"Прогон {run_id} не завершился ошибкой.", f"Run {run_id} did not fail."))
        return f.retry_config(rec.config())

    def retry(self, run_id: str, launch: bool = True) -> RunRecord:
        """Start the retry as a new run; it continues the failed run's checkpoint if any."""
        f = self.failure(run_id)
        if f is not None and not f.can_retry:
            raise RunError(f.advice)  # e.g. missing data: running again cannot help
        cfg = self.retry_config(run_id)
        parent = run_id if cfg.get("resume_from") else None
        rec = self.create(cfg, parent_id=parent)
        # A Kaggle start uploads and pushes over the network: the window does that in a
        # thread of its own (launch=False, then launch(rec.id) there).
        return self.launch(rec.id) if launch else rec


def state_write_failed(error: sqlite3.Error) -> str:
    """One line for a state-file write that failed while a run is followed."""
    return t(
        f"Файл состояния лаборатории не записывается ({error}): освободите место на диске с папкой данных "
        "лаборатории. Обучение идёт, слежение продолжится, когда место появится.",
        f"The lab's state file cannot be written ({error}): free space on the disk of the lab's data folder. "
        "Training goes on; following resumes once there is room.",
    )


def _log_tail(path: Path, max_bytes: int = 16384) -> str:
    """The last line the trainer wrote for humans. It echoes its events into the log too;
    those are in events.jsonl already, and the last one says nothing about why it died."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - max_bytes))
            lines = [ln.strip() for ln in f.read().decode("utf-8", "replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    lines = [ln for ln in lines if not (ln.startswith('{"event"') or ln.startswith('{"event" '))]
    return lines[-1][:300] if lines else ""
