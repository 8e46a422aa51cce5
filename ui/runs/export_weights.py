"""«Экспорт весов»: the latest checkpoint's weights as .safetensors, by `ternit export` in a
child process (it loads torch; the window never does). Which checkpoint, and the command,
are app.window.lab's. «Метрики в CSV…»: a run's table (app.runs.metrics) into a file."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from PySide6.QtCore import QProcess, QProcessEnvironment
from PySide6.QtWidgets import QFileDialog, QMainWindow

from app.base.children import child_env
from app.base.i18n import t
from app.window.lab import ActionError, Lab


def export_weights(window: QMainWindow, lab: Lab, run_id: str, out: str | None = None) -> QProcess | None:
    """Ask where to (unless `out`), start the export, say in the status bar how it ended.
    None when there is nothing to export (said first) or the user cancelled."""
    status = window.statusBar()
    try:
        choice = lab.export_checkpoint(run_id)  # none: said before asking where to
        if out is None:
            out, _ = QFileDialog.getSaveFileName(window, t("Экспорт весов", "Export weights"),
                                                 str(Path.home() / lab.export_file_name(run_id)),
                                                 "safetensors (*.safetensors)")
            if not out:
                return None
    except ActionError as e:
        status.showMessage(str(e))
        return None
    proc = QProcess(window)
    env = QProcessEnvironment()
    for key, value in child_env().items():  # its text in UTF-8, which done() reads
        env.insert(key, value)
    proc.setProcessEnvironment(env)
    proc.setProgram(sys.executable)
    proc.setArguments(Lab.export_args(choice.path, out))
    proc.setProcessChannelMode(QProcess.ProcessChannelMode.MergedChannels)

    def done(code: int, _status: Any) -> None:
        text = bytes(proc.readAll()).decode("utf-8", "replace").strip()
        status.showMessage(lab.export_finished(choice, out, code, text))

    proc.finished.connect(done)
    status.showMessage(t(f"Экспорт весов в {out}…", f"Exporting weights to {out}…"))
    proc.start()
    return proc


def export_metrics(window: QMainWindow, registry: Any, run_id: str, out: str | None = None) -> bool:
    """Ask where to (unless `out`), write the run's metrics table, say how in the status bar."""
    from app.runs.metrics import save_metrics

    if out is None:
        name = registry.get(run_id).name
        out, _ = QFileDialog.getSaveFileName(window, t("Метрики в CSV", "Metrics as CSV"),
                                             str(Path.home() / f"{name}-metrics.csv"), "CSV (*.csv)")
        if not out:
            return False
    ok, line = save_metrics(registry, run_id, out)
    window.statusBar().showMessage(line)
    return ok
