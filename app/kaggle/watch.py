"""Following one leg to its end (in its follower thread): kernel status → log stream
(de-duplicated) → the run's events.jsonl → the outputs (app/kaggle/outputs.py). Network
trouble never fails a run: the follower says it is waiting and tries again. LegWatch is a
part of KaggleRuns (app/kaggle/runner.py).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..base import run_status as st
from ..base.i18n import t
from ..base.numbers import duration_text
from ..base.stored_text import both
from . import follow
from .client import AccountClient
from .errors import KaggleError, NetworkDown, NotFound, Stalled, Transient

log = logging.getLogger(__name__)

FINAL_KERNEL = ("COMPLETE", "ERROR", "CANCEL_REQUESTED", "CANCEL_ACKNOWLEDGED")

FOLLOW_ERRORS_TOLERATED = 20  # consecutive odd answers while following before the leg is failed
# A kernel Kaggle says is not there (403/404) after it answered for it once, or this long
# after its push, is deleted, not late to appear: the leg ends with one line instead of being
# waited on.
KERNEL_APPEARS_WITHIN_S = 120.0


class LegWatch:
    """The state machine of a leg being followed (a part of KaggleRuns)."""

    registry: Any
    store: Any
    accounts: Any
    settings: Any
    _stop: threading.Event
    _sleep: Callable[[float], None]

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
            except (NetworkDown, Transient) as e:
                self._message(run_id, t(f"{e} Жду и повторяю; чекпоинты не теряются.",
                                        f"{e} Waiting and retrying; no checkpoint is lost."))
                self._sleep(max(self.settings.poll_s, 0.05) * 4)
            except NotFound as e:
                if state in ("pushed", "running") and not self._kernel_gone(leg):
                    self._sleep(max(self.settings.poll_s, 0.05))
                    continue
                message = self._gone_message(leg, e)
                self.store.update_leg(run_id, state="failed", message=message, ended_at=time.time())
                self._status(run_id, st.FAILED, message)
                return None
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

    def _watch(self, leg: dict[str, Any]) -> None:
        run_id = leg["run_id"]
        client = self.accounts.client(leg["account"])
        ref = leg["kernel_ref"]
        status, failure = client.kernel_status(ref)
        if status != leg.get("kernel_status"):  # Kaggle has seen the kernel (a later 403 means deleted)
            leg = self.store.update_leg(run_id, kernel_status=status)
        if status == "QUEUED" or status == "NEW_SCRIPT":
            self._status(run_id, st.QUEUED, self._queued_message(leg))
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
        except Stalled:  # silent too long: reopened at once; the replay skips what was read
            log.info("the log stream of %s went silent; reopening it", run_id)
            self._message(run_id, t(
                f"журнал ядра молчал {duration_text(self.settings.stall_s, 'ru')} — переподключаюсь",
                f"the kernel's log was silent for {duration_text(self.settings.stall_s, 'en')} — reconnecting"))
            return
        except Exception as e:  # a stream cut mid-way, or no stream for this kernel (yet)
            log.info("the log stream of %s is unavailable: %s", run_id, _brief(e))
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


    def _queued_message(self, leg: dict[str, Any]) -> str:
        """«в очереди Kaggle 3 мин (с 14:03)», and how to cancel."""
        since = leg.get("pushed_at") or time.time()
        at = time.strftime("%H:%M", time.localtime(since))
        url = leg.get("kernel_url") or leg.get("kernel_ref") or ""
        # «{waited}» is counted by the reader to its own now (i18n.both's since), not frozen
        # at this poll's «0 с».
        if leg.get("stop_requested_at"):
            return both(f"в очереди Kaggle {{waited}} (с {at}); остановка запрошена — продолжения не будет, само "
                        f"ядро отмените: {url} → Stop session",
                        f"in Kaggle's queue for {{waited}} (since {at}); stop asked — no next leg; cancel the "
                        f"kernel itself: {url} → Stop session", since=since)
        return both(f"в очереди Kaggle {{waited}} (с {at}); отменить: «Остановить», а само ядро — {url} → Stop "
                    "session",
                    f"in Kaggle's queue for {{waited}} (since {at}); to cancel: “Stop”, and the kernel "
                    f"itself: {url} → Stop session", since=since)

    @staticmethod
    def _kernel_gone(leg: dict[str, Any]) -> bool:
        pushed = leg.get("pushed_at")
        return bool(leg.get("kernel_status")) or pushed is None or time.time() - float(pushed) > KERNEL_APPEARS_WITHIN_S

    @staticmethod
    def _gone_message(leg: dict[str, Any], e: BaseException) -> str:
        ref = leg.get("kernel_ref") or leg.get("kernel_slug")
        return t(f"ядра {ref} больше нет на Kaggle (удалено?): прогон остановлен; чекпоинты, уже скачанные, "
                 f"целы — «Продолжить» начнёт новое ядро ({e})",
                 f"kernel {ref} is no longer on Kaggle (deleted?): the run is stopped; checkpoints already "
                 f"downloaded are intact — “Continue” starts a new kernel ({e})")


def _brief(e: BaseException) -> str:
    text = str(e).splitlines()[0] if str(e) else ""
    return f"{type(e).__name__}: {text[:160]}" if text else type(e).__name__
