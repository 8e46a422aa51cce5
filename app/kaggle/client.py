"""One Kaggle client per account, never the global one (app/kaggle/sdk.py imports the real
client and keeps it to each account's own key or token, with timeouts).

Every call goes through the lab's backoff (app/kaggle/backoff.py) and comes back as what it
means: a dataset's stage, a kernel's status, a refusal (PushRefused), a dataset or kernel that
is not there (NotFound — 403 or 404, one rule for both), a refused key (AuthError — only the
quota call, which must succeed for a working key, can say so), a silent stream (Stalled).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..base.i18n import t
from . import settings as kaggle_settings
from .backoff import Backoff
from .credentials import Credential
from .errors import Busy, KaggleError, NotFound, PushRefused, Stalled, UploadFailed
from .quota import Quota
from .sdk import endpoint, import_kaggle, make_api, set_stall_timeout

# Kaggle's processing stages of a dataset version (kagglesdk DatabundleVersionStatus, as
# kaggle's dataset_status names them): anything else but these is still being processed.
DATASET_READY, DATASET_FAILED, DATASET_DELETED = "ready", "failed", "deleted"
LAB_SLUG_PREFIX = "ternit-"  # every dataset the lab makes (datasets.Bundle.slug)


@dataclass(frozen=True)
class KaggleDataset:
    """One of the account's own datasets as Kaggle lists it."""

    ref: str
    title: str
    bytes: int | None


class AccountClient:
    """Everything the lab asks Kaggle for one account, each call with the lab's backoff."""

    def __init__(self, cred: Credential, backoff: Backoff | None = None,
                 on_wait: Callable[[str, float], None] | None = None) -> None:
        self.cred = cred
        self.username = cred.username
        set_stall_timeout(kaggle_settings.load().stall_s)
        self.api = make_api(cred)
        self.backoff = backoff or Backoff()
        self.on_wait = on_wait

    def _call(self, what: str, fn: Callable[[], Any], key_check: bool = False) -> Any:
        return self.backoff.call(fn, what, self.username, self.on_wait, key_check=key_check)

    # -- account -----------------------------------------------------------------------
    def quota(self) -> Quota:
        """The account's GPU quota: the call that proves the key (401/403 here refuse it)."""
        resp = self._call(t("квота GPU", "GPU quota"), self.api.quota_view, key_check=True)
        return Quota.from_response(resp)

    # -- datasets ----------------------------------------------------------------------
    def dataset_stage(self, ref: str) -> str | None:
        """The dataset's processing stage ("ready", "failed", or a stage still in progress
        such as "blobs_received"); None when it is not there (absent, deleted or not
        visible to this account)."""
        try:
            stage = self._call(t(f"датасет {ref}", f"dataset {ref}"), lambda: self.api.dataset_status(ref))
        except NotFound:
            return None
        return None if stage == DATASET_DELETED else str(stage)

    def lab_datasets(self) -> list[KaggleDataset]:
        """The account's own datasets that the lab made (slug ternit-…), with their sizes."""
        out: list[KaggleDataset] = []
        token: str | None = None
        while True:
            resp = self._call(t("список датасетов", "the list of datasets"), lambda tok=token: (
                self.api.dataset_list_with_response(mine=True, search=LAB_SLUG_PREFIX, page_size=100,
                                                    page_token=tok)))
            for d in getattr(resp, "datasets", None) or []:
                if d.ref.split("/")[-1].startswith(LAB_SLUG_PREFIX):
                    out.append(KaggleDataset(d.ref, d.title or "", d.total_bytes))
            token = getattr(resp, "next_page_token", "") or None
            if not token:
                return out

    def dataset_delete(self, ref: str) -> None:
        owner, _, slug = ref.partition("/")
        self._call(t(f"удаление датасета {ref}", f"deleting dataset {ref}"),
                   lambda: self.api.dataset_delete(owner, slug, no_confirm=True))

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
        """Push the kernel in folder; a refusal (inside HTTP 200, or 412/403) raises PushRefused."""
        try:
            resp = self._call(t("отправка ядра", "pushing the kernel"), lambda: self.api.kernels_push(str(folder)))
        except (Busy, NotFound) as e:
            raise PushRefused(self.username, t(f"Kaggle не принял ядро на аккаунте {self.username}: {e}",
                                               f"Kaggle refused the kernel on account {self.username}: {e}")) from e
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
        """The kernel's log stream (replays from the start on every call). Silent longer
        than the stall timeout (sdk.set_stall_timeout): Stalled."""
        def open_stream() -> Iterator[dict[str, Any]]:
            with _stall_is_stalled(ref):  # inside the backoff: a silent opening is not retried
                return _first(self.api.kernels_logs_stream(ref))

        stream = self._call(t(f"журнал ядра {ref}", f"kernel log {ref}"), open_stream)
        with _stall_is_stalled(ref):
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


@contextlib.contextmanager
def _stall_is_stalled(ref: str) -> Iterator[None]:
    """A read timeout inside (opening the stream or reading it) is Stalled, not retried as
    a network failure: the follower reopens the stream at once."""
    try:
        yield
    except KaggleError:
        raise
    except Exception as e:
        if is_stall(e):
            raise Stalled(t(f"журнал ядра {ref} молчит дольше допустимого",
                            f"the log of kernel {ref} went silent")) from e
        raise


def is_stall(exc: BaseException | None) -> bool:
    """A read that timed out (requests wraps urllib3's ReadTimeoutError in a ConnectionError)."""
    import requests
    import urllib3

    seen = 0
    while exc is not None and seen < 6:
        if isinstance(exc, (requests.ReadTimeout, urllib3.exceptions.ReadTimeoutError, TimeoutError)):
            return True
        nested = [a for a in getattr(exc, "args", ()) if isinstance(a, BaseException)]
        exc = nested[0] if nested else (exc.__cause__ or exc.__context__)
        seen += 1
    return False


__all__ = ["AccountClient", "KaggleDataset", "KaggleError", "endpoint", "import_kaggle", "is_stall", "make_api"]
