"""Gradient accumulation (run.json `training.tokens_per_step`): micro-steps add up to the
whole batch, the data of a micro-step is the data a second card would read, a bad value
is refused before training, resume stays bit-exact, DDP and the lean state accumulate."""

from __future__ import annotations

import pytest

from tests.trainer_run import events, run_module, run_trainer, torchrun, write_run

torch = pytest.importorskip("torch")

CPU = torch.device("cpu")
N, B = 32, 4  # the tiny runs' context and batch per card (tests/trainer_run.py)


def _model(seed: int = 7):
    from trainer.config.run_config import ModelConfig
    from trainer.model.gpt import GPT

    model = GPT(ModelConfig(context=N, width=64, heads=2, layers=2, vocab=300))
    model.init_weights(seed)
    return model


def _batches(count: int, rows: int = B):
    g = torch.Generator().manual_seed(0)
    return [(x[:, :-1], x[:, 1:]) for x in (torch.randint(0, 300, (rows, N + 1), generator=g) for _ in range(count))]


def _max_diff(a, b) -> float:
    return max(float((p - q).detach().abs().max()) for p, q in zip(a.parameters(), b.parameters(), strict=True))


def _share_apart(a, b, tolerance: float) -> float:
    """The share of the two models' weights that differ by more than `tolerance`."""
    apart = sum(int(((p - q).detach().abs() > tolerance).sum()) for p, q in zip(a.parameters(), b.parameters(), strict=True))
    return apart / sum(p.numel() for p in a.parameters())


def _step_both(make_opt, precision: str = "fp32", kind: str = "normal") -> tuple[float, float, float, float]:
    """One step as two micro-steps and as one batch of both: (their largest weight
    difference, the share of weights that differ by more than 1e-6, how far the step moved
    the weights, the two losses' difference)."""
    from trainer.step.optim import make_scaler
    from trainer.step.step import train_step

    start, split, whole = _model(), _model(), _model()
    (x1, y1), (x2, y2) = _batches(2)
    scaler = make_scaler(precision, CPU)
    ls = train_step(split, make_opt(split), scaler, [(x1, y1), (x2, y2)], 1e-3, precision, CPU, 1.0, kind)
    lw = train_step(whole, make_opt(whole), scaler, (torch.cat([x1, x2]), torch.cat([y1, y2])), 1e-3,
                    precision, CPU, 1.0, kind)
    return (_max_diff(split, whole), _share_apart(split, whole, 1e-6), _max_diff(whole, start),
            abs(float(ls) - float(lw)))


def test_two_micro_steps_make_the_step_of_their_whole_batch():
    from trainer.config.run_config import TrainingConfig
    from trainer.step.optim import make_optimizer

    t = TrainingConfig(lr=1e-3)
    diff, apart, moved, loss_diff = _step_both(lambda m: make_optimizer(m, t, CPU))
    assert moved > 5e-4  # AdamW's first step moves a weight by about lr
    # Float rounding only, not a second update (which would move every weight by about lr). Not
    # a bound on the largest difference alone: AdamW's first step is lr·g/(|g| + eps), so a weight
    # whose gradient is near eps moves by a rounding-sized difference times lr/eps — how far
    # depends on the processor's summation order (seen here: 1 weight of 119,552 at 5e-6).
    assert diff < 1e-4 and loss_diff < 1e-5
    assert apart < 1e-3


def test_lean_state_updates_once_from_the_summed_gradient():
    pytest.importorskip("bitsandbytes")
    from trainer.config.run_config import TrainingConfig
    from trainer.step.lean import LeanOptimizer

    t = TrainingConfig(lr=1e-3)
    opts = []

    def make(m):
        opts.append(LeanOptimizer(m, t, CPU, "fp32", "held"))
        return opts[-1]

    diff, _, moved, _ = _step_both(make, kind="held")
    assert moved > 5e-4
    # Two updates (a hook firing on the first micro-step) would differ by about lr.
    assert diff < 1e-4
    assert [o.updates for o in opts] == [1, 1]
    assert all(p.grad is None for o in opts for p in o.order)  # nothing left held after the step


