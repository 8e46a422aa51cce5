"""Exporting a checkpoint's weights as safetensors (the history's «Экспорт весов»).

The export loads the checkpoint with torch, so it runs as its own process:
`python -m trainer.export CKPT OUT.safetensors`.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ..i18n import t
from .checkpoints import latest_checkpoint
from .process import _trainer_root


@dataclass
class ExportResult:
    ok: bool
    checkpoint: str
    out: str
    message: str  # the exporter's own output, or why it failed


def export_checkpoint(checkpoint: Path | str, out: Path | str, timeout: float | None = None) -> ExportResult:
    """Run the exporter and wait for it; the file appears at `out` only when complete."""
    import os

    checkpoint, out = Path(checkpoint).resolve(), Path(out).resolve()
    if not checkpoint.is_file():
        return ExportResult(False, str(checkpoint), str(out), t(f"Чекпоинта {checkpoint} нет.", f"Checkpoint {checkpoint} does not exist."))
    env = dict(os.environ)
    root = _trainer_root()
    if root:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "trainer.export", str(checkpoint), str(out)],
            capture_output=True, text=True, env=env, timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return ExportResult(False, str(checkpoint), str(out), t("Экспорт не уложился во время.", "The export timed out."))
    text = (done.stdout + done.stderr).strip()
    return ExportResult(done.returncode == 0 and out.is_file(), str(checkpoint), str(out), text)


def run_checkpoint(run_dir: Path | str) -> Path | None:
    """The checkpoint a run's export uses: its latest."""
    return latest_checkpoint(Path(run_dir))
