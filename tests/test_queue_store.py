"""The queue's state and its command line: items in order, edits racing the runner's claim,
series' combinations, one runner at a time, a start whose record was lost."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.base import run_status as st
from app.queue import cli, lock
from app.queue.adding import add_runs
from app.queue.runner import QueueRunner, run_config, trainer_process
from app.queue.series import expand, parse_vary
from app.queue.store import DONE, LAUNCHING, WAITING, QueueError, QueueStore
from app.queue.world import Planner
from app.runs import process as proc
from app.runs.manager import RunManager
from app.runs.registry import Registry

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def lab(tmp_path, monkeypatch):
    monkeypatch.setenv("TERNIT_HOME", str(tmp_path / "lab"))
    reg = Registry()
    yield reg, QueueStore(reg.state)
    reg.close()


def cfg(data: Path | str = "/nowhere", name: str = "r", **training) -> dict:
    return {"name": name, "model": {"context": 16, "width": 16, "heads": 2, "layers": 1, "vocab": 300},
            "training": {"batch_per_card": 2, "steps_to": 4, "limit_min": 2, "eval_every": 2, "eval_segments": 4,
                         "warmup_steps": 1, "sample_tokens": 0, **training},
            "data": {"dir": str(data)}, "target": {"kind": "local", "gpu": "cpu"}}


def no_check(_: dict) -> None:
    return None


def test_items_keep_their_order_and_moves_count_among_the_waiting(lab):
    _, store = lab
    ids = [store.add(cfg(name=n)).id for n in "abcd"]
    assert [it.name for it in store.items()] == ["a", "b", "c", "d"]
    assert store.claim(ids[0], "local", "run-a")  # a is starting: no longer among the waiting
    assert [it.id for it in store.move(ids[3], 1)] == [ids[3], ids[1], ids[2]]
    assert [it.name for it in store.items()] == ["a", "d", "b", "c"]
    store.move(ids[3], 99)
    assert [it.name for it in store.items((WAITING,))] == ["b", "c", "d"]
    with pytest.raises(QueueError, match="ждёт|waiting"):
        store.move(ids[0], 1)


def test_remove_hold_pause_and_the_claim_never_cross(lab):
    _, store = lab
    a, b, c = (store.add(cfg(name=n)) for n in "abc")
    store.set_held(b.id, True)
    assert not store.claim(b.id, "local", "x")  # held: the runner passes it by
    assert store.item(b.id).label("en") == "held"
    store.remove(a.id)
    assert not store.claim(a.id, "local", "y")  # removed just before the claim: nothing starts
    assert store.claim(c.id, "local", "z")
    with pytest.raises(QueueError, match="ternit run stop z"):
        store.remove(c.id)  # started: it is stopped first, not dropped
    store.set_paused(True)
    assert store.paused()
    store.set_paused(False)
    assert not store.paused()
    with pytest.raises(QueueError):
        store.item(a.id)


def test_a_series_is_the_product_of_its_values_named_by_them():
    key, values = parse_vary("training.lr=0.001,3e-4")
    assert (key, values) == ("training.lr", [0.001, 0.0003])
    combos = expand(cfg(name="demo"), [("training.lr", [0.001, 0.0003]), ("model.width", [256, 384, 512])])
    assert [c["name"] for c, _ in combos][:4] == ["demo lr=0.001 width=256", "demo lr=0.001 width=384",
                                                  "demo lr=0.001 width=512", "demo lr=0.0003 width=256"]
    assert len(combos) == 6 and combos[4][0]["model"]["width"] == 384 and combos[4][1] == {
        "training.lr": 0.0003, "model.width": 384}
    for bad in ("lr=0.1", "training.lr", "training.lr=", "nosection=1,2"):
        with pytest.raises(QueueError):
            parse_vary(bad)
    with pytest.raises(QueueError, match="одно или два|one or two"):
        expand(cfg(), [("training.lr", [1]), ("model.width", [1]), ("model.layers", [1])])


def test_nothing_is_queued_unless_every_run_passes_the_pre_check(lab, tiny_data):
    _, store = lab
    base = cfg(tiny_data, "w")
    with pytest.raises(QueueError, match="width=30"):  # 30 is not a multiple of 4 heads
        add_runs(store, {**base, "model": {**base["model"], "heads": 4}}, vary=[("model.width", [32, 30])])
    assert store.items() == []
    from app.kaggle.store import KaggleStore

    KaggleStore(store.state).ensure_account("bob")  # a named account must be the lab's (issue 37)
    added = add_runs(store, base, target="kaggle", account="bob", vary=[("training.lr", [0.001, 0.003])])
    assert [(it.target, it.account, it.series_id) for it in added.items] == [("kaggle", "bob", added.series.id)] * 2


def test_a_run_refused_on_one_kind_of_machine_goes_only_to_the_other(lab, tiny_data):
    """«Лимит, мин» 800: longer than a Kaggle session (the trainer's own rule for a Kaggle
    run), fine on this PC — queued for `any`, it is planned here only; for `kaggle`, refused."""
    reg, store = lab
    it = add_runs(store, cfg(tiny_data, "long", limit_min=800), target="any").items[0]
    assert list(it.refused) == ["kaggle"] and "limit_min" in it.refused["kaggle"]
    assert Planner(store, reg).timeline().row(it.id).machine == "local"
    with pytest.raises(QueueError, match="limit_min"):
        add_runs(store, cfg(tiny_data, "long", limit_min=800), target="kaggle")
    assert len(store.items()) == 1


@pytest.mark.windows  # msvcrt's byte-range lock there
def test_one_runner_at_a_time_and_a_killed_one_frees_the_queue(lab):
    reg, _ = lab
    holder = subprocess.Popen(
        [sys.executable, "-c", "import time; from app.queue.lock import RunnerLock; "
         "RunnerLock('ternit queue run').acquire(); print('held', flush=True); time.sleep(60)"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    runner = QueueRunner(RunManager(reg), "test")
    with pytest.raises(lock.RunnerBusy, match=f"{holder.pid}.*ternit queue run"):
        runner.start()
    assert lock.is_held()
    holder.kill()  # SIGKILL; TerminateProcess on Windows: no clean-up either way
    holder.wait(10)
    assert not lock.is_held()  # the OS let go with the process: no stale lock to clear
    runner.start()
    assert lock.is_held() and str(os.getpid()) in lock.holder()
    runner.close()


def test_a_start_whose_record_was_lost_is_followed_not_repeated(lab, tiny_data, monkeypatch):
    """The runner died between spawning the trainer and writing that down: the restart finds
    the trainer training the run's folder and follows it; it does not spawn a second."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    reg, store = lab
    it = add_runs(store, cfg(tiny_data, "lost"), target="local", check=no_check).items[0]
    manager = RunManager(reg)
    run_id = reg.reserve_run_id(it.name)
    assert store.claim(it.id, "local", run_id)
    rec = manager.create(run_config(store.item(it.id)), run_id=run_id)
    store.set_step(it.id, LAUNCHING)
    plan = proc.plan_launch(rec.path, "cpu")
    proc.spawn(plan, rec.path)  # what launch() does before it records the pid
    assert reg.get(run_id).status == st.CREATED
    # A runner that restarts does so long after the spawn; right after it, Linux may show the
    # new process's cmdline empty (exec has closed Popen's pipe before it sets the arguments),
    # so the test, like a real restart, begins once the trainer can be seen.
    seen_by = time.monotonic() + 60
    while trainer_process(reg.get(run_id)) is None and time.monotonic() < seen_by:
        time.sleep(0.02)

    runner = QueueRunner(RunManager(reg), "test")
    runner.start()
    assert reg.get(run_id).status in st.ACTIVE | st.ENDED
    deadline = time.monotonic() + 300  # a bound for a broken test: it waits for the run's end
    runner.drive(stop=lambda: time.monotonic() > deadline, poll_s=0.1)
    runner.close()
    done = reg.get(run_id)
    assert store.item(it.id).state == DONE and done.status == st.FINISHED, (done.last_message, store.item(it.id))
    events = [json.loads(ln) for ln in done.events_path.read_text().splitlines() if ln.strip()]
    assert [e["event"] for e in events].count("start") == 1
    spawned = [ln for ln in done.log_path.read_text().splitlines() if ln.startswith("$ ")]
    assert len(spawned) == 1, spawned  # the trainer was started once
    assert len(reg.list_runs()) == 1


