"""A run's metrics as TensorBoard event files, so that people who use other trainers open the
lab's runs in the viewer they already have (`tensorboard --logdir <the lab's runs folder>`).

Written by the lab, not the trainer, from the run's events.jsonl: a Kaggle run's events come
back into the same file, so its folder gets the same files, and the trainer keeps its two
dependencies. The lab writes them when it settles a run that ended (RunManager.poll) and
`ternit run tensorboard RUN|all [DIR]` writes them for runs made before.

The values are metrics.csv's (app/runs/metrics.py, the run's own rows: a continued run's
folder holds its own steps, and TensorBoard's own run list shows the chain's folders side by
side), plus bits per byte of each evaluation. TensorBoard keeps a scalar as a 32-bit float.

Why tensorboardX: it writes the event format with protobuf alone (no TensorFlow, no
tensorboard package). Its package imports torch when torch is installed (to accept tensors),
and the lab's processes never load torch: it is imported with torch hidden (`_writer_class`).
"""

from __future__ import annotations

import logging
import shutil
import sys
from pathlib import Path
from typing import Any

from .bits import bits_per_byte, bytes_per_token
from .metrics import metrics_rows
from .registry import Registry, RunRecord

log = logging.getLogger(__name__)

FOLDER = "tensorboard"  # in the run folder

# metrics.csv's column -> TensorBoard's tag (grouped as TensorBoard groups tags by their prefix)
TAGS = {
    "loss": "train/loss",
    "lr": "train/lr",
    "tokens_seen": "train/tokens_seen",
    "tokens_per_s": "train/tokens_per_s",
    "step_ms": "train/step_ms",
    "val_loss": "val/loss",
    "val_ci95_low": "val/loss_ci95_low",
    "val_ci95_high": "val/loss_ci95_high",
    "mem_alloc_mb": "memory/alloc_mb",
    "mem_peak_mb": "memory/peak_mb",
}
BPB_TAG = "val/bits_per_byte"

Scalar = tuple[str, int, float, float]  # tag, step, value, wall time


def scalars(rows: list[dict[str, Any]], bytes_per_tok: float | None) -> list[Scalar]:
    """What the event files hold: one scalar per tag and step where the row has a number."""
    out: list[Scalar] = []
    for row in rows:
        step, wall = row["step"], float(row.get("time") or 0.0)
        for column, tag in TAGS.items():
            value = row.get(column)
            if isinstance(value, int | float) and not isinstance(value, bool):
                out.append((tag, step, float(value), wall))
        bpb = bits_per_byte(row.get("val_loss"), bytes_per_tok)
        if bpb is not None:
            out.append((BPB_TAG, step, bpb, wall))
    return out


def _writer_class() -> Any:
    """tensorboardX's SummaryWriter, imported with torch hidden: its `import torch` (to accept
    tensors, which the lab never hands it) then fails as if torch were absent, and the lab's
    process stays without torch."""
    hide = "torch" not in sys.modules
    if hide:
        sys.modules["torch"] = None  # type: ignore[assignment]  # import torch -> ImportError
    try:
        from tensorboardX import SummaryWriter
    finally:
        if hide and sys.modules.get("torch", 0) is None:
            del sys.modules["torch"]
    return SummaryWriter


def write_run(rec: RunRecord, out: Path | None = None) -> Path:
    """Write the run's event files into `out` (default: its folder's `tensorboard/`), replacing
    what an earlier write left there; returns the folder. Written into a fresh folder first and
    renamed into place, so a viewer never reads half of the set beside an old one."""
    target = Path(out) if out is not None else rec.path / FOLDER
    data_dir = str((rec.config().get("data") or {}).get("dir") or "")
    values = scalars(metrics_rows([rec]), bytes_per_token(data_dir))
    fresh = target.with_name(target.name + ".new")
    shutil.rmtree(fresh, ignore_errors=True)
    writer = _writer_class()(logdir=str(fresh), flush_secs=3600)
    try:
        for tag, step, value, wall in values:
            writer.add_scalar(tag, value, global_step=step, walltime=wall)
    finally:
        writer.close()
    shutil.rmtree(target, ignore_errors=True)
    fresh.rename(target)
    return target


def write_quietly(rec: RunRecord) -> None:
    """write_run for a run that just ended: a failure is logged, never raised (the files are
    a copy of events.jsonl; `ternit run tensorboard` writes them again)."""
    try:
        write_run(rec)
    except (OSError, ValueError, ImportError) as e:
        log.warning("TensorBoard files of run %s not written: %s", rec.id, e)


def write_runs(registry: Registry, run_ids: list[str] | None, out: Path | None = None) -> list[Path]:
    """`ternit run tensorboard`: these runs (None: every run in the history that has events),
    each into its own folder's `tensorboard/`, or into `out/<run id>/`."""
    records = [registry.find(r) for r in run_ids] if run_ids is not None else registry.list_runs()
    written = []
    for rec in records:
        if run_ids is None and not rec.events_path.exists():
            continue
        written.append(write_run(rec, Path(out) / rec.id if out is not None else None))
    return written
