"""The economical mode in the real trainer process: bit-exact resume within the mode, and
a checkpoint of either mode continuing in the other."""

from __future__ import annotations

import pytest

from tests.trainer_run import events, run_trainer, write_run

STEPS = 20
STOP = 13


def losses_after(run_dir, step: int) -> list[float]:
    return [s["loss"] for s in events(run_dir, "step") if s["step"] > step]


def checkpoint_at(run_dir, step: int) -> str:
    return str(run_dir / "checkpoints" / f"step-{step:08d}.pt")


def test_economical_resume_is_bit_exact_and_checkpoints_cross_modes(tmp_path, tiny_data):
    kw = {"steps_to": STEPS, "eval_every": STEPS, "eval_segments": 8}
    whole = write_run(tmp_path / "econ-whole", tiny_data, economical=True, **kw)
    p = run_trainer(whole)
    assert p.returncode == 0, p.stderr
    end = events(whole, "end")[-1]
    assert end["reason"] == "steps_reached" and end["step"] == STEPS
    assert events(whole, "start")[0]["config"]["training"]["economical"] is True

    # Stopped and resumed in the economical mode: the same final state, bit for bit.
    parted = write_run(tmp_path / "econ-parted", tiny_data, economical=True, **kw)
    assert run_trainer(parted, "--stop-at-step", str(STOP)).returncode == 0
    p = run_trainer(parted, "--resume", "latest")
    assert p.returncode == 0, p.stderr
    assert events(parted, "end")[-1]["state_sha256"] == end["state_sha256"]
    assert losses_after(parted, STOP) == losses_after(whole, STOP)

    # The economical checkpoint continues in the normal mode...
    normal = write_run(tmp_path / "normal-from-econ", tiny_data, economical=False, **kw)
    p = run_trainer(normal, "--resume", checkpoint_at(parted, STOP))
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
