"""Reading text out of a dataset's files, streaming: .txt/.md, .jsonl (a "text" field) and
.gz of those.

Everything is read as a stream of *units*: a document, or for a long document a run of its
paragraphs of about UNIT_CHARS characters. Units keep memory flat for a 1 GB text file, give
the tokenizer many pieces to encode in parallel, and are what the held-out sample is chosen
from (by a hash of the unit's text). A unit says whether it ends its document: the
end-of-text token goes between documents, never between the pieces of one.

The same reader counts a file when it is added (documents, characters, replacements) and
feeds the tokenizer when data is prepared, so the counts and the prepared text agree.
"""

from __future__ import annotations

import codecs
import gzip
import hashlib
import io
import json
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ..base.i18n import t

UNIT_CHARS = 16_384  # a unit closes at the first paragraph break after this many characters
HARD_UNIT_CHARS = 4 * UNIT_CHARS  # ... or at a line break after this many, whatever comes
LINE_PIECE = 1 << 20  # a single line is read in pieces of at most this many characters
SNIFF_BYTES = 8192

TEXT_SUFFIXES = {".txt": "text", ".md": "text", ".jsonl": "jsonl"}

# Non-UTF-8 bytes become U+FFFD; this handler counts them (per thread) so the user hears how
# many, instead of a crash or a silent change.
_counts = threading.local()


def _count_replace(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeDecodeError):
        raise exc
    _counts.n = getattr(_counts, "n", 0) + 1
    return "\ufffd", exc.end


codecs.register_error("ternit_count_replace", _count_replace)


def what_is_read() -> str:
    """What the lab reads from a dataset, in words (the add dialog, the refusal of a file with
    no text): the rule is `format_of` with `explicit` and the reader's binary check."""
    return t("текст в UTF-8 или Windows-1251 из файлов с любым именем, с расширением или без (в .jsonl — "
             "поле \"text\"), и они же сжатые в .gz; двоичные и скрытые файлы пропускаются",
             "UTF-8 or Windows-1251 text from files of any name, with an extension or none (in .jsonl, the "
             "\"text\" field), and the same compressed as .gz; binary and hidden files are skipped")


def format_of(path: Path, explicit: bool = False) -> str | None:
    """'text' or 'jsonl' for a file the lab reads, else None. A file named explicitly with an
    unknown suffix is read as plain text (the user said it holds text)."""
    name = path.name.lower()
    if name.endswith(".gz"):
        return TEXT_SUFFIXES.get(Path(name[:-3]).suffix) or ("text" if explicit else None)
    return TEXT_SUFFIXES.get(path.suffix.lower()) or ("text" if explicit else None)


@dataclass
class FileStats:
    """What reading one file found."""

    status: str = "ok"  # ok | empty | binary | unreadable
    documents: int = 0
    characters: int = 0
    replaced: int = 0  # byte sequences that were not UTF-8
    bad_lines: int = 0  # .jsonl lines that were not JSON objects with a string "text"
    note: str = ""
    sha256: str = ""  # of the file's bytes as stored
    size: int = 0


