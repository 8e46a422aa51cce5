"""«Метрики в CSV…» in the history's context menu: the item for a run's row, and the
window writing the run's table to the chosen file (the rows are app.runs.metrics')."""

from __future__ import annotations

import json

import pytest

from tests.test_ui_history import row

pytestmark = pytest.mark.usefixtures("russian")


def test_the_rows_context_menu_offers_the_metrics_as_csv(qtbot):
    from app.base import run_status as st
    from ui.runs.history import HistoryView

    view = HistoryView()
    qtbot.addWidget(view)
    view.set_rows([row("a", st.FINISHED), row("b", st.RUNNING)])
    [action] = view.context_actions(view.row_of("b"))
    assert action.text() == "Метрики в CSV…"
    assert max(map(len, action.toolTip().splitlines())) <= 60
    with qtbot.waitSignal(view.metrics_requested) as got:
        action.trigger()
    assert got.args == ["b"]
    assert view.context_actions(-1) == []  # off the rows: no menu


def test_the_window_writes_the_runs_metrics(qtbot, tiny_data, tmp_path):
    from app.runs import RunManager
    from ui.window.main_window import MainWindow

    runs = RunManager()
    rec = runs.registry.create_run({"name": "m", "data": {"dir": str(tiny_data), "constellations": ["tiny"]}})
    with open(rec.events_path, "a", encoding="utf-8") as f:
        for s in (1, 2):
            f.write(json.dumps({"event": "step", "time": 1.0 + s, "step": s, "loss": 5.0, "tokens_seen": 128 * s}) + "\n")
    w = MainWindow(runs=runs, poll_ms=100, extra_prepared=[str(tiny_data)])
    qtbot.addWidget(w)
    out = tmp_path / "m.csv"
    assert w.export_metrics(rec.id, str(out))
    assert out.read_text().splitlines()[1].startswith(f"{rec.id},1,2.0,5.0,,128,")
    assert w.statusBar().currentMessage() == f"Метрики записаны: 2 строки → {out}"
    assert not w.export_metrics(rec.id, str(tmp_path))  # a folder: said, nothing raised
    assert "выберите другое место" in w.statusBar().currentMessage()
