"""Faults, round 3 (issue 37): what a night can meet must not stop the queue — a state file
another process holds write-locked, a damaged queue row, the state file deleted or set aside
under a runner, an account that does not exist. Real runners (`ternit queue run --wait`),
real trainers on tiny CPU models, the lab's real SQLite, other real processes holding it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from app.base import paths
from app.queue.adding import add_runs
from app.queue.store import DONE, QueueStore
from app.runs.registry import Registry

ROOT = Path(__file__).resolve().parent.parent
DEADLINE_S = float(os.environ.get('T37', 240))  # a bound for a broken test, not a timing


def tiny(data: Path, name: str = "q") -> dict:
    return {
        "name": name,
        "model": {"context": 16, "width": 16, "heads": 2, "layers": 1, "vocab": 300},
        "training": {"batch_per_card": 2, "steps_to": 4, "limit_min": 2, "eval_every": 2, "eval_segments": 4,
                     "warmup_steps": 1, "sample_tokens": 0},
        "data": {"dir": str(data)},
        "target": {"kind": "local", "gpu": "cpu"},
    }


def _until(what, timeout: float = DEADLINE_S, every: float = 0.05, why=lambda: ""):
    """Wait for `what()` to be true (an event, bounded by `timeout` for a broken test);
    `why()`: what to show if it never is."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        time.sleep(every)
    raise AssertionError(f"never happened: {what}\n{why()}")


def _events(path: Path) -> list[dict]:
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    return [json.loads(x) for x in lines if x.strip().endswith("}")]


class Lines:
    """A process's output, read line by line in a thread (so the test can wait for one)."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.lines: list[str] = []
        self._t = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self._t.start()

    def _read(self, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def count(self, *words: str) -> int:
        return sum(1 for ln in self.lines if any(w in ln for w in words))

    def text(self) -> str:
        self._t.join(timeout=5)
        return "\n".join(self.lines)


HOLDER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=60)
conn.execute("BEGIN IMMEDIATE")
print("held", flush=True)
sys.stdin.readline()
conn.execute("ROLLBACK")
"""


def test_a_state_file_write_locked_past_the_wait_never_stops_the_runner(tiny_data):
    """Another process holds the state file's write lock (BEGIN IMMEDIATE) while the first of
    two queued runs trains and ends, for several times a command's wait (TERNIT_STATE_WAIT_S=2
    here, two minutes by default): the runner says it waits, retries with backoff, never exits;
    `ternit queue pause` meanwhile says it waits, then fails in one line naming the holder;
    once the lock goes, the first run's end is recorded and the second starts."""
    reg = Registry()
    store = QueueStore(reg.state)
    first = add_runs(store, tiny(tiny_data, "first"), target="local", check=lambda _: None).items[0]
    second = add_runs(store, tiny(tiny_data, "second"), target="local", check=lambda _: None).items[0]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TERNIT_STATE_WAIT_S": "2"}
    runner = subprocess.Popen([sys.executable, "-m", "app.cli", "queue", "run", "--wait"], cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = Lines(runner)
    holder = None
    try:
        it = _until(lambda: (x := store.item(first.id)).state == "running" and x)
        holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(paths.state_db_path())], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        assert holder.stdout.readline().strip() == "held"
        events = reg.get(it.run_id).events_path
        _until(lambda: any(e.get("event") == "end" for e in _events(events)),
               why=out.text)  # the run ended under the lock
        _until(lambda: out.count("ждёт файл состояния", "waits for the state file") >= 2)  # waited, retried
        assert runner.poll() is None, out.text()  # the runner is still there
        from app.queue import lock
        from app.queue.world import runner_line

        note = lock.current_holder()  # what the window's queue line shows meanwhile
        assert note is not None and note.pid == runner.pid and note.waiting, note
        assert note.waiting in runner_line(store, note)
        pause = subprocess.run([sys.executable, "-m", "app.cli", "queue", "pause"], cwd=ROOT, env=env,
                               capture_output=True, text=True, timeout=120)
        lines = [ln for ln in pause.stderr.splitlines() if ln.strip()]
        assert pause.returncode == 2 and "Traceback" not in pause.stderr, pause.stderr
        assert len(lines) == 2 and ("жду" in lines[0] or "waiting" in lines[0]), lines
        assert f"{holder.pid} " in lines[1] and ("держит" in lines[1] or "holds" in lines[1]), lines
        assert store.item(second.id).state == "waiting" and store.item(first.id).state == "running"
        released = time.time()
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.wait(30) == 0
        assert runner.wait(DEADLINE_S) == 0, out.text()
    finally:
        for p in (runner, holder):
            if p is not None and p.poll() is None:
                p.kill()
    a, b = store.item(first.id), store.item(second.id)
    assert (a.state, b.state) == (DONE, DONE), out.text()
    assert len(a.runs) == 1 and len(b.runs) == 1
    assert b.claimed_at > released  # the next one started after the lock went
    assert not store.paused()  # the refused pause did nothing
    assert "Traceback" not in out.text()
    assert reg.get(a.run_id).config()["name"] == "first"


