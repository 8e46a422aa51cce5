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
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import run_status as st
from ..atomic import write_text as atomic_write_text
from ..i18n import t
from . import datasets, follow, kernel
from . import settings as kaggle_settings
from .accounts import Accounts, key_status_text
from .backoff import Backoff
from .client import AccountClient
from .credentials import CredentialStore, global_token_warning
from .errors import (
    AuthError,
    GlobalTokenSet,
    KaggleError,
    NetworkDown,
    NotFound,
    PushRefused,
    Transient,
)
from .picker import Candidate, Pick, Want, pick
from .quota import hours
from .store import ACCOUNT_INVALID, KaggleStore, sha256_file

FINAL_KERNEL = ("COMPLETE", "ERROR", "CANCEL_REQUESTED", "CANCEL_ACKNOWLEDGED")

_followers: dict[str, threading.Thread] = {}
_followers_lock = threading.Lock()
_stop_event = threading.Event()  # replaced by a new one at each shutdown; old followers keep theirs set
_failed_at: dict[str, float] = {}  # run id -> when its follower last broke on something unexpected
RESTART_AFTER_FAILURE_S = 30.0
# A quota-cut leg leaves less than this of the run's «Лимит, мин»: no new kernel is pushed
# (its setup alone would take that long); the user continues it when they wish.
MIN_LEG_MIN = 1.0


def run_limit_min(config: dict[str, Any]) -> float:
    """The run's «Лимит, мин», as the user set it (every leg's run.json keeps it)."""
    return float((config.get("training") or {}).get("limit_min", 630))


def leg_allotment(leg: dict[str, Any], config: dict[str, Any]) -> float:
    """What was left of the run's limit when this leg started (older legs: the limit)."""
    allot = leg.get("allot_min")
    return run_limit_min(config) if allot is None else float(allot)
FOLLOW_ERRORS_TOLERATED = 20  # consecutive odd answers while following before the leg is failed


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


# ---------------------------------------------------------------------------------------------
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


