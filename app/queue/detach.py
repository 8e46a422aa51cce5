"""The queue runner as a process of its own: started by the window (or `ternit queue run`,
or the logon entry) detached from whoever started it, so that the window closed or killed
at any moment changes nothing for the queue.

POSIX: a new session (no terminal's hang-up reaches it), stdin from /dev/null, output to the
lab's log folder (queue-runner.log, rotated as the lab's log is). Windows: `pythonw.exe` (no
console window), its own process group, and out of the parent's job where the job allows
it (a job that does not is refused with ERROR_ACCESS_DENIED: started again without it).

Which process is the runner: the lock note's `pid` (app/queue/lock.py), compared exactly.
On Windows a venv's `Scripts\\pythonw.exe` is a launcher that starts the base interpreter
as its child: the pid `Popen` returns is the launcher's, used here only to tell whether the
start is still alive. (Under the Wine kit the embeddable CPython runs without a venv, so a
real venv's launcher is not exercised there: the logic is tested at its boundary,
`runner_of`.)
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..base import logs
from ..base.children import child_env
from . import lock

log = logging.getLogger(__name__)

RUNNER_LOG = "queue-runner.log"
ERROR_ACCESS_DENIED = 5
# Not in every Python's subprocess module on every OS (the values are Windows' own).
CREATE_NEW_PROCESS_GROUP = 0x00000200
CREATE_NO_WINDOW = 0x08000000
CREATE_BREAKAWAY_FROM_JOB = 0x01000000


def runner_log() -> Path:
    return logs.log_folder() / RUNNER_LOG


def interpreter(os_name: str = os.name, executable: str = sys.executable) -> str:
    """The Python that runs the runner: on Windows its windowless twin, pythonw.exe, where
    there is one beside this one."""
    if os_name == "nt":
        quiet = Path(executable).with_name("pythonw.exe")
        if quiet.exists():
            return str(quiet)
    return executable


def runner_command(os_name: str = os.name, executable: str = sys.executable) -> list[str]:
    """The command that drives the queue until nothing is left (the logon entry runs it too)."""
    return [interpreter(os_name, executable), "-m", "app.cli", "queue", "run", "--wait"]


def popen_kwargs(os_name: str = os.name, breakaway: bool = True) -> dict[str, Any]:
    """How the runner is detached from its starter on this OS."""
    if os_name == "posix":
        return {"start_new_session": True}
    flags = CREATE_NEW_PROCESS_GROUP | CREATE_NO_WINDOW
    if breakaway:
        flags |= CREATE_BREAKAWAY_FROM_JOB
    return {"creationflags": flags}


def _rotate(path: Path) -> None:
    """queue-runner.log → .1 → .2 … once it is as big as the lab's log may grow."""
    try:
        if path.stat().st_size < logs.MAX_BYTES:
            return
    except OSError:
        return
    for i in range(logs.BACKUPS, 0, -1):
        older = path.with_name(f"{path.name}.{i}")
        newer = path.with_name(f"{path.name}.{i - 1}") if i > 1 else path
        try:
            if newer.exists():
                os.replace(newer, older)
        except OSError:
            log.warning("the queue runner's log %s could not be rotated", newer)


def spawn(popen: Callable[..., Any] = subprocess.Popen, os_name: str = os.name) -> Any:
    """Start the runner detached (returns the Popen; its pid may be a launcher's, see above)."""
    path = runner_log()
    path.parent.mkdir(parents=True, exist_ok=True)
    _rotate(path)
    with open(path, "ab") as out:
        out.write(f"\n{time.strftime('%Y-%m-%d %H:%M:%S')} $ {' '.join(runner_command(os_name))}\n".encode())
        out.flush()
        common = {"stdin": subprocess.DEVNULL, "stdout": out, "stderr": subprocess.STDOUT, "close_fds": True,
                  "env": child_env()}
        try:
            return popen(runner_command(os_name), **common, **popen_kwargs(os_name, breakaway=True))
        except OSError as e:
            # The parent's job forbids breaking away (a job without JOB_OBJECT_LIMIT_BREAKAWAY_OK):
            # the runner then lives as long as that job does — still past the window.
            if os_name != "nt" or getattr(e, "winerror", None) != ERROR_ACCESS_DENIED:
                raise
            log.info("the queue runner could not leave the parent's job: started inside it")
            return popen(runner_command(os_name), **common, **popen_kwargs(os_name, breakaway=False))


def parent_pid(pid: int) -> int | None:
    import psutil  # here: the window's first frame asks no process

    try:
        return psutil.Process(pid).ppid()
    except (psutil.Error, OSError):
        return None


def runner_of(note: lock.Note | None, launcher_pid: int,
              parent_of: Callable[[int], int | None] = parent_pid) -> str:
    """Whose is the note of the lock's holder, for a runner started as `launcher_pid`:
    "ours" (the note's pid is the process started, or the child a venv launcher started,
    compared exactly), "other" (another runner holds the queue), "" (nobody holds it yet)."""
    if note is None:
        return ""
    if note.pid == launcher_pid or parent_of(note.pid) == launcher_pid:
        return "ours"
    return "other"


def start_and_wait(wait_s: float = 30.0) -> tuple[Any, lock.Note | None, str]:
    """Start the runner and wait until the lock names who drives the queue: (the Popen, the
    note, "ours" | "other" | "" when it ended or never said within `wait_s`)."""
    proc = spawn()
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        note = lock.current_holder()
        whose = runner_of(note, proc.pid)
        if whose:
            return proc, note, whose
        if proc.poll() is not None:  # it ended: another runner first, or nothing to do, or broken
            return proc, lock.current_holder(), ""
        time.sleep(0.05)
    return proc, None, ""
