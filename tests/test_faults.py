"""Fault injection on the trainer: flipped bytes in a checkpoint, damaged `latest` pointers,
a full disk while writing events or the log, two trainers on one folder, a hang-up, and
run.json values the trainer must refuse before it builds anything. Each test reproduces a
fault that once passed silently or ended in a traceback (issue 17). Tiny model on the CPU.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import pytest

from tests.trainer_run import ROOT, events, run_module, run_trainer, trainer_env, write_run

pytestmark = pytest.mark.timeout(240)


def flip_bytes_in_largest_tensor(path: Path) -> None:
    """XOR 4 bytes in the middle of the checkpoint's largest tensor record (torch stores
    them uncompressed in a zip): the zip still opens and torch still loads it."""
    with zipfile.ZipFile(path) as z:
        info = max((i for i in z.infolist() if "/data/" in i.filename), key=lambda i: i.file_size)
    raw = bytearray(path.read_bytes())
    name_len = int.from_bytes(raw[info.header_offset + 26: info.header_offset + 28], "little")
    extra_len = int.from_bytes(raw[info.header_offset + 28: info.header_offset + 30], "little")
    at = info.header_offset + 30 + name_len + extra_len + info.file_size // 2
    for i in range(4):
        raw[at + i] ^= 0xA5
    path.write_bytes(bytes(raw))


def start_trainer(run_dir: Path, *args: str, **popen: object) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "trainer", "--run", str(run_dir), *args], env=trainer_env(),
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


def wait_for_event(run_dir: Path, kind: str, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = events(run_dir, kind)
        if found:
            return found[-1]
        time.sleep(0.1)
    raise AssertionError(f"no {kind} event in {run_dir}")


def end_state(run_dir: Path) -> str:
    return events(run_dir, "end")[-1]["state_sha256"]


@pytest.fixture(scope="module")
def whole(tiny_data, tmp_path_factory) -> Path:
    """An uninterrupted 8-step run: what every damaged-then-resumed run must end as."""
    run = write_run(tmp_path_factory.mktemp("whole") / "run", tiny_data, steps_to=8)
    assert run_trainer(run).returncode == 0
    return run


@pytest.fixture(scope="module")
def three_checkpoints(tiny_data, tmp_path_factory) -> Path:
    """A run stopped at step 3 with a checkpoint at every step (kept: 1, 2, 3)."""
    run = write_run(tmp_path_factory.mktemp("three") / "run", tiny_data, steps_to=8, checkpoint_every_min=0)
    assert run_trainer(run, "--stop-at-step", "3").returncode == 0
    return run


def copy_run(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


# ---- 1. flipped bytes --------------------------------------------------------------------
def test_flipped_bytes_are_refused_by_name_and_latest_falls_back_to_the_intact_one(three_checkpoints, whole, tmp_path):
    run = copy_run(three_checkpoints, tmp_path / "run")
    newest = run / "checkpoints" / "step-00000003.pt"
    flip_bytes_in_largest_tensor(newest)

    named = run_trainer(run, "--resume", str(newest))
    assert named.returncode == 2 and "Traceback" not in named.stderr
    assert "step-00000003.pt is damaged" in named.stderr and "SHA-256" in named.stderr
    assert "the earlier checkpoint" in named.stderr and "step-00000002.pt is intact" in named.stderr

    p = run_trainer(run, "--resume", "latest")
    assert p.returncode == 0, p.stderr
    assert events(run, "start")[-1]["resumed_from"].endswith("step-00000002.pt")
    warning = events(run, "warning")[-1]
    assert warning["kind"] == "checkpoint_skipped" and "step-00000003.pt is damaged" in warning["message"]
    assert "warning:" in p.stderr and "step-00000002.pt" in p.stderr
    assert end_state(run) == end_state(whole)  # nothing silently wrong: the uninterrupted run's state


def test_export_refuses_a_checkpoint_with_flipped_bytes(three_checkpoints, tmp_path):
    run = copy_run(three_checkpoints, tmp_path / "run")
    newest = run / "checkpoints" / "step-00000003.pt"
    flip_bytes_in_largest_tensor(newest)
    out = tmp_path / "w.safetensors"
    p = run_module("trainer.model.export", str(newest), str(out))
    assert p.returncode == 2 and "damaged" in p.stderr and "step-00000003.pt" in p.stderr
    assert not out.exists()


# ---- 4. damaged pointers -----------------------------------------------------------------
@pytest.mark.parametrize("pointer, said", [
    (b"\xff\xfe", "cannot be read"),
    (b"../run.json\n", "does not name a checkpoint file"),
    (None, "is missing"),
])
def test_a_damaged_or_missing_latest_pointer_falls_back_to_the_newest_step_file(three_checkpoints, tmp_path, pointer, said):
    run = copy_run(three_checkpoints, tmp_path / "run")
    latest = run / "checkpoints" / "latest"
    if pointer is None:
        latest.unlink()
    else:
        latest.write_bytes(pointer)
    p = run_trainer(run, "--resume", "latest", "--stop-at-step", "3")
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    assert events(run, "start")[-1]["resumed_from"].endswith("step-00000003.pt")
    assert said in events(run, "warning")[-1]["message"]


def test_all_checkpoints_cut_short_names_none_as_intact(three_checkpoints, tmp_path):
    run = copy_run(three_checkpoints, tmp_path / "run")
    for f in (run / "checkpoints").glob("step-*.pt"):
        f.write_bytes(f.read_bytes()[:1000])
    p = run_trainer(run, "--resume", "latest")
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert "no intact checkpoint" in p.stderr and "is intact" not in p.stderr
    assert events(run, "end")[-1]["reason"] == "error"


def _bytes_to_the_second_step(three_checkpoints: Path, probe: Path, full: str) -> int:
    """What the resumed run writes into events.jsonl or its log up to its second step's line
    (with some slack, but less than a third step's), measured on a copy without a limit: the
    start's lines change with the trainer (its plan, its awake line), a fixed guess goes stale."""
    run = copy_run(three_checkpoints, probe)
    write_run(run, Path(json.loads((run / "run.json").read_text())["data"]["dir"]), steps_to=8)
    path = run / "events.jsonl" if full == "events" else run / "trainer.log"
    before = path.stat().st_size if path.exists() else 0
    assert run_module("trainer", "--run", str(run), "--resume", "latest", timeout=180,
                      output=run / "trainer.log").returncode == 0
    written = path.read_bytes()[before:]
    steps = [m.end() for m in re.finditer(rb'\{"event":"step"[^\n]*\n', written)]
    return steps[1] + (steps[2] - steps[1]) // 2


# ---- 3. a full disk while writing events or the log ---------------------------------------
@pytest.mark.skipif(not hasattr(os, "fork") or sys.platform == "darwin",
                    reason="RLIMIT_FSIZE in a child (preexec_fn) needs Linux")
@pytest.mark.parametrize("full", ["events", "log"])
def test_a_full_disk_while_writing_events_or_the_log_saves_a_checkpoint_and_exits_3(
        three_checkpoints, whole, tmp_path, full):
    run = copy_run(three_checkpoints, tmp_path / "run")
    write_run(run, Path(json.loads((run / "run.json").read_text())["data"]["dir"]), steps_to=8)  # checkpoint at the end only
    ckpt_size = (run / "checkpoints" / "step-00000003.pt").stat().st_size
    limit = ckpt_size * 2  # a checkpoint still fits; the file padded to just below the limit does not grow far
    log = run / "trainer.log"
    padded = run / "events.jsonl" if full == "events" else log
    with open(padded, "ab") as f:  # room for the start and two steps, not for all five
        f.write(b"\n" * (limit - f.tell() - _bytes_to_the_second_step(three_checkpoints, tmp_path / "probe", full)))
    # Its stdout and stderr appended to the log, every file it writes limited to `limit`
    # bytes (RLIMIT_FSIZE, as a preexec_fn would set it: tests/forked.py).
    p = run_module("trainer", "--run", str(run), "--resume", "latest", timeout=180, output=log,
                   file_size_limit=limit)
    assert p.returncode == 3
    assert b"Traceback" not in log.read_bytes()
    text = (run / "events.jsonl").read_bytes()
    assert text.endswith(b"\n")  # no torn last line
    for line in text.splitlines():
        if line.strip():
            json.loads(line)
    saved = (run / "checkpoints" / "latest").read_text().strip()
    assert saved > "step-00000003.pt"  # the work since the last checkpoint was saved
    if full == "log":  # events.jsonl had room: it says what happened
        err = events(run, "error")[-1]
        assert "could not write the log" in err["message"] and err["checkpoint"].endswith(saved)
    p = run_trainer(run, "--resume", "latest")  # space returned
    assert p.returncode == 0, p.stderr
    assert end_state(run) == end_state(whole)


# ---- 5. one writer per run ---------------------------------------------------------------
def test_a_second_trainer_on_a_running_run_is_refused_and_a_killed_one_leaves_no_lock(tiny_data, tmp_path):
    run = write_run(tmp_path / "run", tiny_data, steps_to=100000, checkpoint_every_min=0)
    first = start_trainer(run)
    try:
        wait_for_event(run, "checkpoint")
        # Held (it keeps its lock, as while training) instead of saving a checkpoint at each
        # of its steps for the whole test: the CPU goes to the trainers being refused.
        (run / "PAUSE").write_text("")
        for extra in ((), ("--resume", "latest")):
            second = run_trainer(run, *extra)
            assert second.returncode == 2 and "Traceback" not in second.stderr, second.stderr
            assert f"process {first.pid}" in second.stderr and "already being trained" in second.stderr
        assert len(events(run, "start")) == 1  # the refused ones wrote nothing into the run
    finally:
        first.kill()  # SIGKILL: no clean-up of its own
        first.communicate()
    (run / "PAUSE").unlink()
    p = run_trainer(run, "--resume", "latest", "--stop-at-step", "1")
    assert p.returncode == 0, p.stderr


@pytest.mark.windows  # msvcrt's byte-range lock there
def test_the_lock_refuses_a_second_holder_and_frees_on_release(tmp_path):
    from trainer.base.lock import LockError, RunLock

    with RunLock(tmp_path):
        with pytest.raises(LockError, match=f"process {os.getpid()}"):
            RunLock(tmp_path).acquire()
    with RunLock(tmp_path):
        pass


# ---- 7. smaller ones ---------------------------------------------------------------------
@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="no SIGHUP on this system")
def test_sighup_saves_like_sigterm(tiny_data, tmp_path):
    run = write_run(tmp_path / "run", tiny_data, steps_to=100000)
    hung_up: list[int] = []

    def hang_up() -> None:  # once it trains: SIGHUP to the trainer's process (its start event's pid)
        try:
            wait_for_event(run, "step")
            pid = events(run, "start")[-1]["pid"]
            os.kill(pid, signal.SIGHUP)
            hung_up.append(pid)
        except BaseException:  # noqa: BLE001 — no step in time: end it, so that the run below returns
            (run / "STOP").touch()
            raise

    thread = threading.Thread(target=hang_up, daemon=True)
    thread.start()
    p = run_trainer(run)
    thread.join(timeout=30)
    assert hung_up, f"the trainer never took a step: {p.stderr}"
    assert p.returncode == 0, p.stderr
    end = events(run, "end")[-1]
    assert end["reason"] == "stopped" and (run / "checkpoints" / "latest").is_file()


