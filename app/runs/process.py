"""Starting the trainer as its own process, and telling whether it still runs.

The trainer is never run inside the window's process (the window never imports torch):
`python -m trainer --run DIR`, or torchrun when this PC has several GPUs (on Windows the
trainer's own launcher, trainer/parallel/ranks.py). The process is put in its own session (Windows:
its own process group, without a console), so closing the window (or a Ctrl+C in the
terminal that ran `ternit run start`) does not stop the training; the lab re-attaches to it
later through events.jsonl and the pid kept in the registry.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from trainer.config.run_config import ConfigError, gpu_choice
from trainer.run.awake import ENV as AWAKE_ENV

from ..base import settings
from ..base.children import child_env
from ..base.i18n import t
from .files import LOG

log = logging.getLogger(__name__)

# Children this process started: reaped here so that a finished trainer does not linger as
# a zombie (which would look alive to a pid check) while the window stays open.
_children: dict[int, subprocess.Popen] = {}


@dataclass
class LaunchPlan:
    """What will be run, and why (the window can show it before starting)."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)  # changes to the environment only
    processes: int = 1
    device: str = "auto"
    note: str = ""


def visible_gpu_count() -> int:
    """GPUs this PC offers to a trainer (app.gpu.cards), without importing torch."""
    from ..gpu.cards import this_pc_cards  # here: a lab that never starts a local run opens no NVML

    return len(this_pc_cards())


def absent_cards(gpu: str) -> str | None:
    """Why a local run's target.gpu cannot train here: a card it names is not one of this
    PC's (app.gpu.cards), said with what the PC has; None when every named card is here (or
    it names none: "auto", "cpu"). The trainer told to use a missing card would stop, or
    with "auto" train on another device than the one the run showed."""
    try:
        ids = gpu_choice(gpu or "auto")  # the one reader of target.gpu (trainer.config.run_config)
    except ConfigError:
        return None  # not a card list: trainer.config.run_config's check names it
    if not isinstance(ids, list):
        return None
    from ..gpu.cards import this_pc_cards

    cards = this_pc_cards()
    missing = [x for x in ids if int(x) not in {c.index for c in cards}]
    if not missing:
        return None
    have = ", ".join(f"{c.index}: {c.name}" for c in cards)
    return t(f"Видеокарты {', '.join(missing)} на этом компьютере нет (есть: {have or 'только процессор'}). "
             "Выберите карту этого компьютера или процессор.",
             f"This computer has no GPU {', '.join(missing)} (it has: {have or 'the CPU only'}). "
             "Choose one of its cards or the CPU.")


def plan_launch(
    run_dir: Path,
    gpu: str = "auto",
    *,
    gpu_count: int | None = None,
    resume: str | None = None,
    stop_at_step: int | None = None,
    python: str | None = None,
) -> LaunchPlan:
    """The command line for a run on this PC.

    `gpu` is run.json's target.gpu: "auto" (every GPU this PC has: one process, or torchrun
    with one process per GPU), "cpu", or GPU indices ("0", "1", "0,1").
    """
    python = python or sys.executable
    try:
        choice = gpu_choice(gpu or "auto")
    except ConfigError as e:
        raise ValueError(str(e)) from None
    trainer_args = ["--run", str(run_dir)]
    if resume:
        trainer_args += ["--resume", resume]
    if stop_at_step is not None:
        trainer_args += ["--stop-at-step", str(int(stop_at_step))]
    env: dict[str, str] = {}
    if choice == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
        count, device, note = 1, "cpu", "CPU (target.gpu = cpu)"
    elif choice == "auto":
        n = visible_gpu_count() if gpu_count is None else gpu_count
        if n <= 0:
            count, device, note = 1, "auto", "no GPU found: the trainer runs on the CPU"
        else:
            count, device, note = n, "cuda", f"{n} GPU(s)"
    else:
        ids = choice
        env["CUDA_VISIBLE_DEVICES"] = ",".join(ids)
        # The ids are NVML's (the form's card, `nvidia-smi`), which count in PCI bus order;
        # CUDA's own default order (fastest first) would pick another card on a mixed PC.
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
        count, device, note = len(ids), "cuda", f"GPU {', '.join(ids)}"
    trainer_args += ["--device", device]
    if count > 1 and os.name == "nt":
        # Windows' torch cannot run torchrun (its store wants libuv): the trainer's own rank
        # launcher (trainer/parallel/ranks.py), the cards talking through gloo (trainer/parallel/distributed.py).
        argv = [python, "-m", "trainer.parallel.ranks", str(count), *trainer_args]
    elif count > 1:
        # `-m -- trainer`: without the `--` torchrun's own parser takes the trainer's
        # `--run` for an abbreviation of its `--run-path` and refuses it as ambiguous.
        argv = [python, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={count}",
                "-m", "--", "trainer", *trainer_args]
    else:
        argv = [python, "-m", "trainer", *trainer_args]
    return LaunchPlan(argv, env, count, device, note)




