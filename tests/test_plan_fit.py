"""The plan's memory verdict (trainer/plan/fit.py): `python -m trainer.config RUN.json
--machine NAME` refuses a plan that does not fit the card and names the fastest
combination that does; a plan that fits gets its memory line. Pure functions and the
command in process (no torch)."""

from __future__ import annotations

import json

import pytest

from trainer.config.__main__ import main as check
from trainer.config.run_config import ModelConfig, RunConfig, TrainingConfig
from trainer.plan.fit import fastest_fitting, fit_of, verdict
from trainer.plan.planner import known_machine, plan


def full(**training) -> RunConfig:
    """The lab's full model (26 × 2304, 18 heads, V 4000, n 1024), batch 1."""
    return RunConfig(model=ModelConfig(layers=26, width=2304, heads=18, context=1024, vocab=4000),
                     training=TrainingConfig(batch_per_card=1, **training))


def test_the_normal_state_of_the_full_model_does_not_fit_16_gb_and_the_lean_state_does(tmp_path, capsys):
    path = tmp_path / "run.json"
    path.write_text(json.dumps(full().to_dict()))
    assert check([str(path), "--machine", "rtx5070ti"]) == 2
    out, err = capsys.readouterr()
    assert "step         normal" in out  # the plan is shown, then why it cannot run
    assert err.startswith("error: does not fit: ") and "over the card's 16,384 MiB" in err
    # The fastest that fits: the held lean state at level off (no recompute, one backward pass).
    assert 'the fastest combination that fits: training.economical "off", training.lean_state "on"' in err
    path.write_text(json.dumps(full(lean_state="on").to_dict()))
    assert check([str(path), "--machine", "rtx5070ti", "--json"]) == 0
    memory = json.loads(capsys.readouterr().out)["memory"]
    assert memory["code"] == "memory_fits" and memory["params"]["needed"] < memory["params"]["card"] == 16_384


def test_fastest_fitting_prefers_less_arithmetic_and_names_none_when_nothing_fits():
    m = known_machine("rtx3050")  # 8 GB: only offload (two passes) and one_pass (one) fit the full model
    best = fastest_fitting(full(), m)
    assert best is not None and best.fits and best.plan.step.value == "one_pass"
    assert best.plan.economical.value == "off"  # the least arithmetic of the plans that fit
    assert best.arithmetic == 1.0  # one backward pass, no recompute: as fast as the normal step's arithmetic
    huge = RunConfig(model=ModelConfig(layers=48, width=4096, heads=32, context=1024, vocab=4000),
                     training=TrainingConfig(batch_per_card=1))
    assert fastest_fitting(huge, m) is None
    refusal = verdict(huge, plan(huge, m))
    assert refusal.code == "does_not_fit" and refusal.params["fits"] is False
    assert "no combination" in refusal.text()


def test_the_cpu_has_no_card_to_weigh_against():
    cfg = full()
    p = plan(cfg, known_machine("cpu"))
    assert fit_of(cfg, p).fits is None and verdict(cfg, p) is None


def test_the_trainers_advice_at_batch_1_names_what_fits(tmp_path):
    """Out of memory at batch 1: recomputation cannot help when the state is what does not
    fit; the trainer's advice names the combination the memory model says fits."""
    import torch

    from trainer.parallel.distributed import World
    from trainer.run.control import Options
    from trainer.run.train import Trainer

    cfg = full()
    trainer = Trainer(cfg, Options(tmp_path), World(), torch.device("cpu"))
    try:
        trainer.plan = plan(cfg, known_machine("rtx5070ti"))  # as the plan on that card would be
        advice = trainer.oom(RuntimeError("CUDA out of memory")).advice
        assert 'training.economical "off", training.lean_state "on"' in advice
        assert "turn on training.economical" not in advice
        trainer.plan = plan(cfg, known_machine("cpu"))  # no card memory: nothing to name
        assert "no combination" in trainer.oom(RuntimeError("out of memory")).advice
    finally:
        trainer.events.close()


def test_the_plans_speed_says_what_it_rests_on(tmp_path, capsys):
    """The note's 149 ms a step at the full model on an RTX 5070 Ti, with the combination's
    recompute and second backward pass counted in its arithmetic (trainer.plan.step_cost)."""
    path = tmp_path / "run.json"
    path.write_text(json.dumps(full(lean_state="on").to_dict()))
    assert check([str(path), "--machine", "rtx5070ti"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.strip().startswith("speed"))
    # The note's own shape, one backward pass, no recompute: the note's figure itself.
    assert "≈ 149 ms a step: the note's 149 ms a step (1.67 B weights, 1,024 tokens, RTX 5070 Ti" in line
    assert "×1.00 the normal step's" in line and "(1 backward pass a step) counted" in line
    path.write_text(json.dumps(full(lean_state="fused", economical="full").to_dict()))
    assert check([str(path), "--machine", "rtx5070ti", "--json"]) == 0
    speed = json.loads(capsys.readouterr().out)["speed"]["params"]
    assert speed["backward_passes"] == 2 and speed["second_backward"] == 2 / 3 and speed["recompute"] > 0
    assert speed["ms"] == pytest.approx(149 * (1 + speed["recompute"] + speed["second_backward"]))
    # A card with no measured step time says so, and still counts the passes.
    assert check([str(path), "--machine", "rtx3050"]) == 0
    assert "no measured step time of this card to scale" in capsys.readouterr().out


def test_the_forms_time_estimate_says_what_it_counts(russian):
    from app.form.sizes import time_row
    from app.sizing.estimate import estimate

    full_model = dict(layers=26, width=2304, heads=18, context=1024, vocab=4000, batch=1, gpu="rtx5070ti")
    note = time_row(estimate(**full_model, economical="full", lean_state="fused"), 1000).note
    assert "149 мс на шаг" in note  # the speed's basis: the note
    assert "учтены: пересчёт +" in note and "и второй обратный проход +67 %" in note
    assert "учтены:" not in time_row(estimate(**full_model, lean_state="on"), 1000).note
