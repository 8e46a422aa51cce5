"""The Kaggle side's few settings: the quota margin and how often to ask Kaggle.

Read from the lab's settings.json ("kaggle_margin_min", "kaggle_poll_s"), overridable by
TERNIT_KAGGLE_MARGIN_MIN / TERNIT_KAGGLE_POLL_S (headless use and tests).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..base import settings as lab_settings

DEFAULT_MARGIN_MIN = 15.0  # session set-up, the final checkpoint and the upload of outputs
DEFAULT_POLL_S = 15.0


@dataclass(frozen=True)
class KaggleSettings:
    margin_min: float = DEFAULT_MARGIN_MIN
    poll_s: float = DEFAULT_POLL_S


def _number(env: str, stored: object, default: float) -> float:
    for value in (os.environ.get(env), stored):
        try:
            if value is not None and float(value) >= 0:  # type: ignore[arg-type]
                return float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            continue
    return default


def load() -> KaggleSettings:
    s = lab_settings.load()
    return KaggleSettings(
        margin_min=_number("TERNIT_KAGGLE_MARGIN_MIN", s.get("kaggle_margin_min"), DEFAULT_MARGIN_MIN),
        poll_s=_number("TERNIT_KAGGLE_POLL_S", s.get("kaggle_poll_s"), DEFAULT_POLL_S),
    )
