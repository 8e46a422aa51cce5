"""The «Поиск» tab (pytest-qt): a search's trials in the table, the optimisation history
drawn by the lab, each field's importance (PedAnovaImportanceEvaluator) once enough trials
completed, and the best trial's run.json handed on for a new form."""

from __future__ import annotations

from optuna.trial import TrialState

from app.runs import Registry
from app.search import study as studies
from app.search.adding import create_search
from app.search.space import parse_space
from app.search.store import COMPLETE, FAILED, SearchStore


def _search_with_trials(store: SearchStore):
    base = {"name": "wide", "model": {"width": 32}, "training": {"lr": 0.001, "warmup_steps": 10}}
    search = create_search(store, base, parse_space(["lr=log:1e-4..1e-1", "warmup_steps=1..100"]), 8, seed=3)
    study, _ = studies.load_study(studies.journal_path(search.journal), search.study_name)
    losses = [4.0, 3.5, None, 3.8, 3.2, 3.6, 3.4, 3.9]
    for number, loss in enumerate(losses):
        trial = study.ask(fixed_distributions={d.key: d.distribution() for d in search.space})
        store.add_trial(search.id, number, dict(trial.params))
        if loss is None:
            study.tell(trial, state=TrialState.FAIL)
            store.set_trial(search.id, number, state=FAILED, told=1)
        else:
            study.tell(trial, loss)
            store.set_trial(search.id, number, state=COMPLETE, val_loss=loss, val_low=loss - 0.05,
                           val_high=loss + 0.05, run_id=f"run-{number}", told=1)
    return search


def test_the_tab_shows_a_search_and_hands_on_its_best(qtbot, russian):
    from ui.search.tab import SearchTab

    reg = Registry()
    try:
        store = SearchStore(reg.state)
        search = _search_with_trials(store)
        tab = SearchTab(store, refresh_ms=0)
        qtbot.addWidget(tab)
        assert tab.choice.count() == 1 and tab.table.rowCount() == 8
        assert tab.table.item(4, 2).text() == "готов" and tab.table.item(2, 2).text() == "не удался"
        assert tab.table.item(4, 3).text() == "3,2000 [3,1500…3,2500]"
        xs, ys = tab.best_line.getData()
        assert list(xs) == [0, 1, 3, 4, 5, 6, 7] and list(ys) == [4.0, 3.5, 3.5, 3.2, 3.2, 3.2, 3.2]
        assert tab.importance.text().startswith("Важность полей: lr ")
        assert "warmup_steps" in tab.importance.text()
        with qtbot.waitSignal(tab.use_best) as got:
            tab.best_button.click()
        cfg = got.args[0]
        best = store.trial(search.id, 4).params
        assert cfg["training"]["lr"] == best["training.lr"] and cfg["training"]["warmup_steps"] == best["training.warmup_steps"]
        assert cfg["name"] == "wide-best" and cfg["model"] == {"width": 32}
        tab.stop()
    finally:
        reg.close()


def test_a_search_from_the_form_runs_through_the_windows_queue(qtbot, tiny_data, russian):
    """«Поиск…» beside «Серия…»: two trials over lr, run by the window's own queue driver on
    this PC's CPU; the tab's table and history plot follow them to the end."""
    from PySide6.QtWidgets import QDialogButtonBox

    from tests.test_window_queue import WAIT_MS, fill_tiny, make_window
    from tests.trainer_run import end_left_trainers

    w = make_window(qtbot, tiny_data)
    try:
        view = w.form_view
        fill_tiny(qtbot, view)
        dialog = w.start_search(view.form.run_config())
        assert dialog.fields[0].text().startswith("lr=log:")
        dialog.fields[1].setText("nosuch=1..2")
        ok = dialog.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Ok)
        ok.click()
        assert dialog.isVisible() and "nosuch" in dialog.error.text()  # said, the dialog stays
        dialog.fields[1].setText("")
        dialog.trials.setValue(2)
        dialog.target.setCurrentIndex(dialog.target.findData("local"))
        ok.click()
        tab = w.search_tab
        assert w.tabs.currentWidget() is tab and tab.choice.count() == 1

        def states() -> list[str]:
            tab.refresh()
            return [tab.table.item(r, 2).text() for r in range(tab.table.rowCount())]

        qtbot.waitUntil(lambda: states() == ["готов", "готов"], timeout=WAIT_MS)
        xs, _ = tab.points.getData()
        assert list(xs) == [0, 1] and tab.best_button.isEnabled()
    finally:
        end_left_trainers(w.runs)
        w.close()


def test_the_form_shows_the_lab_law_once_it_is_fitted(qtbot, tiny_data, russian):
    """«Как выбрать размер» in the window: the law's lines with their basis appear by themselves
    once the fit (in its own thread) is done."""
    from app.law.fit import Law
    from tests.test_law import _finished_run
    from tests.test_window_queue import WAIT_MS, fill_tiny, make_window

    law = Law(E=2.0, A=60.0, B=90.0, alpha=0.4, beta=0.35)
    reg = Registry()
    try:
        for n in (1000, 3000, 8000, 20000):
            for d in (n // 3, n, 3 * n):
                _finished_run(reg, tiny_data, n, d, float(law.loss(n, d)))
    finally:
        reg.close()
    w = make_window(qtbot, tiny_data)
    try:
        fill_tiny(qtbot, w.form_view)

        def shown() -> str:  # the panel's own labels, not the form asked again
            layout = w.form_view.size_layout
            return "\n".join(layout.itemAt(i).widget().text() for i in range(layout.count())
                             if layout.itemAt(i).widget() is not None and layout.itemAt(i).widget().isVisible())

        qtbot.waitUntil(lambda: "Закон лабы: val loss" in shown(), timeout=WAIT_MS)
        text = shown()
        assert "по 12 прогонам лабы" in text and "Оптимум для этих вычислений" in text and "Когда расти" in text
        assert "по справке (20 токенов на вес)" in text
    finally:
        w.close()
