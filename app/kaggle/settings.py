"""The Kaggle side's few settings: the quota margin and how often to ask Kaggle.

Read from the lab's settings.json ("kaggle_margin_min", "kaggle_poll_s"), overridable by
TERNIT_KAGGLE_MARGIN_MIN / TERNIT_KAGGLE_POLL_S (headless use and tests).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from .. import paths

DEFAULT_MARGIN_MIN = 15.0  # session set-up, the final checkpoint and the upload of outputs
DEFAULT_POLL_S = 15.0


@dataclass(frozen=True)
class KaggleSettings:
    margin_min: float = DEFAULT_MARGIN_MIN
    poll_s: float = DEFAULT_POLL_S


def _settings_file() -> dict:
    try:
        data = json.loads((paths.config_dir() / "settings.json").read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _number(env: str, stored: object, default: float) -> float:
    for value in (os.environ.get(env), stored):
        try:
            if value is not None and float(value) >= 0:  # type: ignore[arg-type]
                return float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            continue
    return default


def load() -> KaggleSettings:
    s = _settings_file()
    return KaggleSettings(
        margin_min=_number("TERNIT_KAGGLE_MARGIN_MIN", s.get("kaggle_margin_min"), DEFAULT_MARGIN_MIN),
        poll_s=_number("TERNIT_KAGGLE_POLL_S", s.get("kaggle_poll_s"), DEFAULT_POLL_S),
    )
