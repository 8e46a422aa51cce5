"""app.runs without the trainer: registry, event tail, series, failures, continuation,
crash settling, launch plans. (The real trainer runs in test_runs_local.py.)"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.base import run_status as status
from app.base.i18n import set_language
from app.runs import EventTail, Registry, RunManager, RunNotFound
from app.runs.continuing import ContinueError
from app.runs.failure import failure_from_events
from app.runs.files import new_run_id
from app.runs.process import plan_launch, visible_gpu_count
from app.runs.series import DATA_CHANGED, LEG, PAUSE, run_series

CFG = {
    "name": "demo-27m",
    "model": {"context": 32, "width": 32, "heads": 2, "layers": 2, "vocab": 300},
    "training": {"batch_per_card": 4, "steps_to": 30, "lr": 0.001},
    "data": {"dir": "/nowhere", "constellations": ["tiny"]},
    "target": {"kind": "local", "gpu": "cpu", "account": "auto"},
    "resume_from": None,
}


def write_events(path: Path, events: list[dict], partial: str = "") -> None:
    with open(path, "a", encoding="utf-8") as f:
        for ev in events:
            f.write(json.dumps(ev) + "\n")
        f.write(partial)


def ev(event: str, step: int, **fields) -> dict:
    return {"event": event, "time": 1.0 + step, "step": step, **fields}


def steps(a: int, b: int, tps: int = 128, loss: float = 5.0) -> list[dict]:
    return [ev("step", s, loss=loss - s / 100, tokens_seen=s * tps) for s in range(a, b + 1)]


def start(step: int = 0, data_id: str = "d1", **extra) -> dict:
    return ev("start", step, params=35200, config=CFG, tokens_per_step=128, data_id=data_id, **extra)


# ---- EventTail ---------------------------------------------------------------------------
def test_event_tail_returns_only_complete_lines_and_keeps_its_offset(tmp_path):
    path = tmp_path / "events.jsonl"
    tail = EventTail(path)
    assert tail.read() == []  # no file yet
    write_events(path, [ev("start", 0), ev("step", 1, loss=5.0)], partial='{"event": "step", "ti')
    got = tail.read()
    assert [e["event"] for e in got] == ["start", "step"]
    assert tail.read() == []  # the half line waits
    with open(path, "a") as f:
        f.write('me": 3, "step": 2, "loss": 4.5}\nnot json\n')
    got = tail.read()
    assert [(e["event"], e["step"]) for e in got] == [("step", 2)]
    assert tail.bad_lines == 1
    # A new tail from the saved offset reads nothing old; a replaced (shorter) file restarts.
    assert EventTail(path, tail.offset).read() == []
    path.write_text(json.dumps(ev("start", 0)) + "\n")
    assert [e["event"] for e in tail.read()] == ["start"]


# ---- registry ----------------------------------------------------------------------------
def test_run_ids_are_sortable_readable_and_unique(tmp_path):
    now = time.mktime((2026, 11, 29, 23, 41, 0, 0, 0, -1))
    a = new_run_id("Demo 27M", tmp_path, now)
    b = new_run_id("Demo 27M", tmp_path, now)
    c = new_run_id("Кот/пёс", tmp_path, now + 60)
    assert a == "20261129-2341-demo-27m" and b == "20261129-2341-demo-27m-2"
    assert c == "20261129-2342-кот-пёс"
    assert sorted([c, b, a]) == [a, b, c]


def test_registry_creates_folders_rows_and_legs_that_survive_reopening(tmp_path):
    reg = Registry()
    rec = reg.create_run(CFG)
    assert rec.status == status.CREATED and rec.leg == 1 and rec.chain_id == rec.id
    assert json.loads(rec.run_json_path.read_text()) == CFG
    assert rec.checkpoints_dir.is_dir() and rec.outputs_dir.is_dir()
    assert not list(rec.path.glob(".*tmp"))  # the atomic write left no temp file
    leg = reg.create_leg(rec.id, {**CFG, "target": {"kind": "kaggle", "account": "bob"}}, status=status.UPLOADING)
    assert (leg.parent_id, leg.chain_id, leg.leg, leg.target_kind, leg.target_account) == (
        rec.id, rec.id, 2, "kaggle", "bob")
    reg.set_kernel_ref(leg.id, "bob/ternit-run")
    reg.set_status(leg.id, status.RUNNING_KAGGLE, "kernel running")
    with pytest.raises(ValueError):
        reg.set_status(leg.id, "bogus")
    with pytest.raises(ValueError):
        reg.update(leg.id, no_such_column=1)
    reg.close()

    reg2 = Registry()  # "restart": a new object over the same SQLite file
    again = reg2.get(leg.id)
    assert (again.kaggle_kernel_ref, again.status, again.last_message) == ("bob/ternit-run", "running_kaggle", "kernel running")
    assert [r.id for r in reg2.lineage(leg.id)] == [rec.id, leg.id]
    assert [r.id for r in reg2.chain(rec.id)] == [rec.id, leg.id]
    assert [r.id for r in reg2.list_runs()] == [leg.id, rec.id]
    assert reg2.find(rec.id[:-2] + rec.id[-2:]).id == rec.id
    assert {r.id for r in reg2.active()} == {leg.id}
    with pytest.raises(RunNotFound):
        reg2.get("nope")
    with pytest.raises(LookupError):
        reg2.find("demo")  # two runs match
    reg2.close()


def test_ingest_folds_events_into_the_row_incrementally():
    reg = Registry()
    rec = reg.create_run(CFG)
    reg.update(rec.id, status=status.STARTING)
    write_events(rec.events_path, [start(), *steps(1, 10), ev("eval", 10, val_loss=5.2, val_ci95=[5.1, 5.3])])
    got = reg.ingest(rec.id)
    assert len(got) == 12
    row = reg.get(rec.id)
    assert (row.status, row.last_step, row.tokens_seen, row.params, row.best_val_loss, row.steps_to) == (
        "running", 10, 1280, 35200, 5.2, 30)
    assert reg.ingest(rec.id) == []
    write_events(rec.events_path, [*steps(11, 20), ev("eval", 20, val_loss=5.4, val_ci95=[5.3, 5.5]),
                                   ev("end", 20, reason="time_limit", message="stopped by the time limit at step 20")])
    assert len(reg.ingest(rec.id)) == 12
    row = reg.get(rec.id)
    assert (row.status, row.last_step, row.best_val_loss, row.end_reason) == ("time_limit", 20, 5.2, "time_limit")
    # Kaggle rows keep the status their runner sets; only the figures follow the events.
    k = reg.create_run({**CFG, "target": {"kind": "kaggle"}}, status=status.RUNNING_KAGGLE)
    write_events(k.events_path, [start(), *steps(1, 3), ev("end", 3, reason="steps_reached", message="x")])
    reg.ingest(k.id)
    assert (reg.get(k.id).status, reg.get(k.id).last_step) == ("running_kaggle", 3)


# ---- crash settling and re-attach --------------------------------------------------------
def dead_pid() -> tuple[int, float]:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid, time.time() - 5


def test_a_vanished_trainer_is_settled_from_its_end_event_or_marked_failed():
    reg = Registry()
    ended, vanished = reg.create_run(CFG), reg.create_run(CFG)
    for rec in (ended, vanished):
        pid, t0 = dead_pid()
        reg.update(rec.id, status=status.RUNNING, pid=pid, pid_started_at=t0)
    write_events(ended.events_path, [start(), *steps(1, 5), ev("end", 5, reason="stopped", message="stopped on request")])
    write_events(vanished.events_path, [start(), *steps(1, 7)], partial='{"event": "st')
    (vanished.log_path).write_text("parameters: 35,200\nKilled\n")
    reg.close()

    heard = []
    m = RunManager(Registry())  # the lab restarts: re-attach settles both
    m.add_listener(heard.append)
    assert m.registry.get(ended.id).status == "stopped"
    v = m.registry.get(vanished.id)
    assert v.status == "failed" and v.last_step == 7
    assert v.last_message.startswith("the trainer process disappeared") and "Killed" in v.last_message
    f = m.failure(vanished.id)
    assert f.kind == "vanished" and f.retry_label("en") == "Retry"
    assert m.poll() == [] and heard == []  # nothing active any more


def test_a_live_process_is_followed_again_and_listeners_hear_its_end(tmp_path):
    reg = Registry()
    rec = reg.create_run(CFG)
    # A real process standing in for a trainer that outlived the window: it waits for a file.
    gate = tmp_path / "go"
    p = subprocess.Popen([sys.executable, "-c", f"import os,time\nwhile not os.path.exists({str(gate)!r}): time.sleep(0.02)"])
    from app.runs.process import process_start_time

    reg.update(rec.id, status=status.RUNNING, pid=p.pid, pid_started_at=process_start_time(p.pid))
    write_events(rec.events_path, [start(), *steps(1, 3)])
    heard = []
    m = RunManager(Registry())
    m.add_listener(heard.append)
    assert m.registry.get(rec.id).status == "running" and m.registry.get(rec.id).last_step == 3
    write_events(rec.events_path, [*steps(4, 6), ev("end", 6, reason="steps_reached", message="reached step 6")])
    gate.touch()
    p.wait()
    updates = m.poll()
    assert [(u.run.id, u.run.status, len(u.events), u.status_changed) for u in updates] == [(rec.id, "finished", 4, True)]
    assert len(heard) == 1 and heard[0].status == "finished"
    set_language("en")
    try:
        assert heard[0].title() == "demo-27m: finished" and "Step 6/30" in heard[0].text()
    finally:
        set_language(None)


# ---- failures ----------------------------------------------------------------------------
def test_failures_carry_advice_and_a_retry_config():
    set_language("en")
    try:
        oom = failure_from_events(
            [ev("error", 0, kind="oom", message="out of memory at step 1: CUDA out of memory", advice="lower",
                checkpoint=None, suggested_batch=2)], CFG)
        assert (oom.kind, oom.batch, oom.suggested_batch) == ("oom", 4, 2)
        assert "from 4 to 2" in oom.advice and oom.retry_label() == "Retry with batch 2"
        retry = oom.retry_config(CFG)
        assert retry["training"]["batch_per_card"] == 2 and retry["resume_from"] is None and CFG["training"]["batch_per_card"] == 4
        nan = failure_from_events(
            [ev("error", 12, kind="nan", message="the loss became nan at step 12", advice="x", checkpoint="/r/c/step-00000010.pt")], CFG)
        assert nan.suggested_lr == pytest.approx(0.00033) and nan.retry_config(CFG)["resume_from"] == "/r/c/step-00000010.pt"
        data = failure_from_events(
            [ev("error", 0, kind="data", message="/data/x lacks train.bin: prepare the data again", advice="x")], CFG)
        assert data.file == "/data/x" and data.retry_label() is None and "/data/x" in data.advice
        bad_config = failure_from_events([ev("error", 0, kind="other", message="model.width 30 does not divide by model.heads 4")])
        assert not bad_config.can_retry and bad_config.retry_label() is None and "did not start" in bad_config.advice
        crashed = failure_from_events([start(), *steps(1, 3), ev("error", 3, kind="other", message="RuntimeError: x")])
        assert crashed.retry_label() == "Retry" and "trainer.log" in crashed.advice
    finally:
        set_language(None)
    ru = failure_from_events([ev("error", 0, kind="oom", message="oom", advice="", suggested_batch=2)], CFG)
    assert ru.retry_label() == "Повторить с батчем 2" and "Батч на карту" in ru.advice
    # An unexpected error: the trainer's English advice does not leak into the Russian text.
    ru_crash = failure_from_events([start(), *steps(1, 3), ev("error", 3, kind="other", message="RuntimeError: x",
                                                               advice="see trainer.log for the traceback")])
    assert "trainer.log" in ru_crash.advice and "see " not in ru_crash.advice


@pytest.mark.parametrize("lang", ["ru", "en"])
def test_oom_at_batch_1_names_what_the_economical_level_can_still_give(lang):
    set_language(lang)
    try:
        advice = {}
        for value in (False, True, "off", "selective", "full"):
            cfg = {**CFG, "training": {**CFG["training"], "batch_per_card": 1, "economical": value}}
            f = failure_from_events([ev("error", 0, kind="oom", message="CUDA out of memory", advice="")], cfg)
            assert f.suggested_batch is None and not f.can_retry
            advice[value] = f.advice
    finally:
        set_language(None)
    ru = lang == "ru"
    turn_on = "включите пересчёт активаций" if ru else "turn on activation recompute"
    go_full = "выберите полный пересчёт активаций" if ru else "choose the full activation recompute"
    assert turn_on in advice[False] and advice[False] == advice["off"]
    assert go_full in advice[True] and advice[True] == advice["selective"]  # true is the selective level
    assert "пересчёт" not in advice["full"] and "recompute" not in advice["full"]
    assert advice["full"].endswith(".") and ("размер модели" if ru else "model size") in advice["full"]


@pytest.mark.parametrize("lang", ["ru", "en"])
def test_oom_above_batch_1_offers_the_next_economical_level_beside_a_smaller_batch(lang):
    set_language(lang)
    try:
        advice = {}
        for value in ("off", "selective", "full"):
            cfg = {**CFG, "training": {**CFG["training"], "batch_per_card": 4, "economical": value}}
            f = failure_from_events([ev("error", 0, kind="oom", message="oom", suggested_batch=2)], cfg)
            assert f.suggested_batch == 2 and f.retry_config(cfg)["training"]["batch_per_card"] == 2
            advice[value] = f.advice
    finally:
        set_language(None)
    ru = lang == "ru"
    assert ("с 4 до 2" if ru else "from 4 to 2") in advice["off"]
    assert ("включите пересчёт активаций" if ru else "turn on activation recompute") in advice["off"]
    assert ("выберите полный пересчёт" if ru else "choose the full activation recompute") in advice["selective"]
    assert ("пересчёт" if ru else "recompute") not in advice["full"]


# ---- series ------------------------------------------------------------------------------
def test_series_joins_a_chain_and_marks_data_changes_pauses_and_redone_steps():
    reg = Registry()
    parent = reg.create_run(CFG)
    write_events(parent.events_path, [
        start(), *steps(1, 10), ev("eval", 10, val_loss=5.0, val_ci95=[4.9, 5.1]),
        ev("pause", 10, seconds=3.5), *steps(11, 14),
        # resumed in place from the step-12 checkpoint: 13 and 14 are redone
        start(12), *steps(13, 20), ev("eval", 20, val_loss=4.8, val_ci95=[4.7, 4.9]),
    ])
    child = reg.create_leg(parent.id, {**CFG, "resume_from": "x"})
    write_events(child.events_path, [start(20, data_id="d2", data_changed=True), *steps(21, 30),
                                     ev("eval", 30, val_loss=5.5, val_ci95=[5.4, 5.6])])
    s = run_series(reg.lineage(child.id))
    assert s.steps == list(range(1, 31)) and s.tokens == [i * 128 for i in range(1, 31)]
    assert s.eval_steps == [10, 20, 30] and s.eval_segment == [0, 0, 1]
    assert (s.val_low[0], s.val_high[2]) == (4.9, 5.6)
    kinds = [(m.kind, m.step) for m in s.markers]
    assert kinds == [(PAUSE, 10), (LEG, 20), (DATA_CHANGED, 20)]
    assert s.run_ids == [parent.id, child.id]
    only_child = RunManager(reg).series(child.id, with_parents=False)
    assert only_child.steps[0] == 21 and only_child.markers == []


# ---- continuing --------------------------------------------------------------------------
def test_continue_config_takes_the_checkpoint_and_locks_the_model(tiny_data):
    reg = Registry()
    m = RunManager(reg)
    cfg = {**CFG, "data": {"dir": str(tiny_data), "constellations": ["tiny"]}}
    parent = reg.create_run(cfg)
    with pytest.raises(ContinueError):
        m.continue_config(parent.id)
    ck = parent.checkpoints_dir / "step-00000030.pt"
    import torch

    torch.save({"format": 1, "step": 30, "run_id": parent.id}, ck)  # what a payload says, without weights
    (parent.checkpoints_dir / "latest").write_text("step-00000030.pt\n")
    meta = json.loads((tiny_data / "meta.json").read_text())
    write_events(parent.events_path, [start(data_id=meta["data_id"]) | {"config": cfg}, *steps(1, 30),
                                      ev("end", 30, reason="steps_reached", message="done")])
    new = m.continue_config(parent.id)
    assert new["resume_from"] == str(ck.resolve()) and new["model"] == CFG["model"]
    assert new["training"]["steps_to"] == 60  # the parent had reached its 30
    assert m.continue_config(parent.id, steps_to=45)["training"]["steps_to"] == 45
    with pytest.raises(ContinueError):
        m.continue_config(parent.id, steps_to=30)
    check = m.check_continue(parent.id, new)
    assert (check.start_step, check.validation_anew, check.model_changed, check.warning) == (30, False, False, None)
    other = {**new, "data": {"dir": str(tiny_data), "constellations": ["tiny", "more"]}}
    assert m.check_continue(parent.id, other).validation_anew
    bigger = {**new, "model": {**new["model"], "layers": 4}}
    assert m.check_continue(parent.id, bigger).model_changed
    with pytest.raises(ContinueError):
        m.start_continue(parent.id, bigger)
    reg.ingest(parent.id)
    rows = m.history(lang="en")
    assert rows[0].can_continue and rows[0].where == "this PC · CPU" and rows[0].steps == "30 / 30"


# ---- launching ---------------------------------------------------------------------------
def test_launch_plans_pick_cpu_one_gpu_or_torchrun(tmp_path, monkeypatch):
    p = plan_launch(tmp_path, "cpu")
    assert p.argv[1:] == ["-m", "trainer", "--run", str(tmp_path), "--device", "cpu"] and p.env == {"CUDA_VISIBLE_DEVICES": ""}
    p = plan_launch(tmp_path, "auto", gpu_count=2, resume="latest")
    assert p.argv[1:8] == ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "-m", "--", "trainer"]
    # torchrun's own parser accepts this line (the test may import torch; the app never does).
    from torch.distributed.run import get_args_parser

    parsed = get_args_parser().parse_args(p.argv[3:])
    assert (parsed.module, parsed.training_script, parsed.training_script_args[:2]) == (True, "trainer", ["--run", str(tmp_path)])
    assert p.argv[-4:] == ["--resume", "latest", "--device", "cuda"] and p.processes == 2
    p = plan_launch(tmp_path, "1")
    assert p.env == {"CUDA_VISIBLE_DEVICES": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"} and "torch.distributed.run" not in p.argv
    assert plan_launch(tmp_path, "auto", gpu_count=0).device == "auto"
    with pytest.raises(ValueError):
        plan_launch(tmp_path, "gpu0")
    from bench.fake_nvml import FakeCard, pc_with_cards

    pc_with_cards(monkeypatch, [FakeCard(uuid=f"GPU-{i}") for i in range(3)])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,-1,2")
    assert visible_gpu_count() == 2
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert visible_gpu_count() == 0


def test_status_labels_exist_in_both_languages():
    for s in status.STATUSES:
        assert status.label(s, "ru") and status.label(s, "en")
    assert status.label("stopping", "ru") == "сохранение…"


def test_a_builder_over_a_loaded_series_carries_on_with_live_events():
    reg = Registry()
    parent = reg.create_run(CFG)
    write_events(parent.events_path, [start(), *steps(1, 10)])
    child = reg.create_leg(parent.id, CFG)
    write_events(child.events_path, [start(10, data_id="d2"), *steps(11, 12), ev("eval", 12, val_loss=5.0, val_ci95=[4.9, 5.1])])
    from app.runs.series import SeriesBuilder

    b = SeriesBuilder(run_series(reg.lineage(child.id)))
    b.begin_run(parent.id)  # switching back and forth between followed runs adds nothing
    b.begin_run(child.id)
    for e in [*steps(13, 14), ev("eval", 14, val_loss=4.9, val_ci95=[4.8, 5.0])]:
        b.add(e)
    s = b.series
    assert s.steps == list(range(1, 15)) and s.eval_segment == [1, 1] and s.eval_tokens == [12 * 128, 14 * 128]
    assert [(m.kind, m.step) for m in s.markers] == [(LEG, 10), (DATA_CHANGED, 10)]


def test_poll_reports_a_run_that_another_process_ended():
    reg = Registry()
    k = reg.create_run({**CFG, "target": {"kind": "kaggle", "account": "alice"}}, status=status.QUEUED)
    heard = []
    m = RunManager(reg)
    m.add_listener(heard.append)
    assert [u.run.id for u in m.poll(kaggle=False)] == [k.id]
    other = Registry()  # e.g. the Kaggle runner, or `ternit run wait` in a terminal
    other.set_status(k.id, status.TIME_LIMIT, "quota ran out")
    other.close()
    updates = m.poll(kaggle=False)
    assert [(u.run.status, u.status_changed) for u in updates] == [("time_limit", True)]
    assert [h.run.id for h in heard] == [k.id]
    assert m.poll(kaggle=False) == []
    rows = m.history(lang="en")
    assert rows[0].where == "Kaggle · alice" and rows[0].status_label == "stopped by limit"


def test_latest_checkpoint_prefers_the_pointer_and_finds_downloaded_outputs(tmp_path):
    from app.runs.checkpoints import latest_checkpoint

    assert latest_checkpoint(tmp_path) is None
    out = tmp_path / "outputs" / "working" / "run" / "checkpoints"
    out.mkdir(parents=True)
    for n in (10, 20):
        (out / f"step-{n:08d}.pt").write_bytes(b"x")
    (out / ".step-00000030.pt.tmp").write_bytes(b"half")
    assert latest_checkpoint(tmp_path).name == "step-00000020.pt"
    own = tmp_path / "checkpoints"
    own.mkdir()
    for n in (5, 7):
        (own / f"step-{n:08d}.pt").write_bytes(b"x")
    (own / "latest").write_text("step-00000005.pt\n")
    assert latest_checkpoint(tmp_path).name == "step-00000005.pt"


def test_wait_follows_a_kaggle_chain_into_its_next_leg():
    reg = Registry()
    kcfg = {**CFG, "target": {"kind": "kaggle", "account": "auto"}}
    first = reg.create_run(kcfg, status=status.RUNNING_KAGGLE)
    reg.update(first.id, started_at=first.created_at)
    write_events(first.events_path, [start(), *steps(1, 5), ev("end", 5, reason="time_limit", message="limit")])
    second = reg.create_leg(first.id, {**kcfg, "resume_from": "/x/step-00000005.pt"}, status=status.RUNNING_KAGGLE)
    write_events(second.events_path, [start(5), *steps(6, 9), ev("end", 9, reason="steps_reached", message="done")])
    reg.set_status(first.id, status.TIME_LIMIT, "limit. Continuing on Kaggle: leg 2")
    reg.set_status(second.id, status.FINISHED, "reached step 9")
    m = RunManager(reg)
    final = m.wait(first.id, poll_s=0.01, timeout=60)  # settled already: returns at once
    assert (final.id, final.status, final.leg) == (second.id, "finished", 2)
    assert m.wait(first.id, follow_chain=False, timeout=60).id == first.id


def test_stop_falls_back_to_sigterm_when_the_stop_file_is_not_heeded(tmp_path):
    reg = Registry()
    rec = reg.create_run(CFG)
    # A real process that, like the trainer, saves and writes `end` on SIGTERM — but never
    # looks at the STOP file (a step that takes very long).
    script = (
        "import json, signal, sys, time\n"
        f"path = {str(rec.events_path)!r}\n"
        "def bye(*a):\n"
        "    open(path, 'a').write(json.dumps({'event': 'end', 'time': time.time(), 'step': 3,"
        " 'reason': 'stopped', 'message': 'stopped on request at step 3'}) + '\\n')\n"
        "    sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, bye)\n"
        "open(path, 'a').write(json.dumps({'event': 'start', 'time': time.time(), 'step': 0}) + '\\n')\n"
        "while True: time.sleep(0.05)\n"
    )
    from app.runs import process as proc

    plan = proc.LaunchPlan([sys.executable, "-c", script])
    pid, started = proc.spawn(plan, rec.path)
    reg.update(rec.id, status=status.STARTING, pid=pid, pid_started_at=started)
    m = RunManager(reg, stop_grace_s=0.3)
    assert m.stop(rec.id).status == "stopping" and (rec.path / "STOP").exists()
    final = m.wait(rec.id, poll_s=0.05, timeout=30)
    assert (final.status, final.end_reason) == ("stopped", "stopped")
    # `end` is written from the handler just before the process exits: wait (bounded) for
    # the exit itself rather than assume it has happened by the time the event is read.
    deadline = time.monotonic() + 30
    while proc.is_alive(pid, started) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not proc.is_alive(pid, started)


def test_a_long_backlog_is_ingested_thinned_to_its_last_step():
    reg = Registry()
    rec = reg.create_run(CFG)
    reg.update(rec.id, status=status.RUNNING)
    write_events(rec.events_path, [start(), *steps(1, 3000), ev("eval", 3000, val_loss=4.0, val_ci95=[3.9, 4.1]),
                                   *steps(3001, 3005)])
    got = reg.ingest(rec.id)
    assert [(e["event"], e["step"]) for e in got] == [("start", 0), ("eval", 3000), ("step", 3005)]
    row = reg.get(rec.id)
    assert (row.last_step, row.tokens_seen, row.best_val_loss) == (3005, 3005 * 128, 4.0)


def test_the_runs_core_never_imports_torch():
    code = ("import sys, app.runs, app.runs.cli, app.runs.export_cli; "
            "bad = [m for m in ('torch', 'PySide6', 'kaggle') if m in sys.modules]; print(bad); sys.exit(bool(bad))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(__file__).parent.parent)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_lost_state_file_is_rebuilt_from_the_run_folders(tmp_path):
    from app.base import paths

    reg = Registry()
    parent = reg.create_run(CFG)
    write_events(parent.events_path, [start(), *steps(1, 10), ev("eval", 10, val_loss=5.1, val_ci95=[5, 5.2]),
                                      ev("end", 10, reason="time_limit", message="limit")])
    ck = parent.checkpoints_dir / "step-00000010.pt"
    ck.write_bytes(b"x")
    child = reg.create_leg(parent.id, {**CFG, "resume_from": str(ck)})
    pid, _ = dead_pid()
    write_events(child.events_path, [start(10) | {"pid": pid, "time": time.time()}, *steps(11, 12)])
    live = reg.create_run(CFG)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    write_events(live.events_path, [start() | {"pid": sleeper.pid, "time": time.time() + 1}, *steps(1, 2)])
    never = reg.create_run(CFG)
    kaggle = reg.create_run({**CFG, "target": {"kind": "kaggle", "account": "bob"}})
    write_events(kaggle.events_path, [start(), *steps(1, 4), ev("end", 4, reason="steps_reached", message="ok")])
    reg.close()
    for suffix in ("", "-wal", "-shm"):  # the state is lost (or moved aside as damaged)
        Path(str(paths.state_db_path()) + suffix).unlink(missing_ok=True)

    try:
        m = RunManager(Registry())
        got = {r.id: r for r in m.registry.list_runs()}
        assert {r.id for r in m.adopted} == set(got) == {parent.id, child.id, live.id, never.id, kaggle.id}
        assert (got[parent.id].status, got[parent.id].best_val_loss, got[parent.id].last_step) == ("time_limit", 5.1, 10)
        c = got[child.id]
        assert (c.parent_id, c.chain_id, c.leg, c.status, c.end_reason) == (parent.id, parent.id, 2, "failed", "vanished")
        assert (got[live.id].status, got[live.id].pid) == ("running", sleeper.pid)
        assert got[never.id].status == "created"
        assert (got[kaggle.id].status, got[kaggle.id].target_account) == ("finished", "bob")
        assert m.registry.adopt_folders() == []  # nothing left to adopt
    finally:
        sleeper.kill()
        sleeper.wait()
