"""The lab's state: one SQLite file (app.base.paths.state_db_path()) with versioned migrations.

Migrations are the files `app/migrations/NNN_name.sql`, applied in number order, each in
its own transaction together with `PRAGMA user_version` (the highest applied) and a row in
`schema_migrations`, so a crash mid-migration leaves the database as it was. Numbers may
have gaps that are filled later (one engineer's 003 can land before another's 002): every
file not yet applied is applied, in number order. Opening an older database upgrades it.

Threads: the window polls the state from a timer while a worker thread writes, so every
thread gets its own connection (sqlite3 connections are not for sharing). WAL mode lets the
readers go on while one writer writes; `busy_timeout` makes a second writer wait instead of
failing at once.

Connections run in autocommit mode: a single `execute` is its own transaction; several
statements that must stand or fall together go in `with state.transaction():`.
"""

from __future__ import annotations

import logging
import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import paths
from .state_repair import is_damaged, repair

log = logging.getLogger(__name__)

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"

def _wait_ms() -> int:
    """How long a command waits for another program's write lock on the state file: two
    minutes (a backup or sync tool, an SQLite browser's edit), TERNIT_STATE_WAIT_S to
    change it (the tests wait a second or two)."""
    try:
        return max(0, int(float(os.environ.get("TERNIT_STATE_WAIT_S", "120")) * 1000))
    except ValueError:
        return 120_000


BUSY_TIMEOUT_MS = _wait_ms()
_NAME = re.compile(r"^(\d{3})_[A-Za-z0-9_\-]+\.sql$")


class StateError(RuntimeError):
    """The state database cannot be used; the message says why and what to do."""


def unavailable(path: Path, exc: sqlite3.Error, what: str = "") -> StateError:
    """A failure of the state file in one line (a full disk, a lock, a failing disk, a
    damaged file: app/base/state_faults.py), with what was not done and what to do."""
    from .state_faults import state_error

    return StateError(state_error(path, exc, what, BUSY_TIMEOUT_MS / 1000))


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    path: Path

    def statements(self) -> list[str]:
        return split_statements(self.path.read_text(encoding="utf-8"))


def find_migrations(folder: Path = MIGRATIONS_DIR) -> list[Migration]:
    """The migration files in number order; two files with one number are an error."""
    found: dict[int, Migration] = {}
    for p in sorted(folder.glob("*.sql")) if folder.is_dir() else []:
        m = _NAME.match(p.name)
        if not m:
            continue
        version = int(m.group(1))
        if version == 0:
            raise StateError(f"migration {p.name}: numbers start at 001")
        if version in found:
            raise StateError(
                f"two migrations share number {version:03d}: {found[version].path.name} and {p.name}"
            )
        found[version] = Migration(version, p.stem, p)
    return [found[v] for v in sorted(found)]


def split_statements(sql: str) -> list[str]:
    """Split a script into complete statements (sqlite3 knows where triggers end)."""
    out: list[str] = []
    buf = ""
    for line in sql.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            stmt = buf.strip()
            if _strip_comments(stmt):
                out.append(stmt)
            buf = ""
    if _strip_comments(buf).strip():
        raise StateError(f"unterminated SQL statement: {buf.strip()[:80]!r}")
    return out


def _strip_comments(sql: str) -> str:
    return "\n".join(line.split("--", 1)[0] for line in sql.splitlines()).strip().rstrip(";").strip()


class _Connection(sqlite3.Connection):
    """A connection whose every statement that meets another program's write lock waits
    WAIT_NOTICE_S, says so (who holds the file, that the lab waits), then waits the rest of
    BUSY_TIMEOUT_MS: a plain UPDATE as much as a BEGIN, so no write fails at SQLite's first
    busy moment and none waits unannounced."""

    state_path: Path
    _notice_ms = -1

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:  # type: ignore[override]
        return self._waiting(super().execute, sql, parameters)

    def executemany(self, sql: str, parameters: Any, /) -> sqlite3.Cursor:  # type: ignore[override]
        return self._waiting(super().executemany, sql, parameters)

    def _busy(self, ms: int) -> None:
        sqlite3.Connection.execute(self, f"PRAGMA busy_timeout = {int(ms):d}")

    def _waiting(self, fn: Callable[..., sqlite3.Cursor], *args: Any) -> sqlite3.Cursor:
        notice_ms = int(WAIT_NOTICE_S * 1000)
        if notice_ms != self._notice_ms:  # read each time: a test may shorten it
            self._busy(notice_ms)
            self._notice_ms = notice_ms
        try:
            return fn(*args)
        except sqlite3.OperationalError as exc:
            from .state_faults import holder_text, kind

            rest = BUSY_TIMEOUT_MS / 1000 - WAIT_NOTICE_S
            if kind(exc) != "locked" or rest <= 0:
                raise
            from .i18n import t
            from .numbers import duration_text

            who = holder_text(self.state_path)
            _say_wait(t(f"файл состояния лаборатории {self.state_path} занят ({who}): жду до {duration_text(rest, 'ru')}…",
                        f"the lab's state file {self.state_path} is locked ({who}): waiting up to {duration_text(rest, 'en')}…"))
            self._busy(int(rest * 1000))
            try:
                return fn(*args)
            finally:
                self._busy(notice_ms)


