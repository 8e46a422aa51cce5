"""The monitor panel, offscreen with pytest-qt, against the fake NVML."""

from __future__ import annotations

import json
import os

import pynvml
import pytest

from app.base.i18n import set_language
from app.gpu.nvml import NvmlSession
from app.gpu.sampler import Sampler
from app.gpu.settings import MonitorSettings
from bench.fake_nvml import NOT_SUPPORTED, FakeNvml, two_cards
from ui.base import palette
from ui.monitor.gpu_card import LEVEL_COLOURS
from ui.monitor.panel import MonitorPanel

WAIT_MS = 60_000  # a bound for a failure only: a loaded machine stretches what the test waits for


@pytest.fixture(autouse=True)
def english():
    set_language("en")
    yield
    set_language(None)


@pytest.fixture
def fake(monkeypatch) -> FakeNvml:
    nv = FakeNvml(two_cards())
    nv.install(monkeypatch)
    return nv


def make_panel(qtbot, settings: MonitorSettings | None = None) -> MonitorPanel:
    panel = MonitorPanel(Sampler(NvmlSession()), settings or MonitorSettings(),
                         save_settings=False)
    qtbot.addWidget(panel)
    panel.show()  # offscreen; a hidden panel only keeps history (see the test below)
    return panel


def test_two_gpus_render_with_history(qtbot, fake):
    panel = make_panel(qtbot)
    for temp in (60, 61, 62):
        fake.cards[0].temp = temp
        panel.show_snapshot(panel.sampler.sample())
    assert sorted(panel.cards) == [0, 1] and not panel.status_label.isVisibleTo(panel)
    card = panel.cards[0]
    assert card.title.text() == "GPU 0 · Tesla T4"
    assert card.memory_bar.format() == "used on the card: 4 200 MB / 15 360 MB (27%)"
    assert card.memory_bar.value() == 273
    assert card.temp_label.text() == "Temperature: 62 °C (slowdown at 85 °C)"
    assert card.temperature_level == "normal"
    assert "load 97%" in card.load_label.text() and "power 68 / 70 W" in card.load_label.text()
    xs, ys = card.curves["temp_c"].getData()
    assert list(ys) == [60, 61, 62] and xs[-1] == 0
    assert card.slowdown_line.isVisible() and card.slowdown_line.value() == 85
    assert "Machine: CPU" in panel.host_label.text()
    assert panel.trainer_label.text() == "Trainer: not running"


def test_hidden_panel_draws_when_shown(qtbot, fake):
    panel = make_panel(qtbot)
    panel.hide()  # another tab of the window is in front
    fake.cards[0].lost = True
    with qtbot.waitSignal(panel.alerts_changed):  # warnings still arrive
        panel.show_snapshot(panel.sampler.sample())
    assert panel.cards == {} and panel.history.gpus() == [0, 1]
    panel.show()
    assert panel.cards[0].title.text().endswith("lost (fell off the bus)")


def test_unsupported_fields_show_na(qtbot, fake):
    fake.cards[1].errors.update({"nvmlDeviceGetPowerUsage": NOT_SUPPORTED,
                                 "nvmlDeviceGetTemperature": NOT_SUPPORTED,
                                 "nvmlDeviceGetTemperatureThreshold": NOT_SUPPORTED})
    panel = make_panel(qtbot)
    panel.show_snapshot(panel.sampler.sample())
    card = panel.cards[1]
    assert card.temp_label.text() == "Temperature: n/a (slowdown at n/a)"
    assert card.temperature_level == "unknown" and card.temp_colour == palette.color(LEVEL_COLOURS["unknown"])
    assert "power n/a / 70 W" in card.load_label.text() and "fan n/a" in card.load_label.text()
    assert not card.slowdown_line.isVisible()
    xs, ys = card.curves["temp_c"].getData()
    assert len(ys) == 1 and ys[0] != ys[0]  # NaN: a gap in the plot, not a zero


def test_no_driver_shows_the_plain_message(qtbot, fake):
    fake.init_error = pynvml.NVML_ERROR_LIBRARY_NOT_FOUND
    panel = make_panel(qtbot)
    panel.show_snapshot(panel.sampler.sample())
    assert panel.cards == {} and panel.status_label.isVisibleTo(panel)
    assert panel.status_label.text().startswith(
        "no NVIDIA GPU found: local training runs on the CPU")
    assert "Machine: CPU" in panel.host_label.text()
    set_language("ru")
    panel.show_snapshot(panel.sampler.sample())
    assert panel.status_label.text().startswith(
        "видеокарта NVIDIA не найдена: локальное обучение идёт на процессоре")


