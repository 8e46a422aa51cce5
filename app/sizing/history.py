"""Measured runs for the estimates, read from run folders (run.json + events.jsonl).

The window feeds `estimate(measured=...)` from its own run history; the headless
`ternit estimate` reads the lab's runs folder through here. One entry per run:
{"run", "gpu", "params", "layers", "width", "heads", "context", "vocab", "batch",
 "tokens_per_s", "mem_peak_mb", "economical", "lean_state", "steps"}.
The CPU's short rate measurement (cpu_rate.py) joins the lab's own list as one more entry,
marked "probe": the estimates scale the CPU's rate by it, never take it for a run.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from .gpus import GPUS

WARMUP_STEPS = 2  # the first steps include start-up work (and the CPU's memory count)


def run_gpu(start: dict[str, Any]) -> str:
    """The GPUS key a run trained on, from its `start` event."""
    if start.get("device") == "cpu":
        return "cpu"
    target = (start.get("config") or {}).get("target") or {}
    chosen = target.get("gpu")
    if chosen in GPUS and chosen != "cpu":
        return str(chosen)
    if target.get("kind") == "kaggle":
        return "t4x2" if int(start.get("world_size") or 1) >= 2 else "t4"
    return "local"


def read_events(path: Path) -> list[dict[str, Any]]:
    out = []
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                try:
                    ev = json.loads(line)
                except ValueError:
                    continue  # a torn last line of a running or crashed trainer
                if isinstance(ev, dict):
                    out.append(ev)
    except OSError:
        return []
    return out


def measured_from_events(run_id: str, events: list[dict[str, Any]]) -> dict[str, Any] | None:
    starts = [e for e in events if e.get("event") == "start"]
    steps = [e for e in events if e.get("event") == "step" and isinstance(e.get("tokens_per_s"), (int, float))]
    if not starts or not steps:
        return None
    start = starts[-1]
    cfg = start.get("config") or {}
    model, training = cfg.get("model") or {}, cfg.get("training") or {}
    try:
        entry = {
            "run": run_id,
            "gpu": run_gpu(start),
            "params": int(start["params"]),
            "layers": int(model["layers"]),
            "width": int(model["width"]),
            "heads": int(model.get("heads", 8)),
            "context": int(model["context"]),
            "vocab": int(model["vocab"]),
            "batch": int(training.get("batch_per_card", 6)),
            "economical": start.get("economical", training.get("economical", False)),
            "lean_state": start.get("lean_state", training.get("lean_state", False)),
            # Micro-steps per step (training.tokens_per_step): a step's time covers them all.
            "accumulation": int(start.get("accumulation") or 1),
        }
    except (KeyError, TypeError, ValueError):
        return None
    timed = steps[WARMUP_STEPS:] if len(steps) > WARMUP_STEPS else steps[-1:]
    entry["tokens_per_s"] = statistics.median(float(e["tokens_per_s"]) for e in timed)
    peaks = [float(e["mem_peak_mb"]) for e in steps if isinstance(e.get("mem_peak_mb"), (int, float))]
    entry["mem_peak_mb"] = max(peaks) if peaks else None
    entry["steps"] = len(steps)
    return entry


def measured_from_run_dir(run_dir: str | Path) -> dict[str, Any] | None:
    d = Path(run_dir)
    return measured_from_events(d.name, read_events(d / "events.jsonl"))


def measured_runs(root: str | Path | None = None, probe: bool = True) -> list[dict[str, Any]]:
    """Every run under `root` (default: the lab's runs folder) that has timed steps, and
    (with `probe`) the CPU's short rate measurement when the lab has made one."""
    if root is None:
        from ..base.paths import runs_dir

        root = runs_dir()
    out = []
    for d in sorted(Path(root).iterdir()) if Path(root).is_dir() else []:
        if d.is_dir():
            m = measured_from_run_dir(d)
            if m is not None:
                out.append(m)
    if probe:
        from .cpu_rate import stored

        rate = stored()
        if rate is not None:
            out.append(rate)
    return out
