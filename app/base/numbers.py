"""Numbers as the interface says them, in its language: 27.7 M / «27,7 млн»,
2 h 05 min / «2 ч 05 мин», 455.2 KiB / «455,2 КиБ». One place, so the form, the history,
the data window and the command line write the same number the same way."""

from __future__ import annotations

import math
import re
from typing import Any

from .i18n import current_language

_UNITS = ((1e9, "млрд", "B"), (1e6, "млн", "M"), (1e3, "тыс.", "k"))


def round_sig(x: float, sig: int) -> float:
    if x == 0 or not math.isfinite(x):
        return x
    return round(x, sig - 1 - int(math.floor(math.log10(abs(x)))))


def count_text(n: float | None, lang: str | None = None, sig: int = 3) -> str:
    """A count with `sig` significant figures and a word unit: 554,823,680 → "550 M" (sig 2);
    None (not known yet) → "—"."""
    if n is None:
        return "—"
    lang = lang or current_language()
    v = round_sig(float(n), sig)
    for size, ru, en in _UNITS:
        if abs(v) >= size:
            q = round_sig(v / size, sig)
            body = f"{q:.{max(0, sig - 1 - int(math.floor(math.log10(abs(q)))))}f}" if q else "0"
            if "." in body:
                body = body.rstrip("0").rstrip(".")
            return f"{decimal_mark(body, lang)} {ru}" if lang == "ru" else f"{body} {en}"
    body = f"{v:.0f}" if abs(v) >= 1 or v == 0 else f"{v:.{sig}g}"
    return decimal_mark(body, lang)


def decimal_mark(text: str, lang: str | None = None) -> str:
    """A number written with a decimal point ("1.5", "0.39×") with the language's mark:
    «1,5» in Russian. Every decimal comma of the lab is written here."""
    return text.replace(".", ",") if (lang or current_language()) == "ru" else text


def decimal_text(x: float, digits: int = 1, lang: str | None = None, sign: bool = False) -> str:
    """`x` with `digits` decimals (and its sign, with `sign`): 1.5 / «1,5»."""
    return decimal_mark(f"{x:+.{digits}f}" if sign else f"{x:.{digits}f}", lang)


def percent_text(fraction: float, lang: str | None = None) -> str:
    """A share as a whole percent: 0.953 → «95 %» (a no-break space, as Russian writes it) /
    "95%"."""
    value = round(fraction * 100)
    return f"{value}\u00a0%" if (lang or current_language()) == "ru" else f"{value}%"


def sig_text(x: float, sig: int = 2, lang: str | None = None) -> str:
    """`x` to `sig` significant figures, never in exponent form: 0.00033 → «0,00033» /
    "0.00033", 27.73 → "27.7", 270.3 → "270"."""
    v = round_sig(float(x), sig)
    if v == 0 or not math.isfinite(v):
        return decimal_mark(f"{v:g}", lang)
    digits = max(0, sig - 1 - int(math.floor(math.log10(abs(v)))))
    body = f"{v:.{digits}f}"
    return decimal_mark(body.rstrip("0").rstrip(".") if "." in body else body, lang)


def loss_text(x: float | None, lang: str | None = None) -> str:
    """A loss as the history, the run's header, the notifications and `ternit run` show it:
    four decimals with the language's mark (5.3702 / «5,3702»); None → "—"."""
    return "—" if x is None else decimal_text(x, 4, lang)


def format_value(value: Any, lang: str | None = None) -> str:
    """A field's value the way a reader of that language expects it: 1 024 / 1,024 (a
    no-break space in Russian), 0,001 / 0.001, вкл./on; None (no value) → "—"."""
    lang = lang or current_language()
    if isinstance(value, bool):
        return ("вкл." if value else "выкл.") if lang == "ru" else ("on" if value else "off")
    if isinstance(value, int):
        return int_text(value, lang)
    if isinstance(value, float):
        return decimal_mark(f"{value:g}", lang)
    if value is None:
        return "—"
    return str(value)


# Russian groups digits with a no-break space (U+00A0), CLDR's separator for ru (and Qt's
# QLocale's): one space for every number the lab writes. Not the narrow U+202F: Windows'
# ANSI code pages (cp1251, cp1252) have no such character, and some fonts draw it as a box.
GROUP_RU = "\u00a0"


def int_text(n: int, lang: str | None = None) -> str:
    """20000 → "20 000" (ru, a no-break space) / "20,000" (en)."""
    lang = lang or current_language()
    return f"{n:,}".replace(",", GROUP_RU) if lang == "ru" else f"{n:,}"


