"""The run registry: the `runs` table of the lab's SQLite state, kept in step with the
run folders.

The folders are the truth (run.json, events.jsonl); the table is the index the history
reads fast. `ingest(run_id)` reads a run's new events (from the byte offset stored in the
row) and folds them into the row's summary: last step, tokens seen, best val loss, status.
Every write is one short transaction, so the window and a `ternit run ... --wait` in
another process can share the file.
"""

from __future__ import annotations

import logging
import shutil
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from trainer.config.run_config import SQLITE_INTEGER_MAX, ConfigError, from_dict

from ..base import paths
from ..base import run_status as st
from ..base.i18n import t
from ..base.run_status import RunNotFound
from ..base.state import State, open_state, unavailable
from ..base.state_faults import no_room
from .events import Event, EventTail, is_step_line, parse_lines, read_events
from .files import (
    CHECKPOINTS,
    EVENTS,
    LOG,
    OUTPUTS,
    RUN_JSON,
    atomic_write_json,
    make_layout,
    new_run_id,
    read_json,
)
from .precheck import RunError

log = logging.getLogger(__name__)

THIN_BACKLOG_LINES = 2000  # more new lines than this at once: skip all but the last step


@dataclass
class RunRecord:
    """One row of the run history. Paths come from `folder`."""

    id: str
    name: str
    folder: str
    parent_id: str | None
    chain_id: str
    leg: int
    target_kind: str
    target_gpu: str | None
    target_account: str | None
    status: str
    created_at: float
    updated_at: float
    started_at: float | None = None
    ended_at: float | None = None
    pid: int | None = None
    pid_started_at: float | None = None
    stop_requested_at: float | None = None
    last_step: int | None = None
    steps_to: int | None = None
    tokens_seen: int | None = None
    best_val_loss: float | None = None
    last_loss: float | None = None
    params: int | None = None
    end_reason: str | None = None
    last_message: str | None = None
    kaggle_kernel_ref: str | None = None
    events_offset: int = 0

    @property
    def path(self) -> Path:
        return Path(self.folder)

    @property
    def events_path(self) -> Path:
        return self.path / EVENTS

    @property
    def log_path(self) -> Path:
        return self.path / LOG

    @property
    def run_json_path(self) -> Path:
        return self.path / RUN_JSON

    @property
    def checkpoints_dir(self) -> Path:
        return self.path / CHECKPOINTS

    @property
    def outputs_dir(self) -> Path:
        return self.path / OUTPUTS

    @property
    def ended(self) -> bool:
        return self.status in st.ENDED

    @property
    def active(self) -> bool:
        return self.status in st.ACTIVE

    def config(self) -> dict[str, Any]:
        """The run's run.json as written at creation; a damaged one is a ValueError that
        names the file."""
        path = self.run_json_path
        try:
            config = read_json(path)
        except ValueError as e:  # not JSON, not UTF-8
            raise ValueError(t(f"{path} повреждён ({e}): восстановите его или запустите прогон заново.",
                               f"{path} is damaged ({e}): restore it or start the run again.")) from None
        if not isinstance(config, dict):
            raise ValueError(t(f"{path} повреждён: в нём не JSON-объект.", f"{path} is damaged: it holds no JSON object."))
        return config


_COLUMNS = tuple(f.name for f in fields(RunRecord))
_WRITABLE = frozenset(_COLUMNS) - {"id", "created_at"}


