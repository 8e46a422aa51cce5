"""A damaged state database, set aside by the lab itself: what can be read of it goes into a
new one, and what could not is said exactly.

SQLite's own `.recover` lives in its command-line shell, which a user's PC may not have, and
Python's sqlite3 module offers nothing like it (`iterdump` stops at the first bad page). So
the salvage is done here, table by table and row by row: a table whose rows all read is
copied whole; where a read fails, its rows are read one rowid at a time and the unreadable
ones are counted. The damaged file stays beside the new one (`state.damaged-<time>.sqlite`,
its WAL with it) for whoever wants to try harder. Run folders are the truth for the run
history (the registry adopts them again); the data library — datasets and constellations,
which nothing else records — is what the salvage is for, and the prepared data's
meta.json files tell which of them were lost when rows could not be read.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from .i18n import t

SUFFIXES = ("", "-wal", "-shm")
ROWID_GAP = 64  # unreadable rowids in a row before the scan jumps ahead (a whole bad page)


@dataclass
class Salvage:
    """What the repair did: where the damaged file went, rows carried over per table, rows
    that could not be read, library entries the prepared data names that are gone."""

    aside: Path
    copied: dict[str, int] = field(default_factory=dict)
    lost: dict[str, int] = field(default_factory=dict)
    unreadable_tables: list[str] = field(default_factory=list)
    missing_library: list[str] = field(default_factory=list)

    def text(self) -> str:
        """One paragraph for the user: what was kept, what was lost, where the old file is."""
        kept = ", ".join(f"{name} {n}" for name, n in sorted(self.copied.items()) if n) or "—"
        lost = [f"{name}: {n}" for name, n in sorted(self.lost.items()) if n]
        lost += [t(f"{name}: не читается вся", f"{name}: unreadable") for name in self.unreadable_tables]
        out = t(f"Файл состояния лаборатории был повреждён: он отложен как {self.aside}, новый создан; "
                f"перенесено строк — {kept}.",
                f"The lab's state file was damaged: it was set aside as {self.aside} and a new one made; "
                f"rows carried over — {kept}.")
        if lost:
            out += t(f" Не прочитались строки — {'; '.join(lost)}.", f" Rows that could not be read — {'; '.join(lost)}.")
        if self.missing_library:
            out += t(f" Из библиотеки данных потеряны (их называют подготовленные данные): "
                     f"{'; '.join(self.missing_library)} — добавьте их снова (ternit data add).",
                     f" Lost from the data library (named by prepared data): {'; '.join(self.missing_library)} "
                     "— add them again (ternit data add).")
        elif not lost and not self.unreadable_tables:
            out += t(" Потерь нет.", " Nothing was lost.")
        return out


def is_damaged(conn: sqlite3.Connection) -> bool:
    """SQLite's own quick check of every page (milliseconds for the lab's small file)."""
    try:
        rows = conn.execute("PRAGMA quick_check").fetchall()
    except sqlite3.DatabaseError:
        return True
    return [tuple(r) for r in rows] != [("ok",)]


@contextmanager
def _exclusive(path: Path) -> Iterator[None]:
    """One repair at a time across the lab's processes (the OS frees it if one dies)."""
    fd = os.open(path.with_name(path.name + ".repair-lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if os.name == "posix":
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_EX)
        else:  # pragma: no cover - Windows
            import msvcrt

            while True:
                try:
                    msvcrt.locking(fd, msvcrt.LK_LOCK, 1)
                    break
                except OSError:
                    time.sleep(0.1)
        yield
    finally:
        os.close(fd)


def repair(path: Path, make_new: Callable[[sqlite3.Connection], object],
           prepared_root: Path | None = None) -> Salvage | None:
    """Set the damaged database at `path` aside, make a new one (`make_new(conn)`: the
    migrations) and carry over what can be read. None when, under the lock, the file turns
    out sound (another process repaired it first)."""
    path = Path(path)
    with _exclusive(path):
        if path.exists() and not _still_damaged(path):
            return None
        aside = path.with_name(f"{path.stem}.damaged-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}{path.suffix}")
        for suffix in SUFFIXES:  # the WAL goes with it: committed rows may still be only there
            src = Path(str(path) + suffix)
            if src.exists():
                os.replace(src, Path(str(aside) + suffix))
        new = sqlite3.connect(str(path), isolation_level=None)
        try:
            new.execute("PRAGMA journal_mode = WAL")
            make_new(new)
            salvage = Salvage(aside)
            _carry_over(aside, new, salvage)
        finally:
            new.close()
    if prepared_root is not None:
        salvage.missing_library = _missing_library(path, prepared_root)
    return salvage


def _still_damaged(path: Path) -> bool:
    try:
        conn = sqlite3.connect(str(path), isolation_level=None)
    except sqlite3.Error:
        return True
    try:
        return is_damaged(conn)
    finally:
        conn.close()


def _carry_over(aside: Path, new: sqlite3.Connection, salvage: Salvage) -> None:
    try:
        old = sqlite3.connect(f"file:{aside}?mode=ro", uri=True, isolation_level=None)
    except sqlite3.Error:
        salvage.unreadable_tables.append("*")
        return
    new.execute("PRAGMA foreign_keys = OFF")  # rows come table by table, in no particular order
    try:
        tables = [r[0] for r in new.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
            "AND name != 'schema_migrations'")]
        for table in tables:
            _carry_table(old, new, table, salvage)
    finally:
        old.close()


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]


