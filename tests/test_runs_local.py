"""Local runs with the real trainer process on the CPU: `ternit run start --wait`, stop
through the STOP file, re-attach after a restart, continue as one chain, crash settling,
a data failure, export. Tiny model (context 32, width 32, 2 heads, 2 layers, vocab 300)."""

from __future__ import annotations

import json
import shutil
import struct
import time

import pytest

from app.base import run_status as status
from app.cli import main as cli
from app.runs import Registry, RunManager
from app.runs import process as proc
from app.runs.checkpoints import latest_checkpoint
from app.runs.series import LEG
from tests.trainer_run import kill_tree

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(autouse=True)
def one_thread(monkeypatch):
    # A 35k-weight model gains nothing from threads; on a shared 2-core machine they only contend.
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


@pytest.fixture(autouse=True)
def no_orphans():
    """Trainers are detached on purpose; a test that fails midway must not leave one
    training on the shared machine: stop (SIGTERM), then kill, whatever is still going."""
    yield
    reg = Registry()
    try:
        for rec in reg.active():
            if rec.target_kind == "local" and proc.terminate(rec.pid, rec.pid_started_at):
                if not proc.wait_exit(rec.pid, 10) and proc.is_alive(rec.pid, rec.pid_started_at):
                    kill_tree(rec.pid)
    finally:
        reg.close()


def config(data_dir, steps_to: int = 30, **training) -> dict:
    return {
        "name": "tiny",
        "model": {"context": 32, "width": 32, "heads": 2, "layers": 2, "vocab": 300},
        "training": {"batch_per_card": 4, "steps_to": steps_to, "eval_every": 10, "eval_segments": 4,
                     "warmup_steps": 5, "limit_min": 3, **training},
        "data": {"dir": str(data_dir), "constellations": ["tiny"]},
        "target": {"kind": "local", "gpu": "cpu"},
    }


