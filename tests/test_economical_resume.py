"""The economical mode in the real trainer process: bit-exact resume within the mode, and
a checkpoint of either mode continuing in the other."""

from __future__ import annotations

import pytest

from tests.trainer_run import events, real_torchrun, run_trainer, torchrun, write_run

STEPS = 20
STOP = 13


def losses_after(run_dir, step: int) -> list[float]:
    return [s["loss"] for s in events(run_dir, "step") if s["step"] > step]


def checkpoint_at(run_dir, step: int) -> str:
    return str(run_dir / "checkpoints" / f"step-{step:08d}.pt")


def test_economical_resume_is_bit_exact_and_checkpoints_cross_modes(tmp_path, tiny_data):
    kw = {"steps_to": STEPS, "eval_every": STEPS, "eval_segments": 8}
    # A checkpoint at every step of the uninterrupted run, kept: its step STOP is where the
    # resumed runs start (the same saved state a stop writes, one process fewer; the stop
    # path itself is test_trainer's), and the saves must not bend its trajectory.
    whole = write_run(tmp_path / "econ-whole", tiny_data, economical=True, **kw,
                      checkpoint_every_min=0, keep_checkpoints=STEPS)
    p = run_trainer(whole)
    assert p.returncode == 0, p.stderr
    end = events(whole, "end")[-1]
    assert end["reason"] == "steps_reached" and end["step"] == STEPS
    assert events(whole, "start")[0]["config"]["training"]["economical"] is True

    # Resumed in the economical mode in a new process: the same final state, bit for bit.
    parted = write_run(tmp_path / "econ-parted", tiny_data, economical=True, **kw)
    p = run_trainer(parted, "--resume", checkpoint_at(whole, STOP))
    assert p.returncode == 0, p.stderr
    assert events(parted, "end")[-1]["state_sha256"] == end["state_sha256"]
    assert losses_after(parted, STOP) == losses_after(whole, STOP)

    # The economical checkpoint continues in the normal mode...
    normal = write_run(tmp_path / "normal-from-econ", tiny_data, economical=False, **kw)
    p = run_trainer(normal, "--resume", checkpoint_at(whole, STOP))
    assert p.returncode == 0, p.stderr
    assert events(normal, "end")[-1]["reason"] == "steps_reached"
    # ...on the same trajectory: the modes differ only in the order of float sums.
    assert losses_after(normal, STOP) == pytest.approx(losses_after(whole, STOP), abs=2e-4)

    # And a normal checkpoint continues in the other economical level.
    full = write_run(tmp_path / "full-from-normal", tiny_data, economical="full", **{**kw, "steps_to": STEPS + 3})
    p = run_trainer(full, "--resume", checkpoint_at(normal, STEPS))
    assert p.returncode == 0, p.stderr
    assert [s["step"] for s in events(full, "step")] == [STEPS + 1, STEPS + 2, STEPS + 3]
    assert all(s["loss"] < events(whole, "step")[0]["loss"] for s in events(full, "step"))


def test_economical_mode_under_ddp_syncs_its_gradients_and_resumes_bit_exact(tmp_path, tiny_data):
    """Kaggle's 2×T4 trains under DDP, whose gradient all-reduce hangs on the weights'
    gradient accumulators: the economical mode's own autograd functions must feed them.
    Its losses follow the normal mode's under DDP (a rank left on its own gradients would
    wander off), and a stopped DDP run continued from its checkpoint ends bit for bit
    where the uninterrupted one does (a quota running out mid-run)."""
    kw = {"steps_to": 10, "eval_every": 5, "eval_segments": 8}
    normal = write_run(tmp_path / "ddp-normal", tiny_data, economical=False, **kw)
    # A kept checkpoint at every step: the continuation starts from its step 6 (the state a
    # stop at 6 saves; two processes stopping together is test_fsdp's and test_dcp_lab's).
    whole = write_run(tmp_path / "ddp-econ", tiny_data, economical="selective", **kw,
                      checkpoint_every_min=0, keep_checkpoints=10)
    for run, launch in ((normal, real_torchrun), (whole, torchrun)):  # as the kernel starts it; forked
        p = launch(run)
        assert p.returncode == 0, p.stderr[-3000:]
        # trainer.log gets each line once (the first rank's), not two interleaved copies.
        assert p.stderr.count("parameters:") == 1 and p.stderr.count("end: reached") == 1, p.stderr[-3000:]
    # DDP itself (test_trainer's test_ddp_on_two_cpu_processes once, now the normal run's):
    # two ranks, the tokens of both a step, rank 0 alone writes the events.
    start = events(normal, "start")[0]
    assert start["world_size"] == 2 and start["tokens_per_step"] == 4 * 2 * 32
    assert [s["step"] for s in events(normal, "step")] == list(range(1, 11))
    assert [(e["step"], e["segments"]) for e in events(normal, "eval")] == [(5, 8), (10, 8)]
    assert events(normal, "end")[-1]["reason"] == "steps_reached"
    assert events(whole, "start")[0]["world_size"] == 2
    a, b = losses_after(normal, 0), losses_after(whole, 0)
    assert len(a) == len(b) == 10
    assert b == pytest.approx(a, rel=1e-5)  # fp32: the modes differ only in rounding

    parted = write_run(tmp_path / "ddp-econ-parted", tiny_data, economical="selective", **kw)
    p = torchrun(parted, "--resume", checkpoint_at(whole, 6))
    assert p.returncode == 0, p.stderr[-3000:]
    assert events(parted, "end")[-1]["state_sha256"] == events(whole, "end")[-1]["state_sha256"]
