"""«Машина» in the run form: the accounts with their quota, and the one-line «Авто» answer.

Both read only the lab's state (last known quota, what each account holds, cached content
hashes), never the network, so the form can ask on every change.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..base.i18n import t
from . import settings as kaggle_settings
from .accounts import Accounts, AccountView
from .datasets import (
    cached_lean_wheel,
    checkpoint_hash_cached,
    code_bundle,
    data_hash_cached,
    needs_wheel,
    wheel_cache_dir,
)
from .picker import Pick, Want, capacity, pick
from .store import KaggleStore

log = logging.getLogger(__name__)
_auto_failures: set[str] = set()  # what «Авто» failed with, logged once each


def account_views(store: KaggleStore | None = None) -> list[AccountView]:
    own = store is None
    store = store or KaggleStore()
    try:
        return Accounts(store).views()
    finally:
        if own:
            store.close()


@dataclass(frozen=True)
class Account:
    """A Kaggle account as the form's «Машина» lists it (public details only, never a key)."""

    name: str
    quota_hours: float | None = None
    valid: bool = True


def accounts_for_form() -> list[Account]:
    """The accounts for «Машина»: name, GPU hours left, whether the key works."""
    out = []
    for v in account_views():
        hours = v.quota.remaining_s / 3600.0 if v.quota else None
        out.append(Account(v.username, hours, v.usable))
    return out


def auto_pick(config: dict[str, Any], store: KaggleStore | None = None) -> Pick:
    """What «Авто» would choose now for this run.json, from the state alone."""
    own = store is None
    store = store or KaggleStore()
    try:
        margin = kaggle_settings.load().margin_min
        cands = capacity(store, margin)
        data_dir = (config.get("data") or {}).get("dir") or ""
        resume = config.get("resume_from") or ""
        want = Want(
            data=(data_hash_cached(Path(data_dir), store) or "") if data_dir else "",
            code=_code_hash(needs_wheel(config)),
            checkpoint=(checkpoint_hash_cached(Path(resume), store) or "") if resume else "",
        )
        limit = float((config.get("training") or {}).get("limit_min", 630))
        return pick(cands, limit, margin, want)
    finally:
        if own:
            store.close()


def auto_explanation(config: dict[str, Any], store: KaggleStore | None = None) -> str:
    """One line for the form: which account «Авто» would pick now, and why."""
    try:
        return auto_pick(config, store).reason
    except Exception as e:  # the form must keep working whatever the state says
        if str(e) not in _auto_failures:  # asked at every form refresh: logged once
            _auto_failures.add(str(e))
            log.warning("«Авто» could not pick a Kaggle account", exc_info=True)
        return t(f"Авто: не удалось оценить ({e})", f"Auto: cannot tell ({e})")


_code_hash_cache: dict[bool, str] = {}


def _code_hash(lean: bool = False) -> str:
    """The hash of the code dataset a run would upload: a lean run's carries the wheel too,
    so an account holding it is told apart from one holding only the trainer's code. Where
    the wheel is not in the cache yet, nobody can hold that bundle: no hash (nothing
    downloaded for a form's refresh)."""
    if lean not in _code_hash_cache:
        try:
            if lean and cached_lean_wheel(wheel_cache_dir()) is None:
                return ""
            _code_hash_cache[lean] = code_bundle(lean=lean).content_hash
        except Exception:  # no hash: the form shows no upload estimate, nothing breaks
            log.warning("the code bundle's hash could not be computed", exc_info=True)
            _code_hash_cache[lean] = ""
    return _code_hash_cache[lean]
