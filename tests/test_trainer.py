"""The trainer as a process: weights, resume bit for bit, limits, stop, failures, DDP."""

from __future__ import annotations

import json
import os
import signal
import sys
import time

import pytest

from tests.trainer_run import events, run_module, run_trainer, start_trainer, write_run

torch = pytest.importorskip("torch")


def test_weight_count_matches_formula_for_many_sizes():
    from trainer.config.run_config import ModelConfig, parameter_count
    from trainer.model.gpt import GPT, count_parameters

    sizes = [(1, 8, 1, 4, 256), (2, 32, 2, 32, 300), (3, 48, 6, 17, 1000), (4, 64, 8, 128, 4000),
             (8, 512, 8, 1024, 4000), (12, 384, 12, 256, 8192), (6, 96, 3, 64, 65535)]
    for layers, width, heads, context, vocab in sizes:
        m = ModelConfig(context=context, width=width, heads=heads, layers=layers, vocab=vocab)
        expected = 12 * layers * width**2 + vocab * width + context * width
        assert parameter_count(m) == expected
        with torch.device("meta"):
            model = GPT(m)
        assert count_parameters(model) == expected, (layers, width, heads, context, vocab)


def test_dry_run_prints_default_weight_count(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"name": "default"}), encoding="utf-8")
    p = run_trainer(run, "--dry-run")
    assert p.returncode == 0, p.stderr
    assert "parameters: 27,738,112" in p.stderr
    start = events(run, "start")[0]
    assert start["params"] == 27_738_112
    assert start["tokens_per_step"] == 6 * 1024


@pytest.fixture(scope="module")
def whole(tiny_data, tmp_path_factory):
    """The uninterrupted 30-step run, shared by the module: every resumed run here must end
    in its state. It keeps a checkpoint of every step, the starting points of the tests'
    continuations, a killed save and a refused shape, and of an export."""
    run = write_run(tmp_path_factory.mktemp("trainer") / "whole", tiny_data, checkpoint_every_min=0,
                    keep_checkpoints=30)
    p = run_trainer(run)
    assert p.returncode == 0, p.stderr
    return run


def ckpt(run, step: int):
    return run / "checkpoints" / f"step-{step:08d}.pt"


def test_bit_exact_resume_and_events(tmp_path, tiny_data, whole):
    end = events(whole, "end")[-1]
    assert end["reason"] == "steps_reached" and end["step"] == 30

    steps = events(whole, "step")
    assert [s["step"] for s in steps] == list(range(1, 31))
    assert steps[-1]["tokens_seen"] == 30 * 4 * 32
    assert all(k in steps[0] for k in ("loss", "lr", "step_ms", "tokens_per_s", "mem_alloc_mb", "mem_peak_mb"))
    assert steps[-1]["loss"] < steps[0]["loss"]
    evals = events(whole, "eval")
    assert [e["step"] for e in evals] == [10, 20, 30]
    assert evals[0]["segments"] == 16 and evals[0]["val_ci95"][0] < evals[0]["val_loss"] < evals[0]["val_ci95"][1]

    # Stopped (the time limit's path, with no checkpoint before it) and resumed: the whole
    # run's state, whose saves at every step did not bend its trajectory either.
    parted = write_run(tmp_path / "parted", tiny_data)
    p = run_trainer(parted, "--stop-at-step", "13")
    assert p.returncode == 0, p.stderr
    first_end = events(parted, "end")[-1]
    assert first_end["reason"] == "time_limit" and first_end["step"] == 13
    p = run_trainer(parted, "--resume", "latest")
    assert p.returncode == 0, p.stderr
    assert events(parted, "start")[-1]["resumed_from"].endswith("step-00000013.pt")
    assert events(parted, "end")[-1]["state_sha256"] == end["state_sha256"]
    # The resumed leg logged the same losses as the uninterrupted run.
    resumed_losses = [s["loss"] for s in events(parted, "step") if s["step"] > 13]
    assert resumed_losses == [s["loss"] for s in steps if s["step"] > 13]


def test_longer_steps_to_stretches_the_schedule(tmp_path, tiny_data):
    from trainer.config.run_config import TrainingConfig
    from trainer.step.optim import Schedule

    s = Schedule.fresh(TrainingConfig(lr=1e-3, warmup_steps=10, steps_to=100))
    assert s.at(0) == pytest.approx(1e-4) and s.at(9) == pytest.approx(1e-3)
    assert s.at(100) == pytest.approx(1e-4)
    longer = s.restretched(60, 200)
    assert longer.at(60) == pytest.approx(s.at(60))
    assert s.at(61) < longer.at(61) < s.at(60)
    assert longer.at(200) == pytest.approx(1e-4)


