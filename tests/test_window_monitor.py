"""The GPU monitor inside the window: its warnings on any tab. With the real trainer on the
CPU (it watches the run training on this computer whatever run the plot shows, and a
heat-guard pause is told in the tray and the run's banner, and marked on the plot once
lifted): test_window_lifecycle, on the one run trained there for all a training run shows."""

from __future__ import annotations

import time

import pytest

from app.gpu.samples import GpuSample, Snapshot
from tests.test_window import WAIT_MS, fill_tiny, window  # noqa: F401 (the fixture)

pytestmark = pytest.mark.usefixtures("russian")


def card_at(temp: float) -> Snapshot:
    """One sample of a card at `temp` (this machine has no GPU; the panel is fed as its
    sampler thread feeds it)."""
    return Snapshot(time=time.time(), status="ok",
                    gpus=[GpuSample(index=0, name="RTX 3050", temp_c=temp, slowdown_c=93.0)])


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
