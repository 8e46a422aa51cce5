"""The window on a PC with an NVIDIA card (a fake NVML with cards, the real trainer process):
the card is offered and chosen, its memory sizes the run, and a run on it reaches the trainer
with that card."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from app.runs import RunManager
from bench.fake_nvml import FakeCard, pc_with_cards
from tests.test_window import fill_tiny, type_into
from tests.trainer_run import end_left_trainers
from tests.ui_actions import choose

pytestmark = pytest.mark.usefixtures("russian")  # conftest: the interface in Russian


@pytest.fixture
def window(qtbot, tiny_data, monkeypatch):
    from ui.window.main_window import MainWindow

    pc_with_cards(monkeypatch, [FakeCard(name="NVIDIA GeForce RTX 3050", total_mb=8192),
                                FakeCard(name="Tesla T4", uuid="GPU-t4", total_mb=15360)])
    w = MainWindow(runs=RunManager(), poll_ms=100, extra_prepared=[str(tiny_data)])
    qtbot.addWidget(w)
    w.show()
    yield w
    end_left_trainers(w.runs)  # never leave a trainer behind
    w.close()


def test_the_pc_s_card_is_offered_sizes_the_run_and_the_trainer_gets_it(qtbot, window):
    view = window.form_view
    combo = view.inputs["gpu"]
    assert combo.currentText() == "Карта этого компьютера: NVIDIA GeForce RTX 3050"  # chosen by default
    assert "из 8\u00a0192 МБ" in view.size_text()  # the card's memory, from NVML
    type_into(qtbot, view, "batch_per_card", "64")
    assert "не помещается" in view.size_text()
    fill_tiny(qtbot, view)
    choose(view, "gpu", "local")
    qtbot.mouseClick(view.start_button, Qt.MouseButton.LeftButton)
    rec = window.runs.registry.get(window.followed)
    assert rec.config()["target"]["gpu"] == "0" and rec.last_message == "GPU 0"
    # This machine has no CUDA: the trainer, told to use card 0, says so (and nothing else ran).
    qtbot.waitUntil(lambda: not window.runs.registry.get(rec.id).active, timeout=90_000)
    failure = window.runs.failure(rec.id)
    assert failure is not None and "--device cuda" in failure.message, failure
