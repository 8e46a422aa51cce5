"""What can go wrong talking to Kaggle, as the lab tells it (RU/EN, with what to do)."""

from __future__ import annotations


class KaggleError(RuntimeError):
    """Any failure on the Kaggle side; str() is the message for the user."""


class AuthError(KaggleError):
    """401 (or a 403 on the key check itself, the quota call): the account's key or token is
    wrong, revoked or lacks the right. Only the quota call marks an account refused
    (Accounts.check); «Авто» then skips it."""

    def __init__(self, username: str, status: int, message: str) -> None:
        super().__init__(message)
        self.username = username
        self.status = status


class NotFound(KaggleError):
    """403 or 404 on a dataset or kernel: it does not exist, or this account cannot see it.
    Kaggle answers 403 for both (kaggle 2.2.5's kernels_status says so; kagglehub's
    create_dataset_or_version treats 403 as missing): one rule for datasets and kernels, and
    never a verdict on the key."""


class Transient(KaggleError):
    """429 or 5xx that kept coming back after the lab's own retries."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class NetworkDown(KaggleError):
    """Kaggle could not be reached at all (no connection, DNS, timeout)."""


class Busy(KaggleError):
    """412: Kaggle has no room for the request now (a capacity answer, JSON or a web page).
    A push refused so is a PushRefused: «Авто» tries the next account."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class Stalled(KaggleError):
    """The kernel's log stream sent nothing for longer than the stall timeout: the lab
    closes it and opens it again (it replays from the start; what was read is skipped)."""


class PushRefused(KaggleError):
    """Kaggle refused the kernel: inside an HTTP 200 (response.error, e.g. "Maximum batch GPU
    session count of 2 reached"), or with 412/403. Auto tries the next account."""

    def __init__(self, username: str, message: str) -> None:
        super().__init__(message)
        self.username = username


class UploadFailed(KaggleError):
    """A dataset could not be created (response.error, or a file did not go up)."""