def spawn(plan: LaunchPlan, run_dir: Path) -> tuple[int, float]:
    """Start the plan detached from this process; stdout+stderr go to RUN_DIR/trainer.log.

    Returns (pid, process start time) — together they identify the process even after
    the pid is reused.
    """
    env = child_env(plan.env)
    if not settings.keep_awake():  # «Не давать ПК уснуть…» off: the trainer asks the OS for nothing
        env[AWAKE_ENV] = "0"
    kwargs: dict = {}
    if os.name == "posix":
        kwargs["start_new_session"] = True
    else:  # Windows: its own process group, no console window
        kwargs["creationflags"] = subprocess.CREATE_NEW_PROCESS_GROUP | getattr(subprocess, "CREATE_NO_WINDOW", 0)
    with open(run_dir / LOG, "ab") as log:
        log.write(f"\n$ {' '.join(plan.argv)}\n".encode())  # trainer.log is UTF-8 throughout
        log.flush()
        proc = subprocess.Popen(
            plan.argv, cwd=run_dir, env=env, stdin=subprocess.DEVNULL, stdout=log,
            stderr=subprocess.STDOUT, close_fds=True, **kwargs,
        )
    _children[proc.pid] = proc
    return proc.pid, process_start_time(proc.pid) or time.time()


def process_start_time(pid: int) -> float | None:
    import psutil  # here (and below): the window's first frame starts no process and asks none

    try:
        return psutil.Process(pid).create_time()
    except (psutil.Error, OSError):
        return None


def is_alive(pid: int | None, started_at: float | None = None) -> bool:
    """Whether the process `pid` (started at `started_at`, if known) is still running."""
    if not pid:
        return False
    child = _children.get(pid)
    if child is not None:
        if child.poll() is None:
            return True
        _children.pop(pid, None)
        return False
    import psutil

    try:
        p = psutil.Process(pid)
        if p.status() == psutil.STATUS_ZOMBIE:
            return False
        if started_at is not None and abs(p.create_time() - started_at) > 1.0:
            return False  # the pid was reused by another program
        return True
    except (psutil.Error, OSError):
        return False


def wait_exit(pid: int | None, timeout: float) -> bool:
    """Wait up to `timeout` s for our own child to end (returns early when it does).

    For a process this one did not start there is nothing to wait on: just sleep.
    Returns whether the process has ended.
    """
    child = _children.get(pid) if pid else None
    if child is not None:
        try:
            child.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        return True
    time.sleep(timeout)
    return not is_alive(pid)


def terminate(pid: int | None, started_at: float | None = None) -> bool:
    """The last resort after STOP had its grace (RunManager.stop_grace_s). Returns whether
    it was sent.

    POSIX: SIGTERM to the trainer's process group (torchrun and every rank), which the
    trainer treats like STOP — finish the step, save, exit.
    Windows: the trainer and its children are ended (TerminateProcess), which costs the steps
    since its last checkpoint (checkpoints are written atomically: the last one is whole).
    Windows has no signal that could reach it: CTRL_BREAK_EVENT only reaches processes that
    share the sender's console, and the window has none while the trainer starts with none
    (CREATE_NO_WINDOW, so that no console window opens beside it)."""
    if not is_alive(pid, started_at):
        return False
    assert pid is not None
    try:
        if os.name != "posix":
            return _end_tree(pid)
        # Our trainers lead their own process group (start_new_session); anything
        # else gets the signal alone, never a group this process did not make.
        if os.getpgid(pid) == pid:
            os.killpg(pid, signal.SIGTERM)
        else:
            os.kill(pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError, OSError):
        return False
    return True


def _end_tree(pid: int) -> bool:
    """End a process and every process it started (the ranks), children first."""
    import psutil

    try:
        root = psutil.Process(pid)
        tree = [*root.children(recursive=True), root]
    except psutil.Error:
        return False
    for p in tree:
        try:
            p.terminate()  # TerminateProcess on Windows
        except psutil.Error:
            pass  # already gone
    return True  # not waited for: the window's poll sees it gone (no freeze on its timer)
