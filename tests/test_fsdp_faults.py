"""A failure only one process sees, under FSDP with two gloo processes: rank 0 alone
writes the events, so a full disk under events.jsonl is rank 0's alone. It must end the
run (exit, said) instead of waiting forever in a collective save the other rank never
joins; the checkpoint before it stays the one to continue from."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests import forked
from tests.trainer_run import events, trainer_env, write_run

pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the full disk reads /proc/self/fd")


def test_a_full_disk_under_rank_0s_events_ends_the_sharded_run_without_a_hang(tmp_path, tiny_data):
    # A checkpoint every step, so there is one from before the failure to continue from.
    run = write_run(tmp_path / "run", tiny_data, steps_to=40, eval_every=40, eval_segments=8,
                    sharding="fsdp", checkpoint_every_min=0)
    env = trainer_env()
    env["TERNIT_TEST_FULL_EVENTS"] = "8"  # the start, a few steps and checkpoints, then full
    # The trainer's two ranks (forked as `torchrun` is in tests/forked.py, torchrun itself where
    # they cannot be), each with tests/trainer_full_events.py's disk. Before the fix rank 0
    # entered the sharded save alone and both processes waited forever: past the limit both
    # ranks are killed and the test fails.
    try:
        p = forked.run_ranks("tests.trainer_full_events", ["--run", str(run), "--device", "cpu"], env, 2,
                             timeout=150)
    except subprocess.TimeoutExpired:
        pytest.fail("the sharded run hung after rank 0's disk filled up")
    stderr = p.stderr
    assert p.returncode != 0
    assert "could not write the events" in stderr or "No space left on device" in stderr, stderr[-3000:]
    written = events(run, "checkpoint")
    assert written, "a checkpoint from before the disk filled up"
    steps = [e["step"] for e in events(run, "step")]
    assert steps and max(steps) < 40  # it ended early, at the failure
    # Nothing half-made: every DCP folder is a complete checkpoint with its manifest.
    for folder in (run / "checkpoints").glob("step-*.dcp"):
        assert (folder / ".metadata").is_file() and (folder.parent / f"{folder.name}.sha256").is_file()
