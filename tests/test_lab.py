"""app.window.lab, the window's decisions without a window: what the form chooses from, on a PC
with NVIDIA cards (a fake NVML with cards) as well as without one."""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import time
from pathlib import Path

import pytest

from app.base import run_status as st
from app.form.run_form import FormContext, RunForm
from app.runs import RunManager, RunRecord
from app.window.lab import HISTORY_EVERY_S, ActionError, Lab, load_form_context
from bench.fake_nvml import FakeCard, pc_with_cards
from tests.fake_kaggle import fixtures
from tests.fake_kaggle.fixtures import KEYS, add_lab_accounts, tiny_config

fake = fixtures.fake  # the fake Kaggle server's fixture
ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.usefixtures("russian")  # conftest: the interface in Russian

RTX_3050 = FakeCard(name="NVIDIA GeForce RTX 3050", uuid="GPU-3050", total_mb=8192)
T4 = FakeCard(name="Tesla T4", uuid="GPU-t4", total_mb=15360)


@pytest.fixture
def cards(monkeypatch):
    """A PC whose NVML answers with an RTX 3050 and a T4."""
    return pc_with_cards(monkeypatch, [RTX_3050, T4])


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
    ctx = load_form_context()  # the card that answers, by its own index
    assert (ctx.local_gpu, ctx.local_gpu_index) == ("Tesla T4", 1)
    cards.cards[1] = FakeCard(name="gone too", lost=True)
    monkeypatch.setattr(nvml, "_session", None)
    assert load_form_context().local_gpu is None
    cards.cards.clear()
    monkeypatch.setattr(nvml, "_session", None)
    assert load_form_context().local_gpu is None


# -- runs: which is followed, watched, going ---------------------------------------------------

def local_run(lab: Lab, data: Path, name: str, status: str = st.FINISHED) -> RunRecord:
    """A run in the history with `status` (a trainer is not needed to decide about it)."""
    cfg = tiny_config(data)
    cfg.update(name=name, target={"kind": "local", "gpu": "cpu"})
    rec = lab.runs.registry.create_run(cfg)
    return lab.runs.registry.update(rec.id, status=status, pid=os.getpid())


def test_the_monitor_watches_the_run_training_here_not_the_one_looked_at(tiny_data):
    lab = Lab(RunManager())
    old = local_run(lab, tiny_data, "old")
    a = local_run(lab, tiny_data, "a", st.RUNNING)
    b = local_run(lab, tiny_data, "b", st.RUNNING)
    assert lab.initial_run() == b.id  # a new window re-attaches to a run still going
    lab.follow(old.id)
    assert lab.monitor_target().id == b.id  # a look at an old run: the newest training here
    lab.follow(a.id)
    assert lab.monitor_target().id == a.id and lab.monitored == a.id
    assert [r.id for r in lab.training_here()] == [a.id, b.id]
    assert lab.follow("no-such-run") is None and lab.followed == a.id


def test_the_form_learns_the_runs_going_and_starts_still_uploading(tiny_data):
    lab = Lab(RunManager())
    going = local_run(lab, tiny_data, "going", st.RUNNING)
    uploading = local_run(lab, tiny_data, "uploading", st.UPLOADING)
    lab.runs.registry.update(uploading.id, status=st.CREATED)  # not yet «active» in the history
    lab.launching |= {uploading.id, "deleted-meanwhile"}
    assert [r.id for r in lab.active_runs()] == [going.id, uploading.id]
    assert lab.launching == {uploading.id}
    assert lab.active_runs()[0].local and lab.active_runs()[0].config["name"] == "going"
    ctx = FormContext()
    assert lab.update_active_runs(ctx) and [r.id for r in ctx.active_runs] == [going.id, uploading.id]
    assert not lab.update_active_runs(ctx)  # the same runs: the form need not refresh


