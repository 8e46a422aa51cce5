"""Kaggle credentials: kept only in the lab's own credentials file, owner-only, written
atomically.

Two kinds, per account (Kaggle's settings page, kaggle.com/settings → API, docs/KAGGLE.md):
an API token ("Generate New Token"; sent as `Authorization: Bearer`, starts with KGAT_)
and a legacy key ("Create Legacy API Key": kaggle.json with username and key, sent as HTTP
Basic). A token sent as a key is refused with 401, so each is stored as what it is.

The file is `config_dir()/kaggle_credentials.json` with mode 0600 (on Windows, where a mode
means nothing, the user profile's access list guards it: docs/KAGGLE.md). It is the one place a
secret lives: the SQLite state keeps only public details (username, quota, key status), and
nothing else the lab writes (logs, run folders, kernels, datasets) ever carries one.
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
TOKEN_PREFIX = "KGAT_"  # Kaggle's API tokens (kaggle-cli PR #1005 reads a KGAT_ "key" as a token)
_USERNAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_\-]{0,63}$")


class CredentialsError(ValueError):
    """A key, a token or a credentials file that cannot be used; the message says what to do."""


@dataclass(frozen=True)
class Credential:
    """One account's secret: a legacy `key` or an API `token` (exactly one of them)."""

    username: str
    key: str = field(default="", repr=False)    # never printed: repr() shows only the username
    token: str = field(default="", repr=False)

    @property
    def kind(self) -> str:
        """"token" (Bearer) or "key" (Basic)."""
        return "token" if self.token else "key"

    @property
    def secret(self) -> str:
        return self.token or self.key

    def config_values(self) -> dict[str, str]:
        """What the kaggle client's KaggleApi.config_values takes for this account."""
        return {"username": self.username, self.kind: self.secret}

    def __str__(self) -> str:
        return self.username


def _username(username: str) -> str:
    username = (username or "").strip()
    if not _USERNAME.match(username):
        raise CredentialsError(t(
            f"имя пользователя Kaggle {username!r} не похоже на настоящее: латиница, цифры, «-» и «_»",
            f"Kaggle username {username!r} does not look right: Latin letters, digits, '-' and '_'",
        ))
    return username


def _damaged(secret: str) -> bool:
    return not secret or any(c.isspace() for c in secret) or len(secret) < 8


def check(username: str, key: str) -> Credential:
    """Validate a username and a secret as typed or read from kaggle.json. A KGAT_ value is
    an API token whatever field it came in (sent as a key it would be refused)."""
    username, key = _username(username), (key or "").strip()
    if key.startswith(TOKEN_PREFIX):
        return check_token(username, key)
    if _damaged(key):
        raise CredentialsError(t(
            "ключ API пуст или повреждён: скопируйте его из kaggle.json (kaggle.com → Settings → API → "
            "Create Legacy API Key) или добавьте токен API (Generate New Token)",
            "the API key is empty or damaged: copy it from kaggle.json (kaggle.com → Settings → API → "
            "Create Legacy API Key) or add an API token (Generate New Token)",
        ))
    return Credential(username, key=key)


def check_token(username: str, token: str) -> Credential:
    """Validate a username and an API token (kaggle.com → Settings → API → Generate New Token)."""
    username, token = _username(username), (token or "").strip()
    if _damaged(token):
        raise CredentialsError(t(
            "токен API пуст или повреждён: скопируйте его целиком со страницы kaggle.com → Settings → API "
            "(Generate New Token) или из файла access_token",
            "the API token is empty or damaged: copy it whole from kaggle.com → Settings → API "
            "(Generate New Token) or from the access_token file",
        ))
    return Credential(username, token=token)


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


def read_token_file(username: str, path: Path) -> Credential:
    """An API token from a file such as Kaggle's `access_token` (the token alone, one line)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise CredentialsError(t(f"не удалось прочитать {path}: {getattr(e, 'strerror', None) or e}",
                                 f"cannot read {path}: {getattr(e, 'strerror', None) or e}")) from e
    return check_token(username, text.strip())


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
                if item.get("token"):
                    cred = check_token(item.get("username", ""), item["token"])
                else:
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
                f"аккаунт {username!r} не добавлен: ternit kaggle add-account --username {username} --token -",
                f"account {username!r} is not added: ternit kaggle add-account --username {username} --token -",
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
        data = {"version": 1, "accounts": [{"username": c.username, c.kind: c.secret}
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
    """Where a global Kaggle token is set up for Kaggle's own command line: the variable
    KAGGLE_API_TOKEN or ~/.kaggle/access_token(.txt). The lab's clients never read them
    (app/kaggle/sdk.py); they are only named to the user."""
    found = []
    if os.environ.get("KAGGLE_API_TOKEN"):
        found.append("KAGGLE_API_TOKEN")
    for name in ("access_token", "access_token.txt"):
        p = Path(os.path.expanduser("~/.kaggle")) / name
        try:
            if p.is_file() and p.read_text(encoding="utf-8").strip():
                found.append(str(p))
        except (OSError, UnicodeDecodeError):
            pass
    return found


def global_token_note() -> str | None:
    """One line for the user when a global token is set, else None."""
    found = global_token_sources()
    if not found:
        return None
    where = ", ".join(found)
    return t(
        f"Задан общий токен Kaggle ({where}): его читает командная строка kaggle. Лаборатория его не "
        "использует — каждый её аккаунт работает со своим ключом или токеном.",
        f"A global Kaggle token is set ({where}): Kaggle's own command line reads it. The lab does not "
        "use it — each of its accounts works with its own key or token.",
    )