class KaggleRuns:
    def __init__(self, registry: Any, creds: CredentialStore | None = None,
                 settings: kaggle_settings.KaggleSettings | None = None,
                 sleep: Callable[[float], None] | None = None) -> None:
        self.registry = registry
        self.settings = settings or kaggle_settings.load()
        self.store = KaggleStore(registry.state)
        self._stop = _stop_event
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
            self._message(self._current_run, t(f"{what}; повтор через {seconds:.0f} с",
                                               f"{what}; retrying in {seconds:.0f} s"))

    def _message(self, run_id: str, message: str) -> None:
        with contextlib.suppress(Exception):
            self.registry.update(run_id, last_message=message)

    def _status(self, run_id: str, status: str, message: str | None = None) -> None:
        self.registry.set_status(run_id, status, message)

    # -- picking --------------------------------------------------------------------------------
    def candidates(self, refresh: bool = True) -> list[Candidate]:
        if refresh:
            self.accounts.check_all()
        out = []
        for v in self.accounts.views():
            out.append(Candidate(v.username, v.remaining_s, v.usable,
                                 frozenset(d.content_hash for d in v.holds), key_status_text(v),
                                 v.quota.refresh_at if v.quota else None))
        return out

    def choose(self, config: dict[str, Any], account: str, want: Want, exclude: set[str],
               limit_min: float | None = None) -> Pick:
        """The account for a leg of `limit_min` minutes (default: the run's «Лимит, мин»)."""
        limit = run_limit_min(config) if limit_min is None else limit_min
        margin = self.settings.margin_min
        cands = self.candidates()
        if account != "auto":
            named = [c for c in cands if c.username == account]
            if not named:
                raise KaggleError(t(f"аккаунт {account!r} не добавлен: ternit kaggle add-account",
                                    f"account {account!r} is not added: ternit kaggle add-account"))
            c = named[0]
            if not c.usable:
                row = self.store.account(account)
                raise AuthError(account, 401, (row.key_reason if row else None) or t(
                    f"ключ аккаунта {account} не принят", f"the key of account {account} was refused"))
            left = (c.remaining_s / 60.0) - margin
            if left <= 0:
                raise KaggleError(t(
                    f"у аккаунта {account} квоты {hours(c.remaining_s)} — не больше запаса {margin:g} мин; "
                    "выберите «Авто» или другой аккаунт",
                    f"account {account} has {hours(c.remaining_s)} of quota, no more than the {margin:g} min "
                    "margin; choose Auto or another account",
                ))
            covers = left >= limit
            return Pick(account, covers, min(limit, left), t(f"выбран аккаунт {account}", f"account {account} chosen"))
        return pick(cands, limit, margin, want, exclude)

    # -- starting a leg -------------------------------------------------------------------------
    def bundles(self, config: dict[str, Any]) -> list[datasets.Bundle]:
        data_dir = (config.get("data") or {}).get("dir") or ""
        if not data_dir:
            raise KaggleError(t("в run.json не указана папка данных (data.dir)",
                                "run.json names no data folder (data.dir)"))
        run_id = self._current_run  # a lean-state run's code carries its library's wheel
        code = datasets.code_bundle(datasets.needs_wheel(config), (lambda m: self._message(run_id, m)) if run_id else None)
        out = [code, datasets.data_bundle(Path(data_dir), self.store)]
        resume = config.get("resume_from")
        if resume:
            path = Path(resume)
            if not path.is_file():
                raise KaggleError(t(f"чекпоинт {path} не найден", f"checkpoint {path} does not exist"))
            out.append(datasets.checkpoint_bundle(path, self.store))
        return out

    def start(self, run_id: str, account: str = "auto", allot_min: float | None = None) -> None:
        """Upload and push the leg `run_id`; `allot_min` is what is left of the run's limit
        for it (None: the whole «Лимит, мин» — a first leg)."""
        warning = global_token_warning()
        if warning:
            raise GlobalTokenSet(warning)
        rec = self.registry.get(run_id)
        config = rec.config()
        allot = run_limit_min(config) if allot_min is None else allot_min
        self._current_run = run_id
        self._status(run_id, st.UPLOADING, t("подготовка: хэши данных и кода", "preparing: hashing data and code"))
        bundles = self.bundles(config)
        want = Want(**{b.kind: b.content_hash for b in bundles})
        tried: set[str] = set()
        notes: list[str] = []
        while True:
            chosen = self.choose(config, account, want, tried, allot)
            if chosen.username is None:
                raise KaggleError(chosen.reason + ("; " + "; ".join(notes) if notes else ""))
            lock = LegLock(rec.path)
            if not lock.acquire():  # a follower (or another start) is already on this run
                raise KaggleError(t("этот прогон уже отправляется на Kaggle", "this run is already being sent to Kaggle"))
            try:
                self.launch(rec, chosen, bundles, account, allot)
            except (PushRefused, AuthError) as e:
                if isinstance(e, AuthError):
                    self.store.set_key_status(chosen.username, ACCOUNT_INVALID, str(e))
                if account != "auto":
                    self.store.update_leg(run_id, state="failed", message=str(e), ended_at=time.time())
                    raise
                tried.add(chosen.username)
                notes.append(str(e))
                self._message(run_id, str(e) + t(" — пробую следующий аккаунт", " — trying the next account"))
                continue
            except (NetworkDown, Transient) as e:
                leg = self.store.leg(run_id)
                if leg is None or leg["state"] not in ("uploading", "pushing"):
                    raise
                # Kaggle cannot be reached (or keeps failing) now: the run is not failed; its
                # follower uploads and pushes when Kaggle answers (after a push cut off, it
                # first asks whether the kernel exists), and «Остановить» still stops it.
                self._message(run_id, t(f"{e} Жду и повторяю.", f"{e} Waiting and retrying."))
            except BaseException as e:
                # The caller shows the failure; no follower may pick this leg up and push later.
                if self.store.leg(run_id) is not None:
                    self.store.update_leg(run_id, state="failed", message=str(e), ended_at=time.time())
                raise
            finally:
                lock.release()
            self.ensure_follower(run_id)
            return

    def launch(self, rec: Any, chosen: Pick, bundles: list[datasets.Bundle], choice: str,
               allot_min: float | None = None) -> None:
        user = chosen.username
        assert user is not None
        by_kind = {b.kind: b for b in bundles}
        ckpt = by_kind.get("checkpoint")
        values = dict(
            run_dir=str(rec.path), chain_id=rec.chain_id, leg=rec.leg, account=user, account_choice=choice,
            pick_reason=chosen.reason, kernel_slug=kernel.kernel_slug(rec.id), state="uploading",
            limit_min=chosen.limit_min, allot_min=allot_min, code_hash=by_kind["code"].content_hash,
            data_hash=by_kind["data"].content_hash, checkpoint_hash=ckpt.content_hash if ckpt else None,
        )
        if self.store.leg(rec.id) is None:
            self.store.add_leg(run_id=rec.id, **values)
        else:
            self.store.update_leg(rec.id, **values)
        self.registry.update(rec.id, target_account=user)
        self._status(rec.id, st.UPLOADING, chosen.reason)
        client = self.accounts.client(user)
        say = lambda msg: self._status(rec.id, st.UPLOADING, msg)  # noqa: E731
        refs = tuple(datasets.ensure(client, self.store, b, say, poll_s=max(0.05, self.settings.poll_s))
                     for b in bundles)
        self._push(rec.id, client, refs)

    def _plan(self, leg: dict[str, Any], refs: tuple[str, ...]) -> kernel.KernelPlan:
        rec = self.registry.get(leg["run_id"])
        config = rec.config()
        resume = config.get("resume_from")
        return kernel.KernelPlan(
            leg["account"], leg["kernel_slug"], config, leg["code_hash"], leg["data_hash"],
            leg["checkpoint_hash"] or "", Path(resume).name if resume else "", leg["limit_min"], refs)

    def _push(self, run_id: str, client: AccountClient, refs: tuple[str, ...]) -> None:
        leg = self.store.leg(run_id) or {}
        if leg.get("stop_requested_at") or self.registry.get(run_id).stop_requested_at:
            # «Остановить» while uploading: nothing runs on Kaggle yet, so nothing is pushed.
            message = t("остановлен до отправки ядра: на Kaggle ничего не запущено",
                        "stopped before the kernel was pushed: nothing runs on Kaggle")
            self.store.update_leg(run_id, state="done", end_reason="stopped", message=message, ended_at=time.time())
            self._status(run_id, st.STOPPED, message)
            return
        leg = self.store.update_leg(run_id, state="pushing")
        plan = self._plan(leg, refs)
        with tempfile.TemporaryDirectory(prefix="ternit-kernel-") as tmp:
            kernel.write_folder(plan, Path(tmp))
            resp = client.push(Path(tmp))
        url = getattr(resp, "url", "") or ""
        self.store.update_leg(run_id, state="pushed", kernel_ref=plan.ref, kernel_url=url,
                              kernel_version=getattr(resp, "version_number", None), pushed_at=time.time())
        self.registry.set_kernel_ref(run_id, plan.ref)
        self._status(run_id, st.QUEUED, t(f"ядро отправлено: {url or plan.ref}", f"kernel pushed: {url or plan.ref}"))

    def _refs(self, leg: dict[str, Any]) -> tuple[str, ...]:
        held = {d.content_hash: d.ref for d in self.store.holdings(leg["account"])}
        hashes = [leg["code_hash"], leg["data_hash"]] + ([leg["checkpoint_hash"]] if leg["checkpoint_hash"] else [])
        missing = [h for h in hashes if h not in held]
        if missing:
            raise KaggleError(t("датасеты для ядра не найдены в состоянии", "the kernel's datasets are not in the state"))
        return tuple(held[h] for h in hashes)

    # -- following ------------------------------------------------------------------------------
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
            worker = KaggleRuns(self.registry, self.accounts.creds, self.settings)
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

    def follow_leg(self, run_id: str) -> str | None:
        """Drive one leg to its end; returns the next leg's run id when the chain goes on."""
        self._current_run = run_id
        errors = 0
        while not self._stop.is_set():
            leg = self.store.leg(run_id)
            assert leg is not None
            state = leg["state"]
            try:
                if state in ("planned", "uploading"):
                    self._redo_upload(leg)
                elif state == "pushing":
                    self._recover_push(leg)
                elif state in ("pushed", "running"):
                    self._watch(leg)
                elif state == "downloading":
                    return self._finish(leg)
                else:
                    return leg.get("next_run_id")
            except (NetworkDown, Transient, GlobalTokenSet) as e:
                # A global token set mid-run: the kernel goes on; following waits until
                # it is removed rather than asking Kaggle as someone else.
                self._message(run_id, t(f"{e} Жду и повторяю; чекпоинты не теряются.",
                                        f"{e} Waiting and retrying; no checkpoint is lost."))
                self._sleep(max(self.settings.poll_s, 0.05) * 4)
            except KaggleError as e:
                # While a kernel runs, one odd answer must not orphan it: retry a while.
                errors += 1
                if state in ("pushed", "running", "downloading") and errors < FOLLOW_ERRORS_TOLERATED:
                    self._message(run_id, t(f"{e} Повторю попытку.", f"{e} Will try again."))
                    self._sleep(max(self.settings.poll_s, 0.05) * 4)
                    continue
                self.store.update_leg(run_id, state="failed", message=str(e), ended_at=time.time())
                self._status(run_id, st.FAILED, str(e))
                return None
            else:
                errors = 0
        return None

    def _redo_upload(self, leg: dict[str, Any]) -> None:
        rec = self.registry.get(leg["run_id"])
        bundles = self.bundles(rec.config())
        client = self.accounts.client(leg["account"])
        refs = tuple(datasets.ensure(client, self.store, b, poll_s=max(0.05, self.settings.poll_s)) for b in bundles)
        self._push(leg["run_id"], client, refs)

    def _recover_push(self, leg: dict[str, Any]) -> None:
        """The lab stopped between 'pushing' and 'pushed': ask Kaggle before pushing again."""
        client = self.accounts.client(leg["account"])
        ref = f"{leg['account']}/{leg['kernel_slug']}"
        try:
            client.kernel_status(ref)
            exists = True
        except (NotFound, AuthError):
            client.quota()  # the key works, so the kernel is simply not there
            exists = False
        if exists:
            self.store.update_leg(leg["run_id"], state="pushed", kernel_ref=ref, pushed_at=time.time())
            self.registry.set_kernel_ref(leg["run_id"], ref)
        else:
            self._push(leg["run_id"], client, self._refs(leg))

    def _watch(self, leg: dict[str, Any]) -> None:
        run_id = leg["run_id"]
        client = self.accounts.client(leg["account"])
        ref = leg["kernel_ref"]
        status, failure = client.kernel_status(ref)
        if status == "QUEUED" or status == "NEW_SCRIPT":
            rec = self.registry.get(run_id)
            if rec.status != st.QUEUED:
                self._status(run_id, st.QUEUED)
            self._sleep(self.settings.poll_s)
            return
        final = status in FINAL_KERNEL
        if not final and leg["state"] != "running":
            self.store.update_leg(run_id, state="running", kernel_status=status)
        rec = self.registry.get(run_id)
        if rec.status != st.RUNNING_KAGGLE and not final:
            self._status(run_id, st.RUNNING_KAGGLE, leg.get("kernel_url") or ref)
        sink = follow.RunSink(Path(leg["run_dir"]))
        try:
            self._stream(leg, client, sink, final, status, failure)
        finally:
            sink.close()

    def _stream(self, leg: dict[str, Any], client: AccountClient, sink: follow.RunSink, final: bool,
                status: str, failure: str) -> None:
        run_id, ref = leg["run_id"], leg["kernel_ref"]
        done = leg["log_lines_done"]

        def record(count: int) -> None:
            self.store.update_leg(run_id, log_lines_done=count)

        try:
            follow.follow(client.log_events(ref), done, sink, record, final=final, stop=self._stop.is_set)
        except (NetworkDown, Transient):
            raise
        except Exception as e:  # a stream cut mid-way, or no stream for this kernel (yet)
            self._message(run_id, t(f"поток журнала недоступен ({_brief(e)}); переподключаюсь",
                                    f"the log stream is unavailable ({_brief(e)}); reconnecting"))
            if not final:
                self._sleep(self.settings.poll_s)
                return
            # The kernel has ended: its outputs carry events.jsonl, so go on to the download.
        if self._stop.is_set():
            return
        if final:
            self.store.update_leg(run_id, state="downloading", kernel_status=status, message=failure or None)
            self._status(run_id, st.DOWNLOADING, t("скачивание результатов", "downloading the outputs"))
        else:
            self._sleep(self.settings.poll_s)

    # -- the end of a leg -----------------------------------------------------------------------
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

    def _continue(self, rec: Any, leg: dict[str, Any], checkpoint: Path) -> tuple[str | None, str]:
        """Start the next leg of the chain on an account with quota (Auto, or the named
        account while it has quota). Returns (next run id or None, a note for the user)."""
        config = rec.config()
        config["resume_from"] = str(checkpoint)
        # «Лимит, мин» is the run's allotment, not each leg's: the next leg gets what the
        # quota-cut one left of it (its kernel ran to its own limit, setup included).
        left = leg_allotment(leg, config) - float(leg.get("limit_min") or 0.0)
        if left < MIN_LEG_MIN:
            return None, t(f"лимит прогона исчерпан (осталось {left:.1f} мин); продолжите кнопкой «Продолжить»",
                           f"the run's limit is used up ({left:.1f} min left); continue it with «Продолжить»")
        choice = leg.get("account_choice") or "auto"
        possible = self.choose(config, "auto", Want(), set(), left)
        if possible.username is None:  # no leg is created that could not start
            return None, t(f"Продолжить негде: {possible.reason}. Позже нажмите «Продолжить».",
                           f"Nowhere to continue: {possible.reason}. Press «Продолжить» (Continue) later.")
        last_error = ""
        try:
            nxt = self.registry.create_leg(rec.id, config)
        except Exception as e:  # noqa: BLE001
            return None, t(f"следующий этап не создан: {e}", f"the next leg was not created: {e}")
        for attempt_choice in ([choice, "auto"] if choice != "auto" else ["auto"]):
            try:
                self.start(nxt.id, attempt_choice, left)
                return nxt.id, t(f"Продолжение на Kaggle: этап {nxt.leg}, {left:.0f} мин, оставшихся от лимита",
                                 f"Continuing on Kaggle: leg {nxt.leg}, for the {left:.0f} min left of the limit")
            except (NetworkDown, Transient):
                raise
            except KaggleError as e:
                last_error = str(e)
                continue
        self._status(nxt.id, st.FAILED, last_error)
        return nxt.id, t(f"Продолжить негде: {last_error}", f"Nowhere to continue: {last_error}")

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


