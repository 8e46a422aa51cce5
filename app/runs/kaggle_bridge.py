"""How Kaggle runs join the same history: the calls the lab makes into app.kaggle.runner.

app.runs owns the history (folders, rows, events, statuses); app.kaggle.runner owns what
happens on Kaggle. The runner module is imported lazily, only when a Kaggle run is
started, stopped or followed, so local runs never load the kaggle client.

The contract (the runner implements these module-level functions):

    start_kaggle_run(registry, run_id, *, account="auto") -> None
        The run's folder and row exist already (status "created", target_kind "kaggle",
        run.json written). Upload, push, and return once the kernel is pushed (or raise
        with a message that says what to do). Set statuses with
        registry.set_status(run_id, "uploading" | "queued" | "running_kaggle" |
        "downloading" | "finished" | "time_limit" | "stopped" | "failed", message) and the
        kernel with registry.set_kernel_ref(run_id, "user/kernel-slug"); record the
        account with registry.update(run_id, target_account=NAME).
        Append the trainer's event lines to the run's events.jsonl (record.events_path),
        exactly as the trainer wrote them; the lab's poll folds them into the row.
        To continue on another account: registry.create_leg(run_id, config) with
        config["resume_from"] set gives the next leg (same chain_id, leg + 1).
    poll_kaggle_runs(registry) -> None            (optional)
        One short, non-blocking step of following every in-flight Kaggle run; the lab
        calls it from its poll timer and from `ternit run ... --wait`.
    stop_kaggle_run(registry, run_id) -> None     (optional)
        Ask the kernel to stop (the trainer saves at STOP/SIGTERM as locally).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

RUNNER_MODULE = "app.kaggle.runner"


class KaggleUnavailable(RuntimeError):
    """The Kaggle side of the lab is not installed or not working."""


_loaded: ModuleType | None = None  # the runner, once a Kaggle run was started or followed


def runner() -> ModuleType:
    global _loaded
    try:
        _loaded = importlib.import_module(RUNNER_MODULE)
    except ImportError as e:
        raise KaggleUnavailable(f"Kaggle runs are not available: {e}") from e
    return _loaded


def shutdown(timeout: float = 2.0) -> None:
    """The lab is quitting: stop following Kaggle runs (the state keeps where each leg was).
    A lab that never loaded the runner has nothing to stop, and loads nothing now."""
    if _loaded is not None:
        _loaded.shutdown_followers(timeout=timeout)


def start(registry: Any, run_id: str, account: str = "auto") -> None:
    runner().start_kaggle_run(registry, run_id, account=account)


def stop(registry: Any, run_id: str) -> bool:
    fn = getattr(runner(), "stop_kaggle_run", None)
    if fn is None:
        return False
    fn(registry, run_id)
    return True


def poll(registry: Any) -> None:
    try:
        mod = runner()
    except KaggleUnavailable:
        return
    fn = getattr(mod, "poll_kaggle_runs", None)
    if fn is not None:
        fn(registry)