READER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("SELECT count(*) FROM queue_items").fetchall()  # open, reading nothing now
print("open", flush=True)
sys.stdin.readline()
"""


def test_the_lock_line_names_the_writer_not_the_readers_that_only_have_the_file_open(monkeypatch):
    """Two processes have the state file open, one holds its write lock: the line names that
    one (Linux: /proc/locks); where the system cannot tell, it says "one of" them."""
    from app.base import state_faults

    Registry().close()
    db = str(paths.state_db_path())
    reader = subprocess.Popen([sys.executable, "-c", READER, db], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    writer = subprocess.Popen([sys.executable, "-c", HOLDER, db], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert reader.stdout.readline().strip() == "open" and writer.stdout.readline().strip() == "held"
        said = state_faults.holder_text(paths.state_db_path())
        assert f"{writer.pid} " in said and str(reader.pid) not in said, said
        monkeypatch.setattr(state_faults, "PROC_LOCKS", Path("/nonexistent/locks"))  # an OS that cannot tell
        said = state_faults.holder_text(paths.state_db_path())
        assert ("один из" in said or "one of" in said) and str(writer.pid) in said and str(reader.pid) in said, said
    finally:
        for p in (reader, writer):
            p.stdin.write("\n")
            p.stdin.flush()
            p.wait(30)


def _raw_item(store: QueueStore, config: str, state: str = "waiting", name: str = "bad") -> int:
    """A queue row written as a hand edit or a bad copy would leave it."""
    now = time.time()
    cur = store.state.execute(
        "INSERT INTO queue_items (position, name, config, target, account, state, created_at, updated_at) "
        "VALUES ((SELECT COALESCE(MAX(position), 0) + 1 FROM queue_items), ?, ?, 'local', 'auto', ?, ?, ?)",
        (name, config, state, now, now))
    return int(cur.lastrowid)


def test_a_damaged_queue_row_fails_only_itself_shown_damaged_and_removable(tiny_data, capsys):
    """Beside a good run: a stored config that is not JSON (`{not json`), one that is JSON but
    not an object (`[1]`), one whose target is a list, and a row in an unknown state. `queue
    list` lists them all (the bad ones «повреждён» with why), the runner runs the good one and
    fails each bad one alone, and `queue remove` takes each out."""
    from app.queue import cli
    from app.queue.runner import QueueRunner
    from app.runs.manager import RunManager

    reg = Registry()
    store = QueueStore(reg.state)
    bad = [_raw_item(store, "{not json"), _raw_item(store, "[1]")]
    good = add_runs(store, tiny(tiny_data, "good"), target="local", check=lambda _: None).items[0]
    listed = {**tiny(tiny_data, "listy"), "target": [1]}
    bad.append(_raw_item(store, json.dumps(listed), name="listy"))
    odd = _raw_item(store, json.dumps(tiny(tiny_data, "odd")), state="zzz", name="odd")
    capsys.readouterr()
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    assert "Traceback" not in out and out.count("повреждён") + out.count("damaged") >= 3 * 2, out
    assert cli.main(["list", "--json"]) == 0
    rows = {r["id"]: r for r in json.loads(capsys.readouterr().out)["items"]}
    assert "not JSON" in rows[bad[0]]["note"] or "не JSON" in rows[bad[0]]["note"]
    assert "zzz" in rows[odd]["note"]

    runner = QueueRunner(RunManager(reg), "test")
    runner.start()
    deadline = time.monotonic() + DEADLINE_S
    runner.drive(stop=lambda: time.monotonic() > deadline, poll_s=0.1)
    runner.close()
    assert store.item(good.id).state == DONE
    for item_id in bad:
        it = store.item(item_id)
        assert it.state == "failed" and it.damaged or it.message, it
    assert sorted(runner.failed) == sorted(bad)
    for item_id in [*bad, odd]:
        assert cli.main(["remove", str(item_id)]) == 0, capsys.readouterr().err
    assert [it.id for it in store.items()] == [good.id]


def test_a_live_runs_checkpoint_is_read_safely_while_keep_checkpoints_rotates(tmp_path, tiny_data):
    """A trainer saving at every step and keeping one checkpoint: 100 choices of its
    checkpoint (what `sample`, `export` and `eval` take) while it rotates — none calls a
    checkpoint damaged, each pinned file is the step that was chosen, and the last still
    reads whole after its own name was rotated away."""
    from app.runs.checkpoints import checkpoint_step, choose_checkpoint, pinned_choice
    from tests.trainer_run import events, start_trainer, write_run
    from trainer.state.checkpoint_index import find_damage, read_payload

    run = write_run(tmp_path / "live", tiny_data, steps_to=1_000_000, checkpoint_every_min=0, keep_checkpoints=1,
                    eval_every=1_000_000, sample_tokens=0, limit_min=5)
    proc = start_trainer(run, "--device", "cpu")
    try:
        _until(lambda: len(events(run, "checkpoint")) >= 3)
        steps = []
        for _ in range(100):
            plain = choose_checkpoint(run)
            assert plain.path is not None and plain.passed_over == [], plain
            choice = pinned_choice(run)
            assert choice.path is not None and choice.passed_over == [], choice
            assert choice.path.parent.parent.name == ".pinned"  # a second name, not the rotating one
            assert read_payload(choice.path)["step"] == checkpoint_step(choice.path)
            steps.append(checkpoint_step(choice.path))
        assert len(set(steps)) > 10, steps  # it did rotate under the reads
        last = choice.path
        _until(lambda: not (run / "checkpoints" / last.name).exists())  # its own name rotated away
        assert find_damage(last) is None and read_payload(last)["step"] == checkpoint_step(last)
        assert len(list(last.parent.parent.iterdir())) <= 3  # a process keeps its last few pins, no more
    finally:
        (run / "STOP").write_text("", encoding="utf-8")
        proc.wait(60)
        proc.end()


def test_a_runner_whose_state_file_is_set_aside_or_deleted_lets_go(tiny_data):
    """The state file renamed aside (a backup tool, a user making room), then on a second lab
    deleted, under a runner that holds the queue: at its next round the runner sees the file
    at the lab's path is not the one it drives (device and inode), starts nothing, lets the
    queue's lock go and says so; a new runner then takes the new, empty queue."""
    import shutil as sh

    from app.queue import lock
    from app.queue.runner import QueueRunner
    from app.runs.manager import RunManager

    for how in ("rename", "delete"):
        reg = Registry()
        store = QueueStore(reg.state)
        item = add_runs(store, tiny(tiny_data, how), target="local", check=lambda _: None).items[0]
        runner = QueueRunner(RunManager(reg), "test")
        heard: list = []
        runner.add_listener(heard.append)
        runner.start()
        assert lock.is_held()
        db = paths.state_db_path()
        for suffix in ("", "-wal", "-shm"):
            part = Path(str(db) + suffix)
            if part.exists():
                if how == "rename":
                    part.rename(part.with_name(part.name.replace("state", "state.aside")))
                else:
                    part.unlink()
        if how == "delete":
            Registry().close()  # the lab opened again meanwhile: a new file at the same path
        runner.tick()
        assert runner.gone and [e.kind for e in heard] == ["let_go"], heard
        assert "ternit queue run" in heard[0].text
        assert store.item(item.id).state == "waiting" and store.item(item.id).runs == []  # nothing started
        assert not lock.is_held()
        assert runner.tick() == []  # and it stays let go
        runner.close()
        reg.close()
        fresh = Registry()
        other = QueueRunner(RunManager(fresh), "the next")
        other.start()  # the new queue is free to drive
        assert QueueStore(fresh.state).items() == []
        other.close()
        fresh.close()
        sh.rmtree(paths.data_dir(), ignore_errors=True)


