"""The loss plot without a trainer: downsampling at 100,000 points, a chain drawn as one
curve with its markers (data changed, pause, next leg), validation bands, the steps/tokens
switch, log scale and overlays."""

from __future__ import annotations

import math

import pytest

from app.runs.series import DATA_CHANGED, LEG, PAUSE
from ui.base.palette import SERIES

WAIT_MS = 60_000  # a bound for a failure only: a loaded machine stretches what the test waits for

pytestmark = pytest.mark.usefixtures("russian")  # conftest: the interface in Russian


@pytest.fixture
def plot(qtbot):
    from ui.runs.loss_plot import LossPlot

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
    qtbot.waitUntil(lambda: len(tr.raw_curve.curve.xData) < 20_000, timeout=WAIT_MS)
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


def test_log_scale_keeps_the_validation_band_on_the_curve(plot):
    """The 95% band sits around the validation points under the log scale too (it stayed
    in linear units: a band at 10^5 for a loss of 5), whether switched on before or after
    the evals arrive."""
    from pyqtgraph import FillBetweenItem

    tr = plot.trace("live", "x")
    tr.add_events("r", [start(0, "A")] + steps(1, 60) + evals(20, 40))

    def band_and_line() -> tuple:
        band = next(i for i in tr._val_items if isinstance(i, FillBetweenItem))
        line = next(i for i in tr._val_items if getattr(i, "opts", {}).get("symbol") == "o")
        rect = band.boundingRect()
        return rect.top(), rect.bottom(), list(line.curve.getData()[1])

    tr.redraw(full=True)
    plot.log_y.setChecked(True)
    low, high, ys = band_and_line()
    assert low == pytest.approx(math.log10(2.86)) and high == pytest.approx(math.log10(3.08))
    assert all(low <= y <= high for y in ys)
    tr.add_events("r", evals(60))  # an eval arriving while the log scale is on
    tr.redraw()
    low, high, ys = band_and_line()
    assert low == pytest.approx(math.log10(2.84)) and all(low <= y <= high for y in ys)
    plot.log_y.setChecked(False)
    low, high, _ = band_and_line()
    assert low == pytest.approx(2.84) and high == pytest.approx(3.08)


def test_markers_at_one_step_share_one_readable_label(plot):
    """A continuation on new data is a new leg and a data change at the same step: one line
    saying both (two labels there overprinted each other)."""
    from app.base.i18n import set_language

    tr = plot.trace("live", "chain")
    tr.add_events("parent", [start(0, "A")] + steps(1, 30))
    tr.add_events("child", [start(30, "B", changed=True)] + steps(31, 60)
                  + [{"event": "pause", "step": 45, "seconds": 12.4}])
    tr.redraw(full=True)
    assert [(m.kind, m.step) for m in tr.series.markers] == [(LEG, 30), (DATA_CHANGED, 30), (PAUSE, 45)]
    lines = {item.value(): item.label.toPlainText() for item in tr._marker_items}
    assert lines == {30: "продолжение · данные сменились: валидация заново", 45: "пауза 12 с"}
    set_language("en")
    plot.x_axis.setCurrentIndex(plot.x_axis.findData("tokens"))  # redrawn, in English
    lines = {item.value(): item.label.toPlainText() for item in tr._marker_items}
    assert lines == {3000: "continued · data changed: validation anew", 4500: "pause 12 s"}


def test_a_new_run_on_the_plot_never_takes_a_colour_still_shown(plot):
    """Overlays ticked and unticked, the live run replaced (another run shown): every run on
    the plot keeps a colour of its own (counting the traces reused a shown one)."""
    from app.runs.series import LossSeries

    a = LossSeries(run_ids=["a"], steps=[1, 2], tokens=[10, 20], loss=[3.0, 2.5])
    plot.trace("live", "x")
    for key in ("overlay:a", "overlay:b"):
        plot.show_series(key, a, label=key)
    plot.remove("overlay:a")
    plot.show_series("overlay:c", a, label="c")
    plot.remove("live")
    plot.trace("live", "y")
    colours = [tr.color for tr in plot.traces.values()]
    assert len(set(colours)) == len(colours) == 3
    for n in range(len(SERIES) + 2):  # more runs than colours: the least used comes next
        plot.show_series(f"overlay:{n}", a, label=str(n))
    colours = [tr.color for tr in plot.traces.values()]
    assert max(colours.count(c) for c in SERIES) - min(colours.count(c) for c in SERIES) <= 1


