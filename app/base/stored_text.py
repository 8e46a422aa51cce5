"""Texts kept for a later reader (a queue item's note, a run's last message, in the state
file): both languages as one JSON object, so the reader sees it in the language of the
moment it reads, not of the moment it was written; a wait's counter ("{waited}") counted to
the reader's now. Text stored before, or written by the trainer (English), reads as it is."""

from __future__ import annotations

import json
import time

from .i18n import Said, current_language
from .numbers import duration_text


def both(ru: str, en: str, since: float | None = None) -> str:
    """The stored form of a text in both languages (see `shown`). With `since` (unix time),
    "{waited}" in the texts is the time since then as the reader reads it: a counter that
    stays right between the writer's updates («ждём 3 мин», not the «0 с» of the write)."""
    texts: dict[str, object] = {"ru": ru, "en": en}
    if since is not None:
        texts["since"] = float(since)
    return json.dumps(texts, ensure_ascii=False)


def both_of(texts: dict[str, str]) -> str:
    """`both` of a {"ru": …, "en": …} table entry (a status label, a field's name)."""
    return both(texts["ru"], texts["en"])


def shown(stored: str | None, lang: str | None = None, now: float | None = None) -> str:
    """A stored text in the reader's language (its "{waited}" counted to `now`): `both`'s
    form, a Said, or any other text as it is ("" for None)."""
    if not stored:
        return ""
    if isinstance(stored, Said):
        return stored.in_language(lang)
    if stored.startswith('{"ru": '):
        try:
            texts = json.loads(stored)
        except ValueError:
            return stored
        if isinstance(texts, dict) and {"ru", "en"} <= texts.keys():
            lang = lang or current_language()
            text = str(texts[lang])
            since = texts.get("since")
            if isinstance(since, (int, float)) and "{waited}" in text:
                waited = max(0.0, (time.time() if now is None else now) - since)
                text = text.replace("{waited}", duration_text(waited, lang))
            return text
    return stored
