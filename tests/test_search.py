"""The search (app/search/) for real: Optuna's study in its journal file, trials as queued
runs of the real trainer (tiny models on the CPU) driven by the queue runner, the median
pruner stopping hopeless runs through STOP, and runners SIGKILLed right after a trial was
asked and right after one was told, then restarted. The pieces around it (the space, the
retry rule, a torn journal, the stop) at their functions."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.base import run_status as st
from app.queue.runner import QueueRunner
from app.queue.store import QueueStore
from app.runs import Registry, RunManager
from app.runs.checkpoints import latest_checkpoint
from app.runs.events import read_events
from app.search import study as studies
from app.search.driver import retry_allowed
from app.search.space import SpaceError, parse_space
from app.search.store import SearchStore
from tests.test_cli_i18n import run_cli

ROOT = Path(__file__).resolve().parent.parent
DEADLINE_S = 300.0  # a bound for a broken test, not a timing: each wait is for the queue's events
LOW, HIGH = 1e-4, 0.9  # wide enough to hold clearly bad values at both ends


def tiny(data: Path, steps_to: int = 200) -> dict:
    return {"name": "lrs", "model": {"context": 16, "width": 16, "heads": 2, "layers": 1, "vocab": 300},
            "training": {"batch_per_card": 2, "steps_to": steps_to, "limit_min": 2, "eval_every": 10,
                         "eval_segments": 4, "warmup_steps": 1, "sample_tokens": 0},
            "data": {"dir": str(data)}, "target": {"kind": "local", "gpu": "cpu"}}


def add_search(tmp_path: Path, data: Path, trials: int, steps_to: int = 200) -> int:
    config = tmp_path / "run.json"
    config.write_text(json.dumps(tiny(data, steps_to)), encoding="utf-8")
    code, out, err = run_cli(["search", "add", "--config", str(config), "--space", f"lr=log:{LOW}..{HIGH}",
                              "--trials", str(trials), "--pruner", "median", "--target", "local", "--seed", "1"], "en")
    assert code == 0, err
    return int(out.strip())


def show(search_id: int) -> dict:
    code, out, err = run_cli(["search", "show", str(search_id), "--json"], "en")
    assert code == 0, err
    return json.loads(out)


def runner_killed_at(moment: str) -> str:
    """`ternit queue run --wait` in its own process, SIGKILLed by the search at `moment`."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TERNIT_SEARCH_KILL_AT": moment}
    p = subprocess.run([sys.executable, "-m", "app.cli", "queue", "run", "--wait"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=DEADLINE_S)
    assert p.returncode == -signal.SIGKILL, (moment, p.returncode, p.stdout, p.stderr)
    return p.stdout + p.stderr


def drive(reg: Registry) -> None:
    runner = QueueRunner(RunManager(reg), "test")
    runner.start()
    deadline = time.monotonic() + DEADLINE_S
    runner.drive(stop=lambda: time.monotonic() > deadline, poll_s=0.05)
    runner.close()


def test_eight_trials_pruned_killed_twice_and_reopened_by_optuna(tiny_data, tmp_path):
    search_id = add_search(tmp_path, tiny_data, 8)
    runner_killed_at("asked:1")  # trial 1 is in the study, not yet in the lab's rows
    runner_killed_at("told:2")   # trial 2 is told in the study, not yet marked told
    reg = Registry()
    try:
        drive(reg)
        view = show(search_id)
        trials = view["trials"]
        assert view["state"] == "done" and [tr["number"] for tr in trials] == list(range(8)), trials
        states = [tr["state"] for tr in trials]
        assert "pruned" in states and states.count("complete") >= 3, states
        # Each trial trained once: one queue item, one run, one start and one end in it.
        queue = QueueStore(reg.state)
        rows = SearchStore(reg.state).trials(search_id)
        for row in rows:
            it = queue.item(row.item_id)
            assert it.runs == [row.run_id], (row, it)
            events = read_events(reg.get(row.run_id).events_path)
            assert [e["event"] for e in events].count("start") == 1 and [e["event"] for e in events].count("end") == 1
        for tr in trials:
            if tr["state"] == "pruned":  # stopped through STOP, with its checkpoint
                rec = reg.get(tr["run_id"])
                assert rec.status == st.STOPPED and latest_checkpoint(rec.path) is not None
        complete = [tr for tr in trials if tr["state"] == "complete"]
        best = view["best"]
        assert LOW <= best["values"]["training.lr"] <= HIGH
        assert best["val_loss"] == min(tr["val_loss"] for tr in complete)
        assert view["history"][-1][2] == best["val_loss"]
        # Optuna itself, opening the journal the view names, sees the same trials.
        import optuna
        from optuna.storages import JournalStorage
        from optuna.storages.journal import JournalFileBackend

        path = view["storage"].removeprefix("journal:")
        study = optuna.load_study(study_name=view["study_name"], storage=JournalStorage(JournalFileBackend(path)))
        names = {"COMPLETE": "complete", "PRUNED": "pruned", "FAIL": "failed"}
        assert [(ft.number, names[ft.state.name]) for ft in study.trials] == [(tr["number"], tr["state"]) for tr in trials]
        assert study.best_trial.number == best["number"] and study.best_value == best["val_loss"]
    finally:
        reg.close()
    # The law over these real runs: one size, so not enough, and the ladder that would measure it.
    code, out, err = run_cli(["law", "--json", "--hours", "2"], "en")
    assert code == 0, err
    law = json.loads(out)
    assert law["enough"] is False and law["runs"] >= 1 and len(law["ladder"]["runs"]) == 6


def test_stopping_a_search_stops_its_running_trial_and_drops_its_waiting_one(tiny_data, tmp_path):
    search_id = add_search(tmp_path, tiny_data, 3, steps_to=4000)  # long enough to be stopped midway
    reg = Registry()
    try:
        runner = QueueRunner(RunManager(reg), "test")
        runner.start()
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:  # until trial 0 trains and trial 1 waits for the card
            runner.tick()
            trials = show(search_id)["trials"]
            if [tr["state"] for tr in trials] == ["running", "waiting"] and \
                    any(e["event"] == "step" for e in read_events(reg.get(trials[0]["run_id"]).events_path)):
                break
            time.sleep(0.05)
        code, out, err = run_cli(["search", "stop", str(search_id)], "en")
        assert code == 0 and "stopping" in out, err
        runner.drive(stop=lambda: time.monotonic() > deadline, poll_s=0.05)
        runner.close()
        view = show(search_id)
        assert view["state"] == "stopped"
        assert [tr["state"] for tr in view["trials"]] == ["pruned", "failed"], view["trials"]
        rec = reg.get(view["trials"][0]["run_id"])
        assert rec.status == st.STOPPED and latest_checkpoint(rec.path) is not None
        assert QueueStore(reg.state).pending() == []
        code, out, _ = run_cli(["search", "list", "--json"], "en")
        assert json.loads(out) == [{"id": search_id, "name": "lrs", "trials": 2, "of": 3, "state": "stopped"}]
    finally:
        reg.close()


def test_the_space():
    lr, steps, width, key = parse_space(["lr=log:1e-4..0.1", "warmup_steps=10..200", "width=128,256",
                                         "training.weight_decay=0..0.3"])
    assert (lr.key, lr.kind, lr.low, lr.high, lr.whole) == ("training.lr", "log", 1e-4, 0.1, False)
    assert (steps.key, steps.whole) == ("training.warmup_steps", True) and width.choices == (128, 256)
    assert (key.key, key.kind, key.whole) == ("training.weight_decay", "range", False)
    for bad in (["lr=log:0..1"], ["lr=1..0.1"], ["nosuch=1..2"], ["lr=0.1"], ["lr"], [], ["lr=1..2"] * 2,
                ["lr=1..2", "warmup_steps=1..2", "width=1,2", "layers=1,2", "heads=1,2"]):
        with pytest.raises(SpaceError):
            parse_space(bad)


def test_a_trial_is_never_retried_with_a_searched_field_changed():
    reg = Registry()
    try:
        store = SearchStore(reg.state)
        [dim] = parse_space(["lr=log:1e-4..0.1"])
        search = store.add(name="s", journal_for=lambda i: (f"searches/{i}.journal", f"s{i}"), config={},
                           space=[dim], trials=2, budget_hours=None, pruner="median", target="any",
                           account="auto", seed=0)
        store.add_trial(search.id, 0, {"training.lr": 0.01})
        store.set_trial(search.id, 0, item_id=41)
        same = {"training": {"lr": 0.01, "batch_per_card": 3}, "resume_from": "ckpt"}  # halved batch, continued
        assert retry_allowed(store, 41, same)
        assert not retry_allowed(store, 41, {"training": {"lr": 0.001}})  # the NaN retry lowers lr
        assert retry_allowed(store, 42, {"training": {"lr": 0.001}})  # no trial: the queue's own rule
    finally:
        reg.close()


def test_a_torn_journal_line_is_cut_before_the_writer_appends(tmp_path):
    path = tmp_path / "s.journal"
    studies.create_study(path, "s")
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"op_code": 4, "worker_id": "x", "study_id"')  # a power cut mid-append
    study, _ = studies.load_study(path, "s", repair=True)
    assert path.read_bytes() == whole
    study.ask()
    study.ask()  # a second line after the cut: Optuna reads the file whole again
    assert len(studies.load_study(path, "s")[0].trials) == 2


def test_a_trial_removed_by_hand_fails_and_the_budget_ends_the_search(tiny_data, russian):
    """The driver over the real queue tables, a trial's run played by hand: its item removed
    from the queue → failed; a run that took 10 s against a budget of 3.6 s → no trial more."""
    from app.queue.store import DONE
    from app.queue.trials import Trials
    from app.search.adding import create_search

    reg = Registry()
    try:
        queue = QueueStore(reg.state)
        searches = SearchStore(reg.state)
        search = create_search(searches, tiny(tiny_data), parse_space([f"lr=log:{LOW}..{HIGH}"]), 5,
                               budget_hours=0.001, target="local", seed=2)
        trials = Trials(queue, RunManager(reg))
        trials.tick()
        [first] = searches.trials(search.id)
        assert first.state == "waiting" and queue.item(first.item_id).state == "waiting"
        trials.tick()  # it still waits for a slot: nothing more is asked
        assert len(searches.trials(search.id)) == 1
        queue.remove(first.item_id)
        trials.tick()
        first, second = searches.trials(search.id)
        assert (first.state, first.told, first.message) == ("failed", True, "убран из очереди")
        # The second trial trains (played by hand: a finished run of 10 s with its evaluation).
        rec = reg.create_run(queue.item(second.item_id).config, run_id="played")
        rec.events_path.write_text(json.dumps({"event": "eval", "time": 1.0, "step": 200, "val_loss": 4.2,
                                               "val_ci95": [4.1, 4.3]}) + "\n", encoding="utf-8")
        now = time.time()
        reg.update(rec.id, status=st.FINISHED, started_at=now - 10, ended_at=now)
        assert queue.claim(second.item_id, "local", rec.id)
        queue.started(second.item_id)
        queue.finish(second.item_id, DONE, "finished")
        trials.tick()
        second = searches.trials(search.id)[1]
        assert (second.state, second.val_loss, second.val_low) == ("complete", 4.2, 4.1)
        assert len(searches.trials(search.id)) == 2 and searches.search(search.id).state == "done"
        assert not trials.retry_allowed(second.item_id, {"training": {"lr": second.params["training.lr"] / 10}})
    finally:
        reg.close()


@pytest.mark.parametrize("kind", ["halving", "median"])
def test_each_pruner_stops_a_hopeless_trial_from_the_stored_reports(tmp_path, kind):
    """The driver, on each tick, reports a running trial's new evaluations by its number into
    the journal and asks the search's pruner with the stored trial (app/search/driver.py
    `_report`, `_running`); the same calls here, for each pruner a user can choose. Successive
    halving keeps its rungs in the stored trials' attributes, written by those calls, so it
    works only because the driver asks it on every tick, and the same after a restart: the
    later trials load the study afresh. A trial far worse than the finished ones is pruned,
    one as good as the best is not. Eval steps as the trainer's (eval_every 10, 200 steps)."""
    from optuna.trial import TrialState

    path = tmp_path / "s.journal"
    studies.create_study(path, "s")
    steps = list(range(10, 210, 10))

    def run(curve: list[float]) -> tuple[int, bool]:
        """(the trial's number, whether it was pruned), asked and followed as the driver does."""
        study, storage = studies.load_study(path, "s", pruner=kind)  # each trial: a runner's restart
        study_id = storage.get_study_id_from_name("s")
        number = study.ask().number
        trial_id = storage.get_trial_id_from_study_id_trial_number(study_id, number)
        for step, value in zip(steps, curve, strict=False):
            storage.set_trial_intermediate_value(trial_id, step, value)
            if study.pruner.prune(study, storage.get_trial(trial_id)):
                study.tell(number, state=TrialState.PRUNED)
                return number, True
        study.tell(number, curve[-1])
        return number, False

    for final in (3.6, 3.5, 3.4, 3.3, 3.2):  # each better than the last: none is pruned
        assert run([final + 2.0 / (i + 1) for i in range(len(steps))])[1] is False
    _, pruned = run([9.0] * len(steps))  # far above every other trial from its first evaluation
    assert pruned
    _, pruned = run([2.9 + 2.0 / (i + 1) for i in range(len(steps))])  # better than the best
    assert not pruned
    states = [tr.state for tr in studies.load_study(path, "s")[0].trials]
    assert states.count(TrialState.PRUNED) == 1 and states.count(TrialState.COMPLETE) == 6