class Registry:
    """The run history over one SQLite file (default: the lab's state.sqlite)."""

    def __init__(self, state: State | Path | str | None = None, runs_root: Path | str | None = None) -> None:
        """`state`: an open State to share (the window's), a database path, or None for
        the lab's own state.sqlite. `runs_root`: where run folders go (default runs_dir())."""
        self._own_state = not isinstance(state, State)
        self.state = state if isinstance(state, State) else open_state(None if state is None else Path(state))
        self.runs_root = Path(runs_root) if runs_root is not None else paths.runs_dir()
        # Run folders adopt_folders found something wrong with, by name, with what (in the
        # interface language): one could not be listed, or its run.json is refused. The
        # rest are listed as they are; `ternit run list` and the window name these.
        self.troubles: dict[str, str] = {}

    @property
    def _db(self):  # this thread's connection
        return self.state.conn

    def close(self) -> None:
        if self._own_state:
            self.state.close()

    # ---- creating runs -------------------------------------------------------------
    def create_run(
        self,
        config: dict[str, Any],
        *,
        parent_id: str | None = None,
        status: str = st.CREATED,
        run_id: str | None = None,
    ) -> RunRecord:
        """A new run folder (run.json written atomically, checkpoints/, outputs/) and its row.

        With `parent_id` the run joins the parent's chain as its next leg. `run_id`: an id
        reserved before (`reserve_run_id`; the queue records it before creating the run, so
        a crash in between finds the same run again instead of making a second).
        """
        st.check(status)
        parent = self.get(parent_id) if parent_id else None
        run_id = run_id or self.reserve_run_id(str(config.get("name") or "run"))
        folder = self.runs_root / run_id
        try:
            make_layout(folder)
            atomic_write_json(folder / RUN_JSON, config)
        except OSError as exc:  # a full disk, a read-only folder: nothing half-made is left
            shutil.rmtree(folder, ignore_errors=True)
            raise RunError(_folder_failed(folder, exc)) from None
        rec = _record(run_id, folder, config, parent, status, time.time())
        try:
            self._insert(rec)
        except sqlite3.Error as exc:
            # No row, so no folder either: a restart would adopt it as a run never started.
            shutil.rmtree(folder, ignore_errors=True)
            raise unavailable(self.state.path, exc, t("Прогон не создан.", "The run was not created.")) from exc
        return rec

    def reserve_run_id(self, name: str) -> str:
        """A new run id, its (empty) folder made so that no other run takes it."""
        return new_run_id(name, self.runs_root)

    def _insert(self, rec: RunRecord, verb: str = "INSERT OR REPLACE") -> bool:
        # The creator's row wins (OR REPLACE) over one adopt_folders() may have made from
        # the same new folder a moment earlier in another process; adopting never
        # overwrites (OR IGNORE).
        values = [getattr(rec, c) for c in _COLUMNS]
        with self.state.transaction():
            cur = self._db.execute(
                f"{verb} INTO runs ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})",
                values,
            )
        return cur.rowcount > 0

    def adopt_folders(self) -> list[RunRecord]:
        """Rows for run folders the table does not know (the state file was lost or moved
        aside as damaged; a folder was copied in): the folders are the truth.

        Parents are found through `resume_from` (a checkpoint inside another run folder);
        the status comes from the events: their `end`, a trainer still alive (the pid in
        its `start` event), else failed as vanished.
        """
        known = {row[0] for row in self._db.execute("SELECT id FROM runs")}
        try:
            folders = sorted(p for p in self.runs_root.iterdir() if p.name not in known and p.is_dir())
        except OSError:
            return []
        adopted = []
        for folder in folders:  # ids sort by time: a parent comes before its continuations
            try:
                rec = self._adopt(folder)
            except (sqlite3.IntegrityError, sqlite3.InterfaceError, OverflowError, TypeError, ValueError) as e:
                # One folder the index cannot take is that run's problem: the others are
                # listed, and this one is named (`ternit run list`, the window's log).
                log.warning("run folder %s could not be listed", folder, exc_info=True)
                self.troubles[folder.name] = t(f"не внесена в историю ({type(e).__name__}: {e})",
                                               f"not listed ({type(e).__name__}: {e})")
                continue
            if rec is not None:
                adopted.append(rec)
        return adopted

    def _adopt(self, folder: Path) -> RunRecord | None:
        """One run folder the index does not know, as a row (None: not a run folder, or
        another process adopted it first)."""
        try:
            config = read_json(folder / RUN_JSON)
        except FileNotFoundError:
            return None  # not a run folder
        except (OSError, ValueError):
            config = None
        if not isinstance(config, dict):
            # A damaged run.json does not make the run vanish: its history is in its
            # events (the trainer's start event holds the whole config).
            config = _start_config(folder / EVENTS)
        parent = None
        resume = config.get("resume_from")
        if isinstance(resume, str) and resume:
            owner = Path(resume).parent.parent
            if owner.parent == self.runs_root and owner.name != folder.name:
                try:
                    parent = self.get(owner.name)
                except RunNotFound:
                    parent = None
        try:
            created = (folder / RUN_JSON).stat().st_mtime
        except OSError:
            created = time.time()
        rec = _record(folder.name, folder, config, parent, st.CREATED, created)
        if not self._insert(rec, "INSERT OR IGNORE"):
            return None
        try:
            from_dict(config)
        except ConfigError as e:  # listed all the same (a number the history cannot hold is left out)
            self.troubles[folder.name] = t(f"его run.json тренер не примет: {e}", f"its run.json is refused by the trainer: {e}")
        events = self.ingest(rec.id)
        rec = self.get(rec.id)
        return self._settle_adopted(rec, events)

    def _settle_adopted(self, rec: RunRecord, events: list[Event]) -> RunRecord:
        end = next((e for e in reversed(events) if e.get("event") == "end"), None)
        if end is not None:
            reason = str(end.get("reason") or "")
            return self.update(rec.id, status=st.END_REASONS.get(reason, st.FAILED))
        start = next((e for e in reversed(events) if e.get("event") == "start"), None)
        if start is None:
            return rec  # never started: stays "created"
        pid = start.get("pid")
        if rec.target_kind == "local" and isinstance(pid, int):
            import psutil  # here: the window's first frame needs none

            try:
                p = psutil.Process(pid)
                if p.create_time() <= float(start.get("time") or 0) + 1:
                    return self.update(rec.id, status=st.RUNNING, pid=pid, pid_started_at=p.create_time())
            except (psutil.Error, OSError, ValueError):
                pass
        return self.update(rec.id, status=st.FAILED, end_reason="vanished",
                           last_message="the trainer process disappeared (found again in the run folders)")

    def create_leg(self, parent_id: str, config: dict[str, Any], status: str = st.CREATED) -> RunRecord:
        """The next leg of the parent's chain (Kaggle continuing on another account, or
        a local «Продолжить»): a new folder whose run.json is `config`."""
        return self.create_run(config, parent_id=parent_id, status=status)

    # ---- reading -------------------------------------------------------------------
    def get(self, run_id: str) -> RunRecord:
        row = self._db.execute(f"SELECT {', '.join(_COLUMNS)} FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise RunNotFound(run_id)
        return RunRecord(*row)

    def find(self, prefix: str) -> RunRecord:
        """A run by its id or a unique start of it (handy on the command line)."""
        try:
            return self.get(prefix)
        except RunNotFound:
            pass
        rows = self._db.execute(
            "SELECT id FROM runs WHERE id LIKE ? ESCAPE '\\' OR id LIKE ? ESCAPE '\\'",
            (_like(prefix) + "%", "%" + _like(prefix) + "%"),
        ).fetchall()
        ids = sorted({r[0] for r in rows})
        if len(ids) == 1:
            return self.get(ids[0])
        if not ids:
            raise RunNotFound(prefix)
        raise LookupError(t(f"{prefix!r} подходит к нескольким прогонам: {', '.join(ids[:5])}: укажите ID полнее",
                            f"{prefix!r} matches several runs: {', '.join(ids[:5])}: give more of the id"))

    def list_runs(self, limit: int | None = None) -> list[RunRecord]:
        """Newest first."""
        sql = f"SELECT {', '.join(_COLUMNS)} FROM runs ORDER BY created_at DESC, id DESC"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [RunRecord(*r) for r in self._db.execute(sql)]

    def active(self) -> list[RunRecord]:
        marks = ", ".join("?" * len(st.ACTIVE))
        rows = self._db.execute(
            f"SELECT {', '.join(_COLUMNS)} FROM runs WHERE status IN ({marks}) ORDER BY created_at",
            tuple(sorted(st.ACTIVE)),
        )
        return [RunRecord(*r) for r in rows]

    def children(self, run_id: str) -> list[RunRecord]:
        rows = self._db.execute(
            f"SELECT {', '.join(_COLUMNS)} FROM runs WHERE parent_id = ? ORDER BY created_at", (run_id,)
        )
        return [RunRecord(*r) for r in rows]

    def lineage(self, run_id: str) -> list[RunRecord]:
        """The run and its ancestors, oldest first: the legs drawn as one curve."""
        out: list[RunRecord] = []
        seen: set[str] = set()
        rec: RunRecord | None = self.get(run_id)
        while rec is not None and rec.id not in seen:
            seen.add(rec.id)
            out.append(rec)
            try:
                rec = self.get(rec.parent_id) if rec.parent_id else None
            except RunNotFound:
                rec = None
        return out[::-1]

    def chain(self, chain_id: str) -> list[RunRecord]:
        rows = self._db.execute(
            f"SELECT {', '.join(_COLUMNS)} FROM runs WHERE chain_id = ? ORDER BY leg, created_at", (chain_id,)
        )
        return [RunRecord(*r) for r in rows]

    # ---- writing -------------------------------------------------------------------
    def update(self, run_id: str, **changes: Any) -> RunRecord:
        """Set columns of one row (unknown names are an error); returns the new row."""
        bad = sorted(set(changes) - _WRITABLE)
        if bad:
            raise ValueError(f"cannot set {', '.join(bad)} on a run (columns: {', '.join(sorted(_WRITABLE))})")
        if "status" in changes:
            st.check(changes["status"])
        changes["updated_at"] = time.time()
        sets = ", ".join(f"{k} = ?" for k in changes)
        with self.state.transaction():  # a lock held elsewhere is waited on aloud (State._begin)
            cur = self._db.execute(f"UPDATE runs SET {sets} WHERE id = ?", (*changes.values(), run_id))
        if cur.rowcount == 0:
            raise RunNotFound(run_id)
        return self.get(run_id)

    def set_status(self, run_id: str, status: str, message: str | None = None) -> RunRecord:
        changes: dict[str, Any] = {"status": status}
        if message is not None:
            changes["last_message"] = message
        if status in st.ENDED:
            changes["ended_at"] = time.time()
        return self.update(run_id, **changes)

    def set_kernel_ref(self, run_id: str, ref: str | None) -> RunRecord:
        return self.update(run_id, kaggle_kernel_ref=ref)

    def discard(self, run_id: str) -> None:
        """Undo a run that never started (a refused Kaggle start): its folder and its row
        go, as if it had not been created."""
        shutil.rmtree(self.get(run_id).path, ignore_errors=True)
        self.delete(run_id)

    def delete(self, run_id: str) -> None:
        """Forget a run in the index (its folder is left alone)."""
        with self.state.transaction():
            self._db.execute("UPDATE runs SET parent_id = NULL WHERE parent_id = ?", (run_id,))
            self._db.execute("DELETE FROM runs WHERE id = ?", (run_id,))

    # ---- events --------------------------------------------------------------------
    def ingest(self, run_id: str) -> list[Event]:
        """Fold the events appended since the last call into the row; returns them.

        A long backlog (a run that went on while the lab was closed) is read thinned:
        of its step events only the last is parsed and returned — the row needs no more,
        and the plot reads the file itself — so re-attaching stays fast.
        """
        rec = self.get(run_id)
        tail = EventTail(rec.events_path, rec.events_offset)
        lines = tail.read_lines()
        if len(lines) > THIN_BACKLOG_LINES:
            steps = [i for i, line in enumerate(lines) if is_step_line(line)]
            drop = set(steps[:-1])
            lines = [line for i, line in enumerate(lines) if i not in drop]
        events, _ = parse_lines(lines)
        if tail.offset == rec.events_offset:
            return events
        changes = summarize(rec, events)
        changes["events_offset"] = tail.offset
        self.update(run_id, **changes)
        return events

    def reindex(self, run_id: str) -> RunRecord:
        """Read the run's events again from the top (after a folder was copied in)."""
        self.update(run_id, events_offset=0)
        self.ingest(run_id)
        return self.get(run_id)


def summarize(rec: RunRecord, events: Iterable[Event]) -> dict[str, Any]:
    """The row's changes that these new events imply.

    Local runs take their status from the events; a Kaggle run's status belongs to the
    Kaggle runner (the `end` event arrives before the outputs are downloaded), so for
    those only the figures are updated.
    """
    out: dict[str, Any] = {}
    best = rec.best_val_loss
    local = rec.target_kind == "local"
    for ev in events:
        kind = ev.get("event")
        step = ev.get("step")
        if _count(step) is not None:
            out["last_step"] = step
        if kind == "start":
            if _count(ev.get("params")) is not None:
                out["params"] = ev["params"]
            out.setdefault("started_at", rec.started_at or ev.get("time"))
            cfg = ev.get("config") or {}
            steps_to = (cfg.get("training") or {}).get("steps_to") if isinstance(cfg, dict) else None
            if _count(steps_to) is not None:
                out["steps_to"] = steps_to
            if local and rec.status in (st.CREATED, st.STARTING) and out.get("status") is None:
                out["status"] = st.RUNNING
            elif local and out.get("status") in st.ENDED:  # resumed in place after an end
                out["status"] = st.RUNNING
                out["ended_at"] = None
                out["end_reason"] = None
        elif kind == "step":
            if _count(ev.get("tokens_seen")) is not None:
                out["tokens_seen"] = ev["tokens_seen"]
            loss = _num(ev.get("loss"))
            if loss is not None:
                out["last_loss"] = loss
        elif kind == "eval":
            v = _num(ev.get("val_loss"))
            if v is not None and v == v and (best is None or v < best):
                best = v
                out["best_val_loss"] = v
        elif kind == "error":
            out["last_message"] = str(ev.get("message") or "")
        elif kind == "end":
            reason = str(ev.get("reason") or "")
            out["end_reason"] = reason
            out["ended_at"] = ev.get("time") or time.time()
            if ev.get("message"):
                out["last_message"] = str(ev["message"])
            if local:
                out["status"] = st.END_REASONS.get(reason, st.FAILED)
    return out


def _folder_failed(folder: Path, exc: OSError) -> str:
    room = no_room(folder.parent)
    if room:
        return t(f"На диске с папкой прогонов {folder.parent} нет места ({room}). Прогон не создан. "
                 "Освободите место и повторите.",
                 f"The disk holding the run folders {folder.parent} is full ({room}). The run was not created. "
                 "Free some space and try again.")
    return t(f"Папку прогона {folder} не создать ({exc}). Прогон не создан.",
             f"The run folder {folder} cannot be made ({exc}). The run was not created.")


def _count(value: Any) -> int | None:
    """A whole number the history can hold (SQLite's INTEGER is 64-bit): anything else, such
    as a steps_to of 10**30 written into a run.json by hand, is not kept (None)."""
    if isinstance(value, int) and not isinstance(value, bool) and -SQLITE_INTEGER_MAX <= value <= SQLITE_INTEGER_MAX:
        return value
    return None


def _num(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):  # the trainer writes NaN/inf as text
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _record(
    run_id: str, folder: Path, config: dict[str, Any], parent: RunRecord | None, status: str, now: float
) -> RunRecord:
    target = config.get("target") if isinstance(config.get("target"), dict) else {}
    training = config.get("training") or {}
    return RunRecord(
        id=run_id,
        name=str(config.get("name") or "run"),
        folder=str(folder),
        parent_id=parent.id if parent else None,
        chain_id=parent.chain_id if parent else run_id,
        leg=parent.leg + 1 if parent else 1,
        target_kind=str(target.get("kind", "local")),
        target_gpu=str(target.get("gpu", "auto")),
        target_account=str(target.get("account", "auto")),
        status=status,
        created_at=now,
        updated_at=now,
        steps_to=_count(training.get("steps_to")) if isinstance(training, dict) else None,
        last_step=parent.last_step if parent else None,  # a continuation starts where it left
    )


def _start_config(events_path: Path) -> dict[str, Any]:
    starts = [e for e in read_events(events_path) if e.get("event") == "start" and isinstance(e.get("config"), dict)]
    return dict(starts[-1]["config"]) if starts else {}


def _like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")

