"""The window's settings: the interface language, kept in settings.json (config folder).

app.i18n reads the "language" key; this writes it, atomically, keeping any other keys.
"""

from __future__ import annotations

import json
from pathlib import Path

from app import atomic, paths
from app.i18n import LANGUAGES, set_language

SETTINGS = "settings.json"


def settings_path() -> Path:
    return paths.config_dir() / SETTINGS


def load() -> dict:
    try:
        data = json.loads(settings_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def save_language(lang: str) -> None:
    """Remember the interface language and use it from now on in this process."""
    if lang not in LANGUAGES:
        raise ValueError(f"language must be one of {LANGUAGES}, not {lang!r}")
    data = load()
    data["language"] = lang
    path = settings_path()
    atomic.write_json(path, data)
    set_language(lang)
