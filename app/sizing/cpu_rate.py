"""This machine's CPU rate, measured once, quickly, when nothing is known of it.

The CPU's table rate (gpus.cpu_flops) assumes an idle machine with the lab's build CPU's
vector units, and on a loaded machine it was many times too optimistic (docs/PERF.md, «Figures the code's docstrings carried»). So when the lab has no measured CPU run and no stored measurement, it starts
`python -m trainer.run.rate` (a few real training steps of a small model; the window never
imports torch) in the background; its result is kept beside the state DB
(`cpu_rate.json`) and joins the measured runs as one entry marked "probe", which scales the
CPU's rate for every shape (speed._cpu_speed). Until then the time row says «оценка».

TERNIT_CPU_PROBE=0 switches the background start off (the test suite does: each test's
fresh lab would start one).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .formulas import Shape

log = logging.getLogger(__name__)

# ≈ 4 M weights, 1,024 tokens a step: a few seconds a step on one busy core.
PROBE_SHAPE = Shape(4, 256, 4, 256, 4000, 4)
PROBE_STEPS = 3
PROBE_TIMEOUT_S = 300
FILE = "cpu_rate.json"

_running: subprocess.Popen | None = None


def rate_path() -> Path:
    from ..base.paths import state_db_path

    return state_db_path().parent / FILE


def stored(path: Path | None = None) -> dict[str, Any] | None:
    """The stored measurement as a measured entry (history's keys, "probe": True), or None
    when there is none or it cannot be read (then it is measured again)."""
    path = path or rate_path()
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        entry = {k: int(raw[k]) for k in ("layers", "width", "heads", "context", "vocab", "batch", "params")}
        tps = float(raw["tokens_per_s"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as e:
        log.warning("the CPU rate measurement %s is unreadable (%s): it will be measured again", path, e)
        return None
    if not tps > 0:
        return None
    return {**entry, "run": "cpu-probe", "gpu": "cpu", "probe": True, "economical": False, "lean_state": False,
            "tokens_per_s": tps, "mem_peak_mb": None, "threads": raw.get("threads"),
            "measured_at": raw.get("measured_at") or path.stat().st_mtime}


def needed(measured: list[dict[str, Any]] | None) -> bool:
    """Nothing is known of the CPU's speed: no CPU run among `measured`, no probe."""
    return not any(m.get("gpu") == "cpu" for m in measured or ())


def command(out: Path, shape: Shape = PROBE_SHAPE, steps: int = PROBE_STEPS) -> list[str]:
    return [sys.executable, "-m", "trainer.run.rate", "--layers", str(shape.layers), "--width", str(shape.width),
            "--heads", str(shape.heads), "--context", str(shape.context), "--vocab", str(shape.vocab),
            "--batch", str(shape.batch), "--steps", str(steps), "--out", str(out)]


def _env() -> dict[str, str]:
    from ..base.children import child_env

    return child_env({"CUDA_VISIBLE_DEVICES": ""})  # the CPU's rate, whatever cards there are


def start(path: Path | None = None, shape: Shape = PROBE_SHAPE, steps: int = PROBE_STEPS,
          errors: bool = False) -> subprocess.Popen:
    """Start the measurement in the background; it writes `path` itself when done. With
    `errors` its stderr is a pipe for the caller to read (a background start, which nobody
    reads, leaves it out so that a chatty child never blocks on a full pipe)."""
    path = path or rate_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    kwargs: dict[str, Any] = {"start_new_session": True} if os.name == "posix" else {
        "creationflags": getattr(subprocess, "CREATE_NO_WINDOW", 0)}
    return subprocess.Popen(command(path, shape, steps), env=_env(), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE if errors else subprocess.DEVNULL,
                            close_fds=True, **kwargs)


def ensure_started(measured: list[dict[str, Any]] | None, path: Path | None = None) -> subprocess.Popen | None:
    """Start the measurement unless the CPU's speed is known, one is stored, one is going
    in this process, or TERNIT_CPU_PROBE=0. Returns the process it started (or None)."""
    global _running
    if os.environ.get("TERNIT_CPU_PROBE", "1") == "0" or not needed(measured):
        return None
    if stored(path) is not None or (_running is not None and _running.poll() is None):
        return None
    try:
        _running = start(path)
    except OSError as e:
        log.warning("the CPU rate measurement did not start (%s): the CPU's speed stays an estimate", e)
        return None
    return _running


def measure(path: Path | None = None, shape: Shape = PROBE_SHAPE, steps: int = PROBE_STEPS,
            timeout: float = PROBE_TIMEOUT_S) -> dict[str, Any] | None:
    """Measure now (waiting for the child) and return the stored entry; None if it failed,
    which is logged with the child's last line."""
    path = path or rate_path()
    proc = start(path, shape, steps, errors=True)
    t0 = time.monotonic()
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        log.warning("the CPU rate measurement took over %.0f s: stopped", timeout)
        return None
    if proc.returncode != 0:
        last = (err or b"").decode(errors="replace").strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
        log.warning("the CPU rate measurement failed after %.0f s: %s", time.monotonic() - t0, last[0])
        return None
    return stored(path)


def measured_with_probe(measured: list[dict[str, Any]], path: Path | None = None,
                        timeout: float = PROBE_TIMEOUT_S) -> list[dict[str, Any]]:
    """`measured`, and the CPU's measurement when nothing was known of it: started here
    (ensure_started) and waited for, at most `timeout` s (a failure is logged, and the
    CPU's speed stays the table's estimate)."""
    proc = ensure_started(measured, path)
    if proc is None:
        return measured
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        log.warning("the CPU rate measurement took over %.0f s: stopped", timeout)
        return measured
    rate = stored(path)
    if rate is None:
        log.warning("the CPU rate measurement ended (exit %s) without a result", proc.returncode)
        return measured
    return [*measured, rate]
