"""argparse for `ternit`'s commands, in the interface language.

argparse writes its own words ("usage:", "options", "show this help message and exit",
"the following arguments are required") in English whatever our texts are; a Russian help
page then reads half in one language. `Parser` puts those words in the interface language
too; every command module builds its parser (and sub-parsers, which inherit the class)
from it, with its own texts as `t(ru, en)` pairs.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from .i18n import t

# argparse's error messages (Python 3.10–3.13 wording) and their Russian; the parts in
# groups are names and values, kept as typed.
_ERRORS_RU: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p, re.S), ru) for p, ru in (
        (r"^the following arguments are required: (?P<a>.*)$", "не хватает аргументов: {a}"),
        (r"^unrecognized arguments: (?P<a>.*)$", "лишние аргументы: {a}"),
        (r"^ambiguous option: (?P<a>\S+) could match (?P<b>.*)$", "неоднозначный параметр {a}: подходят {b}"),
        (r"^invalid choice: (?P<a>.*?) \(choose from (?P<b>.*)\)$", "недопустимое значение {a} (можно: {b})"),
        (r"^invalid (?P<type>\w+) value: (?P<b>.*)$", "неверное значение {b} (нужно: {type})"),
        (r"^expected one argument$", "нужно значение"),
        (r"^expected at most one argument$", "можно не больше одного значения"),
        (r"^expected at least one argument$", "нужно хотя бы одно значение"),
        (r"^expected (?P<a>\d+) arguments?$", "нужно значений: {a}"),
        (r"^ignored explicit argument (?P<a>.*)$", "лишнее значение {a}"),
        (r"^not allowed with argument (?P<a>.*)$", "нельзя вместе с {a}"),
        (r"^one of the arguments (?P<a>.*) is required$", "нужен один из аргументов: {a}"),
        (r"^can't open '(?P<a>.*)': (?P<b>.*)$", "не открыть «{a}»: {b}"),
    )
)
_TYPES_RU = {"int": "целое число", "float": "число"}  # the `type=` names in "invalid int value"
_ARGUMENT = re.compile(r"^argument (?P<name>.+?): (?P<rest>.*)$", re.S)


def translate_error(message: str, lang: str | None = None) -> str:
    """argparse's error message in the interface language (unknown wording: as it is)."""
    if t("ru", "en", lang) == "en":
        return message
    prefix = ""
    m = _ARGUMENT.match(message)
    if m:
        prefix, message = f"аргумент {m['name']}: ", m["rest"]
    for pattern, ru in _ERRORS_RU:
        hit = pattern.match(message)
        if hit:
            parts = {k: _TYPES_RU.get(v, v) if k == "type" else v for k, v in hit.groupdict().items()}
            return prefix + ru.format(**parts)
    return prefix + message


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose headings, -h help, usage prefix and errors follow the
    interface language (read when the parser is built, as our `t()` texts are)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        add_help = kwargs.pop("add_help", True)
        self._usage_prefix = t("использование: ", "usage: ")
        super().__init__(*args, add_help=False, **kwargs)
        self._positionals.title = t("позиционные аргументы", "positional arguments")
        self._optionals.title = t("параметры", "options")
        if add_help:
            self.add_argument("-h", "--help", action="help", default=argparse.SUPPRESS,
                              help=t("показать эту справку и выйти", "show this help message and exit"))

    def _get_formatter(self) -> argparse.HelpFormatter:
        formatter = super()._get_formatter()
        add_usage = formatter.add_usage
        prefix = self._usage_prefix

        def usage_in_language(usage: Any, actions: Any, groups: Any, prefix_: str | None = None) -> None:
            add_usage(usage, actions, groups, prefix if prefix_ is None else prefix_)

        formatter.add_usage = usage_in_language  # type: ignore[method-assign]
        return formatter

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(2, t(f"{self.prog}: ошибка: {translate_error(message, 'ru')}\n",
                       f"{self.prog}: error: {message}\n"))


# A table written by `--out` starts with the UTF-8 byte order mark: Windows PowerShell 5.1,
# Notepad and Excel read a file without one in the ANSI code page (cp1251/cp1252) and garble
# every Cyrillic name. JSON is written without it: JSON readers (Python's json among them)
# refuse a BOM.
BOM = "\ufeff"


def add_out(p: argparse.ArgumentParser) -> None:
    """The `--out FILE` of a command that prints a table (`run list`, `queue list`, …)."""
    p.add_argument("--out", metavar=t("ФАЙЛ", "FILE"), help=t(
        "записать в ФАЙЛ в UTF-8 с BOM (его верно читают PowerShell, Блокнот и Excel; с --json — без BOM), "
        "а не в стандартный вывод",
        "write to FILE as UTF-8 with a BOM (read right by PowerShell, Notepad and Excel; with --json without "
        "one) instead of standard output"))


def print_to(path: str | None, command: Callable[[], int], prog: str, as_json: bool = False) -> int:
    """Run `command`, which prints its table to stdout, with that output going to `path`
    (UTF-8 with a BOM, written whole or not at all) when one is given; the exit code is the
    command's, or 2 with one line when the file cannot be written."""
    if not path:
        return command()
    from pathlib import Path

    from .atomic import write_text

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = command()
    target = Path(path).expanduser()
    try:
        write_text(target, buffer.getvalue() if as_json else BOM + buffer.getvalue())
    except OSError as e:
        why = e.strerror or e
        print(t(f"{prog}: не записать {target} ({why}): выберите другое место",
                f"{prog}: could not write {target} ({why}): choose another place"), file=sys.stderr)
        return 2
    print(t(f"{prog}: записано в {target}", f"{prog}: written to {target}"), file=sys.stderr)
    return code
