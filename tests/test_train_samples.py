"""Samples during training: `sample` events from a real trainer, bit-exact resume with them on."""

from __future__ import annotations

import numpy as np

from tests.trainer_run import events, run_trainer, write_run
from trainer.samples import held_out_prompts


def test_held_out_prompts_start_documents():
    val = np.array([9, 9, 0, 1, 2, 3, 0, 4, 5, 6, 7, 8, 0, 5, 5, 0, 1, 2], dtype=np.uint16)
    prompts = held_out_prompts(val, eot=0, count=3, length=3)
    assert prompts == [[1, 2, 3], [4, 5, 6], [5, 5]]
    assert held_out_prompts(val, eot=0, count=3, length=3) == prompts  # a pure function of the data
    assert held_out_prompts(np.arange(10, dtype=np.uint16), eot=None, count=2, length=2) == [[0, 1], [5, 6]]


def test_samples_appear_in_events(tiny_data, tmp_path):
    run = write_run(tmp_path / "run", tiny_data, steps_to=20, eval_every=10, sample_tokens=8)
    done = run_trainer(run)
    assert done.returncode == 0, done.stderr
    samples = events(run, "sample")
    assert sorted({s["step"] for s in samples}) == [10, 20]
    first = [s for s in samples if s["step"] == 10]
    last = [s for s in samples if s["step"] == 20]
    assert len(first) == 3 and [s["prompt"] for s in first] == [s["prompt"] for s in last]
    for s in samples:
        assert s["prompt"] and 0 < s["tokens"] <= 8 and s["tokens_per_s"] > 0 and isinstance(s["text"], str)
    steps = events(run, "step")
    assert [e["step"] for e in steps] == list(range(1, 21))  # sampling added no step and took none


def test_own_prompts_and_every(tiny_data, tmp_path):
    run = write_run(tmp_path / "run", tiny_data, steps_to=6, eval_every=100, sample_every=3,
                    sample_tokens=4, sample_prompts=["кот", ""])
    assert run_trainer(run).returncode == 0
    samples = events(run, "sample")
    assert [(s["step"], s["index"], s["prompt"]) for s in samples] == [
        (3, 0, "кот"), (3, 1, "<|endoftext|>"), (6, 0, "кот"), (6, 1, "<|endoftext|>")]


def test_resume_bit_exact_with_samples(tiny_data, tmp_path):
    on = {"steps_to": 12, "eval_every": 4, "sample_tokens": 6, "deterministic": True}
    whole = write_run(tmp_path / "whole", tiny_data, **on)
    parted = write_run(tmp_path / "parted", tiny_data, **on)
    plain = write_run(tmp_path / "plain", tiny_data, **{**on, "sample_tokens": 0})
    assert run_trainer(whole).returncode == 0
    assert run_trainer(plain).returncode == 0
    assert run_trainer(parted, "--stop-at-step", "6").returncode == 0
    assert run_trainer(parted, "--resume", "latest").returncode == 0
    sha = events(whole, "end")[-1]["state_sha256"]
    assert events(parted, "end")[-1]["state_sha256"] == sha
    assert events(plain, "end")[-1]["state_sha256"] == sha  # samples change nothing of the training
    assert events(plain, "sample") == [] and len(events(whole, "sample")) > 0
    losses = [e["loss"] for e in events(whole, "step")]
    assert [e["loss"] for e in events(parted, "step")] == losses
