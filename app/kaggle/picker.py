"""«Авто»: which account a run (or its next leg) goes to, and why, in one line.

The rule (issue 6): first an account whose remaining quota covers the whole run (limit +
margin), among those preferring one that already holds the checkpoint and the data;
otherwise the one with the most quota, planning to continue elsewhere. Accounts whose key
was refused are skipped, and so are those with no more than the margin left.
Pure: it reads only the numbers it is given (the form calls it on every change).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ..base.i18n import t
from .quota import hours, refresh_text


@dataclass(frozen=True)
class Candidate:
    username: str
    remaining_s: float
    usable: bool = True                         # False: key refused (or missing)
    holds: frozenset[str] = field(default_factory=frozenset)
    why_not: str = ""                           # shown when skipped
    refresh_at: float | None = None             # when its weekly quota refreshes (unix s)


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
    skipped = [c for c in cands if not c.usable]
    usable = [c for c in cands if c.usable and c.remaining_s > margin_s]
    skip_note = ""
    if skipped:
        skip_note = t(" (пропущены: ", " (skipped: ") + ", ".join(
            f"{c.username} — {c.why_not or t('ключ не принят', 'key refused')}" for c in skipped) + ")"
    if not usable:
        return Pick(None, False, 0.0, t(
            f"Авто: нет аккаунта с квотой больше запаса {margin_min:g} мин — добавьте аккаунт или дождитесь "
            f"обновления квоты{_next_refresh(cands)}{skip_note}",
            f"Auto: no account has more quota than the {margin_min:g} min margin — add an account or wait "
            f"for the quota to refresh{_next_refresh(cands)}{skip_note}",
        ))
    covering = [c for c in usable if c.remaining_s >= need_s]
    if covering:
        best = max(covering, key=lambda c: (_score(c, want), c.remaining_s, c.username))
        held = _holds_text(best, want)
        why = held if held else t("больше всего квоты среди подходящих", "the most quota among those that fit")
        return Pick(best.username, True, limit_min, t(
            f"Авто: {best.username} — квоты {hours(best.remaining_s)} хватает на весь прогон "
            f"({limit_min:g} мин + запас {margin_min:g}); {why}{skip_note}",
            f"Auto: {best.username} — its {hours(best.remaining_s)} of quota covers the whole run "
            f"({limit_min:g} min + {margin_min:g} margin); {why}{skip_note}",
        ))
    best = max(usable, key=lambda c: (c.remaining_s, _score(c, want), c.username))
    leg_min = max(0.0, (best.remaining_s - margin_s) / 60.0)
    return Pick(best.username, False, min(limit_min, leg_min), t(
        f"Авто: {best.username} — ни у кого квоты не хватает на весь прогон; у него больше всего "
        f"({hours(best.remaining_s)}), дальше обучение продолжится на другом аккаунте{skip_note}",
        f"Auto: {best.username} — no account has quota for the whole run; it has the most "
        f"({hours(best.remaining_s)}), the training will continue on another account{skip_note}",
    ))
