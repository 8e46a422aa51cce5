"""Stopping on Windows (issue 22, item 5): SIGBREAK and a closed console save like SIGTERM, and
the lab's last resort after STOP's grace ends the trainer with every process it started.

What Wine cannot show (tests/windows_env.py, the kit's README): console events. Ctrl+Break
and a console's close are not delivered to a process under the kit (its streams are pipes,
it has no console), so the handler is called here as Windows would call it, and SIGBREAK is
raised inside the process. STOP itself, with its checkpoint, is in test_windows_lab.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from app.runs import process
from trainer.run import control
from trainer.run.control import Control

pytestmark = pytest.mark.windows
ROOT = Path(__file__).resolve().parent.parent


def test_a_console_close_asks_for_a_stop_and_holds_the_process_until_it_exits(tmp_path):
    c = Control(tmp_path, limit_s=60, stop_at_step=None)
    # Ctrl+C and Ctrl+Break go on to Python's own SIGINT/SIGBREAK handlers.
    assert not c.on_console_event(control.CTRL_C_EVENT) and not c.on_console_event(control.CTRL_BREAK_EVENT)
    assert not c.signalled
    threading.Timer(0.2, c.exiting.set).start()  # the training loop saves, the interpreter exits
    began = time.monotonic()
    assert c.on_console_event(control.CTRL_CLOSE_EVENT)
    assert c.signalled and c.local_reason(5) == "stopped"
    assert time.monotonic() - began < control.CONSOLE_CLOSE_WAIT_S


def test_a_console_close_gives_up_waiting_within_windows_own_timeout(tmp_path, monkeypatch):
    monkeypatch.setattr(control, "CONSOLE_CLOSE_WAIT_S", 0.05)
    c = Control(tmp_path, limit_s=60, stop_at_step=None)
    assert c.on_console_event(control.CTRL_LOGOFF_EVENT) and c.signalled
    assert control.CONSOLE_CLOSE_WAIT_S < 5  # Windows ends the process 5 s after a close


@pytest.mark.skipif(os.name != "nt", reason="SIGBREAK and SetConsoleCtrlHandler exist on Windows only")
def test_sigbreak_is_a_stop_request_and_the_console_handler_is_registered(tmp_path):
    code = (
        "import signal, sys\n"
        "from pathlib import Path\n"
        "from trainer.run.control import Control\n"
        f"c = Control(Path({str(tmp_path)!r}), limit_s=60, stop_at_step=None)\n"
        "c.install_signals()\n"
        "assert c._console_handler is not None, 'SetConsoleCtrlHandler refused'\n"
        "signal.raise_signal(signal.SIGBREAK)\n"
        "print('stop requested' if c.local_reason(1) == 'stopped' else 'not stopped')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert (done.returncode, done.stdout.strip()) == (0, "stop requested"), done.stderr


def test_the_last_resort_ends_the_trainer_and_its_children(tmp_path):
    """After STOP's grace the lab ends what it started: a SIGTERM to the group on POSIX, the
    whole tree on Windows (CTRL_BREAK_EVENT cannot reach a process without the sender's
    console: before, the trainer went on)."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    code = ("import subprocess, sys, time\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])\n"
            "print(child.pid, flush=True)\n"
            "time.sleep(300)\n")
    plan = process.LaunchPlan([sys.executable, "-c", code])
    pid, started = process.spawn(plan, run_dir)
    log = run_dir / process.LOG
    deadline = time.monotonic() + 120
    lines: list[str] = []
    while time.monotonic() < deadline:  # the grandchild's pid, once it is started
        lines = [ln for ln in log.read_text(encoding="utf-8").splitlines() if ln.strip().isdigit()]
        if lines:
            break
        time.sleep(0.1)
    assert lines, log.read_text(encoding="utf-8")
    grandchild = psutil.Process(int(lines[0]))
    assert process.terminate(pid, started)
    assert process.wait_exit(pid, 30)
    grandchild.wait(30)
    assert not process.is_alive(pid, started) and not grandchild.is_running()