def test_the_command_line_adds_lists_moves_and_says_why(lab, tiny_data, capsys):
    run_json = Path(lab[0].runs_root).parent / "run.json"
    run_json.write_text(json.dumps(cfg(tiny_data, "c")), encoding="utf-8")
    assert cli.main(["add", "--config", str(run_json), "--target", "local", "--steps", "6",
                     "--vary", "training.lr=0.001,0.003"]) == 0
    out = capsys.readouterr()
    ids = [int(line.split("\t")[0]) for line in out.out.splitlines()]
    assert len(ids) == 2 and ("серия" in out.err or "series" in out.err)
    assert cli.main(["move", str(ids[1]), "--to", "1"]) == 0
    capsys.readouterr()
    assert cli.main(["list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    rows = listed["items"]
    assert [r["id"] for r in rows] == [ids[1], ids[0]] and [r["place"] for r in rows] == [1, 2]
    assert rows[0]["machine"] == "local" and rows[0]["expected_start"] <= rows[1]["expected_start"]
    assert rows[0]["expected_end"] <= rows[1]["expected_start"] + 1  # one run at a time on this PC
    assert json.loads(Path(run_json).read_text())["training"]["steps_to"] == 4  # the file is not changed
    assert listed["runner"] == ""
    assert cli.main(["remove", "999"]) == 2
    assert "999" in capsys.readouterr().err
    assert cli.main(["pause"]) == 0 and cli.main(["hold", str(ids[0])]) == 0
    capsys.readouterr()
    assert cli.main(["list"]) == 0
    text = capsys.readouterr().out
    assert "приостановлена" in text or "paused" in text
    assert cli.main(["series", "1", "--json"]) == 0
    table = json.loads(capsys.readouterr().out)
    assert table["keys"] == ["training.lr"] and table["winner"] is None and not table["done"]


def test_the_window_hears_of_a_skip_a_retry_and_the_queue_emptying(lab, russian):
    from app.queue.driver import QueueDriver

    reg, store = lab
    a, b = (store.add(cfg(name=n)) for n in "ab")
    driver = QueueDriver(RunManager(reg))
    assert driver.news(driver.timeline()) == []  # the first look only remembers
    for it in (a, b):
        store.claim(it.id, "local", f"run-{it.name}")
        store.started(it.id)
    store.retry(a.id, cfg(name="a"), None, "Повторить с батчем 1 (один раз): …")
    store.finish(b.id, "failed", "пропущен, очередь идёт дальше: …")
    assert [title for title, _ in driver.news(driver.timeline())] == ["Очередь: a — повтор", "Очередь: b — пропущен"]
    store.claim(a.id, "local", "run-a2")
    store.started(a.id)
    store.finish(a.id, DONE)
    news = driver.news(driver.timeline())
    assert [title for title, _ in news] == ["Очередь пуста"] and "готово: 1" in news[0][1]
    assert driver.news(driver.timeline()) == []  # said once


def test_run_in_the_background_is_refused_while_another_runner_drives(lab, capsys):
    held = lock.RunnerLock("ternit queue run")
    held.acquire()
    try:
        assert cli.main(["run"]) == 2
        assert str(os.getpid()) in capsys.readouterr().err
        assert cli.main(["run", "--wait"]) == 2
    finally:
        held.release()
    assert cli.main(["run", "--wait"]) == 0  # an empty queue: nothing to drive, done


def test_a_run_stopped_before_its_start_is_not_launched_by_the_next_runner(lab, tiny_data):
    """The runner died after creating the run; meanwhile the user stopped it in the history
    (it never started). The next runner settles it as stopped, and starts nothing."""
    reg, store = lab
    it = store.add(cfg(tiny_data, "stopped"), "local")
    manager = RunManager(reg)
    run_id = reg.reserve_run_id(it.name)
    assert store.claim(it.id, "local", run_id)
    manager.create(run_config(store.item(it.id)), run_id=run_id)
    manager.stop(run_id)  # «Остановить» on a run that has not started
    runner = QueueRunner(RunManager(reg), "test")
    runner.start()
    runner.tick()
    runner.close()
    rec = reg.get(run_id)
    assert rec.status == st.STOPPED and rec.pid is None
    assert store.item(it.id).state == DONE


def test_the_timeline_has_a_row_per_machine_lanes_for_sessions_at_once_and_the_refresh(lab):
    from app.kaggle.credentials import Credential, CredentialStore
    from app.kaggle.quota import Quota
    from app.kaggle.store import KaggleStore

    reg, store = lab
    refresh = time.time() + 2 * 86400
    CredentialStore().add(Credential("alice", "k" * 32))
    KaggleStore(reg.state).set_quota("alice", Quota(30 * 3600, 10 * 3600, 0, refresh, time.time()))
    for n in "abc":
        store.add(cfg(name=n), "kaggle")
    tl = Planner(store, reg).timeline()
    assert tl.machines == ["local", "kaggle:alice"] and tl.refreshes["kaggle:alice"][0] == pytest.approx(refresh)
    bars = {b.name: b for b in tl.bars()}
    assert {(b.row, b.lane, b.lanes) for b in (bars["a"], bars["b"])} == {(1, 0, 2), (1, 1, 2)}
    assert bars["c"].start >= min(bars["a"].end, bars["b"].end) - 60  # Kaggle's two sessions: the third waits
    assert "↻" in tl.machine_text("kaggle:alice") and "↻" not in tl.machine_text("local")