def test_time_limit_saves_and_ends(tmp_path, tiny_data):
    run = write_run(tmp_path / "limited", tiny_data, steps_to=100000, limit_min=0.05)
    began = time.monotonic()
    p = run_trainer(run)
    assert p.returncode == 0, p.stderr
    assert time.monotonic() - began < 60  # 3 s of limit, plus start-up on a busy machine
    end = events(run, "end")[-1]
    # The limit counts from the process start (on Kaggle the session clock does too).
    assert end["reason"] == "time_limit" and end["step"] < 100000
    assert (run / "checkpoints" / f"step-{end['step']:08d}.pt").is_file()
    assert events(run, "checkpoint")[-1]["step"] == end["step"]


def _wait_for_step(run, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if events(run, "step"):
            return
        time.sleep(0.1)
    raise AssertionError("the trainer made no step")


def _stopped_at_a_saved_step(run, proc, how: str) -> None:
    assert proc.wait(timeout=60) == 0, proc.stderr()
    end = events(run, "end")[-1]
    assert end["reason"] == "stopped"
    # Which request stopped it (a STOP file left from before would stop a new run at once).
    assert ("RUN_DIR/STOP" if how == "stop_file" else "a signal") in end["message"]
    assert (run / "checkpoints" / f"step-{end['step']:08d}.pt").is_file()


def test_sigterm_finishes_the_step_and_saves(tmp_path, tiny_data):
    # (the STOP file's stop: test_pause_file_holds_training_then_a_stop_file_finishes_the_step_and_saves)
    run = write_run(tmp_path / "sigterm", tiny_data, steps_to=100000)
    proc = start_trainer(run)
    try:
        _wait_for_step(run)
        proc.send_signal(signal.SIGTERM)
        _stopped_at_a_saved_step(run, proc, "sigterm")
    finally:
        proc.end()


def test_pause_file_holds_training_then_a_stop_file_finishes_the_step_and_saves(tmp_path, tiny_data):
    run = write_run(tmp_path / "paused", tiny_data, steps_to=100000)
    (run / "PAUSE").write_text("")
    proc = start_trainer(run)
    try:
        deadline = time.monotonic() + 60
        while not events(run, "start") and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.0)
        assert events(run, "step") == []  # started, but holds while PAUSE exists
        (run / "PAUSE").unlink()
        _wait_for_step(run)
        (run / "STOP").write_text("")
        _stopped_at_a_saved_step(run, proc, "stop_file")
    finally:
        proc.end()
    pause = events(run, "pause")
    assert pause and pause[0]["step"] == 0 and pause[0]["seconds"] >= 1.0


@pytest.mark.skipif(os.name != "posix", reason="SIGKILL is POSIX (Windows' abrupt end, TerminateProcess, is in tests/test_windows_stop.py)")
def test_sigkill_in_the_middle_of_a_save_keeps_the_previous_checkpoint(tmp_path, tiny_data, whole):
    # Continued from the whole run's step 10 in a folder of its own: it saves step 11, then
    # dies half-way through writing step 12.
    run = write_run(tmp_path / "killed", tiny_data, checkpoint_every_min=0)
    # tests/trainer_dying_save.py: the trainer whose second torch.save of the process writes
    # half of its file, then SIGKILLs the process.
    p = run_module("tests.trainer_dying_save", "--run", str(run), "--resume", str(ckpt(whole, 10)))
    assert p.returncode == -signal.SIGKILL, p.stderr
    folder = run / "checkpoints"
    assert (folder / "latest").read_text().strip() == "step-00000011.pt"
    assert not (folder / "step-00000012.pt").exists()
    assert (folder / ".step-00000012.pt.tmp").exists()  # the half-written file never got a name
    p = run_trainer(run, "--resume", "latest")
    assert p.returncode == 0, p.stderr
    assert events(run, "start")[-1]["resumed_from"].endswith("step-00000011.pt")
    assert events(run, "end")[-1]["state_sha256"] == events(whole, "end")[-1]["state_sha256"]
    assert not list(folder.glob(".*.tmp"))


