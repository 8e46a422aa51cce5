"""The Kaggle accounts as the planner sees them: quota left, the legs running on each (what
they reserve, when they are expected to end), the concurrent-session limit, the refresh.

`kaggle_accounts` is the queue's one use of Kaggle capacity. The rule behind it (quota left
minus the running legs' reservations, concurrent GPU sessions per account) belongs to
app/kaggle (issue 23, the `kaggle` engineer): until that function lands this reads the same
facts from the Kaggle state itself; then it calls it and keeps only the shaping into
plan.Account.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from ..kaggle.accounts import Accounts, key_status_text
from ..kaggle.store import KaggleStore
from .plan import Account, Lease

# Kaggle runs at most this many GPU sessions of one account at a time; a push beyond it is
# refused ("Maximum batch GPU session count of 2 reached"). TERNIT_KAGGLE_MAX_SESSIONS
# overrides it (tests).
MAX_GPU_SESSIONS = 2

ExpectedEnd = Callable[[dict[str, Any]], float | None]


def max_sessions() -> int:
    env = os.environ.get("TERNIT_KAGGLE_MAX_SESSIONS", "")
    return int(env) if env.isdigit() and int(env) > 0 else MAX_GPU_SESSIONS


def leg_reservation(leg: dict[str, Any], quota_checked_at: float | None) -> float:
    """The quota a leg in flight still holds: its kernel's limit, less what of it the last
    quota check already counted as used (Kaggle charges a session as it runs)."""
    limit_s = float(leg.get("limit_min") or 0.0) * 60.0
    pushed = leg.get("pushed_at")
    counted = max(0.0, (quota_checked_at or 0.0) - pushed) if pushed else 0.0
    return max(0.0, limit_s - counted)


def kaggle_accounts(store: KaggleStore, now: float | None = None,
                    expected_end: ExpectedEnd | None = None) -> tuple[Account, ...]:
    """Every Kaggle account of the lab, from the state alone (no network): quota as last
    checked, its legs in flight as leases."""
    now = time.time() if now is None else now
    legs = store.legs_in_flight()
    limit = max_sessions()
    out = []
    for v in Accounts(store).views():
        q = v.quota
        running = []
        for leg in (x for x in legs if x["account"] == v.username):
            reserved = leg_reservation(leg, q.checked_at if q else None)
            start = float(leg.get("pushed_at") or leg.get("updated_at") or now)
            end = (expected_end(leg) if expected_end else None) or start + float(leg.get("limit_min") or 0) * 60
            end = max(end, now + 1.0)
            running.append(Lease(min(start, now), end, reserved, min(reserved, end - now)))
        usable = v.usable and q is not None
        why = key_status_text(v) if q is not None else "quota unknown"
        out.append(Account(
            v.username, q.remaining_s if q else 0.0, q.total_s if q else 0.0, q.refresh_at if q else None,
            limit, tuple(running), usable, why, frozenset(d.content_hash for d in v.holds)))
    return tuple(out)