def wait_until(m: RunManager, run_id: str, pred, timeout: float = 60.0):
    """Poll like the window's timer does until `pred(row)` holds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m.poll()
        rec = m.registry.get(run_id)
        if pred(rec):
            return rec
        proc.wait_exit(rec.pid, 0.1)
    raise AssertionError(f"timed out; row: {m.registry.get(run_id)}")


def test_cli_start_wait_trains_resumes_in_place_lists_and_exports(tiny_data, tmp_path, capsys):
    path = tmp_path / "run.json"
    path.write_text(json.dumps(config(tiny_data)))
    # Stopped as if by the time limit: exit code 3, a checkpoint saved.
    assert cli.main(["run", "start", "--config", str(path), "--wait", "--stop-at-step", "20"]) == 3
    out = capsys.readouterr().out
    # 35 200 weights, written as the interface language writes numbers (Russian: a thin space).
    assert "35\u00a0200" in out and "20/30" in out and "конец: остановлен по лимиту времени на шаге 20" in out and "ternit run continue" in out

    reg = Registry()
    m = RunManager(reg)
    rec = reg.list_runs()[0]
    assert (rec.status, rec.last_step) == ("time_limit", 20)
    # Resumed in its own folder (--resume latest): the same events file goes on.
    m.launch(rec.id, resume="latest")
    rec = m.wait(rec.id, timeout=90)
    assert (rec.status, rec.last_step, rec.tokens_seen, rec.params) == ("finished", 30, 30 * 4 * 32, 35_200)
    assert rec.best_val_loss is not None and rec.best_val_loss < 6.0 and rec.end_reason == "steps_reached"
    assert "parameters: 35,200" in rec.log_path.read_text()
    s = m.series(rec.id)
    assert s.steps == list(range(1, 31)) and s.eval_steps == [10, 20, 30]

    assert cli.main(["run", "list"]) == 0
    assert rec.id in capsys.readouterr().out
    out_file = tmp_path / "w.safetensors"
    assert cli.main(["export", rec.id, str(out_file)]) == 0
    raw = out_file.read_bytes()
    header = json.loads(raw[8 : 8 + struct.unpack("<Q", raw[:8])[0]])
    assert header["__metadata__"]["format"] == "ternit-lab" and header["__metadata__"]["step"] == "30"


def test_stop_reattach_and_continue_as_one_chain(tiny_data, capsys):
    m = RunManager()
    rec = m.start(config(tiny_data, steps_to=100_000, eval_every=1000))
    assert rec.status == "starting" and rec.pid
    wait_until(m, rec.id, lambda r: (r.last_step or 0) >= 3)
    m.registry.close()

    m2 = RunManager(Registry())  # the lab restarted: the run is followed again
    again = m2.registry.get(rec.id)
    assert again.status == "running" and proc.is_alive(again.pid, again.pid_started_at)
    stopping = m2.stop(rec.id)
    assert stopping.status == "stopping" and status.label(stopping.status, "ru") == "сохранение…"
    assert (stopping.path / "STOP").exists()
    final = m2.wait(rec.id, timeout=60)
    assert (final.status, final.end_reason) == ("stopped", "stopped")
    n = final.last_step
    assert latest_checkpoint(final.path).name == f"step-{n:08d}.pt"

    assert cli.main(["run", "continue", rec.id, "--steps-to", str(n + 5), "--wait"]) == 0
    assert f"{n + 5}/{n + 5}" in capsys.readouterr().out
    child = m2.registry.children(rec.id)[0]
    assert (child.status, child.last_step, child.leg, child.chain_id) == ("finished", n + 5, 2, rec.id)
    assert child.config()["resume_from"].endswith(f"step-{n:08d}.pt")
    s = m2.series(child.id)
    assert s.steps == list(range(1, n + 6)) and s.tokens == [128 * i for i in range(1, n + 6)]
    assert [(mk.kind, mk.step) for mk in s.markers] == [(LEG, n)]
    rows = {r.id: r for r in m2.history()}
    assert rows[child.id].steps == f"{n + 5} / {n + 5}" and rows[rec.id].can_continue


def test_a_killed_trainer_is_settled_as_failed_after_restart(tiny_data):
    m = RunManager()
    rec = m.start(config(tiny_data, steps_to=100_000, eval_every=1000))
    wait_until(m, rec.id, lambda r: (r.last_step or 0) >= 2)
    kill_tree(rec.pid)  # as if the PC lost power mid-run
    proc.wait_exit(rec.pid, 30)
    m.registry.close()

    heard = []
    m2 = RunManager(Registry())
    m2.add_listener(heard.append)
    dead = m2.registry.get(rec.id)
    assert dead.status == "failed" and dead.end_reason == "vanished" and (dead.last_step or 0) >= 2
    assert dead.last_message.startswith("the trainer process disappeared")
    f = m2.failure(rec.id)
    assert f.kind == "vanished" and f.checkpoint is None and f.retry_label("en") == "Retry"


def test_a_data_failure_names_the_folder(tmp_path, tiny_data, capsys):
    missing = tmp_path / "no-such-data"
    path = tmp_path / "run.json"
    path.write_text(json.dumps(config(missing)))
    assert cli.main(["run", "start", "--config", str(path), "--wait"]) == 2  # the lab's pre-check
    assert str(missing) in capsys.readouterr().err and Registry().list_runs() == []
    # Data that goes away between the start and the trainer's own check: a failed run.
    shutil.copytree(tiny_data, missing)
    m = RunManager()
    rec = m.create(config(missing))
    shutil.rmtree(missing)
    m.launch(rec.id)
    assert cli.main(["run", "wait", rec.id]) == 1
    rec = Registry().list_runs()[0]
    assert rec.status == "failed" and rec.end_reason == "error"
    f = RunManager().failure(rec.id)
    assert f.kind == "data" and f.file == str(missing) and str(missing) in f.advice
    assert "ternit data prepare" in capsys.readouterr().err
    assert cli.main(["run", "retry", rec.id]) == 2  # fix the data first: nothing is started
    assert "ternit data prepare" in capsys.readouterr().err and len(Registry().list_runs()) == 1
    assert cli.main(["run", "show", rec.id, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["failure"]["kind"] == "data" and shown["id"] == rec.id
    assert shown["versions"]["ternit_lab"] and "torch" in shown["versions"]  # for a bug report
    assert cli.main(["run", "show", rec.id]) == 0  # for people: lines in the interface's words
    shown = capsys.readouterr().out
    assert rec.id in shown and "events_offset" not in shown and "pid" not in shown
    assert ("почему упал: " in shown or "why it failed: " in shown) and str(missing) in shown


def test_export_failures_are_said_in_the_interface_language_with_no_traceback(tiny_data, tmp_path, capsys, russian):
    from tests.trainer_run import run_trainer, write_run

    run = write_run(tmp_path / "src", tiny_data, steps_to=2)
    assert run_trainer(run).returncode == 0
    ckpt = run / "checkpoints" / "step-00000002.pt"
    (tmp_path / "afile").write_text("a file where the folder should be")
    assert cli.main(["export", str(ckpt), str(tmp_path / "afile" / "w.safetensors")]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and "Не удалось записать" in err and "Выберите другое место" in err
    damaged = tmp_path / "damaged.pt"
    damaged.write_bytes(ckpt.read_bytes()[:1000])
    assert cli.main(["export", str(damaged), str(tmp_path / "w.safetensors")]) == 2  # the checkpoint: exit 2
    err = capsys.readouterr().err
    assert "не читается" in err and "damaged.pt" in err and "--resume" not in err
    assert not list(tmp_path.glob("*.safetensors")) and not list(tmp_path.glob(".*.tmp"))
