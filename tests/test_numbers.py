"""app.base.numbers: one way to write a number in each language, wherever the lab shows it."""

from __future__ import annotations

import pytest

from app.base.numbers import bytes_text, count_text, duration_text


def test_counts_in_both_languages_and_unknown_as_a_dash() -> None:
    assert count_text(129_000, "ru") == "129 тыс." and count_text(129_000, "en") == "129 k"
    assert count_text(1_284_000, "ru") == "1,28 млн" and count_text(1_284_000, "en") == "1.28 M"
    assert count_text(None, "ru") == "—" and count_text(812, "en") == "812"


def test_file_sizes_use_binary_units_and_the_decimal_comma_in_russian() -> None:
    assert bytes_text(466_124, "ru") == "455,2 КиБ" and bytes_text(466_124, "en") == "455.2 KiB"
    assert bytes_text(3 << 30, "en") == "3.0 GiB" and bytes_text(900, "ru") == "900 Б"


def test_durations_keep_the_precision_of_an_estimate() -> None:
    assert duration_text(42, "ru") == "42 с"
    assert duration_text(610, "ru") == "10 мин" and duration_text(610, "en") == "10 min"
    assert duration_text(2 * 3600 + 5 * 60, "ru") == "2 ч 05 мин"
    assert duration_text(49 * 3600 + 20, "en") == "2 d 1 h"


@pytest.mark.parametrize("lang, text, kind, want", [
    ("en", "20,000", "int", 20000), ("en", "1,234,567", "int", 1234567), ("en", "0.001", "float", 0.001),
    ("en", "1,234.5", "float", 1234.5), ("en", "20000", "int", 20000),
    ("ru", "20 000", "int", 20000), ("ru", "20\u202f000", "int", 20000), ("ru", "20\u00a0000", "int", 20000),
    ("ru", "0,001", "float", 0.001), ("ru", "0.001", "float", 0.001),
])
def test_numbers_are_read_as_the_language_writes_them(lang, text, kind, want):
    """Issue 16: an English «20,000» was refused while the errors printed «100,000,000»."""
    from app.base.numbers import parse_number

    assert parse_number(text, kind, lang) == want


@pytest.mark.parametrize("lang, text, kind", [
    ("en", "0,001", "float"), ("en", "20,00", "int"), ("ru", "20,000", "int"), ("en", "inf", "float"),
    ("en", "abc", "int"), ("ru", "", "int"),
])
def test_what_is_no_number_in_that_language_is_refused(lang, text, kind):
    from app.base.numbers import parse_number

    with pytest.raises(ValueError):
        parse_number(text, kind, lang)


@pytest.mark.parametrize("value", [20000, 1024, 7, 0.001, 1e-6, 2.5, 100_000_000])
@pytest.mark.parametrize("lang", ["ru", "en"])
def test_a_field_shows_what_it_reads_back(value, lang):
    from app.base.numbers import field_text, parse_number

    text = field_text(value, lang)
    assert parse_number(text, "int" if isinstance(value, int) else "float", lang) == value
    if value in (0.001, 2.5):
        assert ("," in text) == (lang == "ru")


def test_decimal_marks_and_field_values_in_both_languages():
    from app.base.numbers import decimal_mark, decimal_text, format_value

    assert decimal_text(1.25, 1, "ru") == "1,2" and decimal_text(1.25, 1, "en") == "1.2"
    assert decimal_text(-0.0421, 3, "ru", sign=True) == "-0,042" and decimal_text(0.5, 3, "en", sign=True) == "+0.500"
    assert decimal_mark("0.39×", "ru") == "0,39×" and decimal_mark("0.39×", "en") == "0.39×"
    assert format_value(16384, "ru") == "16\u00a0384" and format_value(16384, "en") == "16,384"
    assert format_value(0.001, "ru") == "0,001" and format_value(True, "en") == "on" and format_value(None) == "—"


def test_no_decimal_comma_is_written_outside_app_numbers():
    """One formatter: a `.replace(".", ",")` elsewhere in app/ or ui/ is a second copy."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    pattern = re.compile(r"""replace\(\s*(['"])\.\1\s*,\s*(['"]),\2\s*\)""")
    allowed = {"app/base/numbers.py"}
    found = [str(p.relative_to(root)) for room in ("app", "ui") for p in (root / room).rglob("*.py")
             if str(p.relative_to(root)) not in allowed and pattern.search(p.read_text(encoding="utf-8"))]
    assert found == []
