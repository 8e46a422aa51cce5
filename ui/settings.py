"""The window's settings, kept in settings.json (config folder): the interface language
(app.i18n reads the "language" key) and whether closing the window asks about runs that
are still training ("ask_on_close"), and the windows' layout ("window": sizes, splitters,
the bottom tab, the history's columns; checked by app.window_layout) and the form's
values ("form", checked by app.form_memory). Written atomically,
keeping any other keys.
"""

from __future__ import annotations

import json
from pathlib import Path

from app import atomic, form_memory, paths, window_layout
from app.i18n import LANGUAGES, set_language
from app.window_layout import WindowLayout

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


def ask_on_close() -> bool:
    """Whether closing the window while a run trains asks what to do (default: yes)."""
    return load().get("ask_on_close", True) is not False


def save_ask_on_close(ask: bool) -> None:
    data = load()
    data["ask_on_close"] = bool(ask)
    atomic.write_json(settings_path(), data)


def load_layout() -> WindowLayout:
    """The windows' layout as last saved (each missing or bad part: its default)."""
    return window_layout.from_settings(load())


def save_layout(layout: WindowLayout) -> None:
    """Remember the windows' layout (OSError when the config folder cannot be written)."""
    atomic.write_json(settings_path(), window_layout.merged(load(), layout))


def load_form() -> dict:
    """The form's values as last saved (each missing or bad one left out)."""
    return form_memory.from_settings(load())


def save_form(values: dict) -> None:
    """Remember the form's values (OSError when the config folder cannot be written)."""
    atomic.write_json(settings_path(), form_memory.merged(load(), values))


OPEN_SECTIONS = "form_open_sections"  # the form's folded sections the user left open


def open_sections(known: tuple[str, ...]) -> set[str]:
    """The folded form sections («Дополнительно») the user left open; unknown names dropped."""
    raw = load().get(OPEN_SECTIONS)
    return {s for s in raw if s in known} if isinstance(raw, list) else set()


def save_open_sections(sections: set[str]) -> None:
    """Remember them (OSError when the config folder cannot be written)."""
    data = load()
    data[OPEN_SECTIONS] = sorted(sections)
    atomic.write_json(settings_path(), data)
