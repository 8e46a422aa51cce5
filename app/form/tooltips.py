"""The one rule for tooltip text: lines of at most ~60 characters, at most 12 lines.

Qt draws a plain tooltip on a single line as wide as its text (a 1,100-pixel strip for a
long sentence) and a long one as a wall over the form. Every tooltip the window shows goes
through `wrap_tip` (ui/base/tooltips.py applies it to each widget's and menu item's tooltip), so
the rule lives here once. The long story of a form field is its help page («Подробнее»),
which the tooltip's last line names (app/form/fields.py).
"""

from __future__ import annotations

import functools
import re
import textwrap

WIDTH = 60  # characters a line
MAX_LINES = 12

# Spaces that must not become line breaks: inside a number written with space-separated
# thousands («12 288», «102 000») and before a unit or a dash that belongs to the word
# before it would read badly alone at a line's start.
_KEEP_TOGETHER = re.compile(r"(?<=\d) (?=\d{3}(?!\d))|(?<=\S) (?=[—–](?:\s|$))")
_GLUE = "\ue000"  # a private-use character: textwrap splits only at ASCII whitespace


def glue_numbers(text: str) -> str:
    """`text` with no-break spaces where a line break would split a number («5 536») or
    leave a dash alone at a line's start: for text laid out by Qt (a help page)."""
    return _KEEP_TOGETHER.sub("\u00a0", text)


def is_rich(text: str) -> bool:
    """Rich text (Qt lays it out and wraps it by itself): left as it is."""
    return text.lstrip().startswith("<")


@functools.lru_cache(maxsize=2048)  # pure; the form asks again for the same texts at every refresh
def wrap_tip(text: str, width: int = WIDTH, max_lines: int = MAX_LINES) -> str:
    """`text` broken into lines of at most `width` characters (a single unbreakable token
    may be longer), the author's own line breaks kept; more than `max_lines` lines are cut
    to `max_lines`, the last ending in «…». Applying it twice changes nothing."""
    if not text or is_rich(text):
        return text
    lines: list[str] = []
    for paragraph in text.split("\n"):
        if not paragraph.strip():
            lines.append("")
            continue
        glued = _KEEP_TOGETHER.sub(_GLUE, paragraph)
        indent = re.match(r"\s*(?:[•·\-–—]\s+)?", glued)
        hang = " " * len(indent.group(0)) if indent and indent.group(0).strip() else ""
        parts = textwrap.wrap(glued, width=width, break_long_words=False, break_on_hyphens=False,
                              subsequent_indent=hang) or [""]
        lines += [p.replace(_GLUE, " ") for p in parts]
    while lines and not lines[-1]:
        lines.pop()
    if len(lines) > max_lines:
        lines = lines[:max_lines]
        last = lines[-1].rstrip(" .,;:")
        if len(last) > width - 2:
            last = last[: width - 2].rsplit(" ", 1)[0]
        lines[-1] = last + " …"
    return "\n".join(lines)


def fits(text: str, width: int = WIDTH, max_lines: int = MAX_LINES) -> bool:
    """Whether `text` keeps the rule (a line longer than `width` only as a single token)."""
    if is_rich(text):
        return True
    lines = text.split("\n")
    return len(lines) <= max_lines and all(len(x) <= width or " " not in x.strip() for x in lines)