def test_damaged_checkpoint_is_refused_and_the_earlier_one_offered(tmp_path, tiny_data):
    run = write_run(tmp_path / "damaged", tiny_data, steps_to=20, checkpoint_every_min=0, keep_checkpoints=5)
    assert run_trainer(run, "--stop-at-step", "3").returncode == 0
    newest = run / "checkpoints" / "step-00000003.pt"
    newest.write_bytes(newest.read_bytes()[:1000])
    p = run_trainer(run, "--resume", str(newest))  # a named checkpoint: refused, the intact one offered
    assert p.returncode == 2
    assert "damaged" in p.stderr and "step-00000002.pt" in p.stderr
    err = events(run, "error")[-1]
    assert err["kind"] == "other" and "damaged" in err["message"]
    p = run_trainer(run, "--resume", "latest", "--stop-at-step", "4")  # its own latest: the newest intact, said
    assert p.returncode == 0, p.stderr
    assert events(run, "start")[-1]["resumed_from"].endswith("step-00000002.pt")
    assert "step-00000003.pt" in events(run, "warning")[-1]["message"] and "warning:" in p.stderr


def test_checkpoint_of_another_shape_is_refused(tmp_path, tiny_data, whole):
    other = write_run(tmp_path / "other", tiny_data, model={"width": 64})
    p = run_trainer(other, "--resume", str(ckpt(whole, 2)))
    assert p.returncode == 2
    assert "model.width is 64 in run.json but 32 in checkpoint" in p.stderr


@pytest.mark.parametrize(
    ("model", "training", "data", "message"),
    [
        ({"width": 30, "heads": 4}, {}, None, "does not divide by model.heads 4: choose heads from 1, 2, 3, 5, 6, 10, 15, 30"),
        ({"context": 100000}, {}, None, "model.context 100000 is larger than the training data"),
        ({"vocab": 100}, {}, None, "the data's vocabulary (300) is bigger than model.vocab (100)"),
        ({}, {"batch_per_card": 0}, None, "training.batch_per_card must be at least 1"),
        ({}, {"precision": "fp8"}, None, "training.precision must be one of"),
        ({}, {"bogus": 1}, None, "unknown key training.bogus"),
        ({}, {}, "missing", "is not a folder: prepare data first"),
    ],
)
def test_bad_config_exits_2_with_one_line(tmp_path, tiny_data, model, training, data, message):
    run = write_run(tmp_path / "bad", tiny_data if data is None else tmp_path / data, model=model, **training)
    p = run_trainer(run)
    assert p.returncode == 2
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0], p.stderr
    assert not (run / "checkpoints").exists()


def test_missing_data_file_is_named(tmp_path, tiny_data):
    import shutil

    data = tmp_path / "data"
    shutil.copytree(tiny_data, data)
    (data / "val.bin").unlink()
    p = run_trainer(write_run(tmp_path / "run", data))
    assert p.returncode == 2 and "lacks val.bin" in p.stderr
    assert events(tmp_path / "run", "error")[-1]["kind"] == "data"