class _HashingReader(io.RawIOBase):
    """Passes a file's bytes through while hashing them: one read per file gives both."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw
        self.hash = hashlib.sha256()
        self.size = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:  # type: ignore[override]
        n = self.raw.readinto(b)
        if n:
            view = memoryview(b)[:n]
            self.hash.update(view)
            self.size += n
        return n or 0

    def drain(self) -> None:
        while chunk := self.raw.read(1 << 20):
            self.hash.update(chunk)
            self.size += len(chunk)


def looks_binary(head: bytes) -> bool:
    """NUL bytes or many control characters in the first bytes: not text."""
    if not head:
        return False
    if b"\x00" in head:
        return True
    control = sum(1 for b in head if b < 32 and b not in (9, 10, 12, 13, 27))
    return control > len(head) * 0.1


def looks_cp1251(head: bytes) -> bool:
    """Russian text saved in the Windows code page (cp1251), not UTF-8: read as UTF-8 every
    Cyrillic letter would become U+FFFD and the dataset would be all question marks. It is
    taken for cp1251 only when the bytes are not UTF-8, most of its non-ASCII characters are
    then Cyrillic letters and they are a good part of all letters: a UTF-8 file with a stray
    bad byte stays UTF-8, and so does Latin-1 text (its few accented letters, é ü, would
    read as Cyrillic ones among many Latin letters)."""
    if not head or head.startswith(codecs.BOM_UTF8):
        return False
    try:
        head.decode("utf-8")
        return False
    except UnicodeDecodeError as exc:
        if exc.start >= len(head) - 3 and exc.reason == "unexpected end of data":
            return False  # valid UTF-8 cut mid-character by the sniff's length
    text = head.decode("cp1251", errors="replace")
    high = [c for c in text if ord(c) >= 0x80]
    cyrillic = sum(1 for c in high if "\u0400" <= c <= "\u04ff")
    latin = sum(1 for c in text if c.isascii() and c.isalpha())
    return cyrillic >= 8 and cyrillic >= 0.75 * len(high) and cyrillic >= 0.25 * (cyrillic + latin)


def iter_file_units(path: Path, fmt: str, stats: FileStats) -> Iterator[tuple[str, bool]]:
    """(text, ends_document) for each unit of one file; fills `stats` as it goes.

    Problems become stats.status/note (binary, unreadable, empty) rather than exceptions, so
    one bad file never stops a whole dataset.
    """
    try:
        raw = open(path, "rb")  # noqa: SIM115 - closed in finally
    except OSError as exc:
        stats.status, stats.note = "unreadable", t(f"не читается: {exc.strerror or exc}", f"cannot read: {exc.strerror or exc}")
        return
    hashing = _HashingReader(raw)
    _counts.n = 0
    try:
        buffered = io.BufferedReader(hashing, 1 << 20)
        stream: BinaryIO = buffered
        if path.name.lower().endswith(".gz"):
            stream = io.BufferedReader(gzip.GzipFile(fileobj=buffered, mode="rb"), 1 << 20)  # type: ignore[arg-type]
        head = stream.peek(SNIFF_BYTES)[:SNIFF_BYTES]  # type: ignore[attr-defined]
        encoding = "utf-8-sig"
        if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
            encoding = "utf-16"  # Windows "Unicode" text: NULs, but text
        elif looks_binary(head):
            stats.status, stats.note = "binary", t("двоичный файл (не текст), пропущен", "binary file (not text), skipped")
            return
        elif looks_cp1251(head):
            encoding = "cp1251"
            stats.note = t("не UTF-8: прочитан как Windows-1251 (кириллица)",
                           "not UTF-8: read as Windows-1251 (Cyrillic)")
        text = io.TextIOWrapper(stream, encoding=encoding, errors="ternit_count_replace", newline=None)
        if fmt == "jsonl":
            yield from _jsonl_units(text, stats)
        else:
            yield from _text_units(text, stats)
        hashing.drain()  # the .gz trailer, or what a reader left: the hash covers every byte
    except (OSError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
        stats.status = "unreadable"
        stats.note = t(f"не читается ({type(exc).__name__}: {exc})", f"cannot read ({type(exc).__name__}: {exc})")
        return
    finally:
        stats.replaced += getattr(_counts, "n", 0)
        _counts.n = 0
        stats.sha256 = hashing.hash.hexdigest()
        stats.size = hashing.size
        raw.close()
    if stats.status == "ok" and stats.documents == 0:
        stats.status = "empty"
        stats.note = t("нет текста", "no text") + (f" ({_bad_lines_note(stats.bad_lines)})" if stats.bad_lines else "")


def _text_units(text: io.TextIOWrapper, stats: FileStats) -> Iterator[tuple[str, bool]]:
    """A .txt/.md file is one document, cut into units at paragraph breaks."""
    parts: list[str] = []
    size = 0
    any_text = False
    while True:
        line = text.readline(LINE_PIECE)
        if not line:
            break
        blank = not line.strip()
        if size >= UNIT_CHARS and (blank or size >= HARD_UNIT_CHARS):
            # close the unit before this line, so the next unit starts at the break
            if any_text:
                unit = "".join(parts)
                stats.characters += len(unit)
                yield unit, False
            parts, size = [], 0
        parts.append(line)
        size += len(line)
        any_text = any_text or not blank
    if not any_text:
        return  # whitespace only: an empty document
    unit = "".join(parts)
    stats.characters += len(unit)
    stats.documents += 1
    yield unit, True


def _jsonl_units(text: io.TextIOWrapper, stats: FileStats) -> Iterator[tuple[str, bool]]:
    for line in text:
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            stats.bad_lines += 1
            continue
        doc = obj.get("text") if isinstance(obj, dict) else None
        if not isinstance(doc, str):
            stats.bad_lines += 1
            continue
        if not doc.strip():
            continue
        stats.documents += 1
        stats.characters += len(doc)
        yield from split_document(doc)
    if stats.bad_lines:
        stats.note = _bad_lines_note(stats.bad_lines)


def _bad_lines_note(n: int) -> str:
    return t(f"строк без поля \"text\": {n}, пропущены", f"{n} lines without a \"text\" field, skipped")


def split_document(doc: str) -> Iterator[tuple[str, bool]]:
    """One in-memory document as units: cut at the first paragraph break after UNIT_CHARS
    (like a text file), or at a line break / hard cut when there is none for too long."""
    start = 0
    n = len(doc)
    while n - start > UNIT_CHARS:
        cut = doc.find("\n\n", start + UNIT_CHARS, start + HARD_UNIT_CHARS)
        if cut < 0:
            if n - start <= HARD_UNIT_CHARS:
                break
            cut = doc.find("\n", start + UNIT_CHARS, start + HARD_UNIT_CHARS)
            if cut < 0:
                cut = start + HARD_UNIT_CHARS - 1
        cut += 1
        yield doc[start:cut], False
        start = cut
    yield doc[start:], True


def read_whole(path: Path, fmt: str) -> tuple[list[str], FileStats]:
    """All documents of a file in memory (tests and small files only)."""
    stats = FileStats()
    docs: list[str] = []
    cur: list[str] = []
    for unit, end in iter_file_units(path, fmt, stats):
        cur.append(unit)
        if end:
            docs.append("".join(cur))
            cur = []
    return docs, stats