def test_the_plot_follows_a_dark_palette_and_keeps_off_the_right_edge(qtbot):
    """Issue 16: a white plot with hard-coded colours on a dark desktop theme; the plot
    touched the window's right edge."""
    from PySide6.QtWidgets import QApplication

    from ui.base import palette
    from ui.runs.loss_plot import LossPlot

    app = QApplication.instance()
    before = app.palette()
    try:
        app.setPalette(palette.dark_palette())
        assert palette.dark()
        dark = LossPlot()
        qtbot.addWidget(dark)
        assert dark.widget.backgroundBrush().color().lightness() < 80
        assert palette.color("error") != "#b00020"  # the light palette's red is unreadable there
    finally:
        app.setPalette(before)
    assert not palette.dark()
    light = LossPlot()
    qtbot.addWidget(light)
    assert light.widget.backgroundBrush().color().lightness() > 200
    assert light.layout().contentsMargins().right() > 0


def _settled_y(plot, qtbot) -> tuple[float, float]:
    """The y-range once pyqtgraph's auto-range has run (it updates on the next paint)."""
    plot.widget.repaint()
    qtbot.wait(1)
    plot.plot.vb.updateAutoRange()
    return tuple(plot.plot.viewRange()[1])


def test_a_held_out_point_keeps_the_axis_on_the_curves_own_range(plot, qtbot):
    """Issue 27: the first held-out point stretched the y-axis down to 0 (its one-point band
    had no path, and pyqtgraph took the empty box at the origin as the band's extent), and a
    run falling from 8.30 to 8.10 was a flat line at the top. The axis follows the curves
    and the band, with a margin."""
    tr = plot.trace("live", "x")
    tr.add_events("r", [start(0, "A")] + [{"event": "step", "step": s, "loss": 8.3 - 0.2 * s / 100,
                                           "tokens_seen": s * 100} for s in range(1, 101)])
    tr.redraw(full=True)
    tr.add_events("r", [{"event": "eval", "step": 100, "val_loss": 8.12, "val_ci95": [8.05, 8.19]}])
    tr.redraw()
    low, high = _settled_y(plot, qtbot)
    assert 7.5 < low < 8.05 and 8.3 < high < 8.9
    tr.add_events("r", [{"event": "eval", "step": 50, "val_loss": 8.2, "val_ci95": [7.9, 8.5]}])
    tr.redraw()
    low, high = _settled_y(plot, qtbot)
    assert 7.3 < low < 7.9 and 8.5 < high < 9.1  # the wider interval is in view too


def test_zoom_to_recent_shows_the_last_quarter_with_its_own_y_range(plot, qtbot, tmp_path):
    """«Конец крупно»: the slow fall at the end of a long run is not lost under the start's
    drop; points arriving live move the view along; a drag of the user's own ends it."""
    import json

    events = tmp_path / "events.jsonl"

    def write(evs: list[dict]) -> None:
        with events.open("a") as f:
            f.writelines(json.dumps(e) + "\n" for e in evs)

    write([start(0, "A")] + [{"event": "step", "step": s, "loss": 3 + 7 * math.exp(-s / 60),
                              "tokens_seen": s * 100} for s in range(1, 1001)])
    plot.follow("live", [("r", events)], label="x")
    low, high = _settled_y(plot, qtbot)
    assert high > 9
    plot.recent.setChecked(True)
    x_low, x_high = plot.plot.viewRange()[0]
    assert 700 < x_low < 760 and 1000 <= x_high < 1030
    low, high = _settled_y(plot, qtbot)
    assert 2.9 < low < 3.0 and 3.0 < high < 3.1
    write([{"event": "step", "step": s, "loss": 3.0, "tokens_seen": s * 100} for s in range(1001, 1401)])
    assert plot.poll()
    assert 1400 <= plot.plot.viewRange()[0][1] < 1430
    assert plot.view_settings()["recent"] is True
    plot.plot.vb.sigRangeChangedManually.emit([True, True])  # the user dragged the plot
    assert not plot.recent.isChecked()
    plot.apply_view_settings({"recent": True})
    assert plot.recent.isChecked()
