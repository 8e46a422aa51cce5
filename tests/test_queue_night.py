"""The night queue for real: the window starts the queue's own runner and may then die; the
runner and its trainer die together (a power cut) and the logon entry's command carries the
run on from its checkpoint without spending its retry; a Kaggle leg is followed after a
reboot as after a runner kill; the runner ends by itself when nothing is left. Real processes (the window offscreen, the runner, tiny CPU trainers), the
lab's SQLite state; every wait is for an event, bounded by DEADLINE_S only against a hang."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from app.base import run_status as st
from app.kaggle.store import KaggleStore
from app.queue import autostart, detach, lock
from app.queue.adding import add_runs
from app.queue.store import DONE, QueueStore
from app.runs.registry import Registry
from tests.fake_kaggle import fixtures
from tests.fake_kaggle.fixtures import KEYS, add_lab_accounts

fake = fixtures.fake  # the fake-server fixture

ROOT = Path(__file__).resolve().parent.parent
DEADLINE_S = 240.0


def tiny(data: Path, name: str, **training) -> dict:
    return {
        "name": name,
        "model": {"context": 16, "width": 16, "heads": 2, "layers": 1, "vocab": 300},
        "training": {"batch_per_card": 2, "steps_to": 4, "limit_min": 5, "eval_every": 2, "eval_segments": 4,
                     "warmup_steps": 1, "sample_tokens": 0, **training},
        "data": {"dir": str(data)},
        "target": {"kind": "local", "gpu": "cpu"},
    }


def events(run_dir: Path, kind: str) -> list[dict]:
    path = Path(run_dir) / "events.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    return [e for e in (json.loads(x) for x in lines if x.strip()) if e.get("event") == kind]


def wait_for(what, timeout: float = DEADLINE_S, poll_s: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        time.sleep(poll_s)
    raise AssertionError(f"not seen within {timeout} s: {what}")


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def runner_gone() -> bool:
    return lock.current_holder() is None


def test_the_window_starts_the_runner_and_its_death_changes_nothing(tiny_data, tmp_path):
    """Two runs queued; the window (offscreen) starts the detached runner and is SIGKILLed
    while the first trains: both finish, each once, the items' times are their runs' own,
    and the runner ends by itself, saying so."""
    reg = Registry()
    store = QueueStore(reg.state)
    first = add_runs(store, tiny(tiny_data, "first", steps_to=40, eval_every=20), target="local",
                     check=lambda _: None).items[0]
    second = add_runs(store, tiny(tiny_data, "second"), target="local", check=lambda _: None).items[0]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "QT_QPA_PLATFORM": "offscreen"}
    out = open(tmp_path / "window.log", "wb")  # noqa: SIM115 - closed below, after the window's end
    window = subprocess.Popen([sys.executable, "-m", "ui.main"], cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                              stdout=out, stderr=subprocess.STDOUT)
    try:
        note = wait_for(lock.current_holder)
        assert note.pid != window.pid and note.program == "ternit queue run"  # never the window itself
        run_dir = wait_for(lambda: (it := store.item(first.id)).state == "running" and reg.get(it.run_id).path)
        wait_for(lambda: events(run_dir, "step"))  # the first trains
        window.kill()
        killed_at = time.time()
        assert window.wait(30) == -signal.SIGKILL
    finally:
        if window.poll() is None:
            window.kill()
            window.wait(30)
        out.close()
    wait_for(lambda: all(store.item(i).state == DONE for i in (first.id, second.id)))
    wait_for(runner_gone)
    for item_id in (first.id, second.id):
        it = store.item(item_id)
        assert len(it.runs) == 1 and reg.get(it.run_id).status == st.FINISHED, it
        rec = reg.get(it.run_id)
        starts, ends = events(rec.path, "start"), events(rec.path, "end")
        assert len(starts) == 1 and len(ends) == 1
        assert abs(it.started_at - starts[0]["time"]) < 2 and abs(it.ended_at - ends[0]["time"]) < 2, it
    assert events(reg.get(store.item(first.id).run_id).path, "end")[0]["time"] > killed_at  # it trained past the kill
    assert "nothing left to start or follow" in detach.runner_log().read_text(encoding="utf-8") or \
        "больше нечего запускать" in detach.runner_log().read_text(encoding="utf-8")


def _logon(entry: autostart.Entry) -> None:
    """The logon entry's command as a logon runs it: its own folder and arguments, none of
    this test's lab variables (the entry carries the lab's folder itself)."""
    env = {k: v for k, v in os.environ.items() if k not in ("TERNIT_HOME", "PYTHONPATH", "TERNIT_LANG")}
    done = subprocess.run(entry.argv(), cwd=entry.code, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_two_power_cuts_in_one_night_the_logon_entry_carries_the_run_on(tiny_data):
    """The runner and its trainer SIGKILLed together mid-run, twice: each time the logon
    entry's command continues the run from its checkpoint (a `start` with `resumed_from`,
    step > 0), the item's retry is not spent, and the queue finishes; nothing is doubled."""
    reg = Registry()
    store = QueueStore(reg.state)
    item = add_runs(store, tiny(tiny_data, "night", steps_to=60, eval_every=30, checkpoint_every_min=0),
                    target="local", check=lambda _: None).items[0]
    status = autostart.on(where="linux")
    assert status.installed and not status.stale
    entry = autostart.current()
    for cut in (1, 2):
        _logon(entry)
        note = wait_for(lock.current_holder)

        def trainer_past_a_checkpoint(cut: int = cut) -> object:
            it = store.item(item.id)
            if len(it.runs) != cut or not it.run_id:
                return None
            rec = reg.get(it.run_id)
            ckpts = events(rec.path, "checkpoint")
            return rec if rec.pid and ckpts and ckpts[-1]["step"] >= 2 * cut and not events(rec.path, "end") else None

        rec = wait_for(trainer_past_a_checkpoint, poll_s=0.01)
        for pid in (note.pid, rec.pid):  # a power cut: both at once
            os.kill(pid, signal.SIGKILL)
        wait_for(lambda pid=rec.pid: _gone(pid))
        wait_for(runner_gone)
    _logon(entry)
    wait_for(lambda: store.item(item.id).state == DONE)
    wait_for(runner_gone)
    it = store.item(item.id)
    assert it.attempt == 1 and len(it.runs) == 3, it  # two continuations, the retry unspent
    first, *continued = [reg.get(r) for r in it.runs]
    assert not events(first.path, "start")[0].get("resumed_from")
    for rec in continued:
        (start,) = events(rec.path, "start")
        assert start["resumed_from"] and start["step"] > 0, start
    last = continued[-1]
    assert last.status == st.FINISHED and len(events(last.path, "end")) == 1
    assert sum(len(events(reg.get(r).path, "end")) for r in it.runs) == 1
    assert len(reg.list_runs()) == 3


