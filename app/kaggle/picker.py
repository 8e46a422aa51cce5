"""«Авто»: which account a run (or its next leg) goes to, and why, in one line; and each
account's room for one more leg (`capacity`), which the run queue's scheduler asks too.

The rule (issue 6): first an account whose free quota covers the whole run (limit +
margin), among those preferring one that already holds the checkpoint and the data;
otherwise the one with the most free quota, planning to continue elsewhere. Skipped: an
account whose key was refused, one with no more than the margin free, and one whose GPU
sessions are all taken by the lab's legs in flight. «Free» is Kaggle's remaining quota less
what the lab's legs in flight on the account will still spend (issue 23).
`pick` is pure: it reads only the numbers it is given (the form calls it on every change);
`capacity` reads them from the lab's state, never the network.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..base.i18n import t
from ..base.numbers import format_value
from . import settings as kaggle_settings
from .accounts import Accounts, key_status_text
from .quota import hours, refresh_text
from .store import KaggleStore

# Kaggle runs at most two GPU sessions of one account at once; a third push is refused
# with "Maximum batch GPU session count of 2 reached" (docs/KAGGLE.md says where this is
# from). The lab counts its own legs in flight; a session started by hand on kaggle.com is
# seen only when Kaggle refuses the push, and «Авто» then moves on.
GPU_SESSIONS_PER_ACCOUNT = 2
# The leg states in which a leg holds (or is about to take) a GPU session and will spend
# quota: from its upload until its kernel ends.
LEGS_HOLDING = ("planned", "uploading", "pushing", "pushed", "running")


@dataclass(frozen=True)
class Candidate:
    """One account as «Авто» and the scheduler weigh it (public figures only)."""

    username: str
    remaining_s: float                          # Kaggle's remaining quota: total − used − reserved
    usable: bool = True                         # False: key refused (or missing)
    holds: frozenset[str] = field(default_factory=frozenset)
    why_not: str = ""                           # shown when skipped
    refresh_at: float | None = None             # when its weekly quota refreshes (unix s)
    reserved_s: float = 0.0                     # what the lab's legs in flight on it will still spend
    sessions: int = 0                           # the lab's legs in flight on it (a GPU session each)
    sessions_max: int = GPU_SESSIONS_PER_ACCOUNT

    @property
    def free_s(self) -> float:
        """Quota that no leg of the lab has planned on yet."""
        return max(0.0, self.remaining_s - self.reserved_s)

    @property
    def free_sessions(self) -> int:
        return max(0, self.sessions_max - self.sessions)

    def leg_min(self, limit_min: float, margin_min: float) -> float:
        """The longest leg (minutes, at most `limit_min`) this account can start now; 0 when
        it cannot start one (key refused, every GPU session taken, no more than the margin
        free). What a scheduler asks before it hands a run to the account."""
        if not self.usable or self.free_sessions <= 0:
            return 0.0
        return max(0.0, min(float(limit_min), (self.free_s - margin_min * 60.0) / 60.0))


def leg_reservation_s(leg: dict[str, Any], margin_min: float, quota_checked_at: float | None) -> float:
    """What a leg in flight will still take from its account's quota, as of the quota's last
    check: its kernel's limit plus the margin, less the time it had already run by then
    (Kaggle's `used` counts that part)."""
    allotted = (float(leg.get("limit_min") or 0.0) + margin_min) * 60.0
    started = leg.get("pushed_at")
    ran = max(0.0, float(quota_checked_at) - float(started)) if started and quota_checked_at else 0.0
    return max(0.0, allotted - ran)


def capacities(views: Iterable[Any], legs: Iterable[dict[str, Any]], margin_min: float) -> list[Candidate]:
    """Pure: each account (app.kaggle.accounts.AccountView) with its free quota and GPU
    sessions, given the legs in flight (rows of kaggle_legs)."""
    by_account: dict[str, list[dict[str, Any]]] = {}
    for leg in legs:
        if leg.get("state") in LEGS_HOLDING:
            by_account.setdefault(leg["account"], []).append(leg)
    out = []
    for v in views:
        mine = by_account.get(v.username, [])
        checked = v.quota.checked_at if v.quota else None
        reserved = sum(leg_reservation_s(leg, margin_min, checked) for leg in mine)
        why = key_status_text(v) if not v.usable else ""
        if v.usable and len(mine) >= GPU_SESSIONS_PER_ACCOUNT:
            why = t(f"заняты обе сессии GPU ({', '.join(leg['run_id'] for leg in mine)})",
                    f"both GPU sessions are taken ({', '.join(leg['run_id'] for leg in mine)})")
        out.append(Candidate(v.username, v.remaining_s, v.usable, frozenset(d.content_hash for d in v.holds),
                             why, v.quota.refresh_at if v.quota else None, reserved, len(mine)))
    return out


def capacity(store: KaggleStore | None = None, margin_min: float | None = None) -> list[Candidate]:
    """Every Kaggle account's room for one more leg now, from the lab's state alone (no
    network; fast enough for the form's every change and a scheduler's every tick).

    `store`: an app.kaggle.store.KaggleStore (None: the lab's own state, opened and closed
    here); `margin_min`: the quota margin per leg (None: the lab's setting). Each
    Candidate's `free_s` is Kaggle's remaining quota less what the lab's legs in flight on
    the account will still spend, `free_sessions` the GPU sessions left of Kaggle's
    per-account limit, and `leg_min(limit_min, margin_min)` the longest leg it can start
    now (0: none). The figures are as fresh as the last quota check
    (app.kaggle.accounts.Accounts.check)."""
    own = store is None
    store = store or KaggleStore()
    try:
        margin = kaggle_settings.load().margin_min if margin_min is None else margin_min
        return capacities(Accounts(store).views(), store.legs_in_flight(), margin)
    finally:
        if own:
            store.close()


@dataclass(frozen=True)
class Want:
    """What the run needs on the account: content hashes (empty string: unknown/none)."""

    data: str = ""
    code: str = ""
    checkpoint: str = ""


@dataclass(frozen=True)
class Pick:
    username: str | None
    covers: bool
    limit_min: float          # the kernel's own time limit: min(run limit, remaining − margin)
    reason: str               # one line, in the interface language

    @property
    def continues_elsewhere(self) -> bool:
        return self.username is not None and not self.covers


def _score(c: Candidate, want: Want) -> int:
    # The checkpoint counts most (it exists nowhere else on Kaggle), then the data (big).
    return (4 if want.checkpoint and want.checkpoint in c.holds else 0) + \
           (2 if want.data and want.data in c.holds else 0) + \
           (1 if want.code and want.code in c.holds else 0)


def _holds_text(c: Candidate, want: Want) -> str:
    parts = []
    if want.checkpoint and want.checkpoint in c.holds:
        parts.append(t("чекпоинт", "the checkpoint"))
    if want.data and want.data in c.holds:
        parts.append(t("данные", "the data"))
    if not parts:
        return ""
    return t(" и ", " and ").join(parts) + t(" уже там", " already there")


def _next_refresh(cands: list[Candidate]) -> str:
    """When waiting helps first: the earliest refresh among accounts whose key works."""
    known = [c for c in cands if c.usable and c.refresh_at is not None]
    if not known:
        return ""
    first = min(known, key=lambda c: c.refresh_at or 0.0)
    return f" ({first.username}: {refresh_text(first.refresh_at)})"


def pick(candidates: Iterable[Candidate], limit_min: float, margin_min: float,
         want: Want = Want(), exclude: Iterable[str] = ()) -> Pick:
    excluded = set(exclude)
    margin_s = margin_min * 60.0
    need_s = (limit_min + margin_min) * 60.0
    cands = [c for c in candidates if c.username not in excluded]
    skipped = [c for c in cands if not c.usable or c.free_sessions <= 0]
    usable = [c for c in cands if c.usable and c.free_sessions > 0 and c.free_s > margin_s]
    skip_note = ""
    if skipped:
        skip_note = t(" (пропущены: ", " (skipped: ") + ", ".join(
            f"{c.username} — {c.why_not or t('ключ не принят', 'key refused')}" for c in skipped) + ")"
    if not usable:
        return Pick(None, False, 0.0, t(
            f"Авто: нет аккаунта с квотой больше запаса {format_value(margin_min, 'ru')} мин — добавьте аккаунт или дождитесь "
            f"обновления квоты{_next_refresh(cands)}{skip_note}",
            f"Auto: no account has more quota than the {format_value(margin_min, 'en')} min margin — add an account or wait "
            f"for the quota to refresh{_next_refresh(cands)}{skip_note}",
        ))
    covering = [c for c in usable if c.free_s >= need_s]
    if covering:
        best = max(covering, key=lambda c: (_score(c, want), c.free_s, c.username))
        held = _holds_text(best, want)
        why = held if held else t("больше всего квоты среди подходящих", "the most quota among those that fit")
        return Pick(best.username, True, limit_min, t(
            f"Авто: {best.username} — квоты {hours(best.free_s)} хватает на весь прогон "
            f"({format_value(limit_min, 'ru')} мин + запас {format_value(margin_min, 'ru')}); {why}{skip_note}",
            f"Auto: {best.username} — its {hours(best.free_s)} of quota covers the whole run "
            f"({format_value(limit_min, 'en')} min + {format_value(margin_min, 'en')} margin); {why}{skip_note}",
        ))
    best = max(usable, key=lambda c: (c.free_s, _score(c, want), c.username))
    return Pick(best.username, False, best.leg_min(limit_min, margin_min), t(
        f"Авто: {best.username} — ни у кого квоты не хватает на весь прогон; у него больше всего "
        f"({hours(best.free_s)}), дальше обучение продолжится на другом аккаунте{skip_note}",
        f"Auto: {best.username} — no account has quota for the whole run; it has the most "
        f"({hours(best.free_s)}), the training will continue on another account{skip_note}",
    ))