def _connect(path: Path) -> sqlite3.Connection:
    # isolation_level=None: autocommit; transactions are explicit (BEGIN ... COMMIT).
    # check_same_thread=False only so that close() can close every thread's connection at
    # shutdown; each connection is still used by the one thread that made it.
    conn = sqlite3.connect(
        str(path), timeout=WAIT_NOTICE_S, isolation_level=None, check_same_thread=False, factory=_Connection
    )
    conn.state_path = path
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA synchronous = NORMAL")  # safe with WAL; a power cut loses at most the last commit
    return conn


def migrate(conn: sqlite3.Connection, migrations: Sequence[Migration] | None = None) -> list[int]:
    """Apply every migration not yet applied, in number order; returns the versions applied.

    `PRAGMA user_version` holds the highest version applied; the table `schema_migrations`
    remembers each one, so a gap filled later (002 landing after 003 was applied) is still
    applied. Each runs under BEGIN IMMEDIATE and re-checks inside the lock, so two processes
    opening the same fresh database never apply one migration twice.
    """
    migrations = find_migrations() if migrations is None else list(migrations)
    known = max((m.version for m in migrations), default=0)
    current = conn.execute("PRAGMA user_version").fetchone()[0]
    if current > known:
        from .i18n import t

        raise StateError(t(
            f"файл состояния — версии {current}, новее, чем знает эта версия лаборатории ({known}); "
            "обновите лабораторию или укажите другую папку данных (TERNIT_HOME)",
            f"the state database is at version {current}, newer than this lab knows ({known}); "
            "update the lab, or point it at another data folder (TERNIT_HOME)"))
    applied: list[int] = []
    for mig in migrations:
        if mig.version in _applied_versions(conn):
            continue
        statements = mig.statements()
        conn.execute("BEGIN IMMEDIATE")
        try:
            if mig.version in _applied_versions(conn):
                conn.execute("ROLLBACK")
                continue
            for stmt in statements:
                conn.execute(stmt)
            conn.execute(_MIGRATIONS_TABLE)
            conn.execute(
                "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                (mig.version, mig.name, time.time()),
            )
            top = max(mig.version, conn.execute("PRAGMA user_version").fetchone()[0])
            conn.execute(f"PRAGMA user_version = {top:d}")
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            conn.execute("ROLLBACK")
            raise StateError(f"migration {mig.path.name} failed: {exc}") from exc
        applied.append(mig.version)
    return applied


_MIGRATIONS_TABLE = (
    "CREATE TABLE IF NOT EXISTS schema_migrations "
    "(version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
)


def _applied_versions(conn: sqlite3.Connection) -> set[int]:
    has_table = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
    ).fetchone()
    if has_table:
        return {r[0] for r in conn.execute("SELECT version FROM schema_migrations")}
    # A database with a version but no record (made by hand or by an older lab): trust it.
    current = conn.execute("PRAGMA user_version").fetchone()[0]
    return set(range(1, current + 1))