def test_a_micro_step_reads_what_another_card_would():
    from trainer.run.data import Prefetcher, get_batch

    tokens = torch.arange(5000, dtype=torch.int32).numpy().astype("uint16")
    one_card = Prefetcher(tokens, N, B, 11, 0, CPU, world_size=1, accumulation=2)
    micro = one_card.get_step(3)
    for virtual_rank in (0, 1):  # rank 0 and rank 1 of a two-card run at the same step
        x, _ = get_batch(tokens, N, B, 11, 3, virtual_rank)
        assert torch.equal(micro[virtual_rank][0], x)
    # Rank 1 of two cards with two micro-steps: virtual ranks 1 and 3.
    rank1 = Prefetcher(tokens, N, B, 11, 1, CPU, world_size=2, accumulation=2).get_step(3)
    assert torch.equal(rank1[1][0], get_batch(tokens, N, B, 11, 3, 3)[0])
    assert torch.equal(one_card.get_step(4)[0][0], get_batch(tokens, N, B, 11, 4, 0)[0])  # the prefetched one


@pytest.mark.parametrize(("tokens", "target", "says"), [
    (1000, {}, "= 128 tokens: set tokens_per_step to 896 or 1,024"),  # 1 × 4 × 32 per micro-step
    (384, {"kind": "kaggle"}, "2 card(s) × batch_per_card 4 × context 32 = 256 tokens: set tokens_per_step to 256 or 512"),
    (384, {"gpu": "0,1"}, "2 card(s)"),
    (-5, {}, "training.tokens_per_step must be at least 0"),
])
def test_a_tokens_per_step_that_does_not_divide_is_refused_by_the_config_check(tmp_path, tiny_data, tokens, target, says):
    import json

    run = write_run(tmp_path / "bad", tiny_data, tokens_per_step=tokens)
    cfg = json.loads((run / "run.json").read_text())
    cfg["target"] = target
    (run / "run.json").write_text(json.dumps(cfg))
    p = run_module("trainer.config", str(run / "run.json"), timeout=60)  # `python -m trainer.config`, forked
    assert p.returncode == 2 and says in p.stderr, p.stderr


def test_nearest_values_and_batches_are_named():
    from trainer.config.run_config import ConfigError, accumulation, from_dict

    cfg = from_dict({"training": {"tokens_per_step": 12288, "batch_per_card": 6}})
    assert accumulation(cfg, 1) == 2 and accumulation(cfg, 2) == 1
    with pytest.raises(ConfigError) as e:
        accumulation(from_dict({"training": {"tokens_per_step": 12288, "batch_per_card": 5}}), 1)
    assert "10,240 or 15,360" in str(e.value) and "batch_per_card to 3, 4, 6" in str(e.value)
    cfg = from_dict({"training": {"tokens_per_step": 12288}})
    with pytest.raises(ConfigError, match="3 card"):
        accumulation(cfg, 3)  # a world size only the trainer knows: checked at its start


def test_smaller_batch_keeps_the_tokens_per_step():
    from trainer.config.run_config import smaller_batch

    assert smaller_batch(6, 1) == 3 and smaller_batch(5, 1) == 1 and smaller_batch(5, 2) == 2
    assert smaller_batch(1, 4) == 1 and smaller_batch(8, 3) == 4
    for batch, micro in ((6, 1), (5, 1), (7, 2), (12, 5)):
        assert (batch * micro) % smaller_batch(batch, micro) == 0


def test_the_trainer_refuses_it_for_the_cards_it_finds_before_training(tmp_path, tiny_data):
    """target.gpu auto: the config check knows one process only; started on two, the
    trainer refuses 3 × 128 tokens (not a whole number of 2 × 128) before any step."""
    run = write_run(tmp_path / "bad", tiny_data, tokens_per_step=3 * B * N)
    p = torchrun(run)
    assert p.returncode != 0
    err = events(run, "error")[-1]
    assert "tokens_per_step 384" in err["message"] and "2 card(s)" in err["message"]
    assert "256 or 512" in err["message"] and not events(run, "step")


