"""One Kaggle client per account, never the global one.

Rules (shared/DESIGN.md, checked against kaggle 2.2.5 / kagglesdk 0.1.38):
- `import kaggle` authenticates at import time against the *global* credentials and prints
  a help text when there are none; it is imported here lazily, with stdout captured.
- Each account gets its own `KaggleApi()` with its own new `config_values` dict; the lab
  never calls `authenticate()`.
- `TERNIT_KAGGLE_ENDPOINT=http://127.0.0.1:PORT` points every client at a local server:
  kagglesdk has no public endpoint setting, so the LOCAL environment's endpoint is set and
  each api gets `args = ["--local"]` (kagglesdk is pinned to 0.1.x for this).
"""

from __future__ import annotations

import contextlib
import io
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..base.i18n import t
from .backoff import Backoff
from .credentials import Credential, global_token_warning
from .errors import GlobalTokenSet, KaggleError, NotFound, PushRefused, UploadFailed
from .quota import Quota

ENDPOINT_ENV = "TERNIT_KAGGLE_ENDPOINT"
_import_lock = threading.Lock()
_api_class: Any = None


def import_kaggle() -> Any:
    """The KaggleApi class, importing `kaggle` once with its import-time prints swallowed."""
    global _api_class
    with _import_lock:
        if _api_class is None:
            sink = io.StringIO()
            with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
                from kaggle.api.kaggle_api_extended import KaggleApi
            _api_class = KaggleApi
        return _api_class


def endpoint() -> str | None:
    value = os.environ.get(ENDPOINT_ENV, "").strip().rstrip("/")
    return value or None


def make_api(cred: Credential) -> Any:
    """A KaggleApi that speaks only as `cred` (own config_values, no authenticate())."""
    api_class = import_kaggle()
    api = api_class()
    api.config_values = {"username": cred.username, "key": cred.key}
    local = endpoint()
    if local:
        from kagglesdk.kaggle_env import KaggleEnv, _env_to_endpoint

        _env_to_endpoint[KaggleEnv.LOCAL] = local
        api.args = ["--local"]
    else:
        api.args = []  # not the class-level list, which KAGGLE_API_ENVIRONMENT may have filled
    return api


class AccountClient:
    """Everything the lab asks Kaggle for one account, each call with the lab's backoff."""

    def __init__(self, cred: Credential, backoff: Backoff | None = None,
                 on_wait: Callable[[str, float], None] | None = None) -> None:
        self.cred = cred
        self.username = cred.username
        self.api = make_api(cred)
        self.backoff = backoff or Backoff()
        self.on_wait = on_wait

    def _call(self, what: str, fn: Callable[[], Any]) -> Any:
        # The client sends a global token instead of this account's key: a request now
        # would go as the token's owner (wrong quota, or a good key reported as refused).
        warning = global_token_warning()
        if warning:
            raise GlobalTokenSet(warning)
        return self.backoff.call(fn, what, self.username, self.on_wait)

    # -- account -----------------------------------------------------------------------
    def quota(self) -> Quota:
        resp = self._call(t("квота GPU", "GPU quota"), self.api.quota_view)
        return Quota.from_response(resp)

    # -- datasets ----------------------------------------------------------------------
    def dataset_ready(self, ref: str) -> bool | None:
        """True when ready, False while processing, None when it does not exist."""
        try:
            status = self._call(t(f"датасет {ref}", f"dataset {ref}"),
                                lambda: self.api.dataset_status(ref))
        except NotFound:
            return None
        if status == "failed":
            raise UploadFailed(t(f"Kaggle не смог обработать датасет {ref}",
                                 f"Kaggle failed to process dataset {ref}"))
        return status == "ready"

    def dataset_create(self, folder: Path) -> str:
        """Create the private dataset described by folder/dataset-metadata.json; its ref."""
        resp = self._call(t("создание датасета", "creating a dataset"), lambda: self.api.dataset_create_new(
            str(folder), public=False, quiet=True, convert_to_csv=False, dir_mode="zip"))
        if resp is None or getattr(resp, "error", None):
            raise UploadFailed(t(f"Kaggle отказал в создании датасета: {getattr(resp, 'error', '?')}",
                                 f"Kaggle refused the dataset: {getattr(resp, 'error', '?')}"))
        return resp.ref or ""

    # -- kernels -----------------------------------------------------------------------
    def push(self, folder: Path) -> Any:
        """Push the kernel in folder; a refusal inside HTTP 200 raises PushRefused."""
        resp = self._call(t("отправка ядра", "pushing the kernel"),
                          lambda: self.api.kernels_push(str(folder)))
        error = getattr(resp, "error", None) if resp is not None else "no answer"
        if error:
            raise PushRefused(self.username, t(
                f"Kaggle не принял ядро на аккаунте {self.username}: {error}",
                f"Kaggle refused the kernel on account {self.username}: {error}",
            ))
        invalid = list(getattr(resp, "invalid_dataset_sources", None) or [])
        if invalid:  # the kernel would start without its inputs and stop at once
            raise UploadFailed(t(
                f"Kaggle не подключил к ядру датасеты {', '.join(invalid)}; запустите прогон ещё раз",
                f"Kaggle did not attach the datasets {', '.join(invalid)} to the kernel; start the run again",
            ))
        return resp

    def kernel_status(self, ref: str) -> tuple[str, str]:
        """(status name, failure message) — QUEUED, RUNNING, COMPLETE, ERROR, CANCEL_*."""
        resp = self._call(t(f"состояние ядра {ref}", f"kernel status {ref}"),
                          lambda: self.api.kernels_status(ref))
        status = getattr(resp.status, "name", str(resp.status))
        return status, resp.failure_message or ""

    def log_events(self, ref: str) -> Iterator[dict[str, Any]]:
        """The kernel's log stream (replays from the start on every call)."""
        stream = self._call(t(f"журнал ядра {ref}", f"kernel log {ref}"),
                            lambda: _first(self.api.kernels_logs_stream(ref)))
        yield from stream

    def output(self, ref: str, folder: Path) -> list[str]:
        folder.mkdir(parents=True, exist_ok=True)
        files, _ = self._call(t(f"результаты ядра {ref}", f"kernel outputs {ref}"),
                              lambda: self.api.kernels_output(ref, str(folder), force=True, quiet=True))
        return files


def _first(gen: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Open the stream inside the backoff: the HTTP request runs at the first next()."""
    try:
        head = next(gen)
    except StopIteration:
        return iter(())

    def chain() -> Iterator[dict[str, Any]]:
        yield head
        yield from gen

    return chain()


__all__ = ["AccountClient", "KaggleError", "import_kaggle", "make_api", "endpoint"]