def test_a_kaggle_leg_is_followed_after_a_reboot_as_after_a_runner_kill(fake, tiny_data):
    """The runner goes down (a reboot) while its Kaggle leg runs: the logon entry's command
    brings a runner back, which follows the leg to its end — no second push, the outputs
    fetched once, the item done with its one run."""
    fake.add_account("alice", KEYS["alice"], quota_h=10)
    add_lab_accounts("alice")
    reg = Registry()
    store = QueueStore(reg.state)
    item = add_runs(store, tiny(tiny_data, "there"), target="kaggle", check=lambda _: None).items[0]
    autostart.on(where="linux")
    entry = autostart.current()
    _logon(entry)
    note = wait_for(lock.current_holder)
    kaggle = KaggleStore(reg.state)

    def leg_pushed() -> bool:
        run_id = store.item(item.id).run_id
        leg = kaggle.leg(run_id) if run_id else None
        return bool(leg and leg["state"] in ("pushed", "running"))

    wait_for(leg_pushed, poll_s=0.01)
    os.kill(note.pid, signal.SIGKILL)  # the PC went down: the runner with it
    wait_for(runner_gone)
    _logon(entry)
    wait_for(lambda: store.item(item.id).state == DONE)
    wait_for(runner_gone)
    it = store.item(item.id)
    rec = reg.get(it.run_id)
    assert len(fake.pushes) == 1 and len(it.runs) == 1 and it.attempt == 1, it
    assert rec.status == st.FINISHED and len(events(rec.path, "start")) == 1 and len(events(rec.path, "end")) == 1
    fetched = [p.name for p in (rec.path / "outputs").rglob("*") if p.is_file()]
    assert fetched and len(fetched) == len(set(fetched))
    assert kaggle.leg(rec.id)["state"] == "done"
