"""The lab's Kaggle side: accounts and their quota, datasets by content hash, kernels on
2×T4, following their logs, the Auto machine and continuing a run across accounts.

Layers, bottom-up: credentials (keys and tokens, file 0600) → sdk (the real client imported
once, each account's KaggleApi kept to its own credentials, timeouts) → client (one
AccountClient per account, backoff, what each answer means) → quota/store (SQLite, public
details only) → datasets/kernel/follow/room → picker (capacity and «Авто») → runner (one run's
legs on Kaggle: chain → push → followers/watch → outputs); cleanup (the lab's datasets no run
needs). Nothing here imports Qt or torch; `kaggle` itself is imported lazily
(sdk.import_kaggle).
"""


def accounts_for_form() -> list:
    """The accounts for «Машина» (see machine.accounts_for_form)."""
    from .machine import accounts_for_form as impl

    return impl()


def auto_explanation(config: dict) -> str:
    """The one-line «Авто» answer for a run.json (see machine.auto_explanation)."""
    from .machine import auto_explanation as impl

    return impl(config)