def _train_in_process(run, monkeypatch, fail_at_step, failure):
    import trainer.run.train as tt

    real = tt.train_step
    calls = {"n": 0}

    def flaky(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == fail_at_step:
            return failure()
        return real(*args, **kwargs)

    monkeypatch.setattr(tt, "train_step", flaky)
    from trainer.__main__ import main

    return main(["--run", str(run), "--device", "cpu"])


def test_out_of_memory_reports_a_batch_that_fits_and_keeps_the_checkpoint(tmp_path, tiny_data, monkeypatch):
    run = write_run(tmp_path / "oom", tiny_data, batch_per_card=6, checkpoint_every_min=0)

    def oom():
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    assert _train_in_process(run, monkeypatch, 4, oom) == 3
    err = events(run, "error")[-1]
    assert err["kind"] == "oom" and err["suggested_batch"] == 3 and "batch_per_card from 6 to 3" in err["advice"]
    assert err["checkpoint"].endswith("step-00000003.pt")
    assert events(run, "end")[-1]["reason"] == "error"
    from trainer.state.checkpoint import load

    assert load(run / "checkpoints" / "step-00000003.pt")["step"] == 3


def test_nan_loss_stops_and_keeps_the_last_good_checkpoint(tmp_path, tiny_data, monkeypatch):
    run = write_run(tmp_path / "nan", tiny_data, checkpoint_every_min=0)
    assert _train_in_process(run, monkeypatch, 5, lambda: torch.tensor(float("nan"))) == 3
    err = events(run, "error")[-1]
    assert err["kind"] == "nan" and "learning rate" in err["advice"]
    assert err["checkpoint"].endswith("step-00000004.pt")
    assert sorted(p.name for p in (run / "checkpoints").glob("step-*.pt"))[-1] == "step-00000004.pt"


# DDP on two CPU processes: test_economical_resume's DDP test checks it on its normal run
# (one torchrun fewer than a run of its own here).


def test_export_writes_safetensors_with_config(tmp_path, whole):
    out = tmp_path / "w.safetensors"
    p = run_module("trainer.model.export", str(ckpt(whole, 30)), str(out), timeout=60)
    assert p.returncode == 0, p.stderr
    from safetensors import safe_open

    with safe_open(str(out), "pt") as f:
        meta = f.metadata()
        assert json.loads(meta["model"])["width"] == 32
        total = sum(f.get_tensor(k).numel() for k in f.keys())
    assert total == 12 * 2 * 32**2 + 300 * 32 + 32 * 32 == int(meta["params"])


def test_fp16_with_grad_scaler_resumes_bit_exact(tmp_path, tiny_data):
    """A T4's precision (fp16 autocast + GradScaler), run on the CPU: the scaler's state
    travels in the checkpoint and the resumed run ends where the uninterrupted one does."""
    # The continuation starts from the uninterrupted run's own (kept) step 9 in a new process.
    fp16 = write_run(tmp_path / "whole", tiny_data, steps_to=20, precision="fp16", checkpoint_every_min=0,
                     keep_checkpoints=20)
    assert run_trainer(fp16).returncode == 0
    parted = write_run(tmp_path / "parted", tiny_data, steps_to=20, precision="fp16")
    from trainer.state.checkpoint import load

    scaler = load(ckpt(fp16, 9))["scaler"]
    assert scaler["scale"] > 1 and scaler["_growth_tracker"] == 9  # a live scaler, not a disabled one
    p = run_trainer(parted, "--resume", str(ckpt(fp16, 9)))
    assert p.returncode == 0, p.stderr
    assert events(parted, "start")[-1]["precision"] == "fp16"
    assert events(parted, "end")[-1]["state_sha256"] == events(fp16, "end")[-1]["state_sha256"]


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")
def test_full_disk_during_the_final_save_is_an_error_event_and_keeps_the_earlier_checkpoint(tmp_path, tiny_data):
    run = write_run(tmp_path / "full", tiny_data, steps_to=4)
    assert run_trainer(run, "--stop-at-step", "2").returncode == 0
    folder = run / "checkpoints"
    size = (folder / "step-00000002.pt").stat().st_size

    # The trainer may write files only smaller than a checkpoint (RLIMIT_FSIZE, set by
    # tests/trainer_small_files.py before it runs `python -m trainer`).
    p = run_module("tests.trainer_small_files", str(size // 2), "--run", str(run), "--resume", "latest")
    assert p.returncode == 3, p.stderr
    assert "Traceback" not in p.stderr and "could not write checkpoint" in p.stderr
    assert "the disk holding it is full" in p.stderr and "inline_container" not in p.stderr  # named as a full disk
    err = events(run, "error")[-1]
    assert "step-00000004.pt" in err["message"] and err["checkpoint"].endswith("step-00000002.pt")
    assert "--resume" in err["advice"] and events(run, "end")[-1]["reason"] == "error"
    assert (folder / "latest").read_text().strip() == "step-00000002.pt"
    assert sorted(x.name for x in folder.iterdir()) == ["latest", "step-00000002.pt", "step-00000002.pt.sha256"]  # no half-written file left
    assert run_trainer(run, "--resume", "latest").returncode == 0


def test_a_file_in_the_way_of_checkpoints_is_an_error_event(tmp_path, tiny_data):
    run = write_run(tmp_path / "inway", tiny_data, steps_to=2)
    (run / "checkpoints").write_text("not a folder")
    p = run_trainer(run)
    assert p.returncode == 3 and "Traceback" not in p.stderr, p.stderr
    err = events(run, "error")[-1]
    assert "could not write checkpoint" in err["message"] and err["checkpoint"] is None
