"""Interface language: Russian by default, English as a setting.

The language comes from TERNIT_LANG if set, else from settings.json in the config folder
(key "language"), else Russian. Texts are written next to their use as `t(ru, en)` pairs or
kept in tables of {"ru": ..., "en": ...}; there is no scattered translation catalogue.
"""

from __future__ import annotations

import os

from . import paths, settings

LANGUAGES = ("ru", "en")
_override: str | None = None
# settings.json read once per change of its modification time: views ask for the language
# on every label they draw.
_cached: tuple[str, float, str] | None = None


def set_language(lang: str | None) -> None:
    """Force a language for this process (None: back to env/settings)."""
    global _override
    if lang is not None and lang not in LANGUAGES:
        raise ValueError(f"language must be one of {LANGUAGES}, not {lang!r}")
    _override = lang


def current_language() -> str:
    if _override:
        return _override
    env = os.environ.get("TERNIT_LANG")
    if env in LANGUAGES:
        return env
    return _language_from_settings()


def _language_from_settings() -> str:
    global _cached
    path = paths.config_file(settings.FILE)  # asked at every label: no folder made, one stat
    try:
        mtime = os.stat(path).st_mtime
    except OSError:
        return "ru"
    if _cached is not None and _cached[:2] == (path, mtime):
        return _cached[2]
    # A file that is not a JSON object (hand-edited, torn) reads as {}: the default, not a
    # crash of every text the lab shows.
    stored = settings.load().get("language")
    lang = stored if stored in LANGUAGES else "ru"
    _cached = (path, mtime, lang)
    return lang


def t(ru: str, en: str, lang: str | None = None) -> str:
    """The text in the interface language."""
    return en if (lang or current_language()) == "en" else ru


def pick(texts: dict[str, str], lang: str | None = None) -> str:
    """The text of a {"ru": ..., "en": ...} table entry in the interface language."""
    return texts[lang or current_language()]


class Said(str):
    """A text in the current language that keeps both languages: a message made in one
    process (a `ternit data` child) and shown later by another, perhaps after the user
    switched the interface's language. `key` names the kind of message, for a reader that
    treats one kind apart."""

    texts: dict[str, str]
    key: str

    def __new__(cls, ru: str, en: str, key: str = "", lang: str | None = None) -> Said:
        obj = super().__new__(cls, t(ru, en, lang))
        obj.texts = {"ru": ru, "en": en}
        obj.key = key
        return obj

    def in_language(self, lang: str | None = None) -> str:
        return self.texts[lang or current_language()]


def said(ru: str, en: str, key: str = "") -> Said:
    """`t(ru, en)` that remembers both texts (see Said)."""
    return Said(ru, en, key)


def in_language(text: str, lang: str | None = None) -> str:
    """A Said in the interface's language now; any other text as it is."""
    return text.in_language(lang) if isinstance(text, Said) else text
