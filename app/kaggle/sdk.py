"""The real Kaggle client (kaggle 2.2.5 / kagglesdk 0.1.38), imported once and held to the
lab's rules: each account speaks only with its own credentials, never a global one, and no
request waits for ever.

What the client does by itself, and what is done about it here (read in its source):
- `import kaggle` (any submodule) runs `KaggleApi().authenticate()` against the *global*
  credentials: KAGGLE_API_TOKEN, ~/.kaggle/access_token (a token is first checked with
  Kaggle over the network), the config folder's kaggle.json, ~/.kaggle/credentials.json of
  `kaggle auth login` (refreshed over the network, deleted on a 401); it prints a help text
  when there are none, and creates its config folder (~/.kaggle or ~/.config/kaggle).
  → It is imported once, with its output swallowed, its config folder pointed at the lab's
  own empty one (KAGGLE_CONFIG_DIR, for the import only) and its credentials file there too.
- kagglesdk's HTTP client takes a token from `get_access_token_from_env()` — the variable
  KAGGLE_API_TOKEN or ~/.kaggle/access_token(.txt) — before the username and key it is
  given, so a global token would speak for every legacy-key account.
  → That look-up is replaced, in the client's own modules, by one that finds nothing: an
  account's client sends only its own key (Basic) or its own token (Bearer,
  config_values["token"]). The global token stays for Kaggle's own command line; the
  accounts dialog says it is there and not used (credentials.global_token_note).
- No request has a timeout (requests waits for ever on a silent server), and the live log
  stream is one long GET.
  → The client's `requests` is given a Session that sets one whenever a request has none:
  CONNECT_S to connect; then READ_S between bytes of an answer, or the stall timeout for a
  stream (the log stream, a download), after which the lab reopens it.
- Its endpoint is fixed (api.kaggle.com); TERNIT_KAGGLE_ENDPOINT=http://127.0.0.1:PORT points
  every client at a local server through the LOCAL environment's endpoint and
  `args = ["--local"]` (kagglesdk is pinned to 0.1.x for this).
"""

from __future__ import annotations

import contextlib
import io
import os
import threading
import types
from pathlib import Path
from typing import Any

from ..base import paths
from .credentials import Credential

ENDPOINT_ENV = "TERNIT_KAGGLE_ENDPOINT"
CONNECT_S = 20.0  # to open a connection to Kaggle
READ_S = 120.0    # between bytes of an API answer (an upload's answer included)
DEFAULT_STALL_S = 120.0  # a stream's silence; the lab's setting replaces it (stall_timeout)

_import_lock = threading.Lock()
_api_class: Any = None
_stall_s = DEFAULT_STALL_S


def client_dir() -> Path:
    """The kaggle client's own config folder: the lab's, empty (never ~/.kaggle)."""
    return paths.private_dir(paths.config_dir() / "kaggle-client")


def _no_global_token() -> tuple[None, None]:
    """kagglesdk's get_access_token_from_env, as the lab's clients see it: no global token."""
    return None, None


def _timeout_session_class(requests: Any) -> type:
    class TimeoutSession(requests.Session):
        """A requests Session whose every request has a timeout (the client sets none)."""

        def send(self, request: Any, **kwargs: Any) -> Any:
            if kwargs.get("timeout") is None:
                kwargs["timeout"] = (CONNECT_S, _stall_s if kwargs.get("stream") else READ_S)
            return super().send(request, **kwargs)

    return TimeoutSession


def _with_timeouts(requests: Any) -> types.ModuleType:
    """`requests` as the client's modules see it: the same, but Session is TimeoutSession."""
    proxy = types.ModuleType("requests")
    proxy.__dict__.update(requests.__dict__)
    proxy.Session = _timeout_session_class(requests)  # type: ignore[attr-defined]
    return proxy


@contextlib.contextmanager
def _config_dir_for_import(folder: Path) -> Any:
    before = os.environ.get("KAGGLE_CONFIG_DIR")
    os.environ["KAGGLE_CONFIG_DIR"] = str(folder)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("KAGGLE_CONFIG_DIR", None)
        else:
            os.environ["KAGGLE_CONFIG_DIR"] = before


def import_kaggle() -> Any:
    """The KaggleApi class, the client imported once as described above."""
    global _api_class
    with _import_lock:
        if _api_class is not None:
            return _api_class
        import kagglesdk
        import kagglesdk.kaggle_env
        import kagglesdk.kaggle_http_client as http_client
        import requests
        from kagglesdk.kaggle_creds import KaggleCredentials

        folder = client_dir()
        for module in (kagglesdk, kagglesdk.kaggle_env, http_client):
            module.get_access_token_from_env = _no_global_token  # type: ignore[attr-defined]
        KaggleCredentials.DEFAULT_CREDENTIALS_FILE = str(folder / "credentials.json")
        timed = _with_timeouts(requests)
        http_client.requests = timed  # type: ignore[attr-defined]
        sink = io.StringIO()
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink), _config_dir_for_import(folder):
            from kaggle.api import kaggle_api_extended
        kaggle_api_extended.get_access_token_from_env = _no_global_token  # type: ignore[attr-defined]
        kaggle_api_extended.requests = timed  # type: ignore[attr-defined]
        _api_class = kaggle_api_extended.KaggleApi
        return _api_class


def set_stall_timeout(seconds: float) -> None:
    """How long a stream may stay silent before the client gives up on it."""
    global _stall_s
    _stall_s = max(0.1, float(seconds))


def endpoint() -> str | None:
    value = os.environ.get(ENDPOINT_ENV, "").strip().rstrip("/")
    return value or None


def make_api(cred: Credential) -> Any:
    """A KaggleApi that speaks only as `cred`: its own config_values ({"username", "key"} or
    {"username", "token"}), no authenticate()."""
    api = import_kaggle()()
    api.config_values = cred.config_values()
    api.config_dir = str(client_dir())
    local = endpoint()
    if local:
        from kagglesdk.kaggle_env import KaggleEnv, _env_to_endpoint

        _env_to_endpoint[KaggleEnv.LOCAL] = local
        api.args = ["--local"]
    else:
        api.args = []  # not the class-level list, which KAGGLE_API_ENVIRONMENT may have filled
    return api
