"""The lab's settings file, settings.json in the config folder: read and written here only.

Its keys and who checks them: "language" (app.base.i18n), "ask_on_close" (closing the window
while a run trains asks what to do), "keep_awake" (trainer/run/awake.py, through the trainer's and
the queue runner's environment), "window" (app.window.layout), "form"
(app.form.remembered), "kaggle_margin_min" and "kaggle_poll_s" (app.kaggle.settings). A
missing, damaged or hand-edited file that is not a JSON object reads as {}: every key at
its default, never a crash. Writes are atomic and keep the keys they do not change.
(The GPU monitor's settings are a file of their own, app.gpu.settings.)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from . import atomic, paths

FILE = "settings.json"


def path() -> Path:
    return paths.config_dir() / FILE


def load() -> dict[str, Any]:
    """The file's contents ({} for a missing, unreadable or damaged file)."""
    try:
        data = json.loads(path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def save(data: dict[str, Any]) -> None:
    """Write the whole contents atomically (OSError when the config folder cannot be written)."""
    atomic.write_json(path(), data)


def update(**changes: Any) -> None:
    """Set these keys, keeping the others."""
    data = load()
    data.update(changes)
    save(data)


def keep_awake() -> bool:
    """«Не давать ПК уснуть, пока идёт обучение»: whether the trainer and the queue runner ask
    the OS not to sleep while they work (trainer/run/awake.py; default: yes)."""
    return load().get("keep_awake", True) is not False


def save_keep_awake(on: bool) -> None:
    update(keep_awake=bool(on))


def ask_on_close() -> bool:
    """Whether closing the window while a run trains asks what to do (default: yes)."""
    return load().get("ask_on_close", True) is not False
