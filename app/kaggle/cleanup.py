"""Clearing an account of the lab's datasets that no run needs any more.

The lab uploads code, data and checkpoints as private datasets (app/kaggle/datasets.py) and
reuses them by content hash; nothing deletes them, and they count against the account's
private storage. `survey` lists, per account, every dataset of the lab Kaggle holds (its
slug starts with ternit-), with its size, and which legs still in flight use it; `delete`
removes the ones the user confirmed. A dataset deleted here is uploaded again the next time
a run needs it: nothing is lost but the upload.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ..base.i18n import t
from ..base.numbers import bytes_text
from .accounts import Accounts
from .client import LAB_SLUG_PREFIX
from .datasets import SLUG_KIND
from .errors import KaggleError, NotFound
from .store import KaggleStore

KIND_BY_SLUG = {slug: kind for kind, slug in SLUG_KIND.items()}


@dataclass(frozen=True)
class LabDataset:
    """One dataset of the lab on one account."""

    account: str
    ref: str
    kind: str                    # code | data | checkpoint | "" (another ternit- slug)
    bytes: int | None
    label: str                   # what it is, from the lab's state or Kaggle's title
    needed_by: tuple[str, ...]   # the runs in flight that use it

    @property
    def removable(self) -> bool:
        return not self.needed_by

    def line(self) -> str:
        size = bytes_text(self.bytes) if self.bytes is not None else t("размер неизвестен", "size unknown")
        need = t(f" — нужен: {', '.join(self.needed_by)}", f" — needed by {', '.join(self.needed_by)}") \
            if self.needed_by else ""
        return f"{self.ref} ({size}) {self.label}{need}"


def _hash_prefix(ref: str) -> tuple[str, str]:
    """(kind, the content hash's first 16 hex digits) from a slug ternit-KIND-HASH16."""
    slug = ref.split("/")[-1]
    parts = slug[len(LAB_SLUG_PREFIX):].split("-", 1)
    if len(parts) != 2:
        return "", ""
    return KIND_BY_SLUG.get(parts[0], ""), parts[1]


def _in_use(store: KaggleStore, account: str) -> dict[str, list[str]]:
    """hash prefix → the run ids of this account's legs in flight that mount it."""
    out: dict[str, list[str]] = {}
    for leg in store.legs_in_flight():
        if leg["account"] != account:
            continue
        for digest in (leg.get("code_hash"), leg.get("data_hash"), leg.get("checkpoint_hash")):
            if digest:
                out.setdefault(digest[:16], []).append(leg["run_id"])
    return out


def survey(accounts: Accounts, usernames: Iterable[str]) -> list[LabDataset]:
    """Every dataset of the lab on these accounts, as Kaggle lists them now (network)."""
    store = accounts.store
    out: list[LabDataset] = []
    for user in usernames:
        known = {d.ref: d for d in store.holdings(user)}
        in_use = _in_use(store, user)
        for d in accounts.client(user).lab_datasets():
            kind, prefix = _hash_prefix(d.ref)
            row = known.get(d.ref)
            label = (row.label if row is not None and row.label else "") or d.title
            size = d.bytes if d.bytes is not None else (row.bytes if row is not None else None)
            out.append(LabDataset(user, d.ref, kind, size, label, tuple(in_use.get(prefix, ()))))
    return out


def total_bytes(items: Iterable[LabDataset]) -> int:
    return sum(i.bytes or 0 for i in items)


def delete(accounts: Accounts, items: Iterable[LabDataset],
           progress: Callable[[str], None] | None = None) -> list[tuple[LabDataset, str]]:
    """Delete each dataset no run needs (needed ones are left); the lab forgets that the
    account holds it. Returns what could not be deleted, with why."""
    failed: list[tuple[LabDataset, str]] = []
    store = accounts.store
    for item in items:
        if not item.removable:
            continue
        if progress is not None:
            progress(t(f"удаляю {item.ref}", f"deleting {item.ref}"))
        try:
            accounts.client(item.account).dataset_delete(item.ref)
        except NotFound:  # gone already: forgotten below all the same
            pass
        except KaggleError as e:
            failed.append((item, str(e)))
            continue
        for row in store.holdings(item.account):
            if row.ref == item.ref:
                store.drop_dataset(item.account, row.content_hash)
    return failed
