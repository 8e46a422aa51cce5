"""What can go wrong talking to Kaggle, as the lab tells it (RU/EN, with what to do)."""

from __future__ import annotations


class KaggleError(RuntimeError):
    """Any failure on the Kaggle side; str() is the message for the user."""


class AuthError(KaggleError):
    """401/403: the account's key is wrong or revoked. Auto skips the account."""

    def __init__(self, username: str, status: int, message: str) -> None:
        super().__init__(message)
        self.username = username
        self.status = status


class NotFound(KaggleError):
    """404: the dataset or kernel does not exist (yet)."""


class Transient(KaggleError):
    """429 or 5xx that kept coming back after the lab's own retries."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class NetworkDown(KaggleError):
    """Kaggle could not be reached at all (no connection, DNS, timeout)."""


class GlobalTokenSet(KaggleError):
    """A global Kaggle token (KAGGLE_API_TOKEN, ~/.kaggle/access_token) is set: the client
    would send it instead of the account's own key, so the lab asks Kaggle nothing. Says
    nothing about the account's key; it passes once the token is removed."""


class PushRefused(KaggleError):
    """Kaggle answered HTTP 200 but refused the kernel (response.error), e.g. the maximum
    number of GPU sessions is running. Auto tries the next account."""

    def __init__(self, username: str, message: str) -> None:
        super().__init__(message)
        self.username = username


class UploadFailed(KaggleError):
    """A dataset could not be created (response.error, or a file did not go up)."""
