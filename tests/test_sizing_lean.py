"""Sizing with the lean training state (trainer/plan/state_bytes.py, combos.py): the memory each
combination predicts against the trainer's own storage count of real steps on the CPU,
the 8-bit state byte for byte, `--economical auto` (JSON and pick) at the lab's full model
on a 16 GB card and on Kaggle's 2×T4, and the note's speed reference for large models."""

from __future__ import annotations

import json

import pytest

from app.sizing import estimate
from app.sizing.formulas import Shape
from app.sizing.gpus import FULL_SHAPE
from trainer.plan.memory_model import estimate_memory
from trainer.plan.state_bytes import param_sizes, training_state

FULL = dict(layers=26, width=2304, heads=18, context=1024, vocab=4000, batch=1, steps_to=1000, lang="en")
# The normal mode's shape keeps its big loss tensors; the economical levels' a longer context.
SHAPES = {"off": Shape(2, 64, 4, 64, 300, 4), "selective": Shape(2, 64, 4, 128, 300, 8),
          "full": Shape(2, 64, 4, 128, 300, 8)}
# The step kind each lean state makes in these fp32/bf16 runs on one process (trainer.plan.planner).
STEP_OF = {"off": "normal", "on": "held", "fused": "fused", "offload": "offload"}


def _peaks(shape: Shape, precision: str, level: str, lean: str) -> list[dict]:
    """The trainer's storage count (trainer.step.memory) of its first and second real step."""
    import torch

    from trainer.config.run_config import ModelConfig, TrainingConfig
    from trainer.model.gpt import GPT
    from trainer.step.memory import measure_step, model_tensors, optimizer_tensors
    from trainer.step.optim import make_optimizer, make_scaler
    from trainer.step.step import train_step

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # memory does not depend on it; a shared CI machine's speed does
    try:
        torch.manual_seed(0)
        model = GPT(ModelConfig(context=shape.context, width=shape.width, heads=shape.heads,
                                layers=shape.layers, vocab=shape.vocab), level)
        model.init_weights(1)
        dev = torch.device("cpu")
        step = STEP_OF[lean]
        if lean == "off":
            opt = make_optimizer(model, TrainingConfig(), dev)
        else:
            from trainer.step.lean import LeanOptimizer

            opt = LeanOptimizer(model, TrainingConfig(), dev, precision, step)
        scaler = make_scaler(precision, dev)
        x = torch.randint(0, shape.vocab, (shape.batch, shape.context))
        y = torch.randint(0, shape.vocab, (shape.batch, shape.context))
        out = []
        for _ in range(2):
            _, info = measure_step(lambda: train_step(model, opt, scaler, (x, y), 1e-3, precision, dev, 1.0, step),
                                   alive=[*model_tensors(model), *optimizer_tensors(opt)])
            out.append(info)
        return out
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize("lean", ["off", "on", "fused"])
@pytest.mark.parametrize("level", ["off", "selective", "full"])
def test_each_combination_predicts_the_trainers_measured_peak_within_10_percent(level, lean):
    pytest.importorskip("torch")
    if lean != "off":
        pytest.importorskip("bitsandbytes", reason="the lean state's library: pip install 'ternit-lab[lean]'")
    shape = SHAPES[level]
    for precision in ("fp32", "bf16"):
        first, steady = _peaks(shape, precision, level, lean)
        m = estimate_memory(shape, precision, economical=level, step=STEP_OF[lean], device="cpu")
        # The trainer reports the first step on the CPU; later steps hold the moments too.
        assert m.first_step_peak == pytest.approx(first["peak_bytes"], rel=0.10), precision
        assert m.peak == pytest.approx(steady["peak_bytes"], rel=0.10), precision
        # Between steps: weights and optimizer state exactly (the 8-bit codes, block scales,
        # maps); torch's AdamW adds a 4-byte step counter per parameter.
        steps = 0 if lean != "off" else 4 * len(param_sizes(shape))
        assert steady["baseline_bytes"] == m.weights + m.optimizer + steps, precision


