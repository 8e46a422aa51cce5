"""app.lab, the window's decisions without a window: what the form chooses from, on a PC
with NVIDIA cards (a fake NVML with cards) as well as without one."""

from __future__ import annotations

import pytest

from app.form import RunForm
from app.lab import load_form_context
from tests.gpu_fake_nvml import FakeCard, pc_with_cards

pytestmark = pytest.mark.usefixtures("russian")  # conftest: the interface in Russian

RTX_3050 = FakeCard(name="NVIDIA GeForce RTX 3050", uuid="GPU-3050", total_mb=8192)
T4 = FakeCard(name="Tesla T4", uuid="GPU-t4", total_mb=15360)


@pytest.fixture
def cards(monkeypatch):
    """A PC whose NVML answers with an RTX 3050 and a T4."""
    from app.sizing.gpus import local_card

    yield pc_with_cards(monkeypatch, [RTX_3050, T4])
    local_card.cache_clear()


def test_the_pc_s_card_is_offered_chosen_and_sizes_the_run(cards, tiny_data):
    ctx = load_form_context(extra_prepared=[str(tiny_data)])
    assert (ctx.local_gpu, ctx.local_card_memory_mb, ctx.local_gpu_index) == ("NVIDIA GeForce RTX 3050", 8192, 0)
    form = RunForm(ctx)
    labels = dict(form.gpu_choices())
    assert labels["local"] == "Карта этого компьютера: NVIDIA GeForce RTX 3050"
    assert form.values["gpu"] == "local"  # no Kaggle account: a local run, on the card
    est = form.estimate()
    assert est is not None and est["card_memory_mb"] == 8192
    form.set("constellations", ["tiny"])
    assert form.run_config()["target"] == {"kind": "local", "gpu": "0", "account": "auto"}


def test_cuda_visible_devices_picks_the_card_or_hides_them_all(cards, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    ctx = load_form_context()
    assert (ctx.local_gpu, ctx.local_card_memory_mb, ctx.local_gpu_index) == ("Tesla T4", 15360, 1)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    ctx = load_form_context()
    assert ctx.local_gpu is None and RunForm(ctx).values["gpu"] == "cpu"


def test_no_driver_a_card_gone_or_no_card_leave_the_cpu(cards, monkeypatch):
    import pynvml

    from app.gpu import nvml

    cards.init_error = pynvml.NVML_ERROR_LIBRARY_NOT_FOUND
    assert load_form_context().local_gpu is None
    cards.init_error = None
    cards.cards[0] = FakeCard(name="gone", lost=True)
    monkeypatch.setattr(nvml, "_session", None)
    assert load_form_context().local_gpu is None
    cards.cards.clear()
    monkeypatch.setattr(nvml, "_session", None)
    assert load_form_context().local_gpu is None
