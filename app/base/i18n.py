"""Interface language: Russian or English.

The language comes from TERNIT_LANG if set (and `ternit --lang`, `ternit-lab --lang`), else
from settings.json in the config folder (key "language", which «Настройки → Язык
интерфейса» writes), else from the operating system: Russian where the user's interface
language is Russian, English otherwise (`system_language`, which the tests pin). Texts are written next to their use as `t(ru, en)` pairs or
kept in tables of {"ru": ..., "en": ...}; there is no scattered translation catalogue.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from . import paths, settings

LANGUAGES = ("ru", "en")
_override: str | None = None
# Russian's primary language id in a Windows LANGID (the low 10 bits).
_LANG_RUSSIAN = 0x19
# settings.json read once per change of its modification time: views ask for the language
# on every label they draw.
_cached: tuple[str, float, str] | None = None


def set_language(lang: str | None) -> None:
    """Force a language for this process (None: back to env/settings)."""
    global _override
    if lang is not None and lang not in LANGUAGES:
        raise ValueError(f"language must be one of {LANGUAGES}, not {lang!r}")
    _override = lang


def language_override() -> str | None:
    """The language `set_language` forced on this process (None: none)."""
    return _override


def os_language() -> str:
    """The language of the user's interface as the OS says it: "ru" when it is Russian,
    "en" for any other (the lab speaks only these two). Windows: the user's UI language
    (GetUserDefaultUILanguage, not the code page: an English Windows in Russia has a
    Cyrillic code page and English menus). Elsewhere gettext's order of variables:
    LANGUAGE, LC_ALL, LC_MESSAGES, LANG."""
    if sys.platform == "win32":
        import ctypes

        try:
            langid = int(ctypes.windll.kernel32.GetUserDefaultUILanguage())  # type: ignore[attr-defined]
        except (AttributeError, OSError):
            return "en"
        return "ru" if langid & 0x3FF == _LANG_RUSSIAN else "en"
    for name in ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG"):
        value = os.environ.get(name, "")
        first = value.split(":")[0].strip()
        if first and first not in ("C", "POSIX") and not first.startswith("C."):
            return "ru" if first.lower().startswith("ru") else "en"
    return "en"


_system: Callable[[], str] = os_language


def set_system_language(source: Callable[[], str] | None) -> None:
    """Where the language comes from when neither TERNIT_LANG nor the settings name one
    (None: the OS, `os_language`). The tests pin it (tests/conftest.py: Russian), so no
    test depends on the machine's locale."""
    global _system, _cached
    _system = source or os_language
    _cached = None


def system_language() -> str:
    """The language a lab with no choice of its own speaks: the OS's (see os_language)."""
    lang = _system()
    return lang if lang in LANGUAGES else "en"


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
        return system_language()
    if _cached is not None and _cached[:2] == (path, mtime):
        return _cached[2]
    # A file that is not a JSON object (hand-edited, torn) reads as {}: the default, not a
    # crash of every text the lab shows.
    stored = settings.load().get("language")
    lang = stored if stored in LANGUAGES else system_language()
    _cached = (path, mtime, lang)
    return lang


def t(ru: str, en: str, lang: str | None = None) -> str:
    """The text in the interface language."""
    return en if (lang or current_language()) == "en" else ru


def quoted(text: str, lang: str | None = None) -> str:
    """A name in the language's quotes: «tiny» in Russian, “tiny” in English."""
    return f"“{text}”" if (lang or current_language()) == "en" else f"«{text}»"


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

    def __reduce__(self) -> tuple:
        # copy.deepcopy (dataclasses.asdict of a record holding one) and pickle rebuild a
        # str subclass from its reduce value: without this they call Said(text) and fail.
        return (_said_as_shown, (str(self), self.texts["ru"], self.texts["en"], self.key))


def _said_as_shown(shown: str, ru: str, en: str, key: str) -> Said:
    """A Said rebuilt with the text it showed when it was made (its language then)."""
    obj = str.__new__(Said, shown)
    obj.texts = {"ru": ru, "en": en}
    obj.key = key
    return obj


def said(ru: str, en: str, key: str = "") -> Said:
    """`t(ru, en)` that remembers both texts (see Said)."""
    return Said(ru, en, key)


def in_language(text: str, lang: str | None = None) -> str:
    """A Said in the interface's language now; any other text as it is."""
    return text.in_language(lang) if isinstance(text, Said) else text

