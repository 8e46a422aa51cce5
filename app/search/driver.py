"""Driving the searches: one round per queue-runner tick (app/queue/trials.py calls it).

For every running search:
- ask a trial (`study.ask` over the search's space) when none of its trials waits in the queue
  and trials and budget are left: trials are asked as slots free, so the sampler learns from
  the finished ones; the trial is recorded, then queued as a run, the queue item and its
  number written in one transaction;
- report each running trial's new held-out evaluations as its intermediate values and ask
  the pruner; a trial it prunes is stopped through its run's STOP (the run saves a
  checkpoint, its queue item ends done) and told pruned, never failed;
- tell a trial whose queue item ended: complete with its final held-out loss when its run
  reached «Шагов до», pruned when the pruner or the search's stop stopped it, failed
  otherwise (the run failed, or its item was removed from the queue by hand).

Optuna's ask and tell are two writes to its journal and the lab's rows another, and a
runner may be killed between any two. Every round therefore starts from what is stored:
a RUNNING trial of the study with no row (asked, then killed) is adopted — queued now, not
asked again; a trial whose item ended but which is not marked told is told unless the study
already has it finished. Intermediate values go to the study's storage by the trial's
number (BaseStorage.set_trial_intermediate_value) and the pruner is asked with the stored
FrozenTrial (BasePruner.prune): the same path whether the trial was asked by this runner or
by one killed before it, for which Optuna has no live Trial object to report through.
"""

from __future__ import annotations

import logging
import math
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ..base import run_status as st
from ..base.i18n import t
from ..runs.events import read_events
from ..runs.registry import Registry, RunNotFound
from . import study as studies
from .space import params_text, value_at, with_params
from .store import (
    COMPLETE,
    DONE,
    FAILED,
    PRUNED,
    RUNNING,
    STOPPED,
    STOPPING,
    TRIAL_RUNNING,
    WAITING,
    Search,
    SearchStore,
    Trial,
)

log = logging.getLogger(__name__)

# Only the tests set it: `asked:N` / `told:N` ends this process at once (SIGKILL, as a power
# cut would) right after trial N was asked, or told, and before the lab wrote that down.
KILL_ENV = "TERNIT_SEARCH_KILL_AT"


def _fault(moment: str, number: int) -> None:
    if os.environ.get(KILL_ENV) == f"{moment}:{number}":
        os.kill(os.getpid(), getattr(signal, "SIGKILL", signal.SIGTERM))

QUEUE_WAITING = ("waiting", "starting")
QUEUE_RUNNING = ("running",)


@dataclass(frozen=True)
class QueuedRun:
    """A trial's queue item as the search sees it."""

    state: str               # waiting | starting | running | done | failed
    run_id: str | None       # its current run (a chain's last leg)
    runs: list[str]          # every run the item made, in order
    message: str | None = None


class QueuePort(Protocol):
    """What the search needs of the queue (app/queue/trials.py gives it)."""

    def check(self, config: dict[str, Any], target: str) -> None: ...  # raises ValueError: refused
    def add(self, config: dict[str, Any], target: str, account: str) -> int: ...
    def queued(self, item_id: int) -> QueuedRun | None: ...  # None: removed from the queue
    def remove(self, item_id: int) -> bool: ...  # False: it has started meanwhile


