"""The night queue on Windows (the Windows set: under the Wine kit, and with the rest on
Linux): the runner the window starts is detached from it and outlives it; the logon entry
falls back to the Startup folder where Task Scheduler refuses the task.

What the kit cannot show: a real venv's launcher (the kit's embeddable CPython runs without
one, so `detach.runner_of` is tested at its boundary in test_queue_detach.py), a job that
forbids breaking away, and Task Scheduler itself. To be confirmed on Windows."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from app.queue import autostart, detach, lock
from app.queue.store import QueueStore
from app.runs.registry import Registry

pytestmark = pytest.mark.windows
ROOT = Path(__file__).resolve().parent.parent
DEADLINE_S = 240.0
WINDOW = ("import time; from app.queue.driver import QueueDriver; from app.runs.manager import RunManager; "
          "d = QueueDriver(RunManager()); assert d.ensure_runner(); print(d.started.pid, flush=True); time.sleep(600)")


def _until(what, timeout: float = DEADLINE_S):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"not seen within {timeout} s")


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_the_runner_the_window_starts_outlives_the_windows_process(tiny_data):
    reg = Registry()
    store = QueueStore(reg.state)
    cfg = {"name": "waits", "model": {"context": 16, "width": 16, "heads": 2, "layers": 1, "vocab": 300},
           "training": {"steps_to": 4}, "data": {"dir": str(tiny_data)}, "target": {"kind": "local", "gpu": "cpu"}}
    it = store.add(cfg, "local")
    # It waits for more room than any disk has: the runner keeps looking, round after round, and starts nothing.
    store.retry(it.id, cfg, None, "", spend=False, room_bytes=1 << 62)
    store.set_message(it.id, None)
    window = subprocess.Popen([sys.executable, "-c", WINDOW], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        launcher = int(window.stdout.readline() or 0)
        assert launcher, window.stderr.read()
        note = _until(lock.current_holder)
        assert detach.runner_of(note, launcher) == "ours" and note.pid != window.pid
    finally:
        window.kill()  # the window's process ends at once (TerminateProcess on Windows)
        window.wait(60)
    store.set_message(it.id, None)
    # The runner goes on without the window: it writes the item's line again at its next round.
    _until(lambda: store.item(it.id).message)
    assert lock.current_holder() is not None and lock.current_holder().pid == note.pid
    store.remove(it.id)  # nothing left: it ends by itself
    _until(lambda: lock.current_holder() is None)
    _until(lambda: _gone(note.pid))


def test_the_startup_folder_takes_the_entry_where_task_scheduler_refuses_it():
    refused = subprocess.CompletedProcess(["schtasks"], 1, "", "ERROR: Access is denied.")
    entry = autostart.current()
    autostart._windows_on(entry, schtasks=lambda *args: refused)
    status = autostart.status("windows")
    assert status.installed and status.kind == "startup" and status.path == autostart.startup_path()
    assert not status.stale, status.stale
    text = autostart.startup_path().read_bytes().decode("utf-8")
    assert "\r\n" in text and f'cd /d "{entry.code}"' in text
    assert autostart._startup_entry(text) == (entry.argv(), entry.data)
    assert not autostart.task_copy_path().exists()
    assert not autostart.off("windows").installed and not autostart.startup_path().exists()


@pytest.mark.skipif(sys.platform != "win32", reason="kernel32's own SetThreadExecutionState")
def test_the_real_set_thread_execution_state_is_asked_and_cleared_from_the_main_thread():
    """Through the real kernel32 (under Wine a stub that answers but holds nothing: the
    effect on sleep is to be confirmed on Windows)."""
    from trainer.run import awake

    h = awake.hold("the test", env={awake.ENV: "1"}, platform="win32")
    assert h.held and h.how == "SetThreadExecutionState", h.why
    h.release()
    assert not h.held
