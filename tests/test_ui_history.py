"""The history table: statuses, where a run ran (Kaggle kernels included), actions enabled
by what a row allows, overlay ticks and selection kept across refreshes."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from app.runs import HistoryRow
from app.runs import status as st

pytestmark = pytest.mark.usefixtures("russian")  # conftest: the interface in Russian


def row(run_id: str, status: str, **kw) -> HistoryRow:
    base = dict(id=run_id, name=run_id, status=status, status_label=st.label(status), where="этот ПК · CPU",
                steps="10 / 20", last_step=10, steps_to=20, best_val_loss=2.5, tokens_seen=1_280_000,
                params=27_738_112, leg=1, chain_id=run_id, parent_id=None, created="2026-11-30 00:00",
                folder=f"/runs/{run_id}", kernel_ref=None, message=None,
                can_stop=status in st.ACTIVE, can_continue=status in st.ENDED)
    base.update(kw)
    return HistoryRow(**base)


def test_rows_statuses_and_actions(qtbot):
    from ui.history import HistoryView

    view = HistoryView()
    qtbot.addWidget(view)
    rows = [row("a", st.RUNNING), row("b", st.TIME_LIMIT),
            row("c", st.RUNNING_KAGGLE, where="Kaggle · alice · этап 2", leg=2, kernel_ref="alice/ternit-c",
                can_continue=False)]
    view.set_rows(rows)
    table = view.table
    assert table.rowCount() == 3
    assert table.item(0, 2).text() == "идёт" and table.item(1, 2).text() == "остановлен по лимиту"
    assert "alice/ternit-c" in table.item(2, 3).text() and "(этап 2)" in table.item(2, 1).text()
    assert table.item(0, 5).text() == "2.5000" and table.item(0, 6).text() == "1,28 млн"
    assert table.item(0, 7).text() == "27,7 млн"

    view.select("a")
    assert view.buttons["stop"].isEnabled() and not view.buttons["continue"].isEnabled()
    view.select("b")
    assert view.buttons["continue"].isEnabled() and not view.buttons["stop"].isEnabled()
    with qtbot.waitSignal(view.continue_requested) as got:
        view.buttons["continue"].click()
    assert got.args == ["b"]

    with qtbot.waitSignal(view.overlay_changed) as got:
        table.item(0, 0).setCheckState(Qt.CheckState.Checked)
    assert got.args == ["a", True]
    # A refresh keeps the selection and the overlay ticks.
    view.set_rows([row("new", st.STARTING)] + rows)
    assert view.selected().id == "b"
    assert table.item(1, 0).checkState() == Qt.CheckState.Checked
