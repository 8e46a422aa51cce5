"""The lab as the window sees it, headless: what the form chooses from (data, history,
Kaggle accounts, this computer's card), which run is followed and which runs are going, what
each poll means for the window, and the actions (start, continue, retry, stop, quit).

ui/window/main_window.py shows what `Lab` decides and forwards the user's actions to it; the
decisions are tested here without a window (tests/test_lab.py). Lab announces what changed
(`Lab.events`, app/window/events.py): the history, a run's state, the followed run, the run
the GPU monitor watches; the window's views subscribe, so no action handler refreshes them.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base import paths
from ..base import run_status as st
from ..base.i18n import t
from ..base.state import StateError, failure_text, repairs_to_say
from ..data.prepared import Prepared, scan_prepared
from ..form.run_form import ActiveRun, ContinueFrom, FormContext, RunForm, continue_now
from ..runs import (
    ContinueError,
    Failure,
    HistoryRow,
    RunError,
    RunManager,
    RunRecord,
    RunUpdate,
    kaggle_bridge,
)
from ..runs.checkpoints import Choice, checkpoint_step, choose_checkpoint
from ..runs.files import folder_gone
from .events import LabEvents

log = logging.getLogger(__name__)


def load_form_context(runs: RunManager | None = None, extra_prepared: list[str] | None = None) -> FormContext:
    """What the form chooses from: constellations with token counts, prepared data, Kaggle
    accounts, this PC's card. Each source is optional: a part of the lab that is missing or
    fails leaves its choices empty, never the window closed."""
    ctx = FormContext()
    _add_library(ctx)
    for prep in scan_prepared(paths.prepared_dir()):
        ctx.add_prepared(prep)
    dirs = list(extra_prepared or [])
    if runs is not None:  # data folders the history's runs used
        for rec in runs.registry.list_runs(limit=50):
            try:
                d = (rec.config().get("data") or {}).get("dir")
            except (OSError, ValueError):
                d = None
            if d:
                dirs.append(d)
    for d in dict.fromkeys(dirs):
        prep = Prepared.read(d)
        if prep:
            ctx.add_prepared(prep)
    _add_accounts(ctx)
    add_local_gpu(ctx)
    return ctx


def add_local_gpu(ctx: FormContext) -> None:
    """This PC's card (app.gpu.cards: the first one a run started here would train on) as
    the form's «Карта этого компьютера»: its name, its memory (for the sizing panel) and its
    index (what a local run's target.gpu names). No driver, no card or NVML failing: the
    CPU, and the reason in the log."""
    from ..gpu.cards import this_pc_cards

    cards = this_pc_cards()
    if not cards:
        return
    ctx.local_gpu = cards[0].name
    ctx.local_gpu_index = cards[0].index
    ctx.local_card_memory_mb = cards[0].memory_mb


def _add_library(ctx: FormContext) -> None:
    """Constellations from app.data's library (with token counts where known)."""
    from ..data import library

    try:
        for c in library.constellation_summaries():
            ctx.constellations[c["name"]] = c.get("tokens")
    except Exception:  # the library's own errors must not stop the window opening
        log.exception("the data library could not be read for the form")


def _add_accounts(ctx: FormContext) -> None:
    """Kaggle accounts with their quota, as the state knows them (no network)."""
    from ..kaggle import accounts_for_form

    try:
        ctx.accounts = list(accounts_for_form())
    except Exception:  # a damaged Kaggle state must not stop the window opening
        log.exception("the Kaggle accounts could not be read for the form")


HISTORY_EVERY_S = 2.0  # new steps refresh the history this often; a status change at once
# What a refused action raises: each says what happened and what to do, in the interface
# language; the window shows it as it is.
ACTION_ERRORS = (RunError, ContinueError, StateError, OSError, ValueError, KeyError, sqlite3.Error)


class ActionError(Exception):
    """An action the lab could not do; the text is for the user."""


@dataclass
class Tick:
    """What one poll means for the window."""

    updates: list[RunUpdate] = field(default_factory=list)
    error: str = ""  # the runs did not update this time (said in the status bar)
    follow: str | None = None  # the followed Kaggle run went on as this leg: follow it
    monitor_changed: bool = False  # a run started or ended: point the GPU monitor again
    monitor_step: dict[str, Any] | None = None  # the monitored run's newest step event
    history_due: bool = False  # refresh the history now


@dataclass
class Started:
    """A run the lab started (or is uploading to Kaggle: `kaggle`, launched in a thread)."""

    run: RunRecord
    kaggle: bool
    message: str


class Lab:
    """The window's decisions, headless. `runs`: the RunManager (tests give one over their
    own folders); `extra_prepared`: prepared folders added by hand (besides the lab's own)."""

    def __init__(self, runs: RunManager | None = None, extra_prepared: list[str] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.runs = runs if runs is not None else RunManager()
        self.events = LabEvents()  # what changed, for the views that subscribe
        self.extra_prepared = list(extra_prepared or [])
        self.followed: str | None = None
        self.monitored: str | None = None  # the local run the GPU monitor watches
        self.launching: set[str] = set()  # Kaggle starts still uploading in their thread
        self._failures: dict[str, Failure | None] = {}
        self._clock = clock
        self._history_at = 0.0
        self._law: Any = None

    def start_message(self) -> str:
        """The status bar's first line: ready, or what the lab did with a damaged state file
        and the run folders the history could not take as they are (one bad folder is that
        run's problem; the rest are listed)."""
        lines = repairs_to_say()  # a damaged state file set aside as the lab opened
        troubles = self.runs.registry.troubles
        if troubles:
            said = "; ".join(f"{name}: {why}" for name, why in sorted(troubles.items()))
            lines.append(t(f"Папки прогонов с ошибками: {said}", f"Run folders with problems: {said}"))
        return " ".join(lines) or t("Готово", "Ready")

    # -- the form's context ------------------------------------------------------------

    def form_context(self) -> FormContext:
        ctx = load_form_context(self.runs, self.extra_prepared)
        ctx.law_lines = self.law.lines  # the lab's law in «Как выбрать размер»
        return ctx

    @property
    def law(self) -> Any:
        """The lab's law for the form (app/law/advice.py), fitted in its own thread."""
        if self._law is None:
            from ..law.advice import LawAdvisor

            self._law = LawAdvisor(self.runs.registry, on_ready=self.events.law.emit)
        return self._law

    def reload_context(self, old: FormContext) -> FormContext:
        """The choices read again (new data, accounts); what was learnt meanwhile — measured
        speeds, the runs going — stays."""
        ctx = self.form_context()
        ctx.measured, ctx.active_runs = old.measured, old.active_runs
        return ctx

    def add_prepared(self, folder: str, ctx: FormContext) -> None:
        """A prepared folder picked by hand joins the form's choices (and later reloads)."""
        prep = Prepared.read(folder)
        if prep is None:
            raise ActionError(t(
                f"{folder}: нет tokenizer.json, train.bin, val.bin и meta.json — это не подготовленные данные",
                f"{folder}: no tokenizer.json, train.bin, val.bin and meta.json — not prepared data"))
        self.extra_prepared.append(str(folder))
        ctx.add_prepared(prep)

    def measured(self) -> list[dict[str, Any]]:
        """Speeds and memory measured by earlier runs, for the estimates (slow with a long
        history: the window calls it in a thread)."""
        from ..sizing.cpu_rate import measured_with_probe
        from ..sizing.history import measured_runs

        # Nothing known of this CPU's speed: measured now, a few steps in a child process
        # (this runs in the window's thread, so the window goes on meanwhile).
        return measured_with_probe(list(measured_runs(self.runs.registry.runs_root)))

    @staticmethod
    def take_measured(ctx: FormContext, measured: object) -> None:
        """What `measured` gave (read in a thread: the list, or the exception it raised)
        joins the form's context; an unreadable history gives no estimate corrections,
        never a broken window, and says why in the log."""
        if isinstance(measured, BaseException):
            log.warning("the measured speeds of earlier runs could not be read", exc_info=measured)
            ctx.measured = []
        else:
            ctx.measured = list(measured)  # type: ignore[call-overload]

    def update_active_runs(self, ctx: FormContext) -> bool:
        """Tell the form's context which runs are going; True when that set changed (the
        form refreshes only then)."""
        active = self.active_runs()
        if [r.id for r in active] == [r.id for r in ctx.active_runs]:
            return False
        ctx.active_runs = active
        return True

    def active_runs(self) -> list[ActiveRun]:
        """The runs going (and Kaggle starts still uploading), for the form: it refuses the
        same run twice and warns of two on one card."""
        recs = self.runs.registry.active()
        for run_id in sorted(self.launching - {r.id for r in recs}):
            try:
                recs.append(self.runs.registry.get(run_id))
            except KeyError:
                self.launching.discard(run_id)
        active = []
        for rec in recs:
            try:
                active.append(ActiveRun(rec.id, rec.name, rec.target_kind == "local", rec.config()))
            except (OSError, ValueError):  # its run.json is gone or torn: nothing to compare
                continue
        return active

    # -- following -----------------------------------------------------------------------

    def follow(self, run_id: str) -> list[RunRecord] | None:
        """Follow a run: the runs it continues and itself, oldest first (one curve); None
        when it is not in the history. Announced (`followed`, then `monitored`: a run
        followed that trains here is the one the GPU monitor watches)."""
        try:
            chain = self.runs.registry.lineage(run_id)
        except KeyError:
            return None
        self.followed = run_id
        self.events.followed.emit(chain)
        self.monitor_target()
        return chain

    def initial_run(self) -> str | None:
        """What a new window shows: a run still going (re-attached), else the newest."""
        active = self.runs.registry.active()
        if active:
            return active[-1].id
        rows = self.runs.registry.list_runs(limit=1)
        return rows[0].id if rows else None

    def monitor_target(self) -> RunRecord | None:
        """The run the GPU monitor (its trainer figures, its heat guard) watches: the
        followed one if it trains here, else the newest that does. A look at an old run
        must not turn the heat guard off for the run still training."""
        here = [r for r in self.runs.registry.active() if r.target_kind == "local"]
        rec = next((r for r in here if r.id == self.followed), here[-1] if here else None)
        self.monitored = rec.id if rec is not None else None
        self.events.monitored.emit(rec)
        return rec

    def followed_state(self) -> tuple[RunRecord | None, Failure | None]:
        """The followed run for the banner, with its failure (read once: it is final)."""
        if not self.followed:
            return None, None
        try:
            rec = self.runs.registry.get(self.followed)
        except KeyError:
            return None, None
        if rec.status != st.FAILED:
            return rec, None
        if rec.id not in self._failures:
            self._failures[rec.id] = self.runs.failure(rec.id)
        return rec, self._failures[rec.id]

    def forget_failures(self) -> None:
        """The failures' advice is in the old language: read again when next shown."""
        self._failures.clear()

    def training_here(self) -> list[RunRecord]:
        """Local runs training now (not those already saving to stop)."""
        return [r for r in self.runs.registry.active()
                if r.target_kind == "local" and r.status in (st.STARTING, st.RUNNING)]

    def poll(self) -> Tick:
        """One look at the runs: statuses, events, a Kaggle leg to follow into. Announced:
        each run updated and the followed one (`run`), a Kaggle leg followed into
        (`followed`), the GPU monitor's run (`monitored`) when a run started or ended, the
        history when it is due."""
        try:
            updates = self.runs.poll()
        except Exception as e:  # a locked database, a vanished folder: try again next tick
            if not isinstance(e, (StateError, OSError, sqlite3.Error)):
                log.exception("polling the runs failed")
            said = failure_text(e)
            return Tick(error=t(f"Прогоны не обновились ({said}); новая попытка через миг",
                                f"The runs did not update ({said}); trying again in a moment"))
        tick = Tick(updates=updates, monitor_changed=any(u.status_changed for u in updates))
        if tick.monitor_changed:  # a run that just started here is watched from its first steps
            self.monitor_target()
        for u in updates:
            if u.run.id == self.monitored:
                steps = [e for e in u.events if e.get("event") == "step"]
                if steps:
                    tick.monitor_step = steps[-1]
        # A Kaggle leg that hit its limit goes on as the next leg (another account): the
        # plot and the banner go with it, the chain drawn as one curve.
        ended = next((u.run for u in updates if u.run.id == self.followed and u.status_changed
                      and not u.run.active), None)
        nxt = self.runs.next_leg(ended.id) if ended is not None else None
        tick.follow = nxt.id if nxt is not None else None
        tick.history_due = tick.monitor_changed or (
            any(u.events for u in updates) and self._clock() - self._history_at > HISTORY_EVERY_S)
        self._announce_poll(tick)
        return tick

    def _announce_poll(self, tick: Tick) -> None:
        if tick.follow is not None:
            self.follow(tick.follow)
        # The followed run is announced on every poll: its speed and time left move on.
        for run_id in dict.fromkeys([*(u.run.id for u in tick.updates), *([self.followed] if self.followed else [])]):
            self.events.run.emit(run_id)
        if tick.history_due:
            self.events.history.emit()

    def refresh(self) -> None:
        """The history may have changed where the lab cannot see it (`ternit` in a terminal,
        another computer): announced, for the views to read it again."""
        self.events.history.emit()

    def run_changed(self, run_id: str | None) -> None:
        """A run's state changed where no poll sees it yet (the heat guard paused it):
        announced."""
        if run_id:
            self.events.run.emit(run_id)

    def history(self, limit: int = 200) -> list[HistoryRow]:
        self._history_at = self._clock()
        return self.runs.history(limit=limit)

    @staticmethod
    def checkpoint_choices(rows: list[HistoryRow]) -> list[tuple[str, str]]:
        """The runs the form can continue, as (id, label)."""
        return [(r.id, f"{r.name} · {r.steps} · {r.created}") for r in rows if r.can_continue]

    # -- actions -------------------------------------------------------------------------

    def start(self, config: dict[str, Any], continuing: ContinueFrom | None = None) -> Started:
        """Start (or continue `continuing`'s checkpoint). A local start only spawns the
        trainer; a Kaggle run is created here and launched by `launch_in_background`."""
        parent = continuing.run_id if continuing is not None else None
        kaggle = (config.get("target") or {}).get("kind") == "kaggle"
        try:
            if kaggle:
                if parent is not None:
                    check = self.runs.check_continue(parent, config)
                    if check.model_changed:
                        raise ContinueError(check.warning or "model changed")
                rec = self.runs.create(config, parent_id=parent)
            elif parent is not None:
                rec = self.runs.start_continue(parent, config)
            else:
                rec = self.runs.start(config)
        except ACTION_ERRORS as e:
            raise ActionError(failure_text(e)) from e
        return self._started(rec, kaggle, continuing.notes if continuing is not None else ())

    def _started(self, rec: RunRecord, kaggle: bool, notes: tuple[str, ...] = ()) -> Started:
        """A run just created or started: in the history and followed (announced both); what
        the choice of its checkpoint passed over is said with it."""
        if kaggle:
            self.launching.add(rec.id)
        self.events.history.emit()
        self.follow(rec.id)
        said = (t(f"{rec.id}: загрузка на Kaggle…", f"{rec.id}: uploading to Kaggle…") if kaggle
                else t(f"Запущен прогон {rec.id}", f"Started run {rec.id}"))
        return Started(rec, kaggle, " ".join([said, *notes]))

    def launch_in_background(self, run_id: str, done: Callable[[str, str], None]) -> threading.Thread:
        """Upload and push a Kaggle run off the caller's thread; `done(run_id, error)` is
        called in that thread when it ends ("" when pushed)."""
        def work() -> None:
            try:
                self.runs.launch(run_id)
                error = ""
            except Exception as e:  # said in the window; the run's row says failed
                log.warning("Kaggle launch of %s failed", run_id, exc_info=True)
                error = str(e) or type(e).__name__
            done(run_id, error)

        thread = threading.Thread(target=work, name=f"launch-{run_id}", daemon=True)
        thread.start()
        return thread

    def launch_ended(self, run_id: str, error: str) -> str:
        """A background Kaggle start ended: what to tell the user (and the run's new state,
        announced)."""
        self.launching.discard(run_id)
        self.events.history.emit()
        self.events.run.emit(run_id)
        if error:
            try:
                self.runs.registry.get(run_id)
            except KeyError:  # refused before a kernel existed: the run was undone, nothing to follow
                if self.followed == run_id:
                    self.followed = None
            return t(f"{run_id}: не запустился — {error}", f"{run_id}: did not start — {error}")
        rec = self.runs.registry.get(run_id)
        if rec.ended or rec.status == st.UPLOADING:  # stopped while uploading; waiting for Kaggle
            return f"{run_id}: {st.label(rec.status)} — {rec.last_message or ''}"
        return t(f"{run_id}: отправлен на Kaggle", f"{run_id}: pushed to Kaggle")

    def stop(self, run_id: str) -> str:
        """Stop a run; what happens now, for the status bar (its new state, announced)."""
        rec = self.runs.stop(run_id)
        self.events.run.emit(run_id)
        self.events.history.emit()
        if rec.target_kind == "kaggle":  # nothing saves now: the runner's message says what happens
            return f"{rec.name}: {rec.last_message or ''}"
        return t(f"{rec.name}: сохранение…", f"{rec.name}: saving…")

    def retry(self, run_id: str) -> Started:
        """One click after a failure: the same run with the advice applied (OOM: the batch
        that should fit; NaN: a lower learning rate), from its last checkpoint if any."""
        try:
            kaggle = self.runs.registry.get(run_id).target_kind == "kaggle"
            rec = self.runs.retry(run_id, launch=not kaggle)
        except ACTION_ERRORS as e:
            raise ActionError(failure_text(e)) from e
        return self._started(rec, kaggle)  # a Kaggle one uploads in a thread: the window goes on

    def continue_info(self, run_id: str) -> ContinueFrom:
        """What «Продолжить» fills the form with: the checkpoint's config and step."""
        notes: list[str] = []
        try:
            cfg = self.runs.continue_config(run_id, notes=notes)
            rec = self.runs.registry.get(run_id)
        except (ContinueError, KeyError, OSError, ValueError) as e:
            raise ActionError(failure_text(e)) from e
        ckpt = Path(cfg["resume_from"])  # continue_config's choice (choose_checkpoint)
        step = checkpoint_step(ckpt) or rec.last_step or 0
        parent_data = Prepared.read((cfg.get("data") or {}).get("dir") or "")
        return ContinueFrom(run_id=run_id, config=cfg, step=int(step),
                            label=f"{rec.name} · {t('шаг', 'step')} {step}",
                            tokenizer_sha256=parent_data.tokenizer_sha256 if parent_data else "", notes=tuple(notes))

    def continue_now(self, run_id: str, ctx: FormContext) -> tuple[ContinueFrom, dict[str, Any] | None, str]:
        """«Продолжить» in the history, one click: (what to continue, the config to start
        as it is or None, and why not). None when it cannot start as it is (data to
        prepare, …): the window fills the form instead, saying why."""
        info = self.continue_info(run_id)
        config, blockers = continue_now(ctx, info)
        if config is not None:
            return info, config, ""
        return info, None, t("Продолжить сразу нельзя: ", "Cannot continue at once: ") + "; ".join(blockers)

    @staticmethod
    def prepare_args(form: RunForm, constellations: list[str]) -> list[str]:
        """`ternit data prepare` for «Подготовить данные»: the form's context length; a
        continued run keeps its checkpoint's tokenizer."""
        context = form.values.get("context")
        tokenizer = None
        if form.continuing is not None:
            parent_dir = (form.continuing.config.get("data") or {}).get("dir")
            if parent_dir and (Path(parent_dir) / "tokenizer.json").is_file():
                tokenizer = Path(parent_dir) / "tokenizer.json"
        from ..data import manage as data_manage  # here: the window's first frame prepares nothing

        return data_manage.prepare_command(constellations, context if isinstance(context, int) else None, tokenizer)

    def run_folder(self, run_id: str) -> str:
        """The run's folder, to open; ActionError when it was deleted or moved."""
        rec = self.runs.registry.get(run_id)
        gone = folder_gone(rec.path)
        if gone:
            raise ActionError(gone)
        return rec.folder

    def export_checkpoint(self, run_id: str) -> Choice:
        """The checkpoint «Экспорт весов» writes out: the one every command chooses
        (`choose_checkpoint`), with what it passed over."""
        choice = choose_checkpoint(self.runs.registry.get(run_id).path)
        if choice.path is None:
            why = f" ({'; '.join(choice.passed_over)})" if choice.passed_over else ""
            raise ActionError(t(f"У прогона нет целого чекпоинта{why}", f"The run has no intact checkpoint{why}"))
        return choice

    @staticmethod
    def export_finished(choice: Choice, out: str, code: int, text: str) -> str:
        """The status line once «Экспорт весов» ended: where the weights went (and what the
        choice passed over), or why it failed."""
        if code != 0:
            return t(f"Экспорт не удался: {text[-300:]}", f"Export failed: {text[-300:]}")
        return " ".join([t(f"Веса сохранены: {out}.", f"Weights saved: {out}."), *choice.said()])

    def export_file_name(self, run_id: str) -> str:
        """The file name «Экспорт весов» offers: the run's name."""
        return f"{self.runs.registry.get(run_id).name}.safetensors"

    @staticmethod
    def export_args(ckpt: Path, out: str) -> list[str]:
        """`ternit export` (python's arguments): a child process, since it loads torch."""
        return ["-m", "app.cli", "export", str(ckpt), out]

    def overlay(self, run_id: str) -> tuple[str, Any]:
        """A run from the history to draw beside the followed one: (its name, its series)."""
        try:
            return self.runs.registry.get(run_id).name, self.runs.series(run_id)
        except (KeyError, OSError) as e:
            raise ActionError(failure_text(e)) from e

    def shutdown(self, timeout: float = 2.0) -> None:
        """The window closes: stop following Kaggle runs here (the runs themselves go on;
        the next start follows them again)."""
        kaggle_bridge.shutdown(timeout)
