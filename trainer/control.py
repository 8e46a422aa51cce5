"""What starts and stops a training loop: the command line's options, the stop requests
(signals, RUN_DIR/STOP, the time limit, --stop-at-step) and a failure the loop reports.
Kept apart from trainer/train.py, the loop itself."""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .events import detach_terminal


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

    def install_signals(self) -> None:
        def handler(signum, frame):  # finish the step, save, exit cleanly
            self.signalled = True

        signal.signal(signal.SIGINT, handler)
        signal.signal(signal.SIGTERM, handler)
        if hasattr(signal, "SIGHUP"):  # the terminal of a foreground trainer closed: save too

            def hangup(signum, frame):
                self.signalled = True
                detach_terminal()  # its lines would now fail: they go nowhere instead

            signal.signal(signal.SIGHUP, hangup)

    def local_reason(self, step: int) -> str | None:
        if self.signalled or (self.run_dir / "STOP").exists():
            return "stopped"
        if self.stop_at_step is not None and step >= self.stop_at_step:
            return "time_limit"
        if time.monotonic() - self.started >= self.limit_s:
            return "time_limit"
        return None


class TrainingFailure(Exception):
    def __init__(self, kind: str, message: str, advice: str, **extra: Any) -> None:
        super().__init__(message)
        self.kind, self.message, self.advice, self.extra = kind, message, advice, extra
