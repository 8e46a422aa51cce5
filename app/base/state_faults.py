"""What a failure of the lab's state file (SQLite) means, said in one line: a full disk, a
file another program holds locked, a disk that fails, a damaged file — each with what to do.

SQLite reports a full disk as "database or disk is full" (SQLITE_FULL) or, when the write
that failed was another one (a file-size limit, the WAL index), as "disk I/O error"
(SQLITE_IOERR): which of the two it is, the folder itself tells (`no_room`). A damaged file
("database disk image is malformed", "file is not a database") is set aside by the lab
itself (app/base/state_repair.py); nothing here ever advises renaming a file the lab could
still use.
"""

from __future__ import annotations

import errno
import os
import shutil
import sqlite3
from pathlib import Path

from .i18n import t
from .numbers import bytes_text, duration_text

# SQLite's primary result codes (an extended code's low byte).
SQLITE_PERM, SQLITE_BUSY, SQLITE_LOCKED, SQLITE_READONLY, SQLITE_IOERR = 3, 5, 6, 8, 10
SQLITE_CORRUPT, SQLITE_FULL, SQLITE_CANTOPEN, SQLITE_NOTADB = 11, 13, 14, 26
PROBE_BYTES = 64 * 1024
LOW_SPACE_BYTES = 1 << 20  # less free than this: the disk is as good as full


def kind(exc: sqlite3.Error) -> str:
    """"full", "io", "locked", "damaged", "access" or "other", from SQLite's result code
    (Python 3.11+) or, before that, its message."""
    code = getattr(exc, "sqlite_errorcode", None)
    text = str(exc).lower()
    primary = code & 0xFF if isinstance(code, int) else None
    if primary == SQLITE_FULL or "is full" in text:
        return "full"
    if primary in (SQLITE_BUSY, SQLITE_LOCKED) or "locked" in text:
        return "locked"
    if primary in (SQLITE_CORRUPT, SQLITE_NOTADB) or "malformed" in text or "not a database" in text:
        return "damaged"
    if primary == SQLITE_IOERR or "disk i/o error" in text:
        return "io"
    if primary in (SQLITE_PERM, SQLITE_READONLY, SQLITE_CANTOPEN) or "readonly" in text or "unable to open" in text:
        return "access"
    return "other"


