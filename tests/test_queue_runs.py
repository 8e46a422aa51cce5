"""The queue for real: the real trainer (tiny models on the CPU) on this PC and in the fake
Kaggle's kernels (tests/fake_kaggle), the real `kaggle` client, the lab's SQLite state, and
runners that are SIGKILLed at chosen moments and restarted."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from app.base import run_status as st
from app.kaggle.accounts import Accounts
from app.kaggle.store import KaggleStore
from app.queue import cli, lock
from app.queue.adding import add_runs
from app.queue.runner import QueueRunner
from app.queue.series import results
from app.queue.store import DONE, FAILED, QueueStore
from app.runs.manager import RunManager
from app.runs.registry import Registry
from tests.fake_kaggle import fixtures
from tests.fake_kaggle.fixtures import KEYS, add_lab_accounts

fake = fixtures.fake  # the fake-server fixture

ROOT = Path(__file__).resolve().parent.parent
DEADLINE_S = 240.0  # a bound for a broken test, not a timing: each waits for the queue's events


def tiny(data: Path, name: str = "q", **training) -> dict:
    return {
        "name": name,
        "model": {"context": 16, "width": 16, "heads": 2, "layers": 1, "vocab": 300},
        "training": {"batch_per_card": 2, "steps_to": 4, "limit_min": 2, "eval_every": 2, "eval_segments": 4,
                     "warmup_steps": 1, "sample_tokens": 0, **training},
        "data": {"dir": str(data)},
        "target": {"kind": "local", "gpu": "cpu"},
    }


def _drive_to_the_end(reg: Registry) -> tuple[QueueRunner, list]:
    """A runner in this process, driving the queue until nothing is left to start or follow
    (DEADLINE_S bounds a broken test): the runner and what it announced."""
    runner = QueueRunner(RunManager(reg), "test")
    heard: list = []
    runner.add_listener(heard.append)
    runner.start()
    deadline = time.monotonic() + DEADLINE_S
    runner.drive(stop=lambda: time.monotonic() > deadline, poll_s=0.1)
    runner.close()
    return runner, heard


def _events(run_dir: Path, kind: str) -> list[dict]:
    path = Path(run_dir) / "events.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    return [e for e in (json.loads(x) for x in lines if x.strip()) if e["event"] == kind]


def _kernel_limit_s(kernel) -> float:
    return float(re.search(r"^LIMIT_MIN = ([0-9.]+)", kernel.request["text"], re.M).group(1)) * 60.0


def _watch_accounts(fake) -> list[dict]:
    """At every push: the account's kernels running then (this one included), and what they
    could still use at most against the quota left."""
    seen: list[dict] = []

    def on_push(k) -> None:
        with fake._lock:
            fake._charge_running()
            running = [x for x in fake.kernels.values() if x.owner == k.owner and x.status in ("QUEUED", "RUNNING")]
            now = time.monotonic()
            held = sum(_kernel_limit_s(x) - ((now - x.started) if x.started else 0.0) for x in running)
            seen.append({"account": k.owner, "sessions": len(running), "held_s": held,
                         "left_s": fake.remaining_s(k.owner)})

    fake.on_push = on_push
    return seen


def test_a_series_over_this_pc_and_three_accounts(fake, tiny_data, capsys):
    """3 learning rates × 2 widths over `any`: this PC (the CPU) and alice (10 h), bob (quota
    for one run at a time: 4 min against 2 min + 1 min margin) and carol (2 min: none)."""
    fake.add_account("alice", KEYS["alice"], quota_h=10)
    fake.add_account("bob", KEYS["bob"], quota_h=4 / 60)
    fake.add_account("carol", KEYS["carol"], quota_h=2 / 60)
    add_lab_accounts("alice", "bob", "carol")
    pushes = _watch_accounts(fake)
    reg = Registry()
    store = QueueStore(reg.state)
    added = add_runs(store, tiny(tiny_data, "s"), target="any", check=lambda _: None,  # pre-check: test_queue_store
                     vary=[("training.lr", [0.001, 0.003, 0.01]), ("model.width", [16, 32])])
    assert [it.name for it in added.items][:2] == ["s lr=0.001 width=16", "s lr=0.001 width=32"]
    Accounts(KaggleStore(reg.state)).check_all()  # the quota, as `ternit kaggle accounts` would

    capsys.readouterr()
    assert cli.main(["list", "--json"]) == 0  # what `ternit queue list` predicts before it begins
    predicted = json.loads(capsys.readouterr().out)
    rows = predicted["items"]
    order = [r["id"] for r in sorted(rows, key=lambda r: (r["expected_start"], r["place"]))]
    first_wave = {r["id"]: r["machine"] for r in rows if r["expected_start"] <= predicted["now"] + 1}
    ids = [it.id for it in added.items]
    assert first_wave == {ids[0]: "local", ids[1]: "kaggle:alice", ids[2]: "kaggle:alice", ids[3]: "kaggle:bob"}

    _, heard = _drive_to_the_end(reg)

    items = store.series_items(added.series.id)
    assert [it.state for it in items] == [DONE] * 6, [(it.name, it.state, it.message) for it in items]
    assert all(len(it.runs) == 1 for it in items)
    assert [it.id for it in sorted(items, key=lambda it: it.claimed_at)] == order
    assert {it.id: it.machine for it in items if it.id in first_wave} == first_wave
    for it in items:  # each run trained to its end once, where the queue put it
        rec = reg.get(it.run_id)
        assert rec.status == st.FINISHED and len(_events(rec.path, "end")) == 1
        assert rec.target_kind == ("local" if it.machine == "local" else "kaggle")
    # No account ran a kernel beyond its quota or its concurrent-session limit.
    assert {p["account"] for p in pushes} <= {"alice", "bob"} and len(pushes) == 6 - sum(
        it.machine == "local" for it in items)
    assert all(p["sessions"] <= 2 and p["held_s"] <= p["left_s"] + 1 for p in pushes), pushes
    assert max(p["sessions"] for p in pushes if p["account"] == "bob") == 1
    assert all(fake.accounts[a].used_s <= fake.accounts[a].total_s for a in fake.accounts)
    # The series' table names the best: the lowest final held-out loss, with its interval
    # and bits per byte.
    res = results(store, reg, added.series.id)
    scored = [r for r in res.rows if r.val_loss is not None]
    assert len(scored) == 6 and all(r.val_low <= r.val_loss <= r.val_high and r.bits_per_byte > 0 for r in scored)
    best = min(scored, key=lambda r: r.val_loss)
    assert res.done and res.winner == best.item_id
    assert f"lr={best.values['training.lr']}" in res.verdict
    assert [e.kind for e in heard].count("ended") == 6 and heard[-1].kind == "empty"


def test_a_failed_run_is_retried_once_then_skipped_and_the_queue_goes_on(fake, tiny_data):
    fake.add_account("alice", KEYS["alice"], quota_h=10)
    add_lab_accounts("alice")
    fake.kill_kernels_at = "no GPU in this session"  # every kernel dies as its trainer starts
    reg = Registry()
    store = QueueStore(reg.state)
    doomed = add_runs(store, tiny(tiny_data, "doomed"), target="kaggle").items[0]
    after = add_runs(store, tiny(tiny_data, "after"), target="local").items[0]
    runner, heard = _drive_to_the_end(reg)
    doomed, after = store.item(doomed.id), store.item(after.id)
    seen = [(r, reg.get(r).status, reg.get(r).last_message) for r in doomed.runs]
    assert (doomed.state, doomed.attempt, len(doomed.runs)) == (FAILED, 2, 2), (seen, doomed.message)
    assert len(fake.pushes) == 2  # the run and its one retry
    assert "пропущен" in doomed.message or "skipped" in doomed.message
    assert after.state == DONE
    kinds = [(e.kind, e.item.id if e.item else None) for e in heard]
    assert ("retry", doomed.id) in kinds and ("failed", doomed.id) in kinds
    assert runner.failed == [doomed.id]


def _runner(env: dict, extra: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "app.cli", "queue", "run", "--wait"], cwd=ROOT,
                            env={**env, **(extra or {})}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_a_runner_killed_twice_loses_nothing_and_starts_nothing_twice(fake, tiny_data):
    """Killed right after creating a run (before starting it), then while pushing a Kaggle
    leg; each restart finishes what was begun: every run ends once, no kernel is pushed twice,
    and a second runner beside the third is refused with a line naming it."""
    fake.add_account("alice", KEYS["alice"], quota_h=10)
    add_lab_accounts("alice")
    reg = Registry()
    store = QueueStore(reg.state)
    local = add_runs(store, tiny(tiny_data, "here"), target="local").items[0]
    remote = add_runs(store, tiny(tiny_data, "there"), target="kaggle").items[0]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    first = _runner(env, {"TERNIT_QUEUE_KILL_AT": "created"})
    assert first.wait(60) == -signal.SIGKILL, first.stdout.read()
    it = store.item(local.id)
    assert (it.state, it.step) == ("starting", "created") and reg.get(it.run_id).status == st.CREATED

    second = _runner(env)
    fake.on_push = lambda k: (second.kill(), second.wait(30))  # killed mid-push: Kaggle has the kernel
    assert second.wait(120) == -signal.SIGKILL, second.stdout.read()
    fake.on_push = None
    assert len(fake.pushes) == 1
    leg = KaggleStore(reg.state).leg(store.item(remote.id).run_id)
    assert leg["state"] == "pushing"  # the push was never heard back

    third = _runner(env)
    while not lock.is_held() and third.poll() is None:  # the third has taken the queue
        time.sleep(0.02)
    rival = subprocess.run([sys.executable, "-m", "app.cli", "queue", "run", "--wait"], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=60)
    out, _ = third.communicate(timeout=DEADLINE_S)
    assert third.returncode == 0, out
    assert rival.returncode == 2 and str(third.pid) in rival.stderr
    for item in (store.item(local.id), store.item(remote.id)):
        assert item.state == DONE and len(item.runs) == 1, (item, out)
        rec = reg.get(item.run_id)
        assert rec.status == st.FINISHED
        assert len(_events(rec.path, "start")) == 1 and len(_events(rec.path, "end")) == 1
    assert len(fake.pushes) == 1 and len(reg.list_runs()) == 2


def test_a_runner_killed_at_each_step_of_a_start_pushes_once(fake, tiny_data):
    """Killed once the run is claimed (nothing created), then once it is about to be pushed
    (created, nothing uploaded): each restart carries the start on, and one kernel is pushed."""
    fake.run_kernels = False  # the kernel stays queued: this test is about starting it
    fake.add_account("alice", KEYS["alice"], quota_h=10)
    add_lab_accounts("alice")
    reg = Registry()
    store = QueueStore(reg.state)
    it = add_runs(store, tiny(tiny_data, "steps"), target="kaggle", check=lambda _: None).items[0]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for moment, step in (("claimed", "claimed"), ("launching", "launching")):
        runner = _runner(env, {"TERNIT_QUEUE_KILL_AT": moment})
        assert runner.wait(60) == -signal.SIGKILL, runner.stdout.read()
        assert store.item(it.id).step == step
    run_id = store.item(it.id).run_id
    assert reg.get(run_id).status == st.CREATED and fake.pushes == []
    last = QueueRunner(RunManager(reg), "test")
    last.start()  # reconciles: launches the created run
    last.close()
    item = store.item(it.id)
    assert (item.state, item.runs) == ("running", [run_id])
    assert len(fake.pushes) == 1 and fake.pushes[0]["slug"].startswith("alice/")
    assert len(reg.list_runs()) == 1
