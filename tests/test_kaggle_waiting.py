"""Kaggle's waiting states, through the real client against the fake server: a new dataset
processed for a while (waited for, said with how long, cancellable), a kernel in Kaggle's
queue (said with how long), and what was deleted on kaggle.com said in one line at once.
The fake's waits are counted in the lab's own requests: no test sleeps them out."""

from __future__ import annotations

import threading
import time

import pytest

from app.base import run_status as st
from app.kaggle import runner
from app.kaggle.store import KaggleStore
from app.runs.manager import RunError, RunManager
from app.runs.registry import Registry
from tests.fake_kaggle import fixtures
from tests.fake_kaggle.fixtures import KEYS, add_lab_accounts, tiny_config

fake = fixtures.fake  # the fake-server fixture


def _until(predicate, timeout: float = 60.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


# The CLI saying while Kaggle processes the datasets and while the kernel queues (and pushing
# only once both are ready) is proven on the first-real-use run, which waits through both:
# tests/test_kaggle_runs.py test_a_first_real_use_from_the_cli_fresh_token_account_auto_processing_queue_hung_and_cut_stream.


def test_stop_while_kaggle_processes_a_dataset_pushes_nothing(fake, tiny_data):
    fake.add_account("alice", KEYS["alice"], quota_h=30)
    add_lab_accounts("alice")
    fake.dataset_processing_polls = 10**9  # never ready
    m = RunManager(Registry())
    rec = m.create(tiny_config(tiny_data), target="kaggle", account="alice")
    launch = threading.Thread(target=m.launch, args=(rec.id,))
    launch.start()
    _until(lambda: "обрабатывает" in (Registry().get(rec.id).last_message or ""), what="the processing message")
    m.stop(rec.id)
    launch.join(60)
    got = m.registry.get(rec.id)
    assert got.status == st.STOPPED and "ничего не запущено" in got.last_message, got.last_message
    assert fake.pushes == []
    assert KaggleStore(m.registry.state).leg(rec.id)["state"] == "done"


def test_a_dataset_deleted_while_waited_for_is_said_at_once(fake, tiny_data):
    fake.add_account("alice", KEYS["alice"], quota_h=30)
    add_lab_accounts("alice")
    fake.vanish = {"ternit-data-"}
    t0 = time.monotonic()
    with pytest.raises(RunError, match="исчез"):
        RunManager(Registry()).start(tiny_config(tiny_data), target="kaggle", account="alice")
    assert time.monotonic() - t0 < 30 and fake.pushes == []
    assert KaggleStore().account("alice").key_status == "ok"  # a missing dataset says nothing of the key


def test_a_kernel_deleted_on_kaggle_ends_the_leg_in_one_line(fake, tiny_data):
    fake.add_account("alice", KEYS["alice"], quota_h=30)
    add_lab_accounts("alice")
    fake.run_kernels = False  # it waits in Kaggle's queue…
    reg = Registry()
    rec = reg.create_run(tiny_config(tiny_data, limit_min=60))
    runner.start_kaggle_run(reg, rec.id, account="alice")
    _until(lambda: "в очереди Kaggle" in (Registry().get(rec.id).last_message or ""), what="the queued message")
    runner.stop_kaggle_run(reg, rec.id)  # «Остановить» while queued: said, with how to cancel the kernel itself
    _until(lambda: "остановка запрошена" in (Registry().get(rec.id).last_message or ""), what="the stop in the line")
    assert "Stop session" in Registry().get(rec.id).last_message
    fake.delete_kernel(reg.get(rec.id).kaggle_kernel_ref)  # …and its owner deletes it on kaggle.com
    assert runner.wait_followers(30)
    got = reg.get(rec.id)
    assert got.status == st.FAILED and "больше нет на Kaggle" in got.last_message, got.last_message
    assert "\n" not in got.last_message
    assert KaggleStore(reg.state).account("alice").key_status == "ok"