def counted(n: int | float, ru: tuple[str, str, str], en: tuple[str, str], lang: str | None = None,
            sig: int | None = None) -> str:
    """A count with its noun in the form the number asks for: counted(3, ("прогон", "прогона",
    "прогонов"), ("run", "runs")) → «3 прогона» / "3 runs"; 21 → «21 прогон», 11 → «11
    прогонов»; the number as int_text writes it, or with `sig` as count_text does («113 тыс.
    токенов»: after a word unit the noun is plural). Every count said in words goes through
    here (tests/test_words.py finds those that do not)."""
    lang = lang or current_language()
    if sig is not None:
        body = count_text(n, lang, sig)
        whole = round_sig(float(n), sig)
        if abs(whole) >= 1000 or whole != int(whole):  # «27,7 млн весов», «1,5 токена»
            return f"{body} {ru[2 if abs(whole) >= 1000 else 1]}" if lang == "ru" else f"{body} {en[1]}"
        n = int(whole)
    else:
        body = int_text(int(n), lang)
    if lang == "ru":
        return f"{body} {plural_ru(int(n), *ru)}"
    return f"{body} {en[0] if abs(int(n)) == 1 else en[1]}"


def duration_text(seconds: float, lang: str | None = None) -> str:
    """An estimated duration to the precision an estimate has: seconds only under a minute,
    whole minutes under an hour, then hours and minutes, then days and hours."""
    lang = lang or current_language()
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s} с" if lang == "ru" else f"{s} s"
    minutes = int(round(s / 60))
    d, rem = divmod(minutes, 24 * 60)
    h, m = divmod(rem, 60)
    if lang == "ru":
        if d:
            return f"{d} д {h} ч"
        return f"{h} ч {m:02d} мин" if h else f"{m} мин"
    if d:
        return f"{d} d {h} h"
    return f"{h} h {m:02d} min" if h else f"{m} min"


def mb_text(mb: float, lang: str | None = None) -> str:
    """MiB as GB with one decimal above 1 GB: 12004 → "11,7 ГБ" / "11.7 GB"."""
    lang = lang or current_language()
    if mb >= 1024:
        body = decimal_text(mb / 1024, 1, lang)
        return f"{body} ГБ" if lang == "ru" else f"{body} GB"
    return f"{mb:.0f} МБ" if lang == "ru" else f"{mb:.0f} MB"


def bytes_text(n: int, lang: str | None = None) -> str:
    """A file size in binary units: 466,124 → "455.2 KiB" / «455,2 КиБ»."""
    lang = lang or current_language()
    for size, ru, en in ((1 << 30, "ГиБ", "GiB"), (1 << 20, "МиБ", "MiB"), (1 << 10, "КиБ", "KiB")):
        if n >= size:
            body = decimal_text(n / size, 1, lang)
            return f"{body} {ru}" if lang == "ru" else f"{body} {en}"
    return f"{n} Б" if lang == "ru" else f"{n} B"


def bytes_decimal_text(n: int, lang: str | None = None) -> str:
    """A size in decimal units, as Kaggle states its limits ("20 GB"): 20,013,808,640 →
    «20,0 ГБ» / "20.0 GB"; 450,405 → «450,4 КБ»."""
    lang = lang or current_language()
    for size, ru, en in ((10**9, "ГБ", "GB"), (10**6, "МБ", "MB"), (10**3, "КБ", "kB")):
        if n >= size:
            body = decimal_text(n / size, 1, lang)
            return f"{body} {ru}" if lang == "ru" else f"{body} {en}"
    return f"{n} Б" if lang == "ru" else f"{n} B"


def plural_ru(n: int, one: str, few: str, many: str) -> str:
    """Russian noun form after a number: 1 токен, 2 токена, 5 токенов (11–14 → many)."""
    n = abs(int(n))
    if n % 10 == 1 and n % 100 != 11:
        return one
    if 2 <= n % 10 <= 4 and not 12 <= n % 100 <= 14:
        return few
    return many


# Thousands separators as each language writes them: Russian a space (the guide's thin or
# no-break space, or a plain one), English a comma in groups of three.
_SPACES = " \u00a0\u202f\u2009"
_EN_GROUPS = re.compile(r"[+-]?[1-9]\d{0,2}(?:,\d{3})+(?:\.\d*)?(?:[eE][+-]?\d+)?")


def parse_number(text: str, kind: str = "float", lang: str | None = None) -> int | float:
    """A number as the user typed it in the interface's language: «20 000» / «0,001» in
    Russian, "20,000" / "0.001" in English (a point is taken in Russian too, and spaces
    between digits in both). `kind` "int" wants a whole number. ValueError if it is none."""
    lang = lang or current_language()
    raw = text.strip()
    for ch in _SPACES:
        raw = raw.replace(ch, "")
    if lang == "ru":
        raw = raw.replace(",", ".")
    elif "," in raw:
        if not _EN_GROUPS.fullmatch(raw):
            raise ValueError(f"not a number: {text!r}")
        raw = raw.replace(",", "")
    if kind == "int":
        return int(raw)
    value = float(raw)
    if not math.isfinite(value):
        raise ValueError(f"not a finite number: {text!r}")
    return value


def field_text(value: int | float | None, lang: str | None = None) -> str:
    """A number as an input field shows it, the way `parse_number` reads it back:
    20000 → «20 000» / "20,000", 0.001 → «0,001» / "0.001"."""
    lang = lang or current_language()
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, int):
        return int_text(value, lang)
    body = f"{value:g}"
    return body.replace(".", ",") if lang == "ru" else body
