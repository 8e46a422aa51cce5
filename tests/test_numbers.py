"""app.numbers: one way to write a number in each language, wherever the lab shows it."""

from __future__ import annotations

from app.numbers import bytes_text, count_text, duration_text


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
