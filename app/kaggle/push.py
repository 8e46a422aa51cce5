"""Starting a leg on Kaggle: upload what the account lacks (code, data, the checkpoint when
continuing) as private datasets, then push the kernel. Every step is recorded in
kaggle_legs first, so a lab stopped mid-way uploads or pushes nothing twice: a leg found
'pushing' asks Kaggle whether its kernel exists before pushing again. LegPush is a part of
KaggleRuns (app/kaggle/runner.py).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from ..base import run_status as st
from ..base.i18n import t
from . import datasets, kernel
from .chain import run_limit_min
from .client import AccountClient
from .datasets import Cancelled
from .errors import (
    AuthError,
    KaggleError,
    NetworkDown,
    NotFound,
    PushRefused,
    Transient,
)
from .followers import LegLock
from .picker import Pick, Want
from .room import output_room


class LegPush:
    """Uploading a leg's datasets and pushing its kernel (a part of KaggleRuns)."""

    registry: Any
    store: Any
    accounts: Any
    settings: Any

    def start(self, run_id: str, account: str = "auto", allot_min: float | None = None) -> None:
        """Upload and push the leg `run_id`; `allot_min` is what is left of the run's limit
        for it (None: the whole «Лимит, мин» — a first leg)."""
        rec = self.registry.get(run_id)
        config = rec.config()
        room = output_room(config, self.settings.output_bytes)
        if not room.fits:  # before anything is uploaded: its checkpoints cannot come back
            raise KaggleError(room.text())
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
            except Cancelled as e:  # «Остановить» while Kaggle processed a dataset
                self._stopped_before_push(run_id, str(e))
                return
            except (PushRefused, AuthError) as e:
                if isinstance(e, AuthError):
                    # Only the quota call judges a key: it marks the account refused (or not).
                    self.accounts.check(chosen.username)
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
        refs = tuple(datasets.ensure(client, self.store, b, say, poll_s=max(0.05, self.settings.poll_s),
                                     cancelled=lambda: self._stop_asked(rec.id)) for b in bundles)
        self._push(rec.id, client, refs)

    def _stop_asked(self, run_id: str) -> bool:
        leg = self.store.leg(run_id) or {}
        return bool(leg.get("stop_requested_at") or self.registry.get(run_id).stop_requested_at)

    def _stopped_before_push(self, run_id: str, message: str) -> None:
        self.store.update_leg(run_id, state="done", end_reason="stopped", message=message, ended_at=time.time())
        self._status(run_id, st.STOPPED, message)

    def _plan(self, leg: dict[str, Any], refs: tuple[str, ...]) -> kernel.KernelPlan:
        rec = self.registry.get(leg["run_id"])
        config = rec.config()
        resume = config.get("resume_from")
        room = output_room(config, self.settings.output_bytes)
        return kernel.KernelPlan(
            leg["account"], leg["kernel_slug"], config, leg["code_hash"], leg["data_hash"],
            leg["checkpoint_hash"] or "", Path(resume).name if resume else "", leg["limit_min"], refs,
            keep_checkpoints=max(1, room.keep), run_id=rec.id)

    def _push(self, run_id: str, client: AccountClient, refs: tuple[str, ...]) -> None:
        if self._stop_asked(run_id):
            # «Остановить» while uploading: nothing runs on Kaggle yet, so nothing is pushed.
            self._stopped_before_push(run_id, t("остановлен до отправки ядра: на Kaggle ничего не запущено",
                                                "stopped before the kernel was pushed: nothing runs on Kaggle"))
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

    def _redo_upload(self, leg: dict[str, Any]) -> None:
        run_id = leg["run_id"]
        rec = self.registry.get(run_id)
        bundles = self.bundles(rec.config())
        client = self.accounts.client(leg["account"])
        say = lambda msg: self._status(run_id, st.UPLOADING, msg)  # noqa: E731
        try:
            refs = tuple(datasets.ensure(client, self.store, b, say, poll_s=max(0.05, self.settings.poll_s),
                                         cancelled=lambda: self._stop_asked(run_id)) for b in bundles)
        except Cancelled as e:
            self._stopped_before_push(run_id, str(e))
            return
        self._push(run_id, client, refs)

    def _recover_push(self, leg: dict[str, Any]) -> None:
        """The lab stopped between 'pushing' and 'pushed': ask Kaggle before pushing again."""
        client = self.accounts.client(leg["account"])
        ref = f"{leg['account']}/{leg['kernel_slug']}"
        try:
            client.kernel_status(ref)
            exists = True
        except NotFound:  # 403/404: the push never reached Kaggle
            exists = False
        if exists:
            self.store.update_leg(leg["run_id"], state="pushed", kernel_ref=ref, pushed_at=time.time())
            self.registry.set_kernel_ref(leg["run_id"], ref)
        else:
            self._push(leg["run_id"], client, self._refs(leg))
