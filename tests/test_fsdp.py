"""FSDP2 sharding (trainer/sharding.py) in the real trainer under torchrun with two gloo
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

    from trainer.export import export

    export(parted / "checkpoints" / f"step-{STEPS:08d}.dcp", tmp_path / "w.safetensors")
    weights = load_file(str(tmp_path / "w.safetensors"))
    assert "tok.weight" in weights and weights["tok.weight"].dtype == torch.float32
    check_damage_is_refused(parted, folder)


def check_damage_is_refused(run, folder) -> None:
    """The DCP folder's manifest is checked on load: a changed shard, a missing file."""
    from trainer import checkpoint as ckpt

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


def test_fsdp_refusals_are_one_line(tmp_path, tiny_data):
    from trainer.compiling import decide
    from trainer.config import ConfigError, TrainingConfig
    from trainer.distributed import World
    from trainer.sharding import decide as decide_sharding

    two = World(rank=0, local_rank=0, size=2)
    with pytest.raises(ConfigError, match="lean_state cannot be combined with FSDP"):
        decide_sharding(TrainingConfig(sharding="fsdp"), two, torch.device("cpu"), 1000, "on")
    assert decide_sharding(TrainingConfig(), two, torch.device("cpu"), 10**9, "off") == "ddp"  # auto on the CPU
    assert decide_sharding(TrainingConfig(sharding="fsdp"), World(), torch.device("cpu"), 10, "off") == "none"
    with pytest.raises(ConfigError, match="compile \"on\" cannot be combined"):
        decide("on", torch.device("cpu"), "off", "fsdp")
    assert decide("auto", torch.device("cuda"), "off", "fsdp")[0] is False
    from trainer.config import from_dict

    with pytest.raises(ConfigError, match="training.sharding must be one of auto, ddp, fsdp"):
        from_dict({"training": {"sharding": "zero3"}})


def test_the_sizing_offers_no_combination_the_trainer_refuses():
    """One rule (trainer.config.sharding_refusal) for the trainer's refusal and the sizing's
    list: every combination sizing offers passes the trainer's check, and every one it
    leaves out is refused by it."""
    from app.sizing.combos import Combination, combinations, running
    from trainer.config import (
        ECONOMICAL_LEVELS,
        LEAN_MODES,
        ConfigError,
        TrainingConfig,
        sharding_refusal,
    )
    from trainer.distributed import World
    from trainer.sharding import decide

    for cards in (1, 2):
        offered = set(combinations(cards))
        for sharded in ((False, True) if cards > 1 else (False,)):
            for lean in LEAN_MODES:
                world = World(rank=0, local_rank=0, size=cards) if cards > 1 else World()
                t = TrainingConfig(sharding="fsdp" if sharded else "ddp")
                try:
                    decide(t, world, torch.device("cpu"), 1000, lean)
                    refused = False
                except ConfigError as e:
                    refused = True
                    assert str(e) == sharding_refusal(running(sharded, cards), lean)
                for level in ECONOMICAL_LEVELS:
                    assert (Combination(level, lean, sharded) in offered) is not refused, (cards, sharded, lean)
    assert Combination("selective", "on", True) not in combinations(2)  # what auto picked before
    assert Combination("selective", "off", True) in combinations(2)


@pytest.mark.parametrize("level", ["selective", "full"])
def test_fsdp_under_an_economical_level_shards_per_block_and_resumes_bit_exact(tmp_path, tiny_data, level):
    """The economical levels run each block through a method of its own, registered with
    FSDP (trainer.economical.FORWARD): per-block sharding as in the normal mode, and a
    resumed run is the uninterrupted one bit for bit."""
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
