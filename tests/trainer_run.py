"""Helpers for tests that run the real trainer: write a run.json, run the process, read events."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from tests import forked

ROOT = Path(__file__).resolve().parent.parent

TINY_MODEL = {"context": 32, "width": 32, "heads": 2, "layers": 2, "vocab": 300}


def write_run(run_dir: Path, data_dir: Path, model: dict | None = None, **training: Any) -> Path:
    """A run.json for a tiny CPU run; keyword arguments override training keys."""
    run_dir.mkdir(parents=True, exist_ok=True)
    t = {"batch_per_card": 4, "steps_to": 30, "eval_every": 10, "eval_segments": 16, "warmup_steps": 5}
    t.update(training)
    cfg = {"name": run_dir.name, "model": {**TINY_MODEL, **(model or {})}, "training": t, "data": {"dir": str(data_dir)}}
    (run_dir / "run.json").write_text(json.dumps(cfg), encoding="utf-8")
    return run_dir


def trainer_env() -> dict[str, str]:
    return forked.python_env(os.environ)


def run_trainer(run_dir: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """`python -m trainer --run RUN_DIR ARGS` to its end: a real process, forked from one
    that has imported torch (tests/forked.py says why and when it starts fresh)."""
    return run_module("trainer", "--run", str(run_dir), *args, timeout=timeout)


def start_trainer(run_dir: Path, *args: str) -> forked.Started:
    """`python -m trainer --run RUN_DIR ARGS` started and left running, for a test that
    stops, pauses or watches it (subprocess.Popen's uses): forked as `run_trainer` is where
    it can be. Its `end()` in the test's clean-up."""
    return forked.start_module("trainer", ["--run", str(run_dir), *args], trainer_env(), ROOT)


def run_module(module: str, *args: str, timeout: float = 120, input: str | None = None,
               output: Path | None = None, file_size_limit: int | None = None) -> subprocess.CompletedProcess:
    """`python -m MODULE ARGS` with the trainer's environment, captured as subprocess.run does
    (or appended to `output`; `file_size_limit`: see forked.run_module)."""
    return forked.run_module(module, list(args), trainer_env(), ROOT, timeout, input, output, file_size_limit)


def events(run_dir: Path, kind: str | None = None) -> list[dict]:
    path = run_dir / "events.jsonl"
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r for r in rows if kind is None or r["event"] == kind]


def kill_tree(pid: int) -> None:
    """End a trainer at once with everything it started, as a power cut would: SIGKILL to its
    process group on POSIX (the product starts each trainer as a group's leader), the whole
    process tree on Windows (TerminateProcess; Windows has no process groups to signal)."""
    import signal

    import psutil

    if os.name == "posix":
        try:
            os.killpg(os.getpgid(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass
        return
    try:
        root = psutil.Process(pid)
        tree = [*root.children(recursive=True), root]
    except psutil.Error:
        return
    for p in tree:
        try:
            p.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(tree, timeout=30)


def end_left_trainers(manager) -> None:
    """A test's teardown: end every trainer the test left going, at once. A local one is
    killed with its process group (nothing of it is read after the test, and a stop would
    first finish torch's import, a step and a save); a Kaggle one is stopped as the window
    does."""
    from app.runs import process as proc

    for rec in manager.registry.active():
        if rec.target_kind != "local":
            manager.stop(rec.id)
            proc.wait_exit(rec.pid, 30)
        elif proc.is_alive(rec.pid, rec.pid_started_at):
            kill_tree(rec.pid)
            proc.wait_exit(rec.pid, 30)


def torchrun(run_dir: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    """The trainer on two CPU processes (gloo) as torchrun starts them on a 2×T4 kernel:
    the ranks forked (tests/forked.py), or torchrun itself where they cannot be."""
    return forked.run_ranks("trainer", ["--run", str(run_dir), "--device", "cpu", *args], trainer_env(), 2,
                            ROOT, timeout)


def real_torchrun(run_dir: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    """torchrun itself with two CPU processes: for the runs that check the launch as a
    Kaggle kernel makes it (≈ 3 s of torchrun's own start more than `torchrun`)."""
    cmd = forked.torchrun_argv("trainer", ["--run", str(run_dir), "--device", "cpu", *args])
    return subprocess.run(cmd, env=trainer_env(), cwd=ROOT, capture_output=True, text=True, timeout=timeout)
