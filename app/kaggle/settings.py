"""The Kaggle side's few settings: the quota margin, how often to ask Kaggle, how long a
silent log stream is waited on, and how much a kernel's outputs hold.

Read from the lab's settings.json ("kaggle_margin_min", "kaggle_poll_s", "kaggle_stall_s",
"kaggle_output_gb"), overridable by TERNIT_KAGGLE_MARGIN_MIN / TERNIT_KAGGLE_POLL_S /
TERNIT_KAGGLE_STALL_S / TERNIT_KAGGLE_OUTPUT_GB (headless use and tests).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from trainer.config.run_config import KAGGLE_END_MARGIN_MIN

from ..base import settings as lab_settings

DEFAULT_MARGIN_MIN = KAGGLE_END_MARGIN_MIN  # session set-up, the final checkpoint, the outputs' upload
DEFAULT_POLL_S = 15.0
# A running kernel's log stream that sends nothing for this long is closed and opened again.
# Kaggle's load balancer cuts idle streams every few minutes anyway (kaggle 2.2.5's
# kernels_logs_cli reconnects for that); a trainer saving a big checkpoint can be silent a
# minute or two, which a reconnect costs nothing but the replay of the log.
DEFAULT_STALL_S = 120.0
# What /kaggle/working keeps of a session (docs/KAGGLE.md: "Notebooks can save up to 20GB of
# output"), in GB of 10⁹ bytes.
DEFAULT_OUTPUT_GB = 20.0


@dataclass(frozen=True)
class KaggleSettings:
    margin_min: float = DEFAULT_MARGIN_MIN
    poll_s: float = DEFAULT_POLL_S
    stall_s: float = DEFAULT_STALL_S
    output_gb: float = DEFAULT_OUTPUT_GB

    @property
    def output_bytes(self) -> int:
        return int(self.output_gb * 1e9)


def _number(env: str, stored: object, default: float, floor: float = 0.0) -> float:
    for value in (os.environ.get(env), stored):
        try:
            if value is not None and float(value) >= floor:  # type: ignore[arg-type]
                return float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            continue
    return default


def load() -> KaggleSettings:
    s = lab_settings.load()
    return KaggleSettings(
        margin_min=_number("TERNIT_KAGGLE_MARGIN_MIN", s.get("kaggle_margin_min"), DEFAULT_MARGIN_MIN),
        poll_s=_number("TERNIT_KAGGLE_POLL_S", s.get("kaggle_poll_s"), DEFAULT_POLL_S),
        stall_s=_number("TERNIT_KAGGLE_STALL_S", s.get("kaggle_stall_s"), DEFAULT_STALL_S, floor=0.1),
        output_gb=_number("TERNIT_KAGGLE_OUTPUT_GB", s.get("kaggle_output_gb"), DEFAULT_OUTPUT_GB),
    )
