"""Runs on Kaggle, end to end against the fake server: each pushed kernel script runs for
real (the real trainer, tiny model, on the CPU) under TERNIT_KAGGLE_ROOT."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.base import run_status as st
from app.kaggle import datasets, runner
from app.kaggle.client import AccountClient
from app.kaggle.credentials import Credential, CredentialStore
from app.kaggle.store import KaggleStore, sha256_file
from app.runs.manager import RunManager
from app.runs.registry import Registry
from tests.fake_kaggle import fixtures
from tests.fake_kaggle.fixtures import KEYS, add_lab_accounts, tiny_config

fake = fixtures.fake  # the fake-server fixture

ROOT = Path(__file__).resolve().parent.parent


def _events(run_dir: Path, kind: str | None = None) -> list[dict]:
    path = Path(run_dir) / "events.jsonl"
    evs = [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()] if path.exists() else []
    return [e for e in evs if kind is None or e["event"] == kind]


def _lab_bytes() -> bytes:
    """Everything the lab wrote outside its credentials file."""
    home = Path(os.environ["TERNIT_HOME"])
    out = b""
    for p in sorted(home.rglob("*")):
        if p.is_file() and p.name != "kaggle_credentials.json":
            out += p.read_bytes()
    return out


def _assert_no_secret(server) -> None:
    sent, lab = server.all_received(), _lab_bytes()
    assert len(sent) > 10_000  # data, code and kernel really went up
    for key in KEYS.values():
        assert key.encode() not in sent, "a key reached Kaggle in an uploaded byte"
        assert key.encode() not in lab, "a key is in the lab's state, logs or run folders"


def test_auto_run_goes_to_the_right_account_and_trains(fake, tiny_data):
    fake.add_account("alice", KEYS["alice"], quota_h=50)           # its key is refused
    fake.add_account("bob", KEYS["bob"], quota_h=40)               # covers, holds nothing
    fake.add_account("carol", KEYS["carol"], quota_h=20)           # covers, already holds the data
    fake.add_account("dave", KEYS["dave"], quota_h=30, used_h=29)  # does not cover the run
    add_lab_accounts("alice", "bob", "carol", "dave", wrong_key=("alice",))
    store = KaggleStore()
    data = datasets.data_bundle(tiny_data, store)
    datasets.ensure(AccountClient(Credential("carol", KEYS["carol"])), store, data)  # an earlier run did this
    store.close()

    manager = RunManager(Registry())
    rec = manager.start(tiny_config(tiny_data, steps_to=30, limit_min=120), target="kaggle", account="auto")
    push = fake.pushes[-1]
    assert push["slug"].startswith("carol/")
    assert push["machineShape"] == "NvidiaTeslaT4" and push["enableGpu"] is True
    assert push["enableInternet"] is False and push["isPrivate"] is True
    assert f"carol/{data.slug}" in push["datasetDataSources"]
    assert manager.registry.get(rec.id).status in (st.QUEUED, st.RUNNING_KAGGLE, st.DOWNLOADING, st.FINISHED)

    done = manager.wait(rec.id, timeout=90, poll_s=0.1)
    assert done.status == st.FINISHED, done.last_message
    assert done.target_account == "carol" and done.kaggle_kernel_ref == push["slug"]
    steps = _events(done.path, "step")
    assert [e["step"] for e in steps] == list(range(1, 31))
    assert done.last_loss == pytest.approx(steps[-1]["loss"]) and done.last_step == 30
    latest = (done.path / "checkpoints" / "latest").read_text().strip()
    ckpt_event = _events(done.path, "checkpoint")[-1]
    assert Path(ckpt_event["path"]).name == latest
    assert sha256_file(done.path / "checkpoints" / latest) == ckpt_event["sha256"]
    # The lab wrote the run's TensorBoard files from the events the kernel sent back.
    from tests.test_tensorboard import read_back

    assert [s for s, _ in read_back(done.path / "tensorboard")["train/loss"]] == list(range(1, 31))
    # The data went up once (to carol, before); this run uploaded only the trainer code.
    assert sum(1 for ds in fake.datasets.values() if ds.slug == data.slug) == 1
    store = KaggleStore()
    alice = store.account("alice")
    assert alice.key_status == "invalid" and "401" in alice.key_reason
    assert {d.kind for d in store.holdings("carol")} == {"data", "code"}
    store.close()
    _assert_no_secret(fake)


# A chain going on on a second account (leg 2 resumes leg 1's checkpoint, ends at steps_to, the
# run's «Лимит, мин» split between the legs) and RunManager.wait following it leg by leg are
# proven on one chain, followed by the window too: tests/test_kaggle_ui.py
# test_a_kaggle_chain_followed_by_the_window_and_a_cli_wait_goes_on_on_a_second_account.


def test_push_refused_moves_on_and_nothing_is_pushed_twice(fake, tiny_data):
    fake.run_kernels = False  # kernels stay queued: this test is about pushing
    fake.add_account("alice", KEYS["alice"], quota_h=40)
    fake.add_account("bob", KEYS["bob"], quota_h=20)
    fake.refuse_push["alice"] = "Maximum number of GPU sessions reached"
    add_lab_accounts("alice", "bob")
    reg = Registry()
    rec = reg.create_run(tiny_config(tiny_data, limit_min=60))
    runner.start_kaggle_run(reg, rec.id, account="auto")
    assert [p["slug"].split("/")[0] for p in fake.pushes] == ["alice", "bob"]
    got = reg.get(rec.id)
    assert got.target_account == "bob" and got.status == st.QUEUED
    runner.shutdown_followers()

    # The lab stopped right after the push, before recording it: the restart asks Kaggle.
    store = KaggleStore(reg.state)
    store.update_leg(rec.id, state="pushing")
    reg2 = Registry()
    runner.poll_kaggle_runs(reg2)
    deadline = time.monotonic() + 120  # the follower's answer, however loaded the machine
    while store.leg(rec.id)["state"] == "pushing" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert store.leg(rec.id)["state"] == "pushed"
    runner.poll_kaggle_runs(reg2)  # polling again starts no second follower, pushes nothing
    time.sleep(0.3)
    assert len(fake.pushes) == 2
    runner.shutdown_followers()

    # The lab stopped after recording the leg's end but before the run's status: settled.
    store.update_leg(rec.id, state="done", end_reason="steps_reached", message="reached step 30")
    runner.poll_kaggle_runs(reg2)
    assert reg2.get(rec.id).status == st.FINISHED

    # A named account that refuses is not silently replaced.
    other = reg.create_run(tiny_config(tiny_data, limit_min=60))
    with pytest.raises(Exception, match="GPU sessions"):
        runner.start_kaggle_run(reg, other.id, account="alice")


def test_kernel_error_shows_the_trainer_error_event(fake, tiny_data):
    fake.add_account("alice", KEYS["alice"], quota_h=30)
    add_lab_accounts("alice")
    reg = Registry()
    cfg = tiny_config(tiny_data)
    cfg["model"]["vocab"] = 200  # smaller than the data's 300 tokens: the trainer refuses
    rec = reg.create_run(cfg)
    runner.start_kaggle_run(reg, rec.id)
    assert runner.wait_followers(60)
    got = reg.get(rec.id)
    assert got.status == st.FAILED
    error = _events(got.path, "error")[0]
    assert "model.vocab" in error["message"]  # the trainer's own words about what to change
    assert error["message"] in got.last_message and error["advice"] in got.last_message
    assert "[ternit-kernel] the trainer exited with code" in (got.path / "trainer.log").read_text()
    assert fake.kernels[got.kaggle_kernel_ref].status == "ERROR"


def test_a_start_without_network_waits_pushes_once_and_a_restart_without_network_resumes_following(fake, tiny_data,
                                                                                                 tmp_path):
    """A bad network day, on one kernel (each is a real trainer process):
    - `ternit run start --wait` with the network down (the quota known from before) does not
      fail: the run waits, saying Kaggle is unreachable and that it retries, and is pushed
      once Kaggle answers;
    - the lab dies mid-run (SIGKILL), the network is down when it comes back: it says it is
      waiting, retries, and then follows the same kernel to the end — no second push, every
      event once, the checkpoint kept."""
    from app.kaggle.accounts import Accounts

    fake.add_account("alice", KEYS["alice"], quota_h=30)
    add_lab_accounts("alice")
    store = KaggleStore()
    Accounts(store).check_all()  # the quota the lab knows
    store.close()
    cfg = tmp_path / "run.json"
    cfg.write_text(json.dumps(tiny_config(tiny_data, steps_to=300, eval_every=100)))
    fake.down = True
    reg = Registry()
    said = tmp_path / "cli.txt"
    with open(said, "wb") as out:
        child = subprocess.Popen([sys.executable, "-m", "app.cli", "run", "start", "--config", str(cfg), "--target",
                                  "kaggle", "--account", "alice", "--wait"], cwd=ROOT,
                                 env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 90
        while not reg.list_runs() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        runs = reg.list_runs()
        assert len(runs) == 1, said.read_text(errors="replace")[-3000:]
        rec = runs[0]
        while "повторяю" not in (reg.get(rec.id).last_message or "") and time.monotonic() < deadline:
            time.sleep(0.02)
        got = reg.get(rec.id)
        # No RunError: the start waits for Kaggle, and says so.
        assert child.poll() is None and got.status == st.UPLOADING, (got.status, got.last_message,
                                                                      said.read_text(errors="replace")[-3000:])
        assert "недоступен" in got.last_message and "повторяю" in got.last_message, got.last_message
        assert fake.pushes == []
        fake.down = False
        deadline = time.monotonic() + 90
        while len(_events(rec.path, "step")) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _events(rec.path, "step"), "the first lab process never followed the kernel"
    finally:
        child.kill()  # the lab dies mid-run (SIGKILL; TerminateProcess on Windows)
        child.wait()
    assert len(fake.pushes) == 1
    assert KaggleStore(reg.state).leg(rec.id)["state"] in ("pushed", "running")

    fake.down = True  # ...and comes back without a network, while the kernel trains on
    runner.poll_kaggle_runs(Registry())  # the new lab process (here: this one) starts
    deadline = time.monotonic() + 60
    while "недоступен" not in (reg.get(rec.id).last_message or "") and time.monotonic() < deadline:
        time.sleep(0.02)
    waiting = reg.get(rec.id).last_message
    fake.down = False
    assert runner.wait_followers(90)
    got = reg.get(rec.id)
    assert got.status == st.FINISHED, got.last_message
    assert "недоступен" in waiting and "повторяю" in waiting, waiting
    assert len(fake.pushes) == 1
    assert [e["step"] for e in _events(got.path, "step")] == list(range(1, 301))
    assert (got.path / "checkpoints" / "step-00000300.pt").is_file()


def test_a_global_token_blocks_nothing_and_stop_says_what_happens(fake, tiny_data, monkeypatch, capsys):
    fake.run_kernels = False
    fake.add_account("alice", KEYS["alice"], quota_h=30)
    fake.add_account("eve", token="KGAT_someone_elses_token", quota_h=30)
    add_lab_accounts("alice")
    reg = Registry()
    rec = reg.create_run(tiny_config(tiny_data))
    monkeypatch.setenv("KAGGLE_API_TOKEN", "KGAT_someone_elses_token")
    runner.start_kaggle_run(reg, rec.id)
    assert [p["slug"].split("/")[0] for p in fake.pushes] == ["alice"]
    assert {u for _, u in fake.calls} == {"alice"}  # nothing went as the token's owner
    runner.stop_kaggle_run(reg, rec.id)
    leg = KaggleStore(reg.state).leg(rec.id)
    assert leg["stop_requested_at"] is not None
    message = reg.get(rec.id).last_message
    assert "Stop session" in message and leg["kernel_url"] in message
    # `ternit run stop` says the same, not just the unchanged status.
    from app.runs import cli as run_cli

    capsys.readouterr()
    assert run_cli.main(["stop", rec.id]) == 0
    out = capsys.readouterr().out
    assert "Stop session" in out and leg["kernel_url"] in out, out


def test_no_quota_anywhere_says_when_it_refreshes(fake, tiny_data):
    from app.base.i18n import set_language
    from app.kaggle.quota import refresh_text
    from app.runs.manager import RunError

    fake.add_account("alice", KEYS["alice"], quota_h=30, used_h=30)
    fake.add_account("bob", KEYS["bob"], quota_h=30, used_h=29.999)
    add_lab_accounts("alice", "bob")
    set_language("en")
    try:
        with pytest.raises(RunError) as info:
            RunManager(Registry()).start(tiny_config(tiny_data, limit_min=60), target="kaggle", account="auto")
        expected = refresh_text(fake.refresh_time.timestamp())
    finally:
        set_language(None)
    assert "wait for the quota to refresh" in str(info.value)
    assert expected.startswith("refreshes ") and expected in str(info.value)  # when waiting helps
    assert fake.pushes == []
    reg = Registry()
    assert reg.list_runs() == [] and not any(reg.runs_root.iterdir())  # refused: no run left behind


def test_a_kernel_that_dies_without_the_trainers_error_is_told_as_a_kaggle_failure(fake, tiny_data):
    # Kaggle kills the session as the trainer starts (no error event); the kernel ends in ERROR.
    from app.base.i18n import set_language

    fake.add_account("alice", KEYS["alice"], quota_h=30)
    add_lab_accounts("alice")
    fake.kill_kernels_at = "parameters:"
    m = RunManager(Registry())
    rec = m.start(tiny_config(tiny_data), target="kaggle", account="alice")
    done = m.wait(rec.id, timeout=60, poll_s=0.1)
    assert done.status == st.FAILED
    set_language("en")
    try:
        f = m.failure(done.id)
    finally:
        set_language(None)
    assert "parameters:" in f.message and "exited with code" in f.message  # the kernel log's last lines
    assert "Kaggle kernel" in f.advice and "trainer.log" in f.advice
    assert "disappeared" not in f.advice and "computer" not in f.advice
    assert f.retry_label() is not None


def test_stop_while_uploading_pushes_no_kernel(fake, tiny_data):
    import threading

    fake.add_account("alice", KEYS["alice"], quota_h=30)
    add_lab_accounts("alice")
    fake.fail("GetDatasetStatus", 429, retry_after="2")  # the upload takes a while
    m = RunManager(Registry())
    rec = m.create(tiny_config(tiny_data, limit_min=60), target="kaggle", account="alice")
    launch = threading.Thread(target=m.launch, args=(rec.id,))
    launch.start()
    deadline = time.monotonic() + 30
    while KaggleStore(m.registry.state).leg(rec.id) is None and time.monotonic() < deadline:
        time.sleep(0.02)
    m.stop(rec.id)  # the user presses «Остановить» during the upload
    launch.join(60)
    got = m.registry.get(rec.id)
    assert fake.pushes == []  # no kernel spends the account's quota
    assert got.status == st.STOPPED and "ничего не запущено" in got.last_message
    assert KaggleStore(m.registry.state).leg(rec.id)["state"] == "done"  # no follower takes it up


def test_a_leg_stopped_by_the_runs_own_limit_does_not_go_on(fake, tiny_data):
    # Alice's quota covers the run: the leg ends at «Лимит, мин» (12 ms), not by the quota.
    fake.add_account("alice", KEYS["alice"], quota_h=30)
    fake.add_account("bob", KEYS["bob"], quota_h=30)
    add_lab_accounts("alice", "bob")
    reg = Registry()
    first = reg.create_run(tiny_config(tiny_data, steps_to=300, limit_min=0.0002, eval_every=100))
    runner.start_kaggle_run(reg, first.id, account="auto")
    assert runner.wait_followers(120)
    legs = reg.chain(first.chain_id)
    assert len(legs) == 1 and legs[0].status == st.TIME_LIMIT, [(r.leg, r.status) for r in legs]
    assert len(fake.pushes) == 1 and "Продолжение" not in (legs[0].last_message or "")
    reg.ingest(first.id)
    assert reg.get(first.id).last_step < 300  # stopped by the limit; «Продолжить» is the user's


def test_a_run_json_the_trainer_would_refuse_is_caught_before_anything_is_uploaded(fake, tiny_data):
    """A hand-written run.json (ternit run start --config) with a bad value fails at once with
    the trainer's own reason: no dataset uploaded, no kernel pushed, no quota spent."""
    from app.runs.manager import RunError

    fake.add_account("alice", KEYS["alice"], quota_h=10)
    add_lab_accounts("alice")
    m = RunManager()
    with pytest.raises(RunError) as err:
        m.start(tiny_config(tiny_data, lr="abc"), target="kaggle", account="alice")
    assert "training.lr" in str(err.value) and "проверку тренера" in str(err.value)
    assert fake.kernels == {} and fake.datasets == {}
    assert m.registry.list_runs() == []  # refused before a run existed: nothing in the history


