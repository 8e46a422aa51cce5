"""Two NVIDIA cards on a Windows PC (issue 22, item 6): gloo, not NCCL (Windows' torch has
none), and the ranks started by the trainer's own launcher, since torchrun cannot start on
Windows (its rendezvous store asks for libuv, which Windows builds lack). Shown here with
two CPU ranks: the Wine kit has no card, and gloo is the same between CPU processes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch.distributed as dist

from app.runs import process
from tests import trainer_run as tr
from trainer.parallel.distributed import backend_for


@pytest.mark.windows
def test_cards_talk_through_gloo_where_torch_has_no_nccl(monkeypatch):
    if os.name != "nt":
        monkeypatch.setattr(dist, "is_nccl_available", lambda: False)  # as on Windows
    assert backend_for("cuda") == "gloo" and backend_for("cpu") == "gloo"


@pytest.mark.windows
def test_a_two_card_run_is_launched_by_torchrun_or_on_windows_by_the_trainers_own_launcher(tmp_path):
    plan = process.plan_launch(tmp_path, "0,1")
    assert plan.processes == 2 and plan.argv[-4:] == ["--run", str(tmp_path), "--device", "cuda"]
    if os.name == "nt":
        assert plan.argv[1:4] == ["-m", "trainer.parallel.ranks", "2"]
    else:
        assert plan.argv[1:3] == ["-m", "torch.distributed.run"]


def test_two_ranks_started_by_the_launcher_train_together(tiny_data, tmp_path):
    """Not in CI's Windows set (two more torch starts under Wine, ≈ 2 min there); it passed
    under the Wine kit by hand (docs/PERF.md, issue 22)."""
    run = tr.write_run(tmp_path / "run", tiny_data, steps_to=4, eval_every=2, eval_segments=2)
    env = {**tr.trainer_env(), "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([sys.executable, "-m", "trainer.parallel.ranks", "2", "--run", str(run), "--device", "cpu"],
                          env=env, cwd=tr.ROOT, capture_output=True, encoding="utf-8", errors="replace",
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    start, end = tr.events(run, "start")[0], tr.events(run, "end")[-1]
    assert start["world_size"] == 2 and end["reason"] == "steps_reached" and end["step"] == 4
