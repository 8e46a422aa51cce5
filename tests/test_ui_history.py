"""The history table: statuses, where a run ran (Kaggle kernels included), actions enabled
by what a row allows, overlay ticks and selection kept across refreshes."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, Qt

from app.base import run_status as st
from app.runs import HistoryRow

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
    from ui.runs.history import HistoryView

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
    assert table.item(0, 5).text() == "2,5000" and table.item(0, 6).text() == "1,28 млн"
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


def _long_rows() -> list[HistoryRow]:
    return [row(f"run{i}", st.FINISHED, name=f"tiny-run-{i}-with-a-really-long-descriptive-name", created=f"2026-11-30 00:0{i}",
                where="Kaggle · alice-with-a-long-account · этап 2", steps=f"{100 * i} / 100000",
                last_step=100 * i, tokens_seen=10 ** (9 - i), best_val_loss=None if i == 2 else 3.0 - i / 10)
            for i in range(4, -1, -1)]  # newest first, as the registry gives them


def test_narrow_table_keeps_the_name_readable(qtbot):
    # At a narrow width «Прогон» squeezed to «t…» while the other columns kept theirs: it
    # keeps a minimum now (a scroll bar appears), and takes the spare width when there is some.
    from ui.runs.history import NAME_COLUMN, NAME_MIN_PX, HistoryView

    view = HistoryView()
    qtbot.addWidget(view)
    view.show()
    view.set_rows(_long_rows())
    header = view.table.horizontalHeader()
    # The layout follows a resize through queued events: waited for, however long a loaded
    # machine takes to run them (a fixed 50 ms wait was the time, not the event).
    for width in (700, 1000):
        view.resize(width, 300)
        qtbot.waitUntil(lambda w=width: view.table.viewport().width() > 0 and view.width() == w, timeout=60_000)
        qtbot.waitUntil(lambda: header.sectionSize(NAME_COLUMN) >= NAME_MIN_PX
                        and all(header.sectionSize(c) >= view.table.sizeHintForColumn(c) for c in (3, 4)),
                        timeout=60_000)  # «Где», «Шаги»: their contents fit
    view.resize(2400, 300)

    def filled() -> bool:
        used = sum(header.sectionSize(c) for c in range(view.table.columnCount()))
        return used >= view.table.viewport().width() - 2 and header.sectionSize(NAME_COLUMN) > 600

    qtbot.waitUntil(filled, timeout=60_000)  # the name fills the rest


def test_user_column_width_is_kept_and_double_click_refits(qtbot):
    from ui.runs.history import HistoryView

    view = HistoryView()
    qtbot.addWidget(view)
    view.resize(1200, 300)
    view.show()
    view.set_rows(_long_rows())
    header = view.table.horizontalHeader()
    header.resizeSection(3, 90)  # as a user's drag does: sectionResized
    assert view.user_widths == {"where": 90}
    view.set_rows(_long_rows())  # a refresh does not fit it back
    assert header.sectionSize(3) == 90
    header.sectionHandleDoubleClicked.emit(3)
    assert "where" not in view.user_widths and header.sectionSize(3) > 90


def test_sorting_by_a_header_keeps_the_actions_on_the_selected_run(qtbot):
    from ui.runs.history import HistoryView

    view = HistoryView()
    qtbot.addWidget(view)
    view.show()
    view.set_rows(_long_rows())
    table = view.table
    ids = lambda: [view.run_id_at(r) for r in range(table.rowCount())]  # noqa: E731
    assert ids() == ["run4", "run3", "run2", "run1", "run0"]  # newest first by default
    assert view.sort_order() == ("created", "desc")
    view.select("run1")
    # «Токенов» (1 млрд … 100 тыс.): sorted as numbers, not as the texts «1 млрд», «100 тыс.».
    header = table.horizontalHeader()
    for _ in range(2):  # a click on the header, a second one turns the order round
        qtbot.mouseClick(header.viewport(), Qt.MouseButton.LeftButton,
                         pos=QPoint(header.sectionViewportPosition(6) + 5, header.height() // 2))
        key, order = view.sort_order()
        assert key == "tokens"
        assert ids() == (["run4", "run3", "run2", "run1", "run0"] if order == "asc"
                         else ["run0", "run1", "run2", "run3", "run4"])
    assert view.selected().id == "run1"
    assert table.currentRow() == ids().index("run1")
    with qtbot.waitSignal(view.continue_requested) as got:
        view.buttons["continue"].click()
    assert got.args == ["run1"]
    with qtbot.waitSignal(view.show_requested) as got:
        table.cellDoubleClicked.emit(0, 3)
    assert got.args == [ids()[0]]
    with qtbot.waitSignal(view.overlay_changed) as got:
        table.item(ids().index("run3"), 0).setCheckState(Qt.CheckState.Checked)
    assert got.args == ["run3", True]
    # Best val: the run with none («—») comes after every number.
    table.sortByColumn(5, Qt.SortOrder.AscendingOrder)
    assert ids()[-1] == "run2" and ids()[0] == "run4"
    # A refresh keeps the order chosen and the selection.
    view.set_rows(_long_rows())
    assert ids()[-1] == "run2" and view.selected().id == "run1"
    assert view.sort_order() == ("best", "asc")


def test_the_run_on_the_plot_is_ticked(qtbot):
    """Issue 16: the run the plot shows had its «На графике» box unticked."""
    from ui.runs.history import HistoryView

    view = HistoryView()
    qtbot.addWidget(view)
    view.set_rows([row("a", st.FINISHED), row("b", st.FINISHED)])
    view.set_followed("b")
    r = view.row_of("b")
    assert view.table.item(r, 0).checkState() == Qt.CheckState.Checked
    assert not view.table.item(r, 0).flags() & Qt.ItemFlag.ItemIsUserCheckable  # «Показать» another instead
    assert view.table.item(view.row_of("a"), 0).checkState() == Qt.CheckState.Unchecked
    view.set_followed("a")  # another run shown: the tick follows it
    assert view.table.item(view.row_of("a"), 0).checkState() == Qt.CheckState.Checked
    assert view.table.item(view.row_of("b"), 0).checkState() == Qt.CheckState.Unchecked


def test_runs_of_one_name_are_numbered_and_a_retry_is_marked(qtbot):
    """Issue 16: runs of the same name looked identical."""
    from ui.runs.history import HistoryView

    view = HistoryView()
    qtbot.addWidget(view)
    # Newest first: nc-stop failed, was retried; «solo» is alone and stays as it is.
    view.set_rows([row("r3", st.FINISHED, name="nc-stop", created="2026-11-30 00:02"),
                   row("solo", st.FINISHED, name="solo"),
                   row("r2", st.FAILED, name="nc-stop", created="2026-11-30 00:01"),
                   row("r1", st.FINISHED, name="nc-stop", created="2026-11-30 00:01")])
    name = {rid: view.table.item(view.row_of(rid), 1).text() for rid in ("r1", "r2", "r3", "solo")}
    assert name == {"r1": "nc-stop #1", "r2": "nc-stop #2", "r3": "nc-stop #3 · повтор", "solo": "solo"}
    assert "создан 2026-11-30 00:01" in view.table.item(view.row_of("r1"), 1).toolTip()
