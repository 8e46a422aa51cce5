"""The loss plot without a trainer: downsampling at 100,000 points, a chain drawn as one
curve with its markers (data changed, pause, next leg), validation bands, the steps/tokens
switch, log scale and overlays."""

from __future__ import annotations

import math

import pytest

from app.runs.series import DATA_CHANGED, LEG, PAUSE

pytestmark = pytest.mark.usefixtures("russian")  # conftest: the interface in Russian


@pytest.fixture
def plot(qtbot):
    from ui.loss_plot import LossPlot

    view = LossPlot()
    qtbot.addWidget(view)
    view.resize(900, 500)
    view.show()
    return view


def steps(a: int, b: int, tps: int = 100) -> list[dict]:
    return [{"event": "step", "step": s, "loss": 2 + 3 * math.exp(-s / 50) + 0.05 * math.sin(s),
             "tokens_seen": s * tps} for s in range(a, b + 1)]


def start(step: int, data_id: str, tps: int = 100, changed: bool = False) -> dict:
    return {"event": "start", "step": step, "tokens_per_step": tps, "data_id": data_id, "data_changed": changed}


def evals(*at: int) -> list[dict]:
    return [{"event": "eval", "step": s, "val_loss": 3.0 - s / 1000, "val_ci95": [2.9 - s / 1000, 3.1 - s / 1000]}
            for s in at]


def test_100k_points_are_downsampled_and_clipped(plot, qtbot):
    tr = plot.trace("live", "big")
    tr.add_events("r", [start(0, "d")] + steps(1, 100_000))
    tr.redraw(full=True)
    plot.widget.repaint()
    for item in (tr.raw_curve, tr.smooth_curve):
        assert item.opts["autoDownsample"] and item.opts["downsampleMethod"] == "peak"
        assert item.opts["clipToView"]
    assert tr.points == 100_000
    # Once the view has its range, what is drawn is bounded by the plot's width, not the data.
    qtbot.waitUntil(lambda: len(tr.raw_curve.curve.xData) < 20_000, timeout=5_000)
    # A live update appends only the new points (the buffers are not rebuilt).
    tr.add_events("r", steps(100_001, 100_050))
    tr.redraw()
    assert tr.steps.n == 100_050 and tr.steps.view()[-1] == 100_050


def test_a_chain_is_one_curve_with_markers_and_a_new_validation_segment(plot):
    tr = plot.trace("live", "chain")
    tr.add_events("parent", [start(0, "A")] + steps(1, 100) + evals(50, 100)
                  + [{"event": "pause", "step": 70, "seconds": 30}])
    # The continuation resumes at 80 (its checkpoint): the parent's 81..100 are replaced.
    tr.add_events("child", [start(80, "B", changed=True)] + steps(81, 150) + evals(150))
    tr.redraw(full=True)
    s = tr.series
    assert s.run_ids == ["parent", "child"]
    assert s.steps == list(range(1, 151))
    assert s.eval_steps == [50, 150] and s.eval_segment == [0, 1]
    kinds = {m.kind for m in s.markers}
    assert {DATA_CHANGED, PAUSE, LEG} <= kinds
    lines = [item.label.toPlainText() for item in tr._marker_items]
    assert any("валидация заново" in x for x in lines) and any("пауза 30" in x for x in lines)
    # Two validation segments, each with its 95% band.
    from pyqtgraph import FillBetweenItem

    assert sum(isinstance(i, FillBetweenItem) for i in tr._val_items) == 2


def test_tokens_axis_log_scale_and_raw_switch(plot):
    tr = plot.trace("live", "x")
    tr.add_events("r", [start(0, "A", tps=128)] + steps(1, 20, tps=128) + evals(20))
    tr.redraw(full=True)
    assert list(tr.raw_curve.getData()[0][:2]) == [1, 2]
    plot.x_axis.setCurrentIndex(plot.x_axis.findData("tokens"))
    assert list(tr.raw_curve.getData()[0][:2]) == [128, 256]
    assert plot.plot.getAxis("bottom").labelText == "токены"
    plot.log_y.setChecked(True)
    assert plot.plot.ctrl.logYCheck.isChecked()
    plot.show_raw.setChecked(False)
    assert not tr.raw_curve.isVisible() and tr.smooth_curve.isVisible()


def test_overlays_and_removal(plot):
    from app.runs.series import LossSeries

    a = LossSeries(run_ids=["a"], steps=[1, 2, 3], tokens=[10, 20, 30], loss=[3.0, 2.5, 2.2])
    b = LossSeries(run_ids=["b"], steps=[1, 2], tokens=[10, 20], loss=[3.1, 2.9])
    plot.show_series("overlay:a", a, label="a")
    plot.show_series("overlay:b", b, label="b")
    assert set(plot.traces) == {"overlay:a", "overlay:b"}
    assert plot.traces["overlay:a"].color != plot.traces["overlay:b"].color
    assert not plot.traces["overlay:a"].raw_curve.isVisible()  # overlays: smoothed only
    assert not plot.hint.isVisible()
    plot.remove("overlay:a")
    plot.remove("overlay:b")
    assert plot.traces == {} and plot.hint.isVisible()