def test_an_unknown_kaggle_account_is_refused_at_add_and_wait_ends_when_nothing_can_start(tiny_data, capsys):
    """`queue add --account nobody` is refused naming `ternit kaggle add-account`; an item that
    still waits for an account that is not there (removed after it was queued) ends `queue
    run --wait` with a line saying why, instead of waiting forever."""
    from app.kaggle.store import KaggleStore
    from app.queue import cli

    reg = Registry()
    store = QueueStore(reg.state)
    path = Path(paths.data_dir()) / "run.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(tiny(tiny_data, "far")), encoding="utf-8")
    capsys.readouterr()
    assert cli.main(["add", "--config", str(path), "--target", "kaggle", "--account", "nobody"]) == 2
    err = capsys.readouterr().err
    assert "ternit kaggle add-account" in err and "nobody" in err and "Traceback" not in err, err
    assert store.items() == []
    KaggleStore(reg.state).ensure_account("gone")  # queued while it was there, removed after
    add_runs(store, tiny(tiny_data, "far"), target="kaggle", account="gone", check=lambda _: None)
    reg.state.execute("DELETE FROM kaggle_accounts WHERE username = 'gone'")
    reg.close()
    done = subprocess.run([sys.executable, "-m", "app.cli", "queue", "run", "--wait"], cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "gone" in done.stderr and ("негде" in done.stderr or "nowhere" in done.stderr), done.stderr


@pytest.mark.windows
def test_on_windows_an_open_state_file_cannot_be_set_aside_and_elsewhere_the_runner_lets_go():
    """What can happen to a runner's state file on each system: on Windows SQLite opens it
    without sharing deletion, so renaming (or deleting) it while the runner holds it open is
    refused by the system itself; where it succeeds (POSIX), the runner lets go at its next
    round."""
    from app.queue import lock
    from app.queue.runner import QueueRunner
    from app.runs.manager import RunManager

    reg = Registry()
    runner = QueueRunner(RunManager(reg), "test")
    runner.start()
    db = paths.state_db_path()
    try:
        os.rename(db, db.with_name("state.aside.sqlite"))
    except PermissionError:
        assert os.name == "nt"  # the system refuses it: the runner's file stays the lab's
        runner.tick()
        assert not runner.gone and lock.is_held()
    else:
        runner.tick()
        assert runner.gone and not lock.is_held()
    finally:
        runner.close()
        reg.close()