def test_measured_speeds_that_cannot_be_read_leave_none_and_say_why_in_the_log(caplog):
    ctx = FormContext()
    Lab.take_measured(ctx, [{"tokens_per_s": 1.0}])
    assert ctx.measured == [{"tokens_per_s": 1.0}]
    with caplog.at_level(logging.WARNING, logger="app.window.lab"):
        Lab.take_measured(ctx, sqlite3.OperationalError("database is locked"))
    assert ctx.measured == []
    assert any(r.exc_info and "database is locked" in str(r.exc_info[1]) for r in caplog.records)


def test_continue_is_refused_with_its_reason_and_a_failure_is_read_once(tiny_data):
    lab = Lab(RunManager())
    rec = local_run(lab, tiny_data, "no-checkpoint")
    with pytest.raises(ActionError, match="чекпоинт"):
        lab.continue_info(rec.id)
    with pytest.raises(ActionError, match="чекпоинт"):
        lab.export_checkpoint(rec.id)
    with pytest.raises(ActionError, match="чекпоинт"):  # the history's one click says the same
        lab.continue_now(rec.id, FormContext())
    assert lab.export_file_name(rec.id) == "no-checkpoint.safetensors"
    failed = lab.runs.registry.update(rec.id, status=st.FAILED, last_message="the trainer process disappeared")
    lab.follow(failed.id)
    shown, failure = lab.followed_state()
    assert shown.id == failed.id and failure is not None
    assert lab.followed_state()[1] is failure  # final: not read again on every tick
    lab.forget_failures()
    assert lab.followed_state()[1] is not failure


def test_a_poll_that_fails_is_said_and_new_steps_refresh_the_history_every_few_seconds(tiny_data, monkeypatch):
    now = [100.0]
    lab = Lab(RunManager(), clock=lambda: now[0])
    lab.history()
    rec = local_run(lab, tiny_data, "going", st.RUNNING)
    lab.follow(rec.id)
    tick = lab.poll()
    assert not tick.error and tick.follow is None
    with open(rec.events_path, "a", encoding="utf-8") as f:
        f.write(json.dumps({"event": "step", "time": 1.0, "step": 1, "loss": 5.0}) + "\n")
    tick = lab.poll()
    assert tick.updates and not tick.history_due  # steps, but the history was just read
    now[0] += HISTORY_EVERY_S + 0.1
    with open(rec.events_path, "a", encoding="utf-8") as f:
        f.write(json.dumps({"event": "step", "time": 2.0, "step": 2, "loss": 4.9}) + "\n")
    assert lab.poll().history_due

    def locked() -> None:
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(lab.runs, "poll", locked)
    error = lab.poll().error
    assert "занят" in error and "state.sqlite" in error and "новая попытка" in error  # said, with the file


def test_lab_announces_what_changed_to_every_listener_without_a_window(tiny_data):
    """Following, a poll, a stop, a refresh and a change no poll sees (the heat guard's
    pause) are each announced: whoever listens hears it, whoever caused it."""
    now = [100.0]
    lab = Lab(RunManager(), clock=lambda: now[0])
    heard: list = []
    lab.events.history.connect(lambda: heard.append("history"))
    lab.events.run.connect(lambda run_id: heard.append(("run", run_id)))
    lab.events.followed.connect(lambda chain: heard.append(("followed", [r.id for r in chain])))
    lab.events.monitored.connect(lambda rec: heard.append(("monitored", rec.id if rec else None)))
    going = local_run(lab, tiny_data, "going", st.RUNNING)
    waiting = local_run(lab, tiny_data, "waiting", st.CREATED)

    lab.follow(going.id)
    assert heard == [("followed", [going.id]), ("monitored", going.id)]
    heard.clear()
    assert lab.follow("no-such-run") is None and heard == []

    lab.history()  # just read
    lab.poll()
    assert heard == [("run", going.id)]  # the followed run: its speed and time left move on
    heard.clear()
    with open(going.events_path, "a", encoding="utf-8") as f:
        f.write(json.dumps({"event": "step", "time": 1.0, "step": 1, "loss": 5.0}) + "\n")
    now[0] += HISTORY_EVERY_S + 0.1
    lab.poll()
    assert heard == [("run", going.id), "history"]  # new steps, and the history is due
    heard.clear()

    lab.stop(waiting.id)
    assert heard == [("run", waiting.id), "history"]
    heard.clear()
    lab.refresh()  # «Обновить»: the history may have changed outside the window
    lab.run_changed(going.id)  # the heat guard paused it
    lab.run_changed(None)  # nothing watched: nothing to say
    assert heard == ["history", ("run", going.id)]


