"""Samples during training: `sample` events from a real trainer, bit-exact resume with them on."""

from __future__ import annotations

import numpy as np
import pytest

from tests.trainer_run import events, run_trainer, write_run
from trainer.run.samples import held_out_prompts


def test_held_out_prompts_start_documents():
    val = np.array([9, 9, 0, 1, 2, 3, 0, 4, 5, 6, 7, 8, 0, 5, 5, 0, 1, 2], dtype=np.uint16)
    prompts = held_out_prompts(val, eot=0, count=3, length=3)
    assert prompts == [[1, 2, 3], [4, 5, 6], [5, 5]]
    assert held_out_prompts(val, eot=0, count=3, length=3) == prompts  # a pure function of the data
    assert held_out_prompts(np.arange(10, dtype=np.uint16), eot=None, count=2, length=2) == [[0, 1], [5, 6]]


ON = {"steps_to": 12, "eval_every": 4, "sample_tokens": 6, "deterministic": True}


@pytest.fixture(scope="module")
def whole(tiny_data, tmp_path_factory):
    """A 12-step run sampling at each evaluation (4, 8, 12), with a kept checkpoint at every
    step: the samples test reads its events, the resume test starts from its step 6."""
    run = write_run(tmp_path_factory.mktemp("samples") / "whole", tiny_data, **ON,
                    checkpoint_every_min=0, keep_checkpoints=12)
    done = run_trainer(run)
    assert done.returncode == 0, done.stderr
    return run


def test_samples_appear_in_events(whole):
    samples = events(whole, "sample")
    assert sorted({s["step"] for s in samples}) == [4, 8, 12]
    first = [s for s in samples if s["step"] == 4]
    last = [s for s in samples if s["step"] == 12]
    assert len(first) == 3 and [s["prompt"] for s in first] == [s["prompt"] for s in last]
    for s in samples:
        assert s["prompt"] and 0 < s["tokens"] <= 6 and s["tokens_per_s"] > 0 and isinstance(s["text"], str)
    steps = events(whole, "step")
    assert [e["step"] for e in steps] == list(range(1, 13))  # sampling added no step and took none


def test_own_prompts_and_every(tiny_data, tmp_path):
    run = write_run(tmp_path / "run", tiny_data, steps_to=6, eval_every=100, sample_every=3,
                    sample_tokens=4, sample_prompts=["кот", ""])
    assert run_trainer(run).returncode == 0
    samples = events(run, "sample")
    assert [(s["step"], s["index"], s["prompt"]) for s in samples] == [
        (3, 0, "кот"), (3, 1, "<|endoftext|>"), (6, 0, "кот"), (6, 1, "<|endoftext|>")]


def test_resume_bit_exact_with_samples(whole, tiny_data, tmp_path):
    # The continuation starts from the whole run's own step-6 checkpoint in a new process
    # (the state a stop at 6 saves; the stop path is test_trainer's).
    parted = write_run(tmp_path / "parted", tiny_data, **ON)
    plain = write_run(tmp_path / "plain", tiny_data, **{**ON, "sample_tokens": 0})
    assert run_trainer(plain).returncode == 0
    assert run_trainer(parted, "--resume", str(whole / "checkpoints" / "step-00000006.pt")).returncode == 0
    sha = events(whole, "end")[-1]["state_sha256"]
    assert events(parted, "end")[-1]["state_sha256"] == sha
    assert events(plain, "end")[-1]["state_sha256"] == sha  # samples change nothing of the training
    assert events(plain, "sample") == [] and len(events(parted, "sample")) > 0
    losses = [e["loss"] for e in events(whole, "step")]
    assert [e["loss"] for e in events(parted, "step")] == losses[6:]
