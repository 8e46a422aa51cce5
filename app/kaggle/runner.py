"""Runs on Kaggle: the functions app.runs.kaggle_bridge calls, and the legs behind them.

start_kaggle_run(registry, run_id, account="auto")
    Picks the account (or takes the named one), uploads what it lacks (code, data, and the
    checkpoint when continuing) as private datasets, pushes the kernel, returns once it is
    pushed. Under «Авто» a refused push or a refused key moves on to the next account.
poll_kaggle_runs(registry)
    Makes sure every Kaggle leg in flight (per the state) is followed by a thread of this
    process: this is how a restarted lab resumes following. Non-blocking.
stop_kaggle_run(registry, run_id)
    Kaggle offers no way to save-and-stop a running kernel from outside: the lab stops
    continuing the chain, and says how to stop the session on kaggle.com.

Following a leg (a thread): kernel status → log stream (de-duplicated) → the run's
events.jsonl → outputs downloaded → the checkpoint's SHA-256 checked against its event →
the run's status; a leg that the account's quota cut short before «Шагов до» continues as
the next leg of the chain on an account with quota, for what is left of the run's «Лимит, мин». Every step is recorded in kaggle_legs first, so a
crash at any point resumes without pushing anything twice. Network trouble never fails a
run: the follower says it is waiting and tries again.

The parts: chain.py (the account and bundles of a leg, continuing the chain), push.py
(uploads and the push), followers.py (the follower threads and the per-leg lock), watch.py
(following a leg), outputs.py (its end). KaggleRuns joins them; the names below stay
importable from here.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

from ..base import run_status as st
from ..base.i18n import t
from ..base.numbers import decimal_text
from . import followers
from . import settings as kaggle_settings
from .accounts import Accounts
from .backoff import Backoff
from .chain import MIN_LEG_MIN, LegPlanning, leg_allotment, run_limit_min
from .client import AccountClient
from .credentials import CredentialStore
from .followers import (
    RESTART_AFTER_FAILURE_S,
    FollowerThreads,
    LegLock,
    shutdown_followers,
    wait_followers,
)
from .outputs import LegOutputs, take_checkpoint
from .push import LegPush
from .store import KaggleStore
from .watch import FINAL_KERNEL, FOLLOW_ERRORS_TOLERATED, LegWatch

__all__ = [
    "FINAL_KERNEL", "FOLLOW_ERRORS_TOLERATED", "MIN_LEG_MIN", "RESTART_AFTER_FAILURE_S",
    "KaggleRuns", "LegLock", "leg_allotment", "poll_kaggle_runs", "run_limit_min",
    "shutdown_followers", "start_kaggle_run", "stop_kaggle_run", "take_checkpoint",
    "wait_followers",
]


# ---------------------------------------------------------------------------------------------
# The module-level contract (app/runs/kaggle_bridge.py)
# ---------------------------------------------------------------------------------------------
def start_kaggle_run(registry: Any, run_id: str, *, account: str = "auto") -> None:
    KaggleRuns(registry).start(run_id, account or "auto")


def poll_kaggle_runs(registry: Any) -> None:
    runs = KaggleRuns(registry)
    for leg in runs.store.legs_in_flight():
        runs.ensure_follower(leg["run_id"])
    runs.settle_finished()


def stop_kaggle_run(registry: Any, run_id: str) -> None:
    KaggleRuns(registry).request_stop(run_id)


class KaggleRuns(LegPlanning, LegPush, FollowerThreads, LegWatch, LegOutputs):
    """One lab process's view of its Kaggle runs; the parts hold the steps of a leg."""

    def __init__(self, registry: Any, creds: CredentialStore | None = None,
                 settings: kaggle_settings.KaggleSettings | None = None,
                 sleep: Callable[[float], None] | None = None) -> None:
        self.registry = registry
        self.settings = settings or kaggle_settings.load()
        self.store = KaggleStore(registry.state)
        self._stop = followers.stop_event()
        self._sleep = sleep or self._interruptible_sleep
        self._current_run: str | None = None
        self.accounts = Accounts(self.store, creds, self._client)

    # -- plumbing -------------------------------------------------------------------------------
    def _interruptible_sleep(self, seconds: float) -> None:
        self._stop.wait(seconds)

    def _client(self, cred: Any) -> AccountClient:
        base = max(0.05, min(2.0, self.settings.poll_s / 4))
        return AccountClient(cred, Backoff(attempts=4, base_s=base, sleep=self._sleep), on_wait=self._on_wait)

    def _on_wait(self, what: str, seconds: float) -> None:
        if self._current_run:
            self._message(self._current_run, t(f"{what}; повтор через {decimal_text(seconds, 0, 'ru')} с",
                                               f"{what}; retrying in {decimal_text(seconds, 0, 'en')} s"))

    def _message(self, run_id: str, message: str) -> None:
        with contextlib.suppress(Exception):
            self.registry.update(run_id, last_message=message)

    def _status(self, run_id: str, status: str, message: str | None = None) -> None:
        self.registry.set_status(run_id, status, message)

    def settle_finished(self) -> None:
        """A leg recorded as ended whose run still looks active (the lab stopped between the
        two writes): give the run the leg's outcome."""
        for rec in self.registry.active():
            if rec.target_kind != "kaggle":
                continue
            leg = self.store.leg(rec.id)
            if leg is None or leg["state"] not in ("done", "failed"):
                continue
            status = {"steps_reached": st.FINISHED, "time_limit": st.TIME_LIMIT,
                      "stopped": st.STOPPED}.get(leg.get("end_reason") or "", st.FAILED)
            self._status(rec.id, status, leg.get("message") or "")

    def request_stop(self, run_id: str) -> None:
        leg = self.store.leg(run_id)
        if leg is None:
            return
        self.store.update_leg(run_id, stop_requested_at=time.time())
        url = leg.get("kernel_url") or leg.get("kernel_ref") or ""
        self._message(run_id, t(
            f"Ядро Kaggle нельзя остановить с сохранением извне: оно остановится по своему лимиту, "
            f"продолжения не будет. Остановить сразу: {url} → Stop session (без последнего чекпоинта).",
            f"A Kaggle kernel cannot be stopped with a save from outside: it stops at its limit and "
            f"no further leg starts. To stop now: {url} → Stop session (without a last checkpoint).",
        ))
