"""trainer.step.memory_count: the trainer's step counted on fake tensors.

At small shapes on the CPU the count equals StoragePeak of the same step on real tensors,
built as the trainer builds it (trainer.run.wrapping.build_parts, the real bitsandbytes);
what it must include is pinned (the fp32 logits and their gradient, a parameter's fp32
update temporaries, the recomputation's transients); the command prints what the issue
names. Counts are of storages, exact integers: no CPU's floating point is involved."""

from __future__ import annotations

import json

import pytest
import torch

from trainer.config.run_config import ModelConfig, RunConfig, TrainingConfig
from trainer.model.gpt import GPT
from trainer.plan.planner import Machine, plan
from trainer.run.wrapping import build_parts
from trainer.step import memory_count as mc
from trainer.step.memory import measure_step, model_tensors
from trainer.step.step import train_step

CPU = Machine(device="cpu", bitsandbytes=True)
MiB = 2**20


def tiny(precision: str, lean: str, level: str, layers: int = 2, width: int = 64, context: int = 64,
         vocab: int = 300, batch: int = 2):
    cfg = RunConfig()
    cfg.model = ModelConfig(context=context, width=width, heads=2, layers=layers, vocab=vocab)
    cfg.training = TrainingConfig(batch_per_card=batch, economical=level, lean_state=lean, precision=precision)
    return cfg, plan(cfg, CPU)


def real_peaks(cfg: RunConfig, p, steps: int = 2) -> list[int]:
    """StoragePeak of the trainer's own step on real tensors, each of `steps` steps."""
    t, m, dev = cfg.training, cfg.model, torch.device("cpu")
    model = GPT(m, p.economical.value)
    model.init_weights(t.seed)
    parts = build_parts(model, p, t, dev)
    peaks = []
    for _ in range(steps):
        x = torch.randint(0, m.vocab, (t.batch_per_card, m.context))
        y = torch.randint(0, m.vocab, (t.batch_per_card, m.context))
        state = [v for s in parts.optimizer.state.values() for v in s.values() if torch.is_tensor(v)]
        _, info = measure_step(
            lambda x=x, y=y: train_step(parts.module, parts.optimizer, parts.scaler, (x, y), t.lr, p.precision.value,
                                        dev, t.grad_clip, p.step.value),
            alive=[*model_tensors(model), *state, x, y], device=dev)
        peaks.append(info["peak_bytes"])
    return peaks


COMBINATIONS = [("fp32", "off", "off"), ("bf16", "off", "off"), ("bf16", "off", "selective"), ("bf16", "off", "full"),
                ("bf16", "on", "off"), ("bf16", "on", "full"), ("fp32", "on", "selective"),
                ("bf16", "fused", "off"), ("bf16", "fused", "selective"), ("fp32", "fused", "full"),
                ("bf16", "one_pass", "off"), ("bf16", "one_pass", "full"), ("fp32", "one_pass", "selective")]


@pytest.mark.parametrize(("precision", "lean", "level"), COMBINATIONS)
def test_the_count_equals_the_real_steps_storage_peak(precision, lean, level):
    cfg, p = tiny(precision, lean, level)
    fake = mc._run(cfg, p, 2, cuda_rules=False)
    assert [s["peak_bytes"] for s in fake["steps"]] == real_peaks(cfg, p)


def test_cuda_autocast_rules_count_as_on_real_tensors_and_add_the_fp32_norm_inputs():
    # bf16 weights at level off: the only place where CUDA's layer_norm rule changes the step.
    cfg, p = tiny("bf16", "on", "off")
    with mc.cuda_autocast_rules():
        real = real_peaks(cfg, p)
    counted = [s["peak_bytes"] for s in mc._run(cfg, p, 2)["steps"]]
    assert counted == real
    assert counted[1] > mc._run(cfg, p, 2, cuda_rules=False)["steps"][1]["peak_bytes"]


def test_the_count_includes_the_fp32_logits_and_their_gradient():
    # n 1024 × V 4000, one narrow layer: the logits (fp32) and their gradient are the step's
    # largest tensors; both are alive at the peak.
    cfg, p = tiny("bf16", "off", "off", layers=1, width=32, context=1024, vocab=4000, batch=1)
    r = mc.count(cfg, p)
    logits = 4 * 1024 * 4000
    by = r["by_category"]
    assert (by["activations"] + by["temporaries"]) * MiB >= 2 * logits * 0.999  # rounded to 0.1 MiB