def test_lost_gpu_and_errors_mid_run(qtbot, fake):
    panel = make_panel(qtbot)
    panel.show_snapshot(panel.sampler.sample())
    fake.cards[1].lost = True
    with qtbot.waitSignal(panel.alerts_changed) as got:
        panel.show_snapshot(panel.sampler.sample())
    assert [a.kind for a in got.args[0]] == ["lost"]
    assert panel.cards[1].title.text() == "GPU 1 · Tesla T4 — lost (fell off the bus)"
    assert panel.cards[1].memory_bar.format() == "n/a"
    assert "GPU 1 is lost" in panel.alerts_label.text() and panel.alerts_label.isVisibleTo(panel)
    assert panel.cards[0].temp_label.text().startswith("Temperature: 62 °C")
    # The driver goes away: cards disappear, the panel says what happened.
    fake.broken = pynvml.NVML_ERROR_UNINITIALIZED
    panel.show_snapshot(panel.sampler.sample())
    assert panel.cards == {} and "NVML stopped answering" in panel.status_label.text()


def test_trainer_memory_beside_the_cards_figure_and_warnings(qtbot, fake):
    fake.cards[0].processes = [(os.getpid(), 6100.0)]
    fake.cards[0].used_mb = 14800  # 96 %: within 5 % of full
    fake.cards[0].temp = 86  # at the slowdown threshold (85)
    panel = make_panel(qtbot)
    panel.set_trainer_pid(os.getpid())
    panel.on_step_event({"event": "step", "step": 1, "mem_alloc_mb": 5536.0,
                         "mem_peak_mb": 5800.0})
    panel.show_snapshot(panel.sampler.sample())
    text = panel.cards[0].trainer_label.text()
    assert "allocated by the trainer: 5 536 MB (peak 5 800 MB)" in text
    assert ("used on the card by the trainer's process (incl. CUDA context and cache): "
            "6 100 MB") in text
    assert not panel.cards[1].trainer_label.isVisibleTo(panel)  # not on card 1
    assert panel.cards[0].memory_level == "full"
    assert panel.cards[0].temperature_level == "hot"
    kinds = [a.kind for a in panel.alerts]
    assert kinds == ["memory_full", "slowdown"]
    assert "lower “Batch per card”" in panel.alerts_label.text()
    # The test process stands in for the trainer; children left by earlier tests may count.
    assert panel.trainer_label.text().startswith(f"Trainer (pid {os.getpid()}")
    assert panel.trainer_alloc_label.text() == ""  # shown on card 0 already, not twice
    fake.cards[0].processes = []  # not listed on any card (e.g. another pid namespace)
    panel.show_snapshot(panel.sampler.sample())
    assert panel.cards[0].trainer_label.text() == ""
    assert panel.trainer_alloc_label.text().startswith(
        "Allocated by the trainer (its tensors, without the CUDA context and cache): 5 536 MB")


def test_sampling_thread_feeds_the_panel(qtbot, fake):
    panel = make_panel(qtbot)
    with qtbot.waitSignal(panel.bridge.sampled, timeout=WAIT_MS):
        panel.start(interval_s=0.05)
    qtbot.waitUntil(lambda: panel.history.gpus() == [0, 1], timeout=WAIT_MS)
    panel.stop()
    assert not panel.bridge.running
    assert panel.cards[1].title.text() == "GPU 1 · Tesla T4"


def test_heat_guard_pauses_a_local_run(qtbot, fake, tmp_path):
    settings = MonitorSettings(heat_guard=True, guard_threshold_c=80, guard_hold_s=0)
    panel = make_panel(qtbot, settings)
    panel.set_run(tmp_path / "remote", local=False)
    assert panel.guard is None  # never for a Kaggle run
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    panel.set_run(run_dir, local=True)
    fake.cards[1].temp = 82
    panel.show_snapshot(panel.sampler.sample())
    assert not (run_dir / "PAUSE").exists()  # no trainer running yet: nothing to pause
    fake.cards[1].processes = [(os.getpid(), 300.0)]  # the trainer runs on the hot card
    panel.set_trainer_pid(os.getpid())
    with qtbot.waitSignal(panel.pause_changed) as paused:
        panel.show_snapshot(panel.sampler.sample())
    assert paused.args == [True] and (run_dir / "PAUSE").exists()
    assert json.loads((run_dir / "PAUSE").read_text())["by"] == "heat_guard"
    assert "training paused" in panel.guard_label.text()
    fake.cards[1].temp = 70
    with qtbot.waitSignal(panel.pause_changed) as resumed:
        panel.show_snapshot(panel.sampler.sample())
    assert resumed.args == [False] and not (run_dir / "PAUSE").exists()
    # Turning the guard off while paused removes its PAUSE at once.
    fake.cards[1].temp = 90
    panel.show_snapshot(panel.sampler.sample())
    assert (run_dir / "PAUSE").exists()
    with qtbot.waitSignal(panel.pause_changed) as off:
        panel.guard_check.setChecked(False)
    assert off.args == [False] and not (run_dir / "PAUSE").exists() and panel.guard is None
    assert settings.heat_guard is False
    # The window repeats set_run/set_trainer_pid on every poll: a pause in progress stays;
    # the trainer's end lifts it.
    panel.guard_check.setChecked(True)
    panel.show_snapshot(panel.sampler.sample())
    assert (run_dir / "PAUSE").exists()
    panel.set_run(run_dir, local=True)
    panel.set_trainer_pid(os.getpid())
    assert (run_dir / "PAUSE").exists() and panel.guard.state == "paused"
    with qtbot.waitSignal(panel.pause_changed) as ended:
        panel.set_trainer_pid(None)
    assert ended.args == [False] and not (run_dir / "PAUSE").exists()


