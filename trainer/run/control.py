"""What starts and stops a training loop: the command line's options, the stop requests
(signals, RUN_DIR/STOP, the time limit, --stop-at-step) and a failure the loop reports.
Kept apart from trainer/run/train.py, the loop itself."""

from __future__ import annotations

import atexit
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainer.run.events import detach_terminal

# Windows' console events (wincon.h). Ctrl+C and Ctrl+Break reach Python as SIGINT and
# SIGBREAK; closing the console window, logging off and shutting down only reach a handler
# registered with SetConsoleCtrlHandler, and the process is ended as soon as that handler
# returns, or 5 s after a close (Windows' own timeout) if it has not.
CTRL_C_EVENT, CTRL_BREAK_EVENT, CTRL_CLOSE_EVENT, CTRL_LOGOFF_EVENT, CTRL_SHUTDOWN_EVENT = 0, 1, 2, 5, 6
CONSOLE_CLOSE_WAIT_S = 4.5  # inside Windows' 5 s: time for the step in progress and a small save


@dataclass
class Options:
    run_dir: Path
    resume: str | None = None
    device: str = "auto"
    stop_at_step: int | None = None
    dry_run: bool = False
    run_id: str | None = None  # --run-id: the run's id where its folder is not named by it (Kaggle)

    @property
    def identity(self) -> str:
        """The run id written into its checkpoints: --run-id, else the run folder's name."""
        return self.run_id or self.run_dir.resolve().name


@dataclass
class Control:
    """Why the loop should stop: a signal, the STOP file, the time limit or --stop-at-step."""

    run_dir: Path
    limit_s: float
    stop_at_step: int | None
    started: float = field(default_factory=time.monotonic)
    signalled: bool = False
    # Set when the process is about to exit (atexit): the console-close handler waits for it.
    exiting: threading.Event = field(default_factory=threading.Event)
    _console_handler: Any = None  # the ctypes callback, kept alive while it is registered

    def install_signals(self) -> None:
        def handler(signum, frame):  # finish the step, save, exit cleanly
            self.signalled = True

        signal.signal(signal.SIGINT, handler)
        signal.signal(signal.SIGTERM, handler)
        if hasattr(signal, "SIGBREAK"):  # Windows: Ctrl+Break in the trainer's console
            signal.signal(signal.SIGBREAK, handler)
        if hasattr(signal, "SIGHUP"):  # the terminal of a foreground trainer closed: save too

            def hangup(signum, frame):
                self.signalled = True
                detach_terminal()  # its lines would now fail: they go nowhere instead

            signal.signal(signal.SIGHUP, hangup)
        if os.name == "nt":  # its console window closed, the user logging off: save too
            self._console_handler = _register_console_handler(self.on_console_event)
            atexit.register(self.exiting.set)

    def on_console_event(self, event: int) -> bool:
        """Windows' console handler: a close, log-off or shut-down asks for a stop like SIGTERM
        and holds the process until it has saved and is exiting (or CONSOLE_CLOSE_WAIT_S has
        passed), since Windows ends it the moment this returns. Ctrl+C and Ctrl+Break are
        passed on (False) to Python's SIGINT and SIGBREAK handlers."""
        if event not in (CTRL_CLOSE_EVENT, CTRL_LOGOFF_EVENT, CTRL_SHUTDOWN_EVENT):
            return False
        self.signalled = True
        self.exiting.wait(CONSOLE_CLOSE_WAIT_S)
        return True

    def local_reason(self, step: int) -> str | None:
        if self.signalled or (self.run_dir / "STOP").exists():
            return "stopped"
        if self.stop_at_step is not None and step >= self.stop_at_step:
            return "time_limit"
        if time.monotonic() - self.started >= self.limit_s:
            return "time_limit"
        return None


def _register_console_handler(on_event: Any) -> Any:
    """SetConsoleCtrlHandler(on_event) through ctypes (Windows only); returns the callback,
    which must stay referenced while registered, or None where it cannot be registered."""
    import ctypes
    from ctypes import wintypes

    callback = ctypes.WINFUNCTYPE(wintypes.BOOL, wintypes.DWORD)(lambda event: bool(on_event(int(event))))
    kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
    kernel32.SetConsoleCtrlHandler.argtypes = (ctypes.c_void_p, wintypes.BOOL)
    kernel32.SetConsoleCtrlHandler.restype = wintypes.BOOL
    if not kernel32.SetConsoleCtrlHandler(ctypes.cast(callback, ctypes.c_void_p), True):
        return None
    return callback


class TrainingFailure(Exception):
    def __init__(self, kind: str, message: str, advice: str, **extra: Any) -> None:
        super().__init__(message)
        self.kind, self.message, self.advice, self.extra = kind, message, advice, extra
