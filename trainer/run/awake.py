"""Keeping the PC awake while it trains: the operating system's own "do not sleep" request,
held by the process doing the work (the trainer while it trains here, the lab's queue runner
between runs) and gone with it, however that process ends. The display may still sleep and
the screen may lock: only the system's idle sleep is held off.

- Windows: `SetThreadExecutionState(ES_CONTINUOUS | ES_SYSTEM_REQUIRED)`. The state belongs
  to the calling thread, so it is set from the process's long-lived main thread and cleared
  (`ES_CONTINUOUS` alone) from the same one; the function returns the previous state as an
  unsigned DWORD, 0 on failure. (Wine's is a stub: the calls are tested at the ctypes
  boundary; the real effect is to be confirmed on Windows.)
- Linux: logind's sleep/idle inhibitor through `systemd-inhibit --what=sleep:idle
  --mode=block`, which holds the lock while its command runs: the command is `cat` reading a
  pipe from this process, so the lock goes when this process's end closes the pipe — a
  SIGKILL included. No systemd-inhibit (or no logind) is said, not fatal.
- macOS: `caffeinate -i -w PID`, which ends by itself when this process does.

`TERNIT_KEEP_AWAKE=0` (the lab's setting «Не давать ПК уснуть, пока идёт обучение» off)
asks for nothing. Standard library only: this file ships to Kaggle with the trainer, where
there is nothing to hold (KAGGLE_KERNEL_RUN_TYPE is set there).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

ENV = "TERNIT_KEEP_AWAKE"
ES_CONTINUOUS = 0x80000000
ES_SYSTEM_REQUIRED = 0x00000001
SETTLE_S = 0.5  # how long systemd-inhibit may take to refuse (no logind) before it counts as held


@dataclass
class Hold:
    """The request as it stands: `held`, by what (`how`), or why not (`why`)."""

    held: bool
    how: str = ""
    why: str = ""
    _release: Callable[[], None] | None = field(default=None, repr=False)

    def release(self) -> None:
        if self._release is not None:
            self._release()  # raises from a thread not the one that asked: the request stays
            self._release = None
        self.held = False

    def as_event(self) -> dict[str, Any]:
        return {"held": self.held, "how": self.how, "why": self.why}

    def __enter__(self) -> Hold:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def wanted(env: Mapping[str, str] = os.environ) -> bool:
    """Whether to ask at all: not when the lab's setting is off, not inside a Kaggle kernel."""
    return env.get(ENV, "1") != "0" and "KAGGLE_KERNEL_RUN_TYPE" not in env


def hold(reason: str, env: Mapping[str, str] = os.environ, platform: str = sys.platform) -> Hold:
    """Ask the OS not to sleep while this process works; `release()` (or the process's end)
    gives it back. Never raises: a request that cannot be made says why."""
    if not wanted(env):
        return Hold(False, why="off in the lab's settings" if env.get(ENV) == "0" else "not on a PC of the user's")
    try:
        if platform == "win32":
            return windows_hold()
        if platform == "darwin":
            return mac_hold()
        return linux_hold(reason)
    except OSError as e:
        return Hold(False, why=f"{type(e).__name__}: {e}")


def windows_hold(kernel32: Any = None) -> Hold:
    """SetThreadExecutionState from this (the main, long-lived) thread; released from it too."""
    import ctypes

    if kernel32 is None:
        kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined]
    set_state = kernel32.SetThreadExecutionState
    set_state.argtypes = [ctypes.c_uint32]
    set_state.restype = ctypes.c_uint32  # EXECUTION_STATE is a DWORD: unsigned, 0 means failure
    if set_state(ES_CONTINUOUS | ES_SYSTEM_REQUIRED) == 0:
        return Hold(False, "SetThreadExecutionState", "SetThreadExecutionState failed")
    thread = threading.get_ident()

    def release() -> None:
        if threading.get_ident() != thread:  # another thread's state is not ours to clear
            raise RuntimeError("the execution state is released from the thread that set it")
        set_state(ES_CONTINUOUS)

    return Hold(True, "SetThreadExecutionState", "", release)


def linux_hold(reason: str, which: Callable[[str], str | None] = shutil.which) -> Hold:
    exe = which("systemd-inhibit")
    if exe is None:
        return Hold(False, why="systemd-inhibit is not installed (no logind to ask)")
    proc = subprocess.Popen(
        [exe, "--what=sleep:idle", "--who=Ternit Lab", f"--why={reason}", "--mode=block", "cat"],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + SETTLE_S
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    if proc.poll() is not None:  # refused at once: logind is not there or said no
        said = (proc.stderr.read() if proc.stderr else b"").decode(errors="replace").strip()
        return Hold(False, "systemd-inhibit", said.splitlines()[-1] if said else f"exit {proc.returncode}")

    def release() -> None:
        if proc.stdin is not None:
            proc.stdin.close()  # cat ends, and with it systemd-inhibit's lock
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    return Hold(True, "systemd-inhibit", "", release)


def mac_hold() -> Hold:
    exe = shutil.which("caffeinate")
    if exe is None:
        return Hold(False, why="caffeinate is not there")
    proc = subprocess.Popen([exe, "-i", "-w", str(os.getpid())], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def release() -> None:
        proc.terminate()
        proc.wait()

    return Hold(True, "caffeinate", "", release)