def take_checkpoint(run_dir: Path, out: Path, events: list[dict[str, Any]]) -> tuple[str, str | None, str | None]:
    """Copy the newest checkpoint the events name into RUN_DIR/checkpoints, hash-checked."""
    ckpts = [e for e in events if e.get("event") == "checkpoint" and e.get("sha256")]
    if not ckpts:
        return "", None, None
    last = ckpts[-1]
    name = Path(str(last.get("path", ""))).name
    src = out / "run" / "checkpoints" / name
    dst_dir = run_dir / "checkpoints"
    dst = dst_dir / name
    if dst.is_file() and sha256_file(dst) == last["sha256"]:
        return "", str(dst), last["sha256"]
    if not src.is_file():
        return t(f"Чекпоинт {name} не пришёл в результатах ядра.",
                 f"Checkpoint {name} is missing from the kernel's outputs."), None, None
    got = sha256_file(src)
    if got != last["sha256"]:
        return t(f"Чекпоинт {name} повреждён при скачивании (SHA-256 не совпал); файл оставлен в outputs/.",
                 f"Checkpoint {name} was damaged in the download (SHA-256 mismatch); the file is left in outputs/."), None, None
    dst_dir.mkdir(parents=True, exist_ok=True)
    tmp = dst_dir / f".{name}.tmp"
    shutil.copyfile(src, tmp)
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    # The hash the trainer would have stored beside it (sha256sum format), before the name:
    # a continuation checks the copy against it like any local checkpoint.
    atomic_write_text(dst_dir / f"{name}.sha256", f"{got}  {name}\n")
    os.replace(tmp, dst)
    atomic_write_text(dst_dir / "latest", name + "\n")
    return "", str(dst), got


def _brief(e: BaseException) -> str:
    text = str(e).splitlines()[0] if str(e) else ""
    return f"{type(e).__name__}: {text[:160]}" if text else type(e).__name__


def _log_tail(path: Path, lines: int = 5) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    keep = [ln for ln in text.splitlines() if ln.strip() and not follow.is_event_line(ln)]
    return " | ".join(keep[-lines:])[-800:]
