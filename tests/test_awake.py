"""The "do not sleep" request (trainer/run/awake.py) taken and released around a run, at the
OS-call boundary: Windows' SetThreadExecutionState through a stand-in for kernel32 (flags,
restype, the thread, the release — Wine's own is a stub, so its real effect is to be
confirmed on Windows), and Linux's systemd-inhibit as a real process that this suite puts
first on PATH: it records how it was asked and lives exactly as long as its pipe."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from tests.trainer_run import events, run_trainer, write_run
from trainer.run import awake

ROOT = Path(__file__).resolve().parent.parent


class _SetThreadExecutionState:
    """kernel32's function as ctypes shows it: argtypes/restype set by the caller, each call
    recorded with its thread."""

    def __init__(self, result: int = 0x80000000) -> None:
        self.argtypes: list = []
        self.restype = None
        self.calls: list[tuple[int, int]] = []
        self.result = result

    def __call__(self, flags: int) -> int:
        self.calls.append((flags, threading.get_ident()))
        return self.result


class _Kernel32:
    def __init__(self, result: int = 0x80000000) -> None:
        self.SetThreadExecutionState = _SetThreadExecutionState(result)  # noqa: N815 (Windows' name)


def test_windows_asks_from_its_thread_with_the_flags_and_clears_from_the_same_thread():
    k = _Kernel32()
    h = awake.windows_hold(k)
    f = k.SetThreadExecutionState
    assert h.held and h.how == "SetThreadExecutionState"
    assert f.restype is ctypes.c_uint32 and f.argtypes == [ctypes.c_uint32]  # EXECUTION_STATE: an unsigned DWORD
    assert f.calls == [(0x80000001, threading.get_ident())]  # ES_CONTINUOUS | ES_SYSTEM_REQUIRED, no display flag
    failed: list[BaseException] = []
    other = threading.Thread(target=lambda: _catch(h.release, failed))
    other.start()
    other.join()
    assert isinstance(failed[0], RuntimeError) and len(f.calls) == 1  # not from another thread
    h.release()
    assert f.calls[-1] == (0x80000000, threading.get_ident()) and not h.held  # ES_CONTINUOUS alone
    h.release()
    assert len(f.calls) == 2  # released once
    refused = awake.windows_hold(_Kernel32(result=0))
    assert not refused.held and "failed" in refused.why


def _catch(fn, into: list) -> None:
    try:
        fn()
    except BaseException as e:  # noqa: BLE001 - the test reads what was raised
        into.append(e)


def test_nothing_is_asked_when_the_setting_is_off_or_in_a_kaggle_kernel():
    assert not awake.hold("x", env={awake.ENV: "0"}).held
    assert not awake.hold("x", env={"KAGGLE_KERNEL_RUN_TYPE": "Batch"}).held
    assert not awake.linux_hold("x", which=lambda name: None).held


def _fake_inhibitor(folder: Path, refuse: bool = False) -> Path:
    """A `systemd-inhibit` of this test's own: it writes its pid and arguments, then runs its
    command (the trainer's `cat` on a pipe) as the real one does while it holds the lock."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "systemd-inhibit"
    body = 'echo "Failed to connect to bus: No such file or directory" >&2; exit 1' if refuse else \
        'last=""; for a in "$@"; do last="$a"; done; exec "$last"'
    script.write_text(f'#!/bin/sh\necho "$$ $*" >> "{folder}/asked"\n{body}\n')
    script.chmod(0o755)
    return folder / "asked"


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.skipif(sys.platform != "linux", reason="systemd-inhibit is Linux's")
def test_a_trainer_holds_the_request_while_it_trains_and_it_ends_with_the_run(tiny_data, tmp_path):
    asked = _fake_inhibitor(tmp_path / "bin")
    run = write_run(tmp_path / "run", tiny_data, steps_to=3, eval_every=3)
    env = {"PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}", awake.ENV: "1"}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # the trainer's environment (tests/trainer_run.py takes this process's)
    try:
        done = run_trainer(run)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    assert done.returncode == 0, done.stderr
    (ev,) = events(run, "awake")
    assert ev["held"] is True and ev["how"] == "systemd-inhibit"
    pid, *args = asked.read_text().split()
    assert "--what=sleep:idle" in args and "--mode=block" in args and args[-1] == "cat"
    assert _gone(int(pid))  # released with the run's end
    start, end = events(run, "start")[0], events(run, "end")[0]
    assert start["time"] <= ev["time"] <= end["time"]


@pytest.mark.skipif(sys.platform != "linux", reason="systemd-inhibit is Linux's")
def test_the_request_dies_with_a_killed_process_and_a_refusal_is_said(tmp_path):
    asked = _fake_inhibitor(tmp_path / "bin")
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}", awake.ENV: "1",
           "PYTHONPATH": str(ROOT)}
    code = "import sys, time; from trainer.run import awake; h = awake.hold('x'); print(h.held, h.how, flush=True); time.sleep(600)"
    holder = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().split() == ["True", "systemd-inhibit"]
        pid = int(asked.read_text().split()[0])
        assert not _gone(pid)
        holder.send_signal(signal.SIGKILL)  # a power cut of the holder: its pipe closes with it
        holder.wait(30)
        deadline = time.monotonic() + 30
        while not _gone(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _gone(pid)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    _fake_inhibitor(tmp_path / "refusing", refuse=True)
    refused = awake.linux_hold("x", which=lambda name: str(tmp_path / "refusing" / name))
    assert not refused.held and "Failed to connect to bus" in refused.why