def test_a_failing_reading_is_na_for_that_sample_only(qtbot, fake):
    panel = make_panel(qtbot)
    fake.cards[0].errors["nvmlDeviceGetUtilizationRates"] = pynvml.NVML_ERROR_TIMEOUT
    panel.show_snapshot(panel.sampler.sample())
    assert "load n/a" in panel.cards[0].load_label.text()
    assert panel.last_snapshot.errors == ["GPU 0 util_pct: NVMLError_Timeout: Timeout"]
    del fake.cards[0].errors["nvmlDeviceGetUtilizationRates"]
    panel.show_snapshot(panel.sampler.sample())
    assert "load 97%" in panel.cards[0].load_label.text()


def test_deleting_the_panel_ends_the_sampler_thread(qtbot, fake):
    import shiboken6

    panel = MonitorPanel(Sampler(NvmlSession()), MonitorSettings(), save_settings=False)
    with qtbot.waitSignal(panel.bridge.sampled, timeout=WAIT_MS):
        panel.start(interval_s=0.01)
    thread = panel.bridge.thread
    shiboken6.delete(panel)  # gone without stop(), as when a parent window is destroyed
    thread.join(5)
    assert not thread.is_alive()


def test_stopping_the_monitor_lifts_the_guards_pause(qtbot, fake, tmp_path):
    """The window closes («keep training») or rebuilds for another language while the guard
    holds a pause: its PAUSE goes with it (it stayed, and the trainer waited on it until its
    time limit). A PAUSE the user wrote stays."""
    settings = MonitorSettings(heat_guard=True, guard_threshold_c=80, guard_hold_s=0)
    panel = make_panel(qtbot, settings)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    panel.set_run(run_dir, local=True)
    fake.cards[0].processes = [(os.getpid(), 300.0)]  # the trainer runs on the hot card
    panel.set_trainer_pid(os.getpid())
    fake.cards[0].temp = 90
    panel.show_snapshot(panel.sampler.sample())
    assert (run_dir / "PAUSE").exists()
    with qtbot.waitSignal(panel.pause_changed) as lifted:
        panel.close()  # closeEvent -> stop()
    assert lifted.args == [False] and not (run_dir / "PAUSE").exists()
    (run_dir / "PAUSE").write_text("mine\n")
    panel = make_panel(qtbot, settings)
    panel.set_run(run_dir, local=True)
    panel.set_trainer_pid(os.getpid())
    panel.show_snapshot(panel.sampler.sample())
    assert panel.guard.state == "paused"
    panel.stop()
    assert (run_dir / "PAUSE").read_text() == "mine\n"


def test_an_nvml_outage_is_a_gap_in_the_cards_plot(qtbot, fake):
    """NVML stops answering for a while and comes back: the card's history has a gap over
    the outage (a straight line joined the readings either side, as if measured)."""
    clock = {"mono": 1000.0, "wall": 1_700_000_000.0}
    session = NvmlSession(clock=lambda: clock["mono"])
    panel = MonitorPanel(Sampler(session, wall=lambda: clock["wall"]), MonitorSettings(),
                         save_settings=False)
    qtbot.addWidget(panel)
    panel.show()

    def tick(seconds: float = 1.0) -> None:
        clock["mono"] += seconds
        clock["wall"] += seconds
        panel.show_snapshot(panel.sampler.sample())

    tick()
    fake.cards[0].temp = 70
    tick()
    fake.broken = pynvml.NVML_ERROR_UNINITIALIZED
    tick()
    assert panel.cards == {}
    fake.broken = None
    fake.cards[0].temp = 50
    tick(5)  # still the error state: NVML is tried again after 10 s
    tick(6)
    assert sorted(panel.cards) == [0, 1]
    xs, ys = panel.cards[0].curves["temp_c"].getData()
    assert list(xs) == [-13, -12, -11, -6, 0]
    assert ys[:2].tolist() == [62, 70] and all(y != y for y in ys[2:4]) and ys[4] == 50


def test_a_pc_without_a_card_offers_no_heat_guard_and_says_why(qtbot, fake):
    """The heat guard watches an NVIDIA card: on a PC without one its switch and numbers are
    absent, and the line says why; with the fake NVML's cards they are back."""
    fake.init_error = pynvml.NVML_ERROR_LIBRARY_NOT_FOUND
    panel = make_panel(qtbot)
    panel.show_snapshot(panel.sampler.sample())
    assert not any(w.isVisibleTo(panel) for w in panel.guard_controls)
    assert panel.guard_label.text().startswith("No heat guard: it watches an NVIDIA card's temperature")
    fake.init_error = None
    panel2 = make_panel(qtbot)
    panel2.show_snapshot(panel2.sampler.sample())
    assert all(w.isVisibleTo(panel2) for w in panel2.guard_controls)
    assert not panel2.guard_label.text().startswith("No heat guard")
