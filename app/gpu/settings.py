"""The monitor's settings (heat guard on/off, temperature, seconds), kept in the config folder."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from app.base import paths

from .heat_guard import write_atomic

FILE = "monitor.json"


@dataclass
class MonitorSettings:
    heat_guard: bool = False
    guard_threshold_c: float = 83.0  # below the slowdown threshold of most desktop cards
    guard_hold_s: float = 30.0
    guard_hysteresis_c: float = 5.0
    interval_s: float = 1.0


def settings_path() -> Path:
    return paths.config_dir() / FILE


def load() -> MonitorSettings:
    """The saved settings; defaults for a missing or damaged file or unknown keys."""
    try:
        raw = json.loads(settings_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return MonitorSettings()
    if not isinstance(raw, dict):
        return MonitorSettings()
    out = MonitorSettings()
    for f in fields(MonitorSettings):
        value = raw.get(f.name)
        wants_bool = f.type in (bool, "bool")
        if isinstance(value, bool) == wants_bool and isinstance(value, (int, float)):
            setattr(out, f.name, value)
    return out


def save(settings: MonitorSettings) -> None:
    path = settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(asdict(settings), indent=1) + "\n")
