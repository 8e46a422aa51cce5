"""The window's settings: a thin view of app.base.settings (the one reader and writer of
settings.json), with the layout checked by app.window.layout and the form's values by
app.form.remembered."""

from __future__ import annotations

from app.base.i18n import LANGUAGES, set_language
from app.base.settings import load, save, update
from app.form import remembered as form_memory
from app.window import layout as window_layout
from app.window.layout import WindowLayout


def save_language(lang: str) -> None:
    """Remember the interface language and use it from now on in this process."""
    if lang not in LANGUAGES:
        raise ValueError(f"language must be one of {LANGUAGES}, not {lang!r}")
    update(language=lang)
    set_language(lang)


def save_ask_on_close(ask: bool) -> None:
    update(ask_on_close=bool(ask))


def load_layout() -> WindowLayout:
    """The windows' layout as last saved (each missing or bad part: its default)."""
    return window_layout.from_settings(load())


def save_layout(layout: WindowLayout) -> None:
    """Remember the windows' layout (OSError when the config folder cannot be written)."""
    save(window_layout.merged(load(), layout))


def load_form() -> dict:
    """The form's values as last saved (each missing or bad one left out)."""
    return form_memory.from_settings(load())


def save_form(values: dict) -> None:
    """Remember the form's values (OSError when the config folder cannot be written)."""
    save(form_memory.merged(load(), values))


OPEN_SECTIONS = "form_open_sections"  # the form's folded sections the user left open


def open_sections(known: tuple[str, ...]) -> set[str]:
    """The folded form sections («Дополнительно») the user left open; unknown names dropped."""
    raw = load().get(OPEN_SECTIONS)
    return {s for s in raw if s in known} if isinstance(raw, list) else set()


def save_open_sections(sections: set[str]) -> None:
    """Remember them (OSError when the config folder cannot be written)."""
    data = load()
    data[OPEN_SECTIONS] = sorted(sections)
    save(data)
