"""The text between the lab's processes is UTF-8, on every OS.

On Windows a standard stream that is not a console (a pipe, a file: the trainer's
trainer.log, `ternit run list > runs.txt`) is written in the ANSI code page (cp1252 on
English Windows, cp1251 on Russian) with strict errors, so a run named «проба ₽» or a sample
with an emoji kills the process that prints it. Two halves of one rule, used by the trainer
and the lab alike (the lab imports this module; it is standard library only):

- every Python child the lab starts gets UTF8_ENV in its environment, so even what Python
  prints before any of our code runs (a traceback at import) is UTF-8;
- every entry point calls utf8_stdio() first, so one started by hand and redirected is too.
A console is left alone: Windows' console writes any character itself (UTF-16), and a
terminal on Linux or macOS has its own locale.
"""

from __future__ import annotations

import codecs
import sys
from typing import Any

UTF8_ENV = {"PYTHONIOENCODING": "utf-8", "PYTHONUTF8": "1"}


def _is_console(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (OSError, ValueError, AttributeError):
        return False


def _is_utf8(stream: Any) -> bool:
    try:
        return codecs.lookup(stream.encoding).name == "utf-8"
    except (LookupError, TypeError, AttributeError):
        return False


def utf8_stdio() -> None:
    """stdout and stderr in UTF-8 unless they are a console (or absent: pythonw has none).
    Their error handlers stay (stdout strict, stderr backslashreplace): UTF-8 encodes every
    character, so only a lone surrogate could still fail, as it would on Linux."""
    for stream in (sys.stdout, sys.stderr):
        if stream is None or _is_console(stream) or _is_utf8(stream):
            continue
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:  # a TextIOWrapper; a test's capture object is left as it is
            reconfigure(encoding="utf-8")
