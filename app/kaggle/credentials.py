"""Kaggle keys: kept only in the lab's own credentials file, owner-only, written atomically.

The file is `config_dir()/kaggle_credentials.json` with mode 0600 (on Windows, where a mode
means nothing, the user profile's access list guards it: docs/KAGGLE.md). It is the one place a
key lives: the SQLite state keeps only public details (username, quota, key status), and
nothing else the lab writes (logs, run folders, kernels, datasets) ever carries a key.
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from ..base import atomic, paths
from ..base.i18n import t

FILE_NAME = "kaggle_credentials.json"
_USERNAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_\-]{0,63}$")


class CredentialsError(ValueError):
    """A key or a credentials file that cannot be used; the message says what to do."""


@dataclass(frozen=True)
class Credential:
    username: str
    key: str = field(repr=False)  # never printed: repr() shows only the username

    def __str__(self) -> str:
        return self.username


def check(username: str, key: str) -> Credential:
    """Validate a username/key pair as typed or read from kaggle.json."""
    username = (username or "").strip()
    key = (key or "").strip()
    if not _USERNAME.match(username):
        raise CredentialsError(t(
            f"имя пользователя Kaggle {username!r} не похоже на настоящее: латиница, цифры, «-» и «_»",
            f"Kaggle username {username!r} does not look right: Latin letters, digits, '-' and '_'",
        ))
    if not key or any(c.isspace() for c in key) or len(key) < 8:
        raise CredentialsError(t(
            "ключ API пуст или повреждён: скопируйте его из kaggle.json (Settings → API → Create New Token)",
            "the API key is empty or damaged: copy it from kaggle.json (Settings → API → Create New Token)",
        ))
    return Credential(username, key)


def read_kaggle_json(path: Path) -> Credential:
    """The account in a kaggle.json file as Kaggle gives it ({"username": ..., "key": ...})."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise CredentialsError(t(f"не удалось прочитать {path}: {e.strerror}",
                                 f"cannot read {path}: {e.strerror}")) from e
    except ValueError as e:
        raise CredentialsError(t(f"{path} — не JSON; нужен kaggle.json из настроек Kaggle",
                                 f"{path} is not JSON; Kaggle's kaggle.json is needed")) from e
    if not isinstance(raw, dict) or "username" not in raw or "key" not in raw:
        raise CredentialsError(t(f"в {path} нет полей username и key",
                                 f"{path} has no username and key fields"))
    return check(str(raw["username"]), str(raw["key"]))


def default_path() -> Path:
    return paths.config_dir() / FILE_NAME


class CredentialStore:
    """The credentials file: a map username -> key, read fresh on every call (a second lab
    process may have added an account), written whole, atomically, with mode 0600."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = Path(path) if path is not None else default_path()

    def load(self) -> dict[str, Credential]:
        if not self.path.exists():
            return {}
        self._tighten()
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise CredentialsError(t(
                f"файл ключей {self.path} повреждён ({e}); удалите его и добавьте аккаунты заново",
                f"the key file {self.path} is damaged ({e}); delete it and add the accounts again",
            )) from e
        out: dict[str, Credential] = {}
        for item in raw.get("accounts", []) if isinstance(raw, dict) else []:
            try:
                cred = check(item.get("username", ""), item.get("key", ""))
            except (CredentialsError, AttributeError):
                continue
            out[cred.username] = cred
        return out

    def names(self) -> list[str]:
        return sorted(self.load())

    def get(self, username: str) -> Credential:
        found = self.load().get(username)
        if found is None:
            raise CredentialsError(t(
                f"аккаунт {username!r} не добавлен: ternit kaggle add-account --json kaggle.json",
                f"account {username!r} is not added: ternit kaggle add-account --json kaggle.json",
            ))
        return found

    def add(self, *creds: Credential) -> None:
        current = self.load()
        for c in creds:
            current[c.username] = c
        self._write(current)

    def remove(self, username: str) -> bool:
        current = self.load()
        if current.pop(username, None) is None:
            return False
        self._write(current)
        return True

    def _write(self, creds: dict[str, Credential]) -> None:
        data = {"version": 1, "accounts": [{"username": c.username, "key": c.key}
                                           for c in sorted(creds.values(), key=lambda c: c.username)]}
        # Owner-only from the first byte: the mode is set on the temporary file.
        atomic.write_json(self.path, data, mode=0o600)

    def _tighten(self) -> None:
        # A copy restored from a backup may have come back world-readable.
        if os.name == "posix":
            mode = stat.S_IMODE(self.path.stat().st_mode)
            if mode & 0o077:
                os.chmod(self.path, 0o600)


def global_token_sources() -> list[str]:
    """Where a global Kaggle token would silently override every account's own key.

    kagglesdk's HTTP client takes KAGGLE_API_TOKEN or ~/.kaggle/access_token(.txt) before
    any username/key it is given, so the lab must say so instead of running as someone else.
    """
    found = []
    if os.environ.get("KAGGLE_API_TOKEN"):
        found.append("KAGGLE_API_TOKEN")
    for name in ("access_token", "access_token.txt"):
        p = Path(os.path.expanduser("~/.kaggle")) / name
        try:
            if p.is_file() and p.read_text(encoding="utf-8").strip():
                found.append(str(p))
        except OSError:
            pass
    return found


def global_token_warning() -> str | None:
    """One line for the user when a global token is set, else None."""
    found = global_token_sources()
    if not found:
        return None
    where = ", ".join(found)
    return t(
        f"Внимание: задан общий токен Kaggle ({where}). Он подменяет ключи всех аккаунтов лаборатории: "
        "все запросы пойдут от его владельца. Удалите его, чтобы у каждого аккаунта был свой ключ.",
        f"Warning: a global Kaggle token is set ({where}). It overrides every lab account's key: "
        "all requests would go as its owner. Remove it so that each account uses its own key.",
    )
