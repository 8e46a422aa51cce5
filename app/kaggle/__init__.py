"""The lab's Kaggle side: accounts and their quota, datasets by content hash, kernels on
2×T4, following their logs, the Auto machine and continuing a run across accounts.

Layers, bottom-up: credentials (secrets, file 0600) → client (one KaggleApi per account,
backoff) → quota/store (SQLite, public details only) → datasets/kernel/follow → picker →
runner (one run's legs on Kaggle: chain → push → followers/watch → outputs). Nothing here
imports Qt or torch; `kaggle` itself is imported lazily (see client.import_kaggle).
"""


def accounts_for_form() -> list:
    """The accounts for «Машина» (see machine.accounts_for_form)."""
    from .machine import accounts_for_form as impl

    return impl()


def auto_explanation(config: dict) -> str:
    """The one-line «Авто» answer for a run.json (see machine.auto_explanation)."""
    from .machine import auto_explanation as impl

    return impl(config)


def refresh_accounts() -> list:
    """Ask Kaggle for every account's key status and quota, into the state (network: call it
    off the GUI thread, e.g. at start and every few minutes; the form then reads the state)."""
    from .accounts import Accounts
    from .store import KaggleStore

    store = KaggleStore()
    try:
        return Accounts(store).check_all()
    finally:
        store.close()


def kernel_page(ref: str) -> str:
    """The kernel's address for the history ('owner/slug' -> its page on kaggle.com)."""
    import os

    base = os.environ.get("TERNIT_KAGGLE_ENDPOINT", "").strip().rstrip("/") or "https://www.kaggle.com"
    return f"{base}/code/{ref.strip('/')}"