def test_a_listener_that_fails_does_not_keep_the_others_from_hearing():
    from app.base.announcement import Event

    event, heard = Event("run"), []

    def broken(run_id: str) -> None:
        raise RuntimeError("a view failed")

    event.connect(heard.append)
    event.connect(broken)
    event.connect(lambda run_id: heard.append(run_id.upper()))
    with pytest.raises(RuntimeError, match="a view failed"):
        event.emit("a")
    assert heard == ["a", "A"]
    event.disconnect(broken)
    event.emit("b")
    assert heard == ["a", "A", "b", "B"]


def test_quitting_stops_no_kaggle_follower_when_none_ran_and_loads_no_kaggle_client():
    import subprocess
    import sys

    code = ("import sys; from app.window.lab import Lab; from app.runs import RunManager; "
            "lab = Lab(RunManager()); lab.runs.poll(kaggle=False); lab.shutdown(); "
            "print('app.kaggle.runner' in sys.modules, 'kaggle' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False"]


# -- Kaggle: starts and retries upload in a thread (the fake server) ----------------------------

def test_a_kaggle_retry_uploads_in_a_thread_and_stop_says_what_happens(fake, tiny_data):
    fake.run_kernels = False
    fake.add_account("alice", KEYS["alice"], quota_h=30, used_h=30)  # no quota: the start fails
    add_lab_accounts("alice")
    lab = Lab(RunManager())
    heard: list = []
    lab.events.history.connect(lambda: heard.append("history"))
    lab.events.followed.connect(lambda chain: heard.append(chain[-1].id))
    started = lab.start(tiny_config(tiny_data, limit_min=60))
    assert started.kaggle and started.run.id in lab.launching and "загрузка на Kaggle" in started.message
    assert heard == ["history", started.run.id] and lab.followed == started.run.id  # in the history, followed
    ended: list[tuple[str, str]] = []
    lab.launch_in_background(started.run.id, lambda *a: ended.append(a)).join(60)
    assert ended and ended[0][1], ended  # refused: the error comes back for the window
    assert "не запустился" in lab.launch_ended(*ended[0]) and not lab.launching
    # Refused before anything ran on Kaggle: no run is left behind, none followed.
    assert lab.runs.registry.list_runs() == [] and lab.followed is None

    fake.accounts["alice"].used_s = 0.0  # the quota refreshed
    first = lab.start(tiny_config(tiny_data, limit_min=60))
    ended.clear()
    lab.launch_in_background(first.run.id, lambda *a: ended.append(a)).join(60)
    assert ended == [(first.run.id, "")]
    # The kernel fails on Kaggle; its follower (running since the push) says so. Set by hand, the
    # row's FAILED raced with that follower's next poll of a QUEUED kernel.
    kernel = next(k for k in fake.kernels.values() if f"{k.owner}/{k.slug}" in lab.runs.registry.get(first.run.id).kaggle_kernel_ref)
    with fake._lock:
        kernel.status, kernel.failure = "ERROR", "The kernel was stopped by an error"
        kernel.done.set()
    deadline = time.monotonic() + 60
    while lab.runs.registry.get(first.run.id).status != st.FAILED:
        assert time.monotonic() < deadline, lab.runs.registry.get(first.run.id)
        time.sleep(0.05)
    assert lab.runs.failure(first.run.id).retry_label() is not None
    fake.fail("SaveKernel", 429, retry_after="3")  # Kaggle is busy: the push waits 3 s
    began = time.monotonic()
    again = lab.retry(first.run.id)
    assert time.monotonic() - began < 2.0 and again.kaggle  # nothing uploaded on the caller's thread
    ended.clear()
    lab.launch_in_background(again.run.id, lambda *a: ended.append(a)).join(60)
    assert ended == [(again.run.id, "")] and lab.launch_ended(*ended[0]).endswith("отправлен на Kaggle")
    assert len(fake.pushes) == 2 and fake.pushes[1]["slug"].startswith("alice/")  # the 429 one is not kept
    said = lab.stop(again.run.id)
    assert not said.endswith("сохранение…") and "Stop session" in said  # nothing saves: how to stop it
    lab.shutdown()


