"""FSDP2 sharding (trainer/parallel/sharding.py) in the real trainer under torchrun with two gloo
processes on the CPU: bit-exact resume on two processes, a two-process checkpoint (the
DCP form) continuing on one process and a one-process checkpoint continuing on two, the
DCP folder's integrity (manifest checked on load), refusals in one line. One test runs all
of it. The first run is torchrun's own launch; the others fork their two ranks from a
process that has imported torch (tests/forked.py: ≈ 2 s a start instead of ≈ 10–20 s on
CI's 2 cores), and the stopped-and-resumed forked run must end where torchrun's did."""

from __future__ import annotations

import pytest

from tests.trainer_run import events, real_torchrun, run_trainer, torchrun, write_run

torch = pytest.importorskip("torch")

STEPS, STOP = 8, 5
# fp16: what Kaggle's 2×T4 run (16-bit gathered weights, fp32 reduction, the sharded
# GradScaler agreeing on infinities across the processes).
KW = {"steps_to": STEPS, "eval_every": 4, "eval_segments": 8, "sharding": "fsdp", "precision": "fp16"}


def losses_after(run_dir, step: int) -> list[float]:
    return [s["loss"] for s in events(run_dir, "step") if s["step"] > step]


def test_fsdp_resumes_bit_exact_and_crosses_to_one_process_and_back(tmp_path, tiny_data):
    whole = write_run(tmp_path / "whole", tiny_data, **KW)
    p = real_torchrun(whole)  # as the 2×T4 kernel starts it; the other runs' ranks are forked
    assert p.returncode == 0, p.stderr[-3000:]
    start, end = events(whole, "start")[0], events(whole, "end")[-1]
    assert start["world_size"] == 2 and start["sharding"] == "fsdp"
    assert end["reason"] == "steps_reached" and end["state_sha256"]
    assert "sharding: fsdp over 2 blocks + the embeddings, weights gathered in fp16" in p.stderr

    # Stopped and resumed on two processes: the same state, bit for bit.
    parted = write_run(tmp_path / "parted", tiny_data, **KW)
    p = torchrun(parted, "--stop-at-step", str(STOP))
    assert p.returncode == 0, p.stderr[-3000:]
    folder = parted / "checkpoints" / f"step-{STOP:08d}.dcp"
    assert (folder / ".metadata").is_file() and (folder / "extra.pt").is_file()
    assert (parted / "checkpoints" / "latest").read_text().strip() == folder.name
    p = torchrun(parted, "--resume", "latest")
    assert p.returncode == 0, p.stderr[-3000:]
    assert events(parted, "end")[-1]["state_sha256"] == end["state_sha256"]
    assert losses_after(parted, STOP) == losses_after(whole, STOP)

    # The two-process checkpoint continues on one process, on the same trajectory
    # (one process sees half the tokens a step: the losses are close, not equal).
    one = write_run(tmp_path / "one", tiny_data, **{**KW, "steps_to": STEPS + 2})
    p = run_trainer(one, "--resume", str(folder))
    assert p.returncode == 0, p.stderr[-3000:]
    assert "saved sharded over 2 processes: read whole here" in p.stderr
    steps = events(one, "step")
    assert [s["step"] for s in steps] == list(range(STOP + 1, STEPS + 3))
    assert steps[0]["loss"] == pytest.approx(losses_after(whole, STOP)[0], abs=0.1)
    one_ckpt = one / "checkpoints" / f"step-{STEPS + 2:08d}.pt"
    assert one_ckpt.is_file()  # one process writes the ordinary form

    # ...and back: the one-process checkpoint is sharded over two processes.
    back = write_run(tmp_path / "back", tiny_data, **{**KW, "steps_to": STEPS + 4})
    p = torchrun(back, "--resume", str(one_ckpt))
    assert p.returncode == 0, p.stderr[-3000:]
    assert "saved whole (1 process(es)): sharded over 2" in p.stderr
    assert [s["step"] for s in events(back, "step")] == [STEPS + 3, STEPS + 4]

    # The export reads the DCP form whole, with the model's plain names.
    from safetensors.torch import load_file

    from trainer.model.export import export

    export(parted / "checkpoints" / f"step-{STEPS:08d}.dcp", tmp_path / "w.safetensors")
    weights = load_file(str(tmp_path / "w.safetensors"))
    assert "tok.weight" in weights and weights["tok.weight"].dtype == torch.float32
    check_damage_is_refused(parted, folder)