class SearchDriver:
    def __init__(self, store: SearchStore, registry: Registry, port: QueuePort,
                 stop_run: Callable[[str], Any], clock: Callable[[], float] = time.time) -> None:
        self.store, self.registry, self.port, self.stop_run, self.clock = store, registry, port, stop_run, clock
        self._opened: dict[int, tuple[Any, Any]] = {}  # search id -> (study, storage)
        self._storage: Any = None   # the study being driven this round, and its id in its storage
        self._study_id = 0

    def tick(self) -> list[str]:
        """One round over every active search; returns what happened, as lines."""
        said: list[str] = []
        for search in self.store.searches((RUNNING, STOPPING)):
            try:
                said += self._round(search)
            except (OSError, ValueError, KeyError) as e:  # one search's trouble never stops the queue
                log.warning("search %s: this round failed: %s", search.id, e, exc_info=True)
        return said

    # -- one search ---------------------------------------------------------------------------------
    def _round(self, search: Search) -> list[str]:
        if search.id not in self._opened:  # opened (and its tail repaired) once per runner
            self._opened[search.id] = studies.load_study(studies.journal_path(search.journal), search.study_name,
                                                         search.pruner, search.seed, repair=True)
        study, self._storage = self._opened[search.id]  # the storage reads what was appended since
        self._study_id = self._storage.get_study_id_from_name(search.study_name)
        said = self._adopt(search, study)
        for trial in self.store.trials(search.id):
            if not trial.told:
                said += self._follow(search, study, trial)
        if search.state == RUNNING and self._may_ask(search):
            said += self._ask(search, study)
        said += self._maybe_done(search)
        return said

    def _adopt(self, search: Search, study: Any) -> list[str]:
        """Trials the study has as RUNNING and the lab never recorded: asked by a runner that
        was killed before its row was written. Whole ones are queued now; one killed in the
        middle of its sampling (values missing) is told failed: it never ran."""
        from optuna.trial import TrialState

        known = {tr.number for tr in self.store.trials(search.id)}
        said = []
        for ft in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            if ft.number in known:
                continue
            if set(ft.params) != set(search.keys):
                study.tell(ft.number, state=TrialState.FAIL)
                said.append(f"search {search.id}: trial {ft.number} was half-asked before a restart; told failed")
                continue
            self.store.add_trial(search.id, ft.number, dict(ft.params))
            said.append(f"search {search.id}: trial {ft.number} adopted after a restart")
        return said

    def _may_ask(self, search: Search) -> bool:
        trials = self.store.trials(search.id)
        if len(trials) >= search.trials:
            return False
        if any(tr.state == WAITING and not tr.told for tr in trials):
            return False  # one waits for a slot already: the next is asked when it starts
        return not self._budget_spent(search, trials)

    def _budget_spent(self, search: Search, trials: list[Trial]) -> bool:
        if search.budget_hours is None:
            return False
        return self.hours_used(trials) >= search.budget_hours

    def hours_used(self, trials: list[Trial]) -> float:
        """The GPU hours the trials' runs have taken (running ones so far)."""
        total = 0.0
        for tr in trials:
            q = self.port.queued(tr.item_id) if tr.item_id is not None else None
            for run_id in q.runs if q else ([tr.run_id] if tr.run_id else []):
                try:
                    rec = self.registry.get(run_id)
                except RunNotFound:
                    continue
                if rec.started_at:
                    total += max(0.0, (rec.ended_at or self.clock()) - rec.started_at)
        return total / 3600.0

    def _ask(self, search: Search, study: Any) -> list[str]:
        study.sampler = studies.make_sampler(search.seed, len(study.get_trials(deepcopy=False)))
        trial = study.ask(fixed_distributions={d.key: d.distribution() for d in search.space})
        _fault("asked", trial.number)
        row = self.store.add_trial(search.id, trial.number, dict(trial.params))
        return [f"search {search.id}: trial {row.number} asked ({params_text(row.params)})", *self._queue(search, study, row)]

    def _queue(self, search: Search, study: Any, trial: Trial) -> list[str]:
        from optuna.trial import TrialState

        cfg = with_params(search.config, trial.params)
        cfg["name"] = f"{search.name}-t{trial.number}"
        try:
            self.port.check(cfg, search.target)
        except ValueError as e:  # the pre-check refuses these values: the trial cannot run
            self.store.set_trial(search.id, trial.number, state=FAILED, message=str(e))
            self._tell(study, trial.number, TrialState.FAIL)
            self.store.set_trial(search.id, trial.number, told=1)
            return [f"search {search.id}: trial {trial.number} refused: {e}"]
        with self.store.state.transaction():  # the item and its number together, or neither
            item_id = self.port.add(cfg, search.target, search.account)
            self.store.set_trial(search.id, trial.number, item_id=item_id, state=WAITING)
        return []

    # -- a trial ------------------------------------------------------------------------------------
    def _follow(self, search: Search, study: Any, trial: Trial) -> list[str]:
        if trial.item_id is None:
            return self._queue(search, study, trial)
        q = self.port.queued(trial.item_id)
        if q is None:
            return self._finish(search, study, trial, None, t("убран из очереди", "removed from the queue"))
        if q.state in QUEUE_WAITING:
            if search.state == STOPPING and self.port.remove(trial.item_id):
                return self._finish(search, study, trial, None, t("поиск остановлен", "the search was stopped"))
            return []
        if q.state in QUEUE_RUNNING:
            return self._running(search, study, trial, q)
        return self._finish(search, study, trial, q, q.message)

    def _running(self, search: Search, study: Any, trial: Trial, q: QueuedRun) -> list[str]:
        if trial.state != TRIAL_RUNNING or trial.run_id != q.run_id:
            self.store.set_trial(search.id, trial.number, state=TRIAL_RUNNING, run_id=q.run_id)
        step = self._report(search, study, trial, q)
        if trial.prune_at is not None or q.run_id is None:
            return []
        why = None
        if search.state == STOPPING:
            why = "the search was stopped"
        elif step is not None and study.pruner.prune(study, self._frozen(study, trial.number)):
            why = f"pruned at step {step}"
        if why is None:
            return []
        self.stop_run(q.run_id)  # STOP: the run saves its checkpoint and ends
        self.store.set_trial(search.id, trial.number, prune_at=self.clock())
        return [f"search {search.id}: trial {trial.number} stopped ({why}), run {q.run_id}"]

    def _report(self, search: Search, study: Any, trial: Trial, q: QueuedRun) -> int | None:
        """Report the evaluations not yet reported; returns the last step reported (None: none yet)."""
        last = trial.reported_step
        frozen = self._frozen(study, trial.number)
        if frozen.state.is_finished():
            return last
        trial_id = self._storage.get_trial_id_from_study_id_trial_number(self._study_id, trial.number)
        for step, value, _ in self._evals(q.runs):
            if last is None or step > last:
                self._storage.set_trial_intermediate_value(trial_id, step, value)
                last = step
        if last != trial.reported_step:
            self.store.set_trial(search.id, trial.number, reported_step=last)
        return last

    def _evals(self, runs: list[str]) -> list[tuple[int, float, list[Any] | None]]:
        """(step, held-out loss, its interval) of every evaluation of the item's runs, in order."""
        out: list[tuple[int, float, list[Any] | None]] = []
        for run_id in runs:
            try:
                rec = self.registry.get(run_id)
            except RunNotFound:
                continue
            for ev in read_events(rec.events_path):
                v = ev.get("val_loss")
                if ev.get("event") == "eval" and isinstance(v, int | float) and math.isfinite(v) \
                        and isinstance(ev.get("step"), int):
                    out.append((ev["step"], float(v), ev.get("val_ci95")))
        return out

    def _frozen(self, study: Any, number: int) -> Any:
        """The trial as stored (a FrozenTrial), by its number."""
        return self._storage.get_trial(self._storage.get_trial_id_from_study_id_trial_number(self._study_id, number))

    def _finish(self, search: Search, study: Any, trial: Trial, q: QueuedRun | None, message: str | None) -> list[str]:
        from optuna.trial import TrialState

        if q is not None:
            self._report(search, study, trial, q)
        evals = self._evals(q.runs) if q is not None else []
        run = self._run(q.run_id if q else None)
        loss, ci = (evals[-1][1], evals[-1][2]) if evals else (None, None)
        if trial.prune_at is not None:
            state, told = PRUNED, TrialState.PRUNED
        elif run is not None and run.status == st.FINISHED and loss is not None:
            state, told = COMPLETE, TrialState.COMPLETE
        else:
            state, told = FAILED, TrialState.FAIL
        low, high = (ci if isinstance(ci, list) and len(ci) == 2 else (None, None))
        self.store.set_trial(search.id, trial.number, state=state, val_loss=loss, val_low=low, val_high=high,
                             run_id=q.run_id if q else trial.run_id, message=message)
        self._tell(study, trial.number, told, loss if told == TrialState.COMPLETE else None)
        _fault("told", trial.number)
        self.store.set_trial(search.id, trial.number, told=1)
        return [f"search {search.id}: trial {trial.number} {state}" + (f", val loss {loss:.4f}" if loss is not None else "")]

    def _tell(self, study: Any, number: int, state: Any, value: float | None = None) -> None:
        """study.tell once: a tell that reached the study before a kill is not repeated."""
        if self._frozen(study, number).state.is_finished():
            return
        if value is not None:
            study.tell(number, value)
        else:
            study.tell(number, state=state)

    def _run(self, run_id: str | None) -> Any:
        if not run_id:
            return None
        try:
            return self.registry.get(run_id)
        except RunNotFound:
            return None

    def _maybe_done(self, search: Search) -> list[str]:
        trials = self.store.trials(search.id)
        if not all(tr.told for tr in trials):
            return []
        if search.state == STOPPING:
            self.store.set_state(search.id, STOPPED, expect=(STOPPING,))
            return [f"search {search.id}: stopped"]
        if len(trials) >= search.trials or self._budget_spent(search, trials):
            self.store.set_state(search.id, DONE, expect=(RUNNING,))
            return [f"search {search.id}: done"]
        return []


def retry_allowed(store: SearchStore, item_id: int, retry_config: dict[str, Any]) -> bool:
    """Whether the queue may retry this item with `retry_config`: always for a run that is no
    trial; for a trial only when the retry keeps every searched field as the trial asked
    (a halved batch after an out-of-memory error changes the trial being measured when the
    batch is searched, a lowered lr after a NaN changes it when lr is): such a trial ends failed."""
    found = store.trial_of_item(item_id)
    if found is None:
        return True
    search, trial = found
    return all(value_at(retry_config, k) == trial.params.get(k) for k in search.keys)
