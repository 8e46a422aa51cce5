"""The GPU monitor inside the window, with the real trainer on the CPU: it watches the run
training on this computer whatever run the plot shows, and a heat-guard pause is told in the
tray and the run's banner, and marked on the plot once lifted."""

from __future__ import annotations

import json
import time

import pytest
from PySide6.QtCore import Qt

from app.base import run_status as st
from app.gpu.samples import GpuSample, Snapshot
from tests.test_window import WAIT_MS, fill_tiny, window  # noqa: F401 (the fixture)

pytestmark = pytest.mark.usefixtures("russian")


def card_at(temp: float) -> Snapshot:
    """One sample of a card at `temp` (this machine has no GPU; the panel is fed as its
    sampler thread feeds it)."""
    return Snapshot(time=time.time(), status="ok",
                    gpus=[GpuSample(index=0, name="RTX 3050", temp_c=temp, slowdown_c=93.0)])


def test_the_heat_guard_keeps_the_training_run_while_another_is_shown(qtbot, window):  # noqa: F811
    from app.runs.series import PAUSE
    from ui.main_window import LIVE

    form = window.form_view.form
    form.set("gpu", "cpu")
    form.values["constellations"] = ["tiny"]
    old = window.runs.registry.create_run(form.run_config())  # a finished run in the history
    now = time.time()
    old.events_path.write_text("".join(json.dumps(e) + "\n" for e in (
        {"event": "start", "time": now, "step": 0, "params": 35200},
        {"event": "step", "time": now, "step": 1, "loss": 5.0, "tokens_seen": 128},
        {"event": "end", "time": now, "step": 1, "reason": "steps_reached"})), encoding="utf-8")
    window.runs.registry.ingest(old.id)

    fill_tiny(qtbot, window.form_view)
    qtbot.mouseClick(window.form_view.start_button, Qt.MouseButton.LeftButton)
    live = window.followed
    qtbot.waitUntil(lambda: window.runs.registry.get(live).status == st.RUNNING, timeout=WAIT_MS)
    rec = window.runs.registry.get(live)
    monitor = window.monitor
    qtbot.waitUntil(lambda: monitor.watch.pid == rec.pid, timeout=WAIT_MS)
    monitor.guard_hold.setValue(0)
    monitor.guard_check.setChecked(True)
    assert monitor.guard is not None and monitor.run_dir == rec.path

    # Hot: the guard pauses the real trainer; the tray and the banner say so.
    monitor.show_snapshot(card_at(95))
    assert (rec.path / "PAUSE").exists()
    title, text = window.notifications[-1]
    assert title == "Обучение на паузе: видеокарта перегрелась" and "ниже 78 °C" in text
    qtbot.waitUntil(lambda: "видеокарта перегрелась" in window.banner.note.text(), timeout=WAIT_MS)
    assert window.banner.note.isVisible()
    # The trainer looks for PAUSE between steps: wait until it holds (its log says so), or a
    # long step on a loaded machine would outlast the pause and no pause would be marked.
    qtbot.waitUntil(lambda: "paused: RUN_DIR/PAUSE exists" in rec.log_path.read_text(encoding="utf-8"),
                    timeout=WAIT_MS)
    # Cool again: the pause is lifted, the banner's note goes, the plot marks the pause.
    monitor.show_snapshot(card_at(60))
    assert not (rec.path / "PAUSE").exists()
    assert "обучение продолжается" in window.statusBar().currentMessage()
    qtbot.waitUntil(lambda: window.banner.note.text() == "", timeout=WAIT_MS)
    trace = window.plot.traces[LIVE]
    qtbot.waitUntil(lambda: any(m.kind == PAUSE for m in trace.series.markers), timeout=WAIT_MS)

    # A look at the old run: the monitor still watches the one training, its guard stays on.
    window.follow(old.id)
    assert window.followed == old.id
    assert monitor.watch.pid == rec.pid and monitor.run_dir == rec.path and monitor.guard
    monitor.show_snapshot(card_at(95))
    assert (rec.path / "PAUSE").exists() and monitor.guard.state == "paused"
    window.tick()
    assert (rec.path / "PAUSE").exists(), "a poll while another run is shown lifts no pause"
    assert not window.banner.note.isVisible()  # the banner shows the old, finished run
    # The run ends (stopped while paused): the monitor lets it go and lifts the pause.
    window.stop_run(live)
    qtbot.waitUntil(lambda: window.runs.registry.get(live).status == st.STOPPED, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: monitor.watch.pid is None, timeout=WAIT_MS)
    assert not (rec.path / "PAUSE").exists() and monitor.guard is None


def test_gpu_warnings_reach_the_user_on_any_tab(qtbot, window):  # noqa: F811
    monitor = window.monitor
    index = window.tabs.indexOf(monitor)
    window.tabs.setCurrentIndex(0)  # «История» in front
    assert window.tabs.tabText(index) == "Видеокарта"
    monitor.show_snapshot(card_at(95))  # at the card's slowdown threshold (93 °C)
    assert window.tabs.tabText(index) == "Видеокарта ⚠"
    assert "порог замедления карты" in window.tabs.tabToolTip(index)
    assert window.statusBar().currentMessage().startswith("⚠ GPU 0: 95 °C")
    monitor.show_snapshot(card_at(60))
    assert window.tabs.tabText(index) == "Видеокарта" and window.tabs.tabToolTip(index) == ""
    window.language_actions["en"].trigger()
    # With no run on the plot, the plot and the GPU tab come back in the new language (they
    # stayed a «Загрузка графика…» placeholder and gone, the sampler stopped).
    assert window._plot is not None and window.monitor is not None and window.monitor.bridge.running
    window.monitor.show_snapshot(card_at(95))
    index = window.tabs.indexOf(window.monitor)
    assert window.tabs.tabText(index) == "GPU ⚠"
    assert "the card's slowdown threshold" in window.tabs.tabToolTip(index)