# ---- which cards this PC has (issue 27) ----------------------------------------------------

def test_cuda_visible_devices_is_read_as_cuda_reads_it():
    from app.gpu.cards import visible_indices

    uuids = ["GPU-aaa-0", "GPU-bbb-1", None]
    assert visible_indices(None, uuids) == [0, 1, 2]
    assert visible_indices("1,0", uuids) == [1, 0]  # CUDA's order is the variable's
    assert visible_indices("GPU-bbb", uuids) == [1]  # a UUID, or a unique prefix of one
    assert visible_indices("0,-1,1", uuids) == [0]  # a negative id hides it and all after
    assert visible_indices("0,7,1", uuids) == [0]  # so does a card that is not there
    assert visible_indices("0,0", uuids) == [0] and visible_indices("GPU-", uuids) == []


@pytest.mark.parametrize("pc", ["a card", "no card"])
def test_a_local_run_offers_this_pc_s_cards_and_the_cpu_the_catalogue_only_to_estimate(monkeypatch, tiny_data, pc):
    """A card of the catalogue chosen on a PC without it gave its figures to the estimate,
    left «Старт» on and trained on the CPU without a word: it is an estimate, said so, and
    Start says why not."""
    pc_with_cards(monkeypatch, [RTX_3050] if pc == "a card" else [])
    ctx = load_form_context(extra_prepared=[str(tiny_data)])
    form = RunForm(ctx)
    form.set("constellations", ["tiny"])
    labels = dict(form.gpu_choices())
    runnable = {k for k, label in labels.items() if not label.startswith("оценка для")}
    assert runnable == ({"local", "cpu", "t4x2"} if pc == "a card" else {"cpu", "t4x2"})
    assert labels["rtx5070ti"] == "оценка для RTX 5070 Ti (16 ГБ)" and labels["rtx3050"].startswith("оценка для")
    assert form.can_start(), form.start_blockers()  # the default: this PC's card, else its CPU
    form.set("gpu", "rtx5070ti")
    assert form.values["machine"] == "local" and form.estimate() is not None  # a plan, sized
    [why] = form.start_blockers()
    assert "«RTX 5070 Ti (16 ГБ)» — только оценка" in why
    assert ("«Карта этого компьютера: NVIDIA GeForce RTX 3050» или процессор" if pc == "a card" else
            "выберите процессор") in why


def test_the_lab_refuses_a_local_run_on_a_card_this_pc_has_not(monkeypatch, tiny_data):
    """However the run.json came (the CLI, a file, a retry): a card index this PC does not
    have is refused before a folder or a row exists; one it has, and the CPU, are taken."""
    from app.runs import RunError
    from tests.test_runs_local import config

    cards = pc_with_cards(monkeypatch, [RTX_3050])
    m = RunManager()
    for gpu in ("1", "0,1"):
        with pytest.raises(RunError, match="Видеокарты 1 на этом компьютере нет \\(есть: 0: NVIDIA GeForce RTX 3050"):
            m.create({**config(tiny_data), "target": {"kind": "local", "gpu": gpu}})
    assert m.registry.list_runs() == []
    rec = m.create({**config(tiny_data), "target": {"kind": "local", "gpu": "0"}})
    cards.cards.clear()  # the card gone before the run is launched
    from app.gpu import nvml

    monkeypatch.setattr(nvml, "_session", None)
    with pytest.raises(RunError, match="только процессор"):
        m.launch(rec.id)
    assert m.registry.get(rec.id).status == st.FAILED and m.registry.get(rec.id).pid is None
    assert m.create(config(tiny_data)).target_gpu == "cpu"