def test_a_first_real_use_from_the_cli_fresh_token_account_auto_processing_queue_hung_and_cut_stream(
        fake, tiny_data, monkeypatch, tmp_path, capsys):
    """Kaggle as a first real use meets it, from `ternit run start --wait`: a fresh account
    added with an API token (nothing of the lab's on it: every dataset asked for answers
    403), «Авто», datasets processed for a while and a kernel queued (the CLI says both while
    it waits, and pushes only once both datasets are ready), a log stream that hangs once and
    streams cut every few events — the run completes with its loss in the history and no
    account marked refused. (One kernel for what two tests proved: each is a real trainer.)"""
    from app.cli import main as cli_main

    monkeypatch.setenv("TERNIT_KAGGLE_STALL_S", "1")
    fake.add_account("alice", token="KGAT_alice_fresh_token", quota_h=40)  # Settings → API → Generate New Token
    fake.add_account("bob", KEYS["bob"], quota_h=30)  # a legacy key, fresh too
    CredentialStore().add(Credential("alice", token="KGAT_alice_fresh_token"), Credential("bob", KEYS["bob"]))
    fake.dataset_processing_polls = 30  # ≈ 1.5 s of the lab's polls each: the CLI's lines see it
    fake.kernel_queue_polls = 60
    fake.hang_stream_once = 3
    fake.cut_stream_after = 12
    cfg = tmp_path / "run.json"
    cfg.write_text(json.dumps(tiny_config(tiny_data, steps_to=30, limit_min=60)))
    code = cli_main.main(["run", "start", "--config", str(cfg), "--target", "kaggle", "--account", "auto", "--wait"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "Kaggle обрабатывает" in err and "ждём" in err, err
    assert "в очереди Kaggle" in err and "Stop session" in err, err
    assert fake.count("SaveKernel") == 1
    # The kernel was pushed only once both datasets were ready: nothing was left out.
    assert "invalidDatasetSources" not in json.dumps(fake.pushes)
    (done,) = Registry().list_runs()
    assert done.status == st.FINISHED, done.last_message
    assert done.target_account == "alice"
    steps = _events(done.path, "step")
    assert [e["step"] for e in steps] == list(range(1, 31))  # every event once, whatever the replays
    assert done.last_step == 30 and done.last_loss == pytest.approx(steps[-1]["loss"])
    store = KaggleStore()
    assert {a.username: a.key_status for a in store.accounts()} == {"alice": "ok", "bob": "ok"}
    store.close()
    assert fake.count("GetDatasetStatus") >= 2 * 4  # absent (403), then processing, then ready
    # The hung stream was reopened. How many of the later ones the load balancer cut depends on
    # how far the kernel had logged when each opened (a cut is 12 events past that): on a loaded
    # machine the second one may open near the end and never be cut. Every event once (above)
    # is what the cuts must not break.
    assert fake.streams_hung == 1 and fake.streams_opened >= 2
    assert fake.kernels[done.kaggle_kernel_ref].request["datasetDataSources"]  # mounted, none left out
    _assert_no_secret(fake)
    assert b"KGAT_alice_fresh_token" not in fake.all_received() + _lab_bytes()


def test_a_kernel_kaggle_ended_for_quota_shows_kaggles_words_and_goes_on_on_another_account(fake, tiny_data):
    """Alice's quota runs dry mid-leg (issue 37): Kaggle ends the session (ERROR, «weekly GPU
    quota exhausted») after the trainer's first checkpoint. The leg says Kaggle's words — not
    «остановлен по лимиту» of its own — and the chain goes on on bob from that checkpoint to
    the run's end."""
    from tests.fake_kaggle.server import QUOTA_ENDED

    fake.add_account("alice", KEYS["alice"], quota_h=30)
    fake.add_account("bob", KEYS["bob"], quota_h=20)
    add_lab_accounts("alice", "bob")
    fake.dry_at = {"alice": '"event":"checkpoint"'}
    reg = Registry()
    first = reg.create_run(tiny_config(tiny_data, steps_to=40, checkpoint_every_min=0))
    runner.start_kaggle_run(reg, first.id, account="alice")
    assert runner.wait_followers(180)
    legs = reg.chain(first.chain_id)
    said = [(r.leg, r.target_account, r.status, r.last_message) for r in legs]
    assert len(legs) == 2 and legs[0].target_account == "alice" and legs[1].target_account == "bob", said
    assert QUOTA_ENDED.rstrip(".") in (legs[0].last_message or ""), said
    assert legs[1].status == st.FINISHED, said
    reg.ingest(legs[1].id)
    assert reg.get(legs[1].id).last_step == 40
    assert _events(legs[1].path, "start")[0]["resumed_from"].endswith(".pt")
    from app.kaggle.accounts import Accounts, leg_state_text

    alice = next(v for v in Accounts(KaggleStore(reg.state)).views() if v.username == "alice")
    shown = [leg_state_text(k) for k in alice.kernels]  # «Аккаунты…» and `ternit kaggle accounts`
    assert shown and all("weekly GPU quota exhausted" in x for x in shown), shown


def test_a_kernel_kaggle_ended_is_never_shown_as_a_limit_stop():
    """The trainer saved and ended at its limit as Kaggle ended the session (ERROR): the run
    failed, in Kaggle's words; a COMPLETE kernel's limit stop stays one."""
    from app.kaggle.outputs import kaggle_ended

    status, message, quota = kaggle_ended("ERROR", "Your session ended: weekly GPU quota exhausted.",
                                          st.TIME_LIMIT, "reached the time limit", True)
    assert status == st.FAILED and quota and "weekly GPU quota exhausted" in message
    status, message, quota = kaggle_ended("ERROR", "Kernel ran out of memory", st.STOPPED, "stopped", True)
    assert status == st.FAILED and not quota and "out of memory" in message
    assert kaggle_ended("COMPLETE", "", st.TIME_LIMIT, "limit", True) == (st.TIME_LIMIT, "limit", False)