class State:
    """The lab's state database: one connection per thread, migrations applied on open."""

    def __init__(self, path: Path, migrations: Sequence[Migration] | None = None) -> None:
        self.path = Path(path)
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._closed = False
        # What the lab did with a damaged file at this open (app/base/state_repair.py), said
        # once by whoever opened it (`ternit`, the window): None when the file was sound.
        self.repaired: str | None = None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._open(migrations)
        except sqlite3.DatabaseError as exc:
            self.close()
            from .i18n import t

            raise unavailable(self.path, exc, t("Лаборатория не открылась.", "The lab did not open.")) from exc

    def _open(self, migrations: Sequence[Migration] | None) -> None:
        """Open, set WAL and migrate; a damaged file is set aside and what can be read of it
        carried over into a new one first (once)."""
        from .state_faults import kind

        try:
            conn = self.conn
            damaged = is_damaged(conn)
        except sqlite3.DatabaseError as exc:
            if kind(exc) != "damaged":
                raise
            damaged = True
        if damaged:
            self._drop_connections()
            salvage = repair(self.path, lambda c: migrate(c, migrations), paths.prepared_dir())
            if salvage is not None:
                self.repaired = salvage.text()
                _repairs.append(self.repaired)
                log.warning("state file repaired: %s", self.repaired)
            conn = self.conn
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        # Not WAL on e.g. a network file system: still works, only with less concurrency.
        self.journal_mode = "wal" if str(mode).lower() == "wal" else str(mode)
        self.applied = migrate(conn, migrations)

    def _drop_connections(self) -> None:
        with self._lock:
            conns, self._all = self._all, []
        for c in conns:
            c.close()
        self._local = threading.local()

    @property
    def conn(self) -> sqlite3.Connection:
        """This thread's connection (made on first use)."""
        if self._closed:
            raise StateError("the state database is closed")
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = _connect(self.path)
            self._local.conn = conn
            with self._lock:
                self._all.append(conn)
        return conn

    @property
    def version(self) -> int:
        return int(self.conn.execute("PRAGMA user_version").fetchone()[0])

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> sqlite3.Cursor:
        return self.conn.execute(sql, params)

    def executemany(self, sql: str, rows: Any) -> sqlite3.Cursor:
        return self.conn.executemany(sql, rows)

    def query(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[sqlite3.Row]:
        return self.conn.execute(sql, params).fetchall()

    def one(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> sqlite3.Row | None:
        return self.conn.execute(sql, params).fetchone()

    @contextmanager
    def transaction(self, immediate: bool = True) -> Iterator[sqlite3.Connection]:
        """BEGIN (IMMEDIATE: take the write lock now, so no deadlock on upgrade) ... COMMIT,
        or ROLLBACK on any exception. Nested use joins the outer transaction."""
        conn = self.conn
        if conn.in_transaction:
            yield conn
            return
        # IMMEDIATE waits for another program's write lock aloud (_Connection).
        conn.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        else:
            conn.execute("COMMIT")

    def close(self) -> None:
        """Close every thread's connection (call from the owning thread at shutdown)."""
        self._drop_connections()
        self._closed = True

    def __enter__(self) -> State:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_repairs: list[str] = []  # what this process's opens did with a damaged file, not said yet
WAIT_NOTICE_S = 1.0  # a write blocked by another program's lock this long is said, then waited on
_wait_listeners: list[Callable[[str], object]] = []


def on_wait(fn: Callable[[str], object]) -> None:
    """`fn(line)` hears when a write waits for another program's lock on the state file (the
    CLI prints it; the log has it anyway)."""
    _wait_listeners.append(fn)


def _say_wait(line: str) -> None:
    log.info("%s", line)
    for fn in list(_wait_listeners):
        fn(line)


def repairs_to_say() -> list[str]:
    """What the lab did with a damaged state file in this process, each said once: the CLI
    prints it after the command, the window in its first status line."""
    said, _repairs[:] = list(_repairs), []
    return said


def failure_text(exc: BaseException, path: Path | None = None) -> str:
    """What to show for an exception around the state file: an SQLite error in one line
    (full disk, lock with its holder, damage: `unavailable`), anything else as it says."""
    if isinstance(exc, sqlite3.Error):
        return str(unavailable(paths.state_db_path() if path is None else Path(path), exc))
    return str(exc)


def open_state(path: Path | None = None, migrations: Sequence[Migration] | None = None) -> State:
    """Open (creating and upgrading as needed) the lab's state database."""
    return State(paths.state_db_path() if path is None else Path(path), migrations)


class StateStore:
    """A store of the lab's tables over a State: the one it is given (shared: its owner
    closes it) or one it opens itself and closes in `close`."""

    def __init__(self, state: State | None = None) -> None:
        self._own = state is None
        self.state = state if state is not None else open_state()

    def close(self) -> None:
        if self._own:
            self.state.close()


def now() -> float:
    """Timestamps in the state are unix seconds (REAL)."""
    return time.time()