def locked(exc: BaseException) -> bool:
    """Whether `exc` (or what it was raised from: a StateError made of it) is another
    program's write lock on the state file that outlasted the wait."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return False
        if isinstance(seen, sqlite3.Error) and kind(seen) == "locked":
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def no_room(folder: Path) -> str | None:
    """Why nothing more can be written in `folder` — a full disk, a quota, a file-size limit
    (the operating system's own words) or almost no free space — or None when there is room."""
    probe = Path(folder) / f".ternit-room-{os.getpid()}"
    try:
        with open(probe, "wb") as f:
            f.write(b"\0" * PROBE_BYTES)
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", errno.ENOSPC)):
            return os.strerror(e.errno)
        return None
    finally:
        try:
            probe.unlink(missing_ok=True)
        except OSError:
            pass
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return None
    return t(f"свободно {bytes_text(free, 'ru')}", f"{bytes_text(free, 'en')} free") if free < LOW_SPACE_BYTES else None


def holders(path: Path) -> list[str]:
    """The other processes that have the state file (or its WAL) open: "PID name" each."""
    import psutil  # here: only a lock that outlasted its wait asks the processes

    names = {str(Path(path).resolve()) + suffix for suffix in ("", "-wal", "-shm", "-journal")}
    found = []
    for p in psutil.process_iter(["pid", "name"]):
        if p.info["pid"] == os.getpid():
            continue
        try:
            if any(f.path in names for f in p.open_files()):
                found.append(f"{p.info['pid']} {p.info['name']}")
        except (psutil.Error, OSError):
            continue
    return found


# SQLite's write lock: in WAL mode the byte WAL_WRITE_LOCK (120) of the -shm file, in a
# rollback journal the RESERVED/PENDING bytes from 2^30 of the file itself (os_unix.c).
WAL_WRITE_BYTE, PENDING_BYTE = 120, 0x40000000
PROC_LOCKS = Path("/proc/locks")


def writers(path: Path, locks: str | None = None) -> list[int] | None:
    """The pids holding SQLite's write lock on the state file, from Linux's /proc/locks
    (`locks`: its text, for the tests); None where the system cannot tell."""
    if locks is None:
        try:
            locks = PROC_LOCKS.read_text(encoding="ascii", errors="replace")
        except OSError:
            return None
    wanted: dict[str, int] = {}  # "maj:min:inode" (hex:hex:dec as /proc/locks writes it) -> the first byte
    for suffix, first in (("-shm", WAL_WRITE_BYTE), ("", PENDING_BYTE)):
        try:
            st = os.stat(str(path) + suffix)
        except OSError:
            continue
        wanted[f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"] = first
    found: list[int] = []
    for line in locks.splitlines():
        parts = line.split()
        if "->" in parts:  # a waiter, not a holder
            continue
        try:
            i = parts.index("WRITE")
            pid, where, start = int(parts[i + 1]), parts[i + 2], int(parts[i + 3])
            end = parts[i + 4]
        except (ValueError, IndexError):
            continue
        first = wanted.get(where)
        if first is None or pid == os.getpid() or pid in found:
            continue
        if start <= first and (end == "EOF" or int(end) >= first) or first == PENDING_BYTE and start >= first:
            found.append(pid)
    return found


def holder_text(path: Path) -> str:
    """Who holds the state file: the writer where the system tells (Linux), else the
    processes that have it open — "one of" them when there are several (a reader that only
    has it open holds nothing)."""
    who = holders(path)
    pids = writers(path) if os.name == "posix" else None
    if pids:
        named = {int(w.split(" ", 1)[0]): w for w in who}
        return t(f"его держит процесс {', '.join(named.get(p, str(p)) for p in pids)}",
                 f"process {', '.join(named.get(p, str(p)) for p in pids)} holds it")
    if len(who) == 1:
        return t(f"его держит процесс {who[0]}", f"process {who[0]} holds it")
    if who:
        return t(f"его держит один из процессов: {', '.join(who)}", f"one of processes {', '.join(who)} holds it")
    return t("его держит другая программа", "another program holds it")


def state_error(path: Path, exc: sqlite3.Error, what: str = "", waited_s: float | None = None) -> str:
    """One line for a failure of the state file at `path`: what happened, what was not done
    (`what`), what to do."""
    path = Path(path)
    done = f" {what}" if what else ""
    found = kind(exc)
    if found in ("full", "io"):
        room = no_room(path.parent)
        if room or found == "full":
            return t(f"На диске с файлом состояния лаборатории {path} нет места ({room or exc}).{done} "
                     "Освободите место и повторите.",
                     f"The disk holding the lab's state file {path} is full ({room or exc}).{done} "
                     "Free some space and try again.")
        return t(f"Файл состояния лаборатории {path} не читается или не пишется ({exc}).{done} Проверьте диск "
                 "(не отключён ли он, нет ли на нём ошибок) и повторите.",
                 f"The lab's state file {path} cannot be read or written ({exc}).{done} Check the disk "
                 "(is it still connected, does it report errors) and try again.")
    if found == "locked":
        held = holder_text(path)
        waited = t(f"; лаборатория ждала {duration_text(waited_s, 'ru')}", f"; the lab waited {duration_text(waited_s, 'en')}") if waited_s else ""
        return t(f"Файл состояния лаборатории {path} занят: {held}{waited}.{done} Дождитесь, пока та программа "
                 "закончит, или закройте её (другое окно лаборатории, просмотрщик SQLite), и повторите.",
                 f"The lab's state file {path} is locked: {held}{waited}.{done} Wait for that program to "
                 "finish, or close it (another lab window, an SQLite browser), and try again.")
    if found == "damaged":
        return t(f"Файл состояния лаборатории {path} повреждён ({exc}).{done} Запустите лабораторию снова: "
                 "она отложит его и перенесёт в новый всё, что читается.",
                 f"The lab's state file {path} is damaged ({exc}).{done} Start the lab again: it sets the file "
                 "aside and carries over into a new one whatever can be read.")
    if found == "access":
        return t(f"Файл состояния лаборатории {path} не открыть для записи ({exc}).{done} Проверьте права на "
                 "папку данных лаборатории (или укажите другую: TERNIT_HOME).",
                 f"The lab's state file {path} cannot be opened for writing ({exc}).{done} Check the permissions "
                 "of the lab's data folder (or point the lab at another: TERNIT_HOME).")
    return t(f"Файл состояния лаборатории {path} недоступен ({exc}).{done}",
             f"The lab's state file {path} cannot be used ({exc}).{done}")