def test_accumulation_resumes_bit_exact_with_the_economical_mode(tmp_path, tiny_data):
    kw = {"tokens_per_step": 2 * B * N, "steps_to": 8, "eval_every": 4, "economical": "selective"}
    # A kept checkpoint at every step: the continuation starts from the whole run's step 3
    # in a new process (the state a stop at 3 saves; the stop path is test_trainer's).
    whole = write_run(tmp_path / "whole", tiny_data, **kw, checkpoint_every_min=0, keep_checkpoints=8)
    p = run_trainer(whole)
    assert p.returncode == 0, p.stderr
    start = events(whole, "start")[0]
    assert start["tokens_per_step"] == 2 * B * N and start["accumulation"] == 2
    assert "2 micro-steps of 128" in p.stderr
    steps = events(whole, "step")
    assert [s["tokens_seen"] for s in steps] == [i * 2 * B * N for i in range(1, 9)]
    parted = write_run(tmp_path / "parted", tiny_data, **kw)
    p = run_trainer(parted, "--resume", str(whole / "checkpoints" / "step-00000003.pt"))
    assert p.returncode == 0, p.stderr
    assert events(parted, "end")[-1]["state_sha256"] == events(whole, "end")[-1]["state_sha256"]
    assert [s["loss"] for s in events(parted, "step") if s["step"] > 3] == [s["loss"] for s in steps[3:]]
    assert events(parted, "step")[-1]["tokens_seen"] == steps[-1]["tokens_seen"]


def test_lean_state_with_accumulation_resumes_bit_exact(tmp_path, tiny_data):
    pytest.importorskip("bitsandbytes")
    # The held step (lean_state true) accumulates; a fused one is refused with micro-steps
    # (trainer.plan.planner: its promise, no gradients held, would not hold; tests/test_plan.py).
    kw = {"tokens_per_step": 2 * B * N, "steps_to": 6, "eval_every": 6, "lean_state": True}
    whole = write_run(tmp_path / "whole", tiny_data, {"width": 64}, **kw, checkpoint_every_min=0,
                      keep_checkpoints=6)
    p = run_trainer(whole)
    assert p.returncode == 0, p.stderr
    start = events(whole, "start")[0]
    assert start["step_kind"] == "held" and start["accumulation"] == 2 and start["built"]["step"] == "held"
    parted = write_run(tmp_path / "parted", tiny_data, {"width": 64}, **kw)  # from the whole run's step 2
    p = run_trainer(parted, "--resume", str(whole / "checkpoints" / "step-00000002.pt"))
    assert p.returncode == 0, p.stderr
    assert events(parted, "end")[-1]["state_sha256"] == events(whole, "end")[-1]["state_sha256"]


def test_two_cards_and_one_card_at_the_same_tokens_per_step_train_alike(tmp_path, tiny_data):
    """2 processes × 2 micro-steps and 1 process × 4 micro-steps read the same sequences
    (virtual ranks 0–3) and average the same gradients: the losses agree to rounding."""
    kw = {"tokens_per_step": 4 * B * N, "steps_to": 5, "eval_every": 5}
    two = write_run(tmp_path / "two", tiny_data, **kw)
    p = torchrun(two)
    assert p.returncode == 0, p.stderr[-3000:]
    assert events(two, "start")[0]["accumulation"] == 2 and events(two, "start")[0]["world_size"] == 2
    one = write_run(tmp_path / "one", tiny_data, **kw)
    assert run_trainer(one).returncode == 0
    assert events(one, "start")[0]["accumulation"] == 4
    a, b = ([s["loss"] for s in events(r, "step")] for r in (two, one))
    assert len(a) == 5 and a == pytest.approx(b, rel=1e-4)
    assert [s["tokens_seen"] for s in events(two, "step")] == [s["tokens_seen"] for s in events(one, "step")]
