"""The follower threads of this process, and the lock that keeps one follower per leg.

Each Kaggle leg in flight is followed by one thread (app/kaggle/watch.py drives it); a
follower that broke on something unexpected is tried again by a later poll, not at once.
Across processes (the window and a `--wait` CLI) the run folder's lock keeps one follower.
FollowerThreads is a part of KaggleRuns (app/kaggle/runner.py).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

from ..base import run_status as st
from ..base.i18n import t

log = logging.getLogger(__name__)

_followers: dict[str, threading.Thread] = {}
_followers_lock = threading.Lock()
_stop_event = threading.Event()  # replaced by a new one at each shutdown; old followers keep theirs set
_failed_at: dict[str, float] = {}  # run id -> when its follower last broke on something unexpected
RESTART_AFTER_FAILURE_S = 30.0


def stop_event() -> threading.Event:
    """The event the followers started now stop on (shutdown_followers replaces it)."""
    return _stop_event


def shutdown_followers(timeout: float = 5.0) -> None:
    """Stop following (the lab is quitting); the state keeps where each leg was. A follower
    blocked in a log stream stops at its next line; later polls start new followers."""
    global _stop_event
    with _followers_lock:
        old, _stop_event = _stop_event, threading.Event()
        threads = list(_followers.values())
        _followers.clear()
    old.set()
    for th in threads:
        th.join(timeout)


def wait_followers(timeout: float | None = None) -> bool:
    """Block until no follower thread is left (True) or the timeout passes (False)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        with _followers_lock:
            alive = [th for th in _followers.values() if th.is_alive()]
        if not alive:
            return True
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            return False
        alive[0].join(0.2 if left is None else min(0.2, left))


class LegLock:
    """One follower per leg across processes (the window and a `--wait` CLI): an exclusive
    lock on RUN_DIR/.kaggle-follow.lock, held while following, released by the OS if the
    process dies."""

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / ".kaggle-follow.lock"
        self._fd: int | None = None

    def acquire(self) -> bool:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            if os.name == "posix":
                import fcntl

                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            else:  # pragma: no cover - Windows
                import msvcrt

                msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class FollowerThreads:
    """Starting a leg's follower thread (a part of KaggleRuns)."""

    registry: Any
    store: Any
    accounts: Any
    settings: Any
    _stop: threading.Event

    def ensure_follower(self, run_id: str) -> bool:
        """Start a follower thread for the leg unless one runs (here or in another process)."""
        with _followers_lock:
            th = _followers.get(run_id)
            if th is not None and th.is_alive():
                return False
            if time.monotonic() - _failed_at.get(run_id, -1e9) < RESTART_AFTER_FAILURE_S:
                return False
            leg = self.store.leg(run_id)
            if leg is None or leg["state"] in ("done", "failed"):
                return False
            lock = LegLock(Path(leg["run_dir"]))
            if not lock.acquire():
                return False  # another lab process follows it
            # Each follower has its own KaggleRuns: messages go to its own run.
            worker = type(self)(self.registry, self.accounts.creds, self.settings)
            th = threading.Thread(target=worker._follow_thread, args=(run_id, lock), name=f"kaggle-{run_id}",
                                  daemon=True)
            _followers[run_id] = th
            th.start()
            return True

    def _follow_thread(self, run_id: str, lock: LegLock) -> None:
        try:
            next_id = self.follow_leg(run_id)
        except Exception as e:  # noqa: BLE001 — a follower must leave a message, not a traceback
            if isinstance(e, st.RunNotFound):  # the run was deleted from the history: stop for good
                self.store.update_leg(run_id, state="failed", message="run deleted", ended_at=time.time())
            else:  # tried again by a later poll, not at once
                log.warning("following the Kaggle run %s stopped", run_id, exc_info=True)
                _failed_at[run_id] = time.monotonic()
                self._message(run_id, t(f"слежение за ядром прервано: {e}", f"following the kernel stopped: {e}"))
            next_id = None
        finally:
            lock.release()
            with _followers_lock:
                if _followers.get(run_id) is threading.current_thread():
                    del _followers[run_id]
        if next_id and not self._stop.is_set():
            self.ensure_follower(next_id)
