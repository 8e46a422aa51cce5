"""The lab's Kaggle accounts: add, test, refresh quota, remove, and what each one holds.

The key goes to the credentials file; the state (SQLite) gets the username, whether the key
works (and why not), the quota and its refresh time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..base.i18n import t
from .backoff import Backoff
from .client import AccountClient
from .credentials import Credential, CredentialStore, read_kaggle_json
from .errors import AuthError, KaggleError, NetworkDown, Transient
from .quota import Quota
from .store import ACCOUNT_INVALID, ACCOUNT_UNKNOWN, ACCOUNT_UNREACHABLE, DatasetRow, KaggleStore

ClientFactory = Callable[[Credential], AccountClient]

# Keys this process replaced and Kaggle has not judged yet, with the account's status then:
# if the new key is refused at its first check, the old one comes back (a typo must not lose
# a key that worked). Per process, not per Accounts: the dialog checks in its own thread.
_replaced: dict[str, tuple[Credential, str, str | None]] = {}
_replaced_lock = threading.Lock()


@dataclass
class AccountView:
    """One account as the dialog, the CLI and the «Машина» list show it."""

    username: str
    key_status: str  # ok | invalid | unknown | unreachable | missing (no key in the file)
    key_reason: str | None
    quota: Quota | None
    holds: list[DatasetRow] = field(default_factory=list)
    kernels: list[dict] = field(default_factory=list)
    auth: str = ""  # "token" (an API token) or "key" (a legacy key); "" when none is stored

    @property
    def usable(self) -> bool:
        return self.key_status not in (ACCOUNT_INVALID, "missing")

    @property
    def remaining_s(self) -> float:
        return self.quota.remaining_s if self.quota else 0.0


@dataclass
class CheckResult:
    username: str
    ok: bool
    message: str
    quota: Quota | None = None


def untracked(username: str) -> str:
    """What a run on a removed account shows: it is not followed, why, and the way back."""
    return t(f"не отслеживается: аккаунт {username} удалён — ядро на Kaggle идёт и тратит его квоту; "
             f"добавьте аккаунт снова (ternit kaggle add-account --username {username}), и лаборатория "
             "продолжит следить и скачает результаты",
             f"not followed: account {username} was removed — the kernel goes on on Kaggle, spending its "
             f"quota; add the account again (ternit kaggle add-account --username {username}) and the lab "
             "follows it again and downloads its outputs")


class Accounts:
    def __init__(self, store: KaggleStore, creds: CredentialStore | None = None,
                 client_factory: ClientFactory | None = None) -> None:
        self.store = store
        self.creds = creds or CredentialStore()
        self._factory = client_factory or (lambda c: AccountClient(c, Backoff(attempts=3, base_s=1.0)))

    def client(self, username: str) -> AccountClient:
        return self._factory(self.creds.get(username))

    # -- adding and removing ------------------------------------------------------------------
    def add(self, *creds: Credential) -> list[str]:
        before = self.creds.load()
        rows = {a.username: a for a in self.store.accounts()}
        self.creds.add(*creds)
        for c in creds:
            self.store.ensure_account(c.username)
            old = before.get(c.username)
            if old is not None and old.secret != c.secret:
                row = rows.get(c.username)
                with _replaced_lock:
                    _replaced[c.username] = (old, row.key_status if row else ACCOUNT_UNKNOWN,
                                             row.key_reason if row else None)
                # The old key's verdict says nothing of the new one.
                self.store.set_key_status(c.username, ACCOUNT_UNKNOWN)
        return [c.username for c in creds]

    def add_json(self, *files: Path) -> list[str]:
        return self.add(*(read_kaggle_json(Path(f)) for f in files))

    def in_flight(self, username: str) -> list[str]:
        """The runs whose Kaggle legs go on this account now (its kernels spend its quota)."""
        return [leg["run_id"] for leg in self.store.legs_in_flight() if leg["account"] == username]

    def remove(self, username: str) -> bool:
        """Forget the account and its key. Its runs in flight are marked «не отслеживается:
        аккаунт удалён» with the way back: their kernels go on spending the account's quota,
        and adding the account again resumes following them."""
        busy = self.in_flight(username)
        removed = self.creds.remove(username)
        self.store.forget_account(username)
        note = untracked(username)
        for run_id in busy:
            self.store.state.execute("UPDATE runs SET last_message = ?, updated_at = ? WHERE id = ?",
                                     (note, time.time(), run_id))
        return removed

    # -- checking -----------------------------------------------------------------------------
    def check(self, username: str) -> CheckResult:
        """Ask Kaggle for the account's quota: the one call that proves the key or token (a
        missing dataset or kernel says nothing about it) and refreshes the numbers."""
        try:
            client = self.client(username)
            q = client.quota()
        except AuthError as e:
            with _replaced_lock:
                replaced = _replaced.pop(username, None)
            if replaced is not None:
                old, status, reason = replaced
                self.creds.add(old)
                self.store.set_key_status(username, status, reason)
                return CheckResult(username, False, t(
                    f"новый ключ не принят ({e}); прежний ключ оставлен",
                    f"the new key was refused ({e}); the previous key is kept"))
            self.store.set_key_status(username, ACCOUNT_INVALID, str(e))
            return CheckResult(username, False, str(e))
        except (NetworkDown, Transient) as e:
            self.store.set_key_status(username, ACCOUNT_UNREACHABLE, str(e))
            return CheckResult(username, False, str(e))
        except KaggleError as e:
            return CheckResult(username, False, str(e))
        with _replaced_lock:
            _replaced.pop(username, None)
        self.store.set_quota(username, q)
        return CheckResult(username, True, t("ключ работает", "the key works"), q)

    def check_all(self) -> list[CheckResult]:
        return [self.check(name) for name in self.creds.names()]

    # -- views --------------------------------------------------------------------------------
    def views(self) -> list[AccountView]:
        """Every account (from the credentials file and the state), from the state alone:
        no network, fast enough for the form's every change."""
        creds = self.creds.load()
        rows = {a.username: a for a in self.store.accounts()}
        out = []
        for name in sorted(set(creds) | set(rows)):
            row = rows.get(name)
            status = row.key_status if row else "unknown"
            if name not in creds:
                status = "missing"
            out.append(AccountView(
                name, status, row.key_reason if row else None, row.quota if row else None,
                self.store.holdings(name), self.store.legs(name)[:10], creds[name].kind if name in creds else "",
            ))
        return out


def leg_state_text(leg: dict) -> str:
    """A kernel's line in the accounts' lists: its leg's state, and for one Kaggle ended
    (ERROR) Kaggle's own words instead of «done»."""
    if leg.get("kernel_status") == "ERROR":
        said = (leg.get("message") or "").strip().rstrip(".")
        return t(f"Kaggle завершил с ошибкой: {said}" if said else "Kaggle завершил с ошибкой",
                 f"Kaggle ended it with an error: {said}" if said else "Kaggle ended it with an error")
    return str(leg.get("state") or "")


def auth_text(view: AccountView) -> str:
    """What the lab holds for the account: «токен API» or «устаревший ключ»."""
    return {"token": t("токен API", "API token"), "key": t("устаревший ключ", "legacy key")}.get(view.auth, "")


def key_status_text(view: AccountView) -> str:
    return {
        "ok": t("ключ работает", "key works"),
        "invalid": t("ключ не принят", "key refused"),
        "unknown": t("ещё не проверен", "not checked yet"),
        "unreachable": t("Kaggle недоступен", "Kaggle unreachable"),
        "missing": t("нет ключа в файле ключей", "no key in the key file"),
    }.get(view.key_status, view.key_status)