def test_steps_to_below_the_checkpoints_step_is_refused(three_checkpoints, tmp_path):
    run = copy_run(three_checkpoints, tmp_path / "run")
    write_run(run, Path(json.loads((run / "run.json").read_text())["data"]["dir"]), steps_to=2)
    p = run_trainer(run, "--resume", "latest")
    assert p.returncode == 2 and "training.steps_to 2 is below the checkpoint's step 3" in p.stderr


def test_events_file_replaced_by_a_folder_is_one_line(tiny_data, tmp_path):
    run = write_run(tmp_path / "run", tiny_data, steps_to=2)
    (run / "events.jsonl").mkdir()
    p = run_trainer(run)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "events.jsonl" in p.stderr and "in the way" in p.stderr


# ---- 2. values the trainer's own check refuses (python -m trainer.config) ----------------
BAD_VALUES = [
    ({"training": {"seed": -1}}, "training.seed"),
    ({"training": {"seed": 2**64}}, "training.seed"),
    ({"model": {"width": 1_000_000, "heads": 8}}, "GiB"),
    ({"training": {"lr": float("inf")}}, "training.lr must be a finite number"),
    ({"training": {"checkpoint_every_min": -1}}, "training.checkpoint_every_min"),
    ({"training": {"min_lr_ratio": -0.5}}, "training.min_lr_ratio"),
    ({"resume_from": 123}, "resume_from"),
]


@pytest.mark.parametrize("change, said", BAD_VALUES)
def test_values_once_refused_only_at_step_1_are_refused_by_the_check(tmp_path, change, said):
    from trainer.config.__main__ import main

    cfg = {"name": "bad", "model": {"context": 32, "width": 32, "heads": 2, "layers": 2, "vocab": 300}}
    for key, value in change.items():
        cfg[key] = {**cfg.get(key, {}), **value} if isinstance(value, dict) else value
    path = tmp_path / "run.json"
    path.write_text(json.dumps(cfg), encoding="utf-8")
    proc = run_module("trainer.config", str(path), timeout=60)
    assert proc.returncode == 2 and said in proc.stderr and "Traceback" not in proc.stderr
    assert main([str(path)]) == 2


def test_a_run_json_that_is_not_utf8_is_one_line(tmp_path, capsys):
    from trainer.config.__main__ import main

    path = tmp_path / "run.json"
    path.write_bytes(b'{"name": "\xff\xfe"}')
    assert main([str(path)]) == 2
    assert "not UTF-8" in capsys.readouterr().err
