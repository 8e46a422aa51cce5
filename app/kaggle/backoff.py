"""Retrying Kaggle calls: 429 and 5xx back off (Retry-After honoured), network errors wait.

kaggle 2.2.5 retries only blob uploads and dataset creation by itself; push, status, logs
and outputs get no retry there, so every call the lab makes goes through `Backoff.call`.
The status alone decides, whatever the body (Kaggle's JSON, or a web page from a front end):
401 is a refused key or token; 403 and 404 are a dataset or kernel that is not there or not
visible (NotFound) — except on the key check itself (`key_check`, the quota call), where 403
refuses the key too; 412 is Kaggle having no room now (Busy); 429 and 5xx are retried.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TypeVar

from ..base.i18n import t
from .errors import AuthError, Busy, KaggleError, NetworkDown, NotFound, Transient

T = TypeVar("T")


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """Retry-After as seconds: a number ("120", "0.5") or an HTTP date; None if absent/bad."""
    if value is None:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    current = datetime.fromtimestamp(time.time() if now is None else now, UTC)
    return max(0.0, (when - current).total_seconds())


def http_status(exc: BaseException | None) -> int | None:
    """The HTTP status behind an error; kaggle wraps some 401/403s in a ValueError, so the
    exception's context is searched too."""
    seen = 0
    while exc is not None and seen < 5:
        response = getattr(exc, "response", None)
        status = getattr(response, "status_code", None) if response is not None else None
        if status is not None:
            return int(status)
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


def is_network_error(exc: BaseException) -> bool:
    import requests  # a dependency of kaggle; imported late like kaggle itself

    return isinstance(exc, (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError,
                            ConnectionError, TimeoutError))


@dataclass
class Backoff:
    """How the lab retries. `attempts` counts tries of one call for 429/5xx/network errors;
    `sleep` is injectable so that tests can see (and need not wait out) every delay."""

    attempts: int = 6
    base_s: float = 1.0
    cap_s: float = 120.0
    max_retry_after_s: float = 900.0
    sleep: Callable[[float], None] = time.sleep
    waits: list[float] = field(default_factory=list)  # the delays asked for, newest last

    def delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.max_retry_after_s)
        d = min(self.cap_s, self.base_s * (2 ** attempt))
        return d * (0.75 + 0.5 * random.random())  # jitter: many lab windows do not retry in step

    def call(self, fn: Callable[[], T], what: str, username: str = "",
             on_wait: Callable[[str, float], None] | None = None, key_check: bool = False) -> T:
        """Run fn; back off and retry on 429/5xx/network; translate the rest into KaggleError
        (the rules above; `key_check`: this call proves the key, so 403 refuses it)."""
        last: BaseException | None = None
        for attempt in range(self.attempts):
            try:
                return fn()
            except KaggleError:
                raise
            except Exception as exc:  # noqa: BLE001 — classified below, re-raised as ours
                status = http_status(exc)
                if status == 401 or (status == 403 and key_check):
                    raise AuthError(username, status, auth_message(username, status)) from exc
                if status in (403, 404):
                    raise NotFound(t(
                        f"{what}: нет на Kaggle или не видно этому аккаунту (HTTP {status})",
                        f"{what}: not on Kaggle, or not visible to this account (HTTP {status})")) from exc
                if status == 412:
                    raise Busy(t(f"{what}: у Kaggle сейчас нет места (HTTP 412)",
                                 f"{what}: Kaggle has no room for it now (HTTP 412)"), status) from exc
                transient = status == 429 or (status is not None and 500 <= status < 600)
                network = status is None and is_network_error(exc)
                if not (transient or network):
                    raise KaggleError(describe(what, exc)) from exc
                last = exc
                if attempt == self.attempts - 1:
                    break
                ra = None
                if transient:
                    ra = retry_after_seconds(_header(exc, "Retry-After"))
                wait = self.delay(attempt, ra)
                self.waits.append(wait)
                if on_wait is not None:
                    on_wait(describe(what, exc), wait)
                self.sleep(wait)
        assert last is not None
        status = http_status(last)
        if status is None:
            raise NetworkDown(t(
                f"{what}: Kaggle недоступен ({_short(last)}). Проверьте сеть; лаборатория повторит попытку.",
                f"{what}: Kaggle cannot be reached ({_short(last)}). Check the network; the lab will retry.",
            )) from last
        raise Transient(t(
            f"{what}: Kaggle отвечает {status} после {self.attempts} попыток; повторите позже.",
            f"{what}: Kaggle answers {status} after {self.attempts} tries; try again later.",
        ), status) from last


def _header(exc: BaseException | None, name: str) -> str | None:
    while exc is not None:
        response = getattr(exc, "response", None)
        if response is not None:
            return response.headers.get(name)
        exc = exc.__cause__ or exc.__context__
    return None


def auth_message(username: str, status: int) -> str:
    return t(
        f"аккаунт {username}: ключ или токен не принят (HTTP {status}). Создайте новый токен на "
        "kaggle.com → Settings → API (Generate New Token) и добавьте его: «Добавить токен…» или "
        f"ternit kaggle add-account --username {username} --token -",
        f"account {username}: the key or token was refused (HTTP {status}). Create a new token at "
        "kaggle.com → Settings → API (Generate New Token) and add it: “Add token…” or "
        f"ternit kaggle add-account --username {username} --token -",
    )


def _short(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:200]


def describe(what: str, exc: BaseException) -> str:
    status = http_status(exc)
    head = f"HTTP {status}: " if status else ""
    return f"{what}: {head}{_short(exc)}"