def test_the_lean_state_is_smaller_part_by_part():
    s = FULL_SHAPE
    normal, lean = training_state(s, "bf16"), training_state(s, "bf16", "held")
    p = 1_667_801_088
    assert (normal.weights, normal.gradients, normal.optimizer) == (4 * p, 4 * p, 8 * p)
    assert lean.weights == 2 * p and lean.gradients == 2 * p  # bf16, held for the exact clip
    assert 2 * p < lean.optimizer < 2.05 * p  # two uint8 codes a weight and their block scales
    fused = training_state(s, "bf16", "fused")
    assert fused.gradients == 0 and fused.optimizer == lean.optimizer  # updated inside the backward pass
    off = training_state(s, "bf16", "offload")
    assert off.gradients == 0 and off.optimizer_host == lean.optimizer and off.optimizer < lean.optimizer / 50
    # fp16 (a T4): fp32 weights, gradients held for the GradScaler, moments still 8-bit.
    t4 = training_state(s, "fp16", "held")
    assert (t4.weights, t4.gradients) == (4 * p, 4 * p)
    shard = training_state(s, "fp16", "held", cards=2, sharding="fsdp")
    assert (shard.weights, shard.gradients, shard.optimizer) == (t4.weights // 2, t4.gradients // 2, t4.optimizer // 2)


def test_the_full_model_fits_a_16_gb_card_only_with_the_lean_state():
    normal = estimate(**FULL, gpu="rtx5070ti")
    assert normal.fits is False and normal.memory.allocated_peak > 25_000  # the issue's 25,465 MB
    assert normal.fits_with is not None and normal.fits_with.lean_state != "off"
    assert "choose the lean state “8-bit”" in " ".join(normal.advice_texts())
    auto = estimate(**FULL, gpu="rtx5070ti", economical="auto")
    assert auto.fits is True and auto.auto
    assert auto.combination.lean_state == "on" and auto.combination.level == "off"  # the fastest that fits
    assert auto.memory.gradients < 3200 and auto.memory.weights < 3200 and auto.memory.optimizer < 3300
    # The fused step holds no gradients, for the price of a second backward pass.
    fused = estimate(**FULL, gpu="rtx5070ti", lean_state="fused")
    assert fused.memory.gradients == 0 and fused.memory.allocated_peak < auto.memory.allocated_peak
    assert fused.tokens_per_s < auto.tokens_per_s
    lightest = min(o.allocated_mb for o in auto.options)
    assert lightest <= 6000  # the note: 5,536 MB allocated in its economical mode
    # A card with only the note's observed ≈ 6.2 GB: auto picks a combination within 6,000 MB.
    tight = estimate(**FULL, gpu="rtx5070ti", economical="auto", card_memory_mb=6200)
    assert tight.fits is True and tight.memory.allocated_peak <= 6000
    # One backward pass and no PCIe copies (issue 34): the one-pass step at full recompute, not offload.
    assert tight.combination.lean_state == "one_pass" and tight.combination.level == "full"
    assert tight.memory.gradients == 0
    assert tight.tokens_per_s < auto.tokens_per_s  # the recompute costs time


def test_the_full_model_fits_kaggles_two_t4_by_sharding():
    auto = estimate(**FULL, gpu="t4x2", economical="auto")
    assert auto.fits is True and auto.combination.sharded
    assert all(not o.fits for o in auto.options if not o.combination.sharded)
    j = auto.as_json()
    assert j["economical"]["sharding"] == "fsdp" and j["plan"]["sharding"]["value"] == "fsdp"
    assert j["memory_mb"]["sharded_buffers"] > 0 and j["memory_mb"]["ddp_buckets"] == 0


def test_economical_auto_json(capsys):
    from app.cli.main import main

    argv = ["estimate", "--lang", "en", "--layers", "26", "--width", "2304", "--heads", "18", "--context", "1024", "--vocab",
            "4000", "--batch", "1", "--gpu", "rtx5070ti", "--economical", "auto", "--no-measured", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["economical"] == {"level": "off", "lean_state": "on", "sharding": "none", "auto": True}
    assert out["lean_state"] == "on" and out["fits"] is True
    for key in ("weights", "gradients", "optimizer", "optimizer_host", "activations", "allocated_peak", "total"):
        assert key in out["memory_mb"]
    assert len(out["combinations"]) == 15 and sum(c["fits"] for c in out["combinations"]) == 12
    assert main([*argv[:-3], "--lean-state", "offload", "--economical", "full", "--no-measured", "--json"]) == 0
    off = json.loads(capsys.readouterr().out)
    assert off["economical"] == {"level": "full", "lean_state": "offload", "sharding": "none", "auto": False}
    assert off["memory_mb"]["optimizer_host"] > 3000 and off["memory_mb"]["optimizer"] < 100
    # One card: nothing to shard over, and the plan says so (training.sharding is for 2+).
    assert main([*argv[:-3], "--sharding", "--json"]) == 0
    one = json.loads(capsys.readouterr().out)["plan"]["sharding"]
    assert one["value"] == "none" and one["asked"] == "fsdp" and one["reason"]["code"] == "one_process"


def test_large_models_on_the_5070ti_use_the_notes_reference():
    full = estimate(**FULL, gpu="rtx5070ti")
    # 149 ms a step of 1,024 tokens.
    assert full.tokens_per_s == pytest.approx(1024 / 0.149, rel=1e-6)
    assert full.speed.kind == "reference_large" and "the lab's note" in full.tokens_per_s_source
    assert not full.is_measurement and "an estimate, not a measurement" in full.advice_texts()[0]
    small = estimate(gpu="rtx5070ti", lang="en")  # the default model: the specification estimate
    assert small.speed.kind == "spec_estimate" and "2.5 × T4" in small.tokens_per_s_source
    # The 2×T4 has no large-model reference: scaled from its 27.7 M measurement.
    assert estimate(**FULL, gpu="t4x2").speed.kind == "reference"


@pytest.mark.parametrize("lang", ["ru", "en"])
def test_the_lean_state_field_says_what_each_option_costs(lang):
    from app.form import fields as F

    spec = F.spec("lean_state")
    assert [k for k, _ in spec.option_choices(lang)] == ["off", "on", "fused", "offload", "one_pass"]
    assert spec.path == "training.lean_state" and F.defaults()["lean_state"] == "off"
    for text in [spec.tooltip_text(lang), *(spec.option_tooltip(k, lang) for k in spec.options)]:
        lines = text.splitlines()
        assert len(lines) <= 12 and max(len(line) for line in lines) <= 60, text
    costs = {k: spec.option_tooltip(k, lang) for k in spec.options}
    assert all(("байт" if lang == "ru" else "bytes") in c for c in costs.values())
    assert "PCIe" in costs["offload"]


def test_the_form_names_the_lean_state_for_the_full_model_and_writes_it():
    from app.base.i18n import set_language
    from app.form.run_form import FormContext, RunForm

    set_language("en")
    try:
        form = RunForm(FormContext())
        form.set("gpu", "rtx5070ti")
        for key, value in dict(layers=26, width=2304, heads=18, batch_per_card=1).items():
            form.set(key, value)
        [issue] = form.field_issues("batch_per_card")
        assert "not even batch 1 fits" in issue.text and "choose the lean state “8-bit”" in issue.text
        form.set("lean_state", "on")  # taking the advice
        assert form.field_issues("batch_per_card") == []
        rows = {r.key: r for r in form.size_rows()}
        assert "gradients 3,181" in rows["memory_parts"].value and "state “8-bit”" in rows["memory_parts"].note
        assert "the lab's note" in rows["time"].note  # which reference the time comes from
        assert form.run_config()["training"]["lean_state"] is True
        form.set("lean_state", "fused")
        assert "gradients 0" in {r.key: r for r in form.size_rows()}["memory_parts"].value
        form.set("lean_state", "offload")
        cfg = form.run_config()
        assert cfg["training"]["lean_state"] == "offload"
        again = RunForm(FormContext())
        again.load_config(cfg)
        assert again.values["lean_state"] == "offload"
        again.load_config({"training": {"lean_state": False}})
        assert again.values["lean_state"] == "off"
    finally:
        set_language(None)


def test_measured_runs_count_only_in_their_own_lean_state():
    run = {"run": "lean1", "gpu": "t4", "params": 27_738_112, "layers": 8, "width": 512, "heads": 8, "context": 1024,
           "vocab": 4000, "batch": 6, "tokens_per_s": 30_000.0, "mem_peak_mb": 5000.0, "economical": False,
           "lean_state": "on"}
    kw = dict(gpu="t4", lang="en", measured=[run])
    normal, lean = estimate(**kw), estimate(**kw, lean_state="on")
    assert normal.speed.kind == "reference" and normal.calibration_run is None
    assert lean.speed.kind == "measured" and lean.tokens_per_s == pytest.approx(30_000.0)
    assert lean.is_measurement and lean.calibration_run == "lean1"
    assert lean.memory.allocated_peak == pytest.approx(5000.0)


def test_a_lean_estimate_without_lean_runs_starts_from_the_normal_runs_plus_its_cost():
    run = {"run": "n1", "gpu": "cpu", "params": 27_738_112, "layers": 8, "width": 512, "heads": 8, "context": 1024,
           "vocab": 4000, "batch": 2, "tokens_per_s": 500.0, "mem_peak_mb": None, "economical": False}
    kw = dict(gpu="cpu", batch=2, lang="en", measured=[run])
    normal, lean = estimate(**kw), estimate(**kw, lean_state="on")
    assert normal.is_measurement and normal.tokens_per_s == pytest.approx(500.0)
    assert lean.speed.kind == "scaled_measured" and not lean.is_measurement
    assert "the lean state's cost" in lean.tokens_per_s_source
    # bitsandbytes' CPU update: ≈ 0.8 s a step for 17 M weights on one thread, added to the step.
    from app.sizing.combos import LEAN_CPU_S_PER_WEIGHT
    from app.sizing.gpus import cpu_threads

    step = 2 * 1024 / 500.0 + LEAN_CPU_S_PER_WEIGHT * 27_738_112 / cpu_threads()
    assert lean.tokens_per_s == pytest.approx(2 * 1024 / step, rel=1e-9)


def test_the_fused_steps_second_pass_is_charged_only_where_the_step_is_fused():
    """Under fp16 (a T4) the lean step cannot be fused (the GradScaler must see every
    gradient first): the plan refuses "fused" there rather than run it as true, and the
    sizing with it; under bf16 it pays a second backward pass."""
    from app.base.plan_texts import RefusalError

    t4 = dict(gpu="t4", lang="en", measured=[])
    with pytest.raises(RefusalError, match="under fp16 \\(what the “Auto” precision chose for this card\\)") as e:
        estimate(**t4, lean_state="fused")
    assert e.value.refusal.code == "fused_fp16"
    assert "fused" not in {o.combination.lean_state for o in estimate(**t4, economical="auto").options}
    card = dict(gpu="rtx5070ti", lang="en", measured=[])
    assert estimate(**card, lean_state="fused").tokens_per_s < estimate(**card, lean_state="on").tokens_per_s