def _carry_table(old: sqlite3.Connection, new: sqlite3.Connection, table: str, salvage: Salvage) -> None:
    try:
        cols = [c for c in _columns(old, table) if c in set(_columns(new, table))]
    except sqlite3.DatabaseError:
        cols = []
    if not cols:
        salvage.unreadable_tables.append(table)
        return
    names = ", ".join(f'"{c}"' for c in cols)
    insert = f'INSERT OR IGNORE INTO "{table}" ({names}) VALUES ({", ".join("?" * len(cols))})'
    copied = lost = 0
    try:
        rows = old.execute(f'SELECT {names} FROM "{table}"').fetchall()
    except sqlite3.DatabaseError:
        rows = None
    if rows is not None:
        for row in rows:
            copied += new.execute(insert, row).rowcount
    else:  # a bad page somewhere: one rowid at a time, the unreadable ones counted
        for row in _rows_one_by_one(old, table, names):
            if row is None:
                lost += 1
            else:
                copied += new.execute(insert, row).rowcount
    salvage.copied[table] = copied
    salvage.lost[table] = lost


def _rows_one_by_one(old: sqlite3.Connection, table: str, names: str) -> Iterator[tuple | None]:
    """Each row by rowid, None for one that cannot be read; rowids the scan cannot find past
    a bad page are skipped in growing jumps up to the largest rowid the table reports."""
    try:
        top = old.execute(f'SELECT max(rowid) FROM "{table}"').fetchone()[0] or 0
    except sqlite3.DatabaseError:
        top = None
    rowid, misses = 0, 0
    while True:
        try:
            found = old.execute(f'SELECT rowid, {names} FROM "{table}" WHERE rowid > ? ORDER BY rowid LIMIT 1',
                                (rowid,)).fetchone()
        except sqlite3.DatabaseError:
            found = False
        if found is None:
            return
        if found is False:
            yield None
            misses += 1
            rowid += 1 if misses < ROWID_GAP else misses
            if top is not None and rowid > top:
                return
            if top is None and misses > 100_000:
                return
            continue
        misses = 0
        rowid = found[0]
        yield tuple(found[1:])


def _missing_library(path: Path, prepared_root: Path) -> list[str]:
    """The constellations and datasets that prepared data names (its meta.json "sources")
    and the new library lacks: what the salvage could not bring back."""
    conn = sqlite3.connect(str(path))
    try:
        have_c = {r[0] for r in conn.execute("SELECT name FROM constellations")}
        have_d = {r[0] for r in conn.execute("SELECT name FROM datasets")}
    except sqlite3.Error:
        return []
    finally:
        conn.close()
    missing: set[str] = set()
    for meta in sorted(Path(prepared_root).glob("*/meta.json")) if Path(prepared_root).is_dir() else []:
        try:
            sources = json.loads(meta.read_text(encoding="utf-8")).get("sources") or []
        except (OSError, ValueError, AttributeError):
            continue
        for entry in sources:
            if isinstance(entry, list) and len(entry) >= 2:
                constellation, dataset = str(entry[0]), str(entry[1])
                if constellation not in have_c:
                    missing.add(t(f"созвездие {constellation}", f"constellation {constellation}"))
                if dataset not in have_d:
                    missing.add(t(f"набор {dataset}", f"dataset {dataset}"))
    return sorted(missing)
