"""One writer per run folder: an OS lock on RUN_DIR/trainer.base.lock, held while training.

Two trainers on one folder would interleave their events and prune each other's
checkpoints. The lock is the operating system's own (flock on POSIX, a byte-range lock on
Windows), so it goes away with the process however it ends: a SIGKILLed or crashed trainer
never leaves its run locked. The file itself stays; it says which process holds the lock
(pid and start time) so the refusal can name it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

LOCK_FILE = "trainer.base.lock"
# Windows locks are mandatory: the locked byte lies far past the text, so that a second
# process can still read who holds the lock.
WINDOWS_BYTE = 1 << 20


class LockError(Exception):
    """The run folder is being trained by another process: the message names it."""


def try_lock(fd: int) -> bool:
    """Take the OS's own exclusive lock on the open file `fd` without waiting; False when
    another process holds it. Also the lab's queue runner's lock (app/queue/lock.py)."""
    if os.name == "nt":
        import msvcrt

        os.lseek(fd, WINDOWS_BYTE, os.SEEK_SET)
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        finally:
            os.lseek(fd, 0, os.SEEK_SET)
        return True
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # BlockingIOError: held by another open file (another process)
        return False
    return True


def holder(run_dir: Path) -> str:
    """Who the lock file says holds the run ("process 1234, since 12:03:04"), or ""."""
    try:
        text = (Path(run_dir) / LOCK_FILE).read_text(encoding="utf-8", errors="replace").split()
        pid, since = int(text[0]), float(text[1])
    except (OSError, ValueError, IndexError):
        return ""
    return f"process {pid}, running since {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(since))}"


class RunLock:
    """`with RunLock(run_dir):` — or acquire()/release(); acquire raises LockError."""

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise LockError(f"cannot open {self.path} ({type(e).__name__}: {e}): make the run folder writable") from None
        if not try_lock(fd):
            os.close(fd)
            who = holder(self.path.parent) or "another process"
            raise LockError(
                f"run folder {self.path.parent} is already being trained by {who}: "
                "one trainer per run — wait for it to end, or stop it first (create RUN_DIR/STOP)"
            )
        self._fd = fd
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()} {time.time():.3f}\n".encode())
        except OSError:
            pass  # the lock holds without the note; only the refusal's wording loses the pid

    def release(self) -> None:
        if self._fd is None:
            return
        if os.name == "nt":  # Windows wants the range unlocked before the close
            import msvcrt

            try:
                os.lseek(self._fd, WINDOWS_BYTE, os.SEEK_SET)
                msvcrt.locking(self._fd, msvcrt.LK_UNLCK, 1)
            except OSError:
                pass
        os.close(self._fd)  # on POSIX the close alone releases the flock
        self._fd = None

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
