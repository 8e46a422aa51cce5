"""The Kaggle tables of the lab's state (migration 003): public details only, never a key."""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..base.state import StateStore
from .quota import Quota

ACCOUNT_OK, ACCOUNT_INVALID, ACCOUNT_UNKNOWN, ACCOUNT_UNREACHABLE = "ok", "invalid", "unknown", "unreachable"
LEG_STATES = ("planned", "uploading", "pushing", "pushed", "running", "downloading", "done", "failed")
LEG_FINAL = ("done", "failed")


@dataclass(frozen=True)
class AccountRow:
    username: str
    added_at: float
    key_status: str
    key_reason: str | None
    checked_at: float | None
    quota: Quota | None

    @property
    def remaining_s(self) -> float:
        return self.quota.remaining_s if self.quota else 0.0


@dataclass(frozen=True)
class DatasetRow:
    account: str
    content_hash: str
    kind: str
    ref: str
    label: str | None
    bytes: int | None
    uploaded_at: float


class KaggleStore(StateStore):
    """Accounts, what they hold and the legs in flight, over the lab's State."""

    # -- accounts -------------------------------------------------------------------------
    def ensure_account(self, username: str) -> None:
        self.state.execute("INSERT OR IGNORE INTO kaggle_accounts (username, added_at) VALUES (?, ?)",
                           (username, time.time()))

    def forget_account(self, username: str) -> None:
        with self.state.transaction():
            self.state.execute("DELETE FROM kaggle_accounts WHERE username = ?", (username,))
            self.state.execute("DELETE FROM kaggle_datasets WHERE account = ?", (username,))

    def set_key_status(self, username: str, status: str, reason: str | None = None) -> None:
        self.ensure_account(username)
        self.state.execute("UPDATE kaggle_accounts SET key_status = ?, key_reason = ?, checked_at = ? "
                           "WHERE username = ?", (status, reason, time.time(), username))

    def set_quota(self, username: str, q: Quota) -> None:
        self.ensure_account(username)
        self.state.execute(
            "UPDATE kaggle_accounts SET key_status = 'ok', key_reason = NULL, checked_at = ?, quota_total_s = ?, "
            "quota_used_s = ?, quota_reserved_s = ?, quota_refresh_at = ?, quota_checked_at = ? WHERE username = ?",
            (q.checked_at, q.total_s, q.used_s, q.reserved_s, q.refresh_at, q.checked_at, username))

    def accounts(self) -> list[AccountRow]:
        rows = self.state.query("SELECT * FROM kaggle_accounts ORDER BY username")
        return [_account(r) for r in rows]

    def account(self, username: str) -> AccountRow | None:
        r = self.state.one("SELECT * FROM kaggle_accounts WHERE username = ?", (username,))
        return _account(r) if r is not None else None

    # -- datasets held ----------------------------------------------------------------------
    def dataset(self, account: str, content_hash: str) -> DatasetRow | None:
        r = self.state.one("SELECT * FROM kaggle_datasets WHERE account = ? AND content_hash = ?",
                           (account, content_hash))
        return DatasetRow(**dict(r)) if r is not None else None

    def record_dataset(self, account: str, content_hash: str, kind: str, ref: str, label: str,
                       size: int | None) -> None:
        self.state.execute(
            "INSERT OR REPLACE INTO kaggle_datasets (account, content_hash, kind, ref, label, bytes, uploaded_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)", (account, content_hash, kind, ref, label, size, time.time()))

    def drop_dataset(self, account: str, content_hash: str) -> None:
        self.state.execute("DELETE FROM kaggle_datasets WHERE account = ? AND content_hash = ?",
                           (account, content_hash))

    def holdings(self, account: str | None = None) -> list[DatasetRow]:
        if account is None:
            rows = self.state.query("SELECT * FROM kaggle_datasets ORDER BY account, uploaded_at")
        else:
            rows = self.state.query("SELECT * FROM kaggle_datasets WHERE account = ? ORDER BY uploaded_at",
                                    (account,))
        return [DatasetRow(**dict(r)) for r in rows]

    # -- legs -------------------------------------------------------------------------------
    def add_leg(self, **values: Any) -> None:
        values.setdefault("updated_at", time.time())
        cols = ", ".join(values)
        self.state.execute(f"INSERT INTO kaggle_legs ({cols}) VALUES ({', '.join('?' * len(values))})",
                           tuple(values.values()))

    def leg(self, run_id: str) -> dict[str, Any] | None:
        r = self.state.one("SELECT * FROM kaggle_legs WHERE run_id = ?", (run_id,))
        return dict(r) if r is not None else None

    def update_leg(self, run_id: str, **changes: Any) -> dict[str, Any]:
        changes["updated_at"] = time.time()
        sets = ", ".join(f"{k} = ?" for k in changes)
        self.state.execute(f"UPDATE kaggle_legs SET {sets} WHERE run_id = ?", (*changes.values(), run_id))
        leg = self.leg(run_id)
        assert leg is not None, run_id
        return leg

    def legs_in_flight(self) -> list[dict[str, Any]]:
        marks = ", ".join("?" * len(LEG_FINAL))
        rows = self.state.query(f"SELECT * FROM kaggle_legs WHERE state NOT IN ({marks}) ORDER BY updated_at",
                                LEG_FINAL)
        return [dict(r) for r in rows]

    def legs(self, account: str | None = None) -> list[dict[str, Any]]:
        if account is None:
            rows = self.state.query("SELECT * FROM kaggle_legs ORDER BY updated_at DESC")
        else:
            rows = self.state.query("SELECT * FROM kaggle_legs WHERE account = ? ORDER BY updated_at DESC",
                                    (account,))
        return [dict(r) for r in rows]

    # -- content hashes of big files ------------------------------------------------------
    def cached_sha256(self, path: Path) -> str | None:
        """The file's SHA-256 if it is cached for its current size and mtime."""
        try:
            st = os.stat(path)
        except OSError:
            return None
        r = self.state.one("SELECT size, mtime_ns, sha256 FROM kaggle_hash_cache WHERE path = ?",
                           (str(Path(path).resolve()),))
        if r is not None and r["size"] == st.st_size and r["mtime_ns"] == st.st_mtime_ns:
            return str(r["sha256"])
        return None

    def file_sha256(self, path: Path) -> str:
        """SHA-256 of a file, read once per (size, mtime) and cached in the state."""
        cached = self.cached_sha256(path)
        if cached is not None:
            return cached
        st = os.stat(path)
        digest = sha256_file(path)
        self.state.execute("INSERT OR REPLACE INTO kaggle_hash_cache (path, size, mtime_ns, sha256) VALUES (?, ?, ?, ?)",
                           (str(Path(path).resolve()), st.st_size, st.st_mtime_ns, digest))
        return digest


def sha256_file(path: Path, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(chunk), b""):
            h.update(block)
    return h.hexdigest()


def combine(parts: Iterable[tuple[str, str]]) -> str:
    """One hash over (name, sha256) pairs, order-independent."""
    h = hashlib.sha256()
    for name, digest in sorted(parts):
        h.update(f"{name}\0{digest}\n".encode())
    return h.hexdigest()


def _account(r: Any) -> AccountRow:
    q = None
    if r["quota_total_s"] is not None:
        q = Quota(r["quota_total_s"], r["quota_used_s"] or 0.0, r["quota_reserved_s"] or 0.0,
                  r["quota_refresh_at"], r["quota_checked_at"] or 0.0)
    return AccountRow(r["username"], r["added_at"], r["key_status"], r["key_reason"], r["checked_at"], q)
