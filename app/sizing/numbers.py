"""Numbers as the panel says them: 27.7 M / «27,7 млн», 2 h 05 min / «2 ч 05 мин»."""

from __future__ import annotations

import math

_UNITS = ((1e9, "млрд", "B"), (1e6, "млн", "M"), (1e3, "тыс.", "k"))


def round_sig(x: float, sig: int) -> float:
    if x == 0 or not math.isfinite(x):
        return x
    return round(x, sig - 1 - int(math.floor(math.log10(abs(x)))))


def count_text(n: float, lang: str, sig: int = 3) -> str:
    """A count with `sig` significant figures and a word unit: 554,823,680 → "550 M" (sig 2)."""
    v = round_sig(float(n), sig)
    for size, ru, en in _UNITS:
        if abs(v) >= size:
            q = round_sig(v / size, sig)
            body = f"{q:.{max(0, sig - 1 - int(math.floor(math.log10(abs(q)))))}f}" if q else "0"
            if "." in body:
                body = body.rstrip("0").rstrip(".")
            return f"{body.replace('.', ',')} {ru}" if lang == "ru" else f"{body} {en}"
    body = f"{v:.0f}" if abs(v) >= 1 or v == 0 else f"{v:.{sig}g}"
    return body.replace(".", ",") if lang == "ru" else body


def int_text(n: int, lang: str) -> str:
    """20000 → "20 000" (ru, a thin space as in the guide) / "20,000" (en)."""
    return f"{n:,}".replace(",", "\u202f") if lang == "ru" else f"{n:,}"


def duration_text(seconds: float, lang: str) -> str:
    s = max(0, int(round(seconds)))
    d, rem = divmod(s, 86400)
    h, rem = divmod(rem, 3600)
    m, sec = divmod(rem, 60)
    if lang == "ru":
        if d:
            return f"{d} д {h} ч"
        if h:
            return f"{h} ч {m:02d} мин"
        return f"{m} мин {sec:02d} с" if m else f"{sec} с"
    if d:
        return f"{d} d {h} h"
    if h:
        return f"{h} h {m:02d} min"
    return f"{m} min {sec:02d} s" if m else f"{sec} s"


def mb_text(mb: float, lang: str) -> str:
    """MiB as GB with one decimal above 1 GB: 12004 → "11,7 ГБ" / "11.7 GB"."""
    if mb >= 1024:
        body = f"{mb / 1024:.1f}"
        return f"{body.replace('.', ',')} ГБ" if lang == "ru" else f"{body} GB"
    return f"{mb:.0f} МБ" if lang == "ru" else f"{mb:.0f} MB"


def plural_ru(n: int, one: str, few: str, many: str) -> str:
    """Russian noun form after a number: 1 токен, 2 токена, 5 токенов (11–14 → many)."""
    n = abs(int(n))
    if n % 10 == 1 and n % 100 != 11:
        return one
    if 2 <= n % 10 <= 4 and not 12 <= n % 100 <= 14:
        return few
    return many
