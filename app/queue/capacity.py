"""The Kaggle accounts as the planner sees them: quota left, the legs running on each (what
they reserve, when they are expected to end), the concurrent-session limit, the refresh.

The rule behind it — an account's free quota is Kaggle's remaining quota less what the lab's
legs in flight will still spend, within Kaggle's GPU sessions per account — is app/kaggle's
(`picker.capacity`, the one «Авто» asks too). Here it is only shaped into plan.Account: the
same reservations, one lease per leg, so the planner also knows when each comes back.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..kaggle import settings as kaggle_settings
from ..kaggle.picker import LEGS_HOLDING, capacity, leg_reservation_s
from ..kaggle.store import KaggleStore
from .plan import Account, Lease

ExpectedEnd = Callable[[dict[str, Any]], float | None]


def kaggle_accounts(store: KaggleStore, now: float | None = None, expected_end: ExpectedEnd | None = None,
                    margin_min: float | None = None) -> tuple[Account, ...]:
    """Every Kaggle account of the lab, from the state alone (no network): quota as last
    checked, its legs in flight as leases."""
    now = time.time() if now is None else now
    margin = kaggle_settings.load().margin_min if margin_min is None else margin_min
    legs = [leg for leg in store.legs_in_flight() if leg.get("state") in LEGS_HOLDING]
    out = []
    for c in capacity(store, margin):
        row = store.account(c.username)
        quota = row.quota if row is not None else None
        checked = quota.checked_at if quota is not None else None
        leases = []
        for leg in (x for x in legs if x["account"] == c.username):
            reserved = leg_reservation_s(leg, margin, checked)
            start = float(leg.get("pushed_at") or leg.get("updated_at") or now)
            end = (expected_end(leg) if expected_end else None) or start + float(leg.get("limit_min") or 0) * 60
            end = max(end, now + 1.0)
            leases.append(Lease(min(start, now), end, reserved, min(reserved, end - now)))
        out.append(Account(
            c.username, c.remaining_s, quota.total_s if quota is not None else 0.0, c.refresh_at, c.sessions_max,
            tuple(leases), c.usable and quota is not None, c.why_not or ("" if quota else "quota unknown"), c.holds))
    return tuple(out)