def check_damage_is_refused(run, folder) -> None:
    """The DCP folder's manifest is checked on load: a changed shard, a missing file."""
    from trainer.state import checkpoint as ckpt

    assert ckpt.damage(folder) is None
    assert events(run, "checkpoint")[0]["sha256"] == ckpt.file_sha256(folder)
    shard = folder / "__1_0.distcp"
    good = shard.read_bytes()
    data = bytearray(good)
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    assert "__1_0.distcp" in ckpt.damage(folder) and "changed on disk" in ckpt.damage(folder)
    p = run_trainer(run, "--resume", str(folder))
    assert p.returncode == 2 and "is damaged" in p.stderr, p.stderr[-2000:]
    shard.write_bytes(good)
    (folder / "extra.pt").unlink()
    assert "extra.pt is missing" in ckpt.damage(folder)


def test_fsdp_choices_and_refusals():
    """The plan (trainer/plan/planner.py) decides FSDP, for the trainer and the sizing alike
    (tests/test_plan.py holds the sizing to it over the whole grid)."""
    from trainer.config.run_config import ConfigError, from_dict
    from trainer.plan.planner import Machine, Refusal, plan

    def shards(machine: Machine, width: int = 64, **training) -> str:
        p = plan(from_dict({"model": {"width": width, "layers": 24}, "training": training}), machine)
        return p.code if isinstance(p, Refusal) else p.sharding.value

    two_cpu = Machine(processes=2, bitsandbytes=True, compiler=True)
    t4x2 = Machine(processes=2, device="cuda", card_memory_mb=15_360, capability=(7, 5), bitsandbytes=True,
                   triton=True, compiler=True)
    assert shards(two_cpu, sharding="fsdp", lean_state=True) == "lean_under_fsdp"
    assert shards(two_cpu, 1440) == "ddp"  # auto on the CPU: no card to weigh the state against
    assert shards(Machine(), sharding="fsdp") == "none"  # one process: said, nothing to share
    assert shards(two_cpu, sharding="fsdp", compile="on") == "compile_on_fsdp"
    # auto on a card: FSDP when 16 bytes a weight are over half of it, unless the lean state
    # runs (which FSDP does not take: DDP, where it fits as the sizing says).
    # 24 × 1440 is 604 M weights: 9.7 GB of normal state, over half a T4's 15 GB.
    assert shards(t4x2, 512) == "ddp" and shards(t4x2, 1440) == "fsdp" and shards(t4x2, 1440, lean_state=True) == "ddp"
    p = plan(from_dict({"model": {"layers": 24, "width": 1440, "heads": 12}, "training": {"compile": "auto"}}), t4x2)
    assert p.compile.value == "off" and p.compile.reason.code == "compile_fsdp"  # auto stays eager, and says why
    assert p.samples.value == "off" and p.samples.reason.code == "samples_fsdp"
    with pytest.raises(ConfigError, match="training.sharding must be one of auto, ddp, fsdp"):
        from_dict({"training": {"sharding": "zero3"}})


@pytest.mark.parametrize("level", ["selective", "full"])
def test_fsdp_under_an_economical_level_shards_per_block_and_resumes_bit_exact(tmp_path, tiny_data, level):
    """The economical levels run inside each block's own forward pass (trainer.model.gpt.Block),
    which FSDP gathers around: per-block sharding as in the normal mode, and a resumed run
    is the uninterrupted one bit for bit."""
    kw = {**KW, "economical": level, "eval_every": 8}
    # A checkpoint kept at every step: the continuation starts from the whole run's own.
    whole = write_run(tmp_path / "whole", tiny_data, **kw, checkpoint_every_min=0, keep_checkpoints=STEPS)
    p = torchrun(whole)
    assert p.returncode == 0, p.stderr[-3000:]
    assert f"sharding: fsdp over 2 blocks + the embeddings (per block under the economical level {level} too)" in p.stderr
    end = events(whole, "end")[-1]
    assert end["reason"] == "steps_reached"
    # A save after every step, the last one included, made by both processes together (a
    # sharded save is collective: rank 1 once began a second save of the last step alone
    # and the run hung until killed).
    assert [c["step"] for c in events(whole, "checkpoint")] == list(range(1, STEPS + 1))
    parted = write_run(tmp_path / "parted", tiny_data, **kw)
    p = torchrun(parted, "--resume", str(whole / "checkpoints" / f"step-{STOP:08d}.dcp"))
    assert p.returncode == 0, p.stderr[-3000:]
    assert events(parted, "end")[-1]["state_sha256"] == end["state_sha256"]
    assert losses_after(parted, STOP) == losses_after(whole, STOP)
