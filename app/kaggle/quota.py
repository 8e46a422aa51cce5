"""A Kaggle account's weekly GPU quota: total − used − reserved, and when it refreshes."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..base.i18n import t


@dataclass(frozen=True)
class Quota:
    total_s: float
    used_s: float
    reserved_s: float
    refresh_at: float | None  # unix seconds of the weekly reset
    checked_at: float

    @property
    def remaining_s(self) -> float:
        return max(0.0, self.total_s - self.used_s - self.reserved_s)

    @property
    def fraction_left(self) -> float:
        return self.remaining_s / self.total_s if self.total_s > 0 else 0.0

    @classmethod
    def from_response(cls, resp: Any) -> Quota:
        gpu = getattr(resp, "gpu_quota", None)

        def secs(name: str) -> float:
            v = getattr(gpu, name, None) if gpu is not None else None
            return float(v.total_seconds()) if v is not None else 0.0

        refresh = getattr(resp, "quota_refresh_time", None)
        if isinstance(refresh, datetime):
            if refresh.tzinfo is None:
                refresh = refresh.replace(tzinfo=UTC)
            refresh_at: float | None = refresh.timestamp()
        else:
            refresh_at = None
        return cls(secs("total_time_allowed"), secs("time_used"), secs("time_reserved"),
                   refresh_at, time.time())


def hours(seconds: float) -> str:
    """'12 ч 30 мин' / '12 h 30 min'."""
    m = int(round(seconds / 60))
    h, m = divmod(m, 60)
    if h:
        return t(f"{h} ч {m:02d} мин", f"{h} h {m:02d} min")
    return t(f"{m} мин", f"{m} min")


def refresh_text(refresh_at: float | None) -> str:
    if refresh_at is None:
        return t("время обновления неизвестно", "refresh time unknown")
    local = datetime.fromtimestamp(refresh_at).strftime("%d.%m %H:%M")
    return t(f"обновится {local}", f"refreshes {local}")