def test_the_count_includes_a_parameters_fp32_update_temporaries():
    # "held" under bf16 updates each parameter through fp32 copies of it and of its gradient
    # (8 bytes a weight). With 8 tokens the step's peak is the first update (the attention's
    # qkv matrix, 3·d² weights), while every bf16 gradient is still held.
    d = 256
    cfg, p = tiny("bf16", "on", "off", layers=1, width=d, context=8, vocab=300, batch=1)
    r = mc.count(cfg, p)
    by = r["by_category"]
    assert by["gradients"] == by["weights"]  # all held, in the weights' precision
    assert by["temporaries"] * MiB >= 8 * 3 * d * d * 0.99  # rounded to 0.1 MiB
    assert r["backward_passes"] == 1


def test_the_count_includes_the_recomputations_transients():
    # Full recompute keeps only the blocks' inputs; the backward pass recomputes a block's
    # norm, attention and MLP slices, which the count sees as temporaries beside them.
    cfg, p = tiny("fp32", "off", "full", layers=2, width=64, context=256, vocab=300, batch=4)
    r = mc.count(cfg, p)
    assert r["by_category"]["temporaries"] * MiB >= 4 * 4 * 256 * 64 * 2


def test_one_pass_makes_one_backward_pass_after_its_priming_step_and_holds_no_gradients():
    cfg, p = tiny("bf16", "one_pass", "full")
    r = mc.count(cfg, p)
    assert [s["backward_passes"] for s in r["steps"]] == [2, 1]  # the first step primes its clipping
    assert r["backward_passes"] == 1 and r["step_of_peak"] == 2 and r["combination"]["step"] == "one_pass"
    # Its moments are about half the 8-bit state's (at small shapes its update's row-slice
    # temporaries outweigh that; at the full model it is the lower: docs/PERF.md).
    wide, fused = (mc.count(*tiny("bf16", kind, "full", width=256)) for kind in ("one_pass", "fused"))
    assert wide["by_category"]["optimizer_state"] < 0.6 * fused["by_category"]["optimizer_state"]
    assert wide["by_category"]["gradients"] < 0.2 * wide["by_category"]["weights"]  # no set held


def test_fused_makes_two_backward_passes_and_offload_keeps_the_moments_off_the_card():
    cfg, p = tiny("bf16", "fused", "full")
    fused = mc.count(cfg, p)
    assert fused["backward_passes"] == 2 and fused["combination"]["step"] == "fused"
    cfg, p = tiny("bf16", "offload", "full")
    off = mc.count(cfg, p)
    # On the card: one parameter's moments at a time (the largest is the embedding's here).
    largest = 300 * 64
    assert off["by_category"]["optimizer_state"] * MiB <= 2 * largest + 8 * (largest // 256 + 1) + 2048 + 0.05 * MiB
    assert off["peak_mb"] < fused["peak_mb"]


def test_the_categories_add_up_to_the_peak():
    cfg, p = tiny("bf16", "fused", "selective")
    r = mc.count(cfg, p)
    assert set(r["by_category"]) == set(mc.CATEGORIES)
    assert sum(r["by_category"].values()) == pytest.approx(r["peak_mb"], abs=0.3)  # each rounded to 0.1
    assert r["step_of_peak"] in (1, 2) and len(r["steps"]) == 2


def test_command_prints_the_json_and_refuses_what_it_cannot_count(tmp_path, capsys):
    cfg, _ = tiny("auto", "fused", "full")
    raw = cfg.to_dict()
    (tmp_path / "run.json").write_text(json.dumps(raw))
    assert mc.main([str(tmp_path / "run.json"), "--machine", "rtx5070ti", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert {"peak_mb", "by_category", "step_of_peak", "backward_passes", "combination"} <= set(r)
    assert r["combination"]["precision"] == "bf16" and r["backward_passes"] == 2
    # A fused step on Kaggle's two T4s is refused by the plan (fp16 and DDP): one line, exit 2.
    assert mc.main([str(tmp_path / "run.json"), "--machine", "t4x2"]) == 2
    assert capsys.readouterr().err.startswith("error: ")
    assert mc.main([str(tmp_path / "run.json"), "--machine", "nosuchcard"]) == 2
