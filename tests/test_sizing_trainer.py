"""app.sizing against the real trainer: the weight count its --dry-run prints, and the memory
model against the trainer's own storage count of a real step (CPU)."""

from __future__ import annotations

import json
import random

import pytest

from app.sizing import param_count
from app.sizing.formulas import Shape
from tests.trainer_run import run_trainer
from trainer.plan.memory_model import estimate_memory

# The guide's default and an odd shape (every term different); more shapes in-process below.
SIZES = [(8, 512, 8, 1024, 4000), (3, 40, 5, 130, 17)]


def test_weight_count_matches_the_trainers_dry_run(tmp_path):
    for i, (layers, width, heads, context, vocab) in enumerate(SIZES):
        d = tmp_path / f"r{i}"
        d.mkdir()
        model = {"layers": layers, "width": width, "heads": heads, "context": context, "vocab": vocab}
        (d / "run.json").write_text(json.dumps({"model": model}), encoding="utf-8")
        p = run_trainer(d, "--dry-run", "--device", "cpu")  # the real trainer process (forked)
        assert p.returncode == 0, p.stderr
        want = param_count(layers, width, context, vocab)
        start = next(json.loads(line) for line in (d / "events.jsonl").read_text().splitlines())
        assert start["event"] == "start" and start["params"] == want
        assert f"parameters: {want:,}" in p.stderr


def test_weight_count_matches_the_model_for_random_shapes():
    torch = pytest.importorskip("torch")
    from trainer.config.run_config import ModelConfig
    from trainer.model.gpt import GPT, count_parameters

    rng = random.Random(7)
    for _ in range(12):
        heads = rng.choice([1, 2, 4, 8])
        cfg = ModelConfig(context=rng.randint(1, 2048), width=heads * rng.randint(1, 96),
                          heads=heads, layers=rng.randint(1, 12), vocab=rng.randint(2, 65536))
        with torch.device("meta"):
            model = GPT(cfg)
        assert count_parameters(model) == param_count(cfg.layers, cfg.width, cfg.context, cfg.vocab)


def _measured_peaks(shape: Shape, precision: str, level: str) -> tuple[int, int]:
    """The trainer's storage count of its first and second real step (trainer.step.memory)."""
    import torch

    # One thread: on a shared 2-core CI machine two OpenMP threads fighting other
    # processes run many times slower (docs/PERF.md); memory does not depend on it.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _peaks(shape, precision, level)
    finally:
        torch.set_num_threads(threads)


def _peaks(shape: Shape, precision: str, level: str) -> tuple[int, int]:
    import torch

    from trainer.config.run_config import ModelConfig, TrainingConfig
    from trainer.model.gpt import GPT
    from trainer.step.memory import measure_step, model_tensors, optimizer_tensors
    from trainer.step.optim import make_optimizer, make_scaler
    from trainer.step.step import train_step

    torch.manual_seed(0)
    cfg = ModelConfig(context=shape.context, width=shape.width, heads=shape.heads,
                      layers=shape.layers, vocab=shape.vocab)
    model = GPT(cfg, level)
    model.init_weights(1)
    dev = torch.device("cpu")
    opt = make_optimizer(model, TrainingConfig(), dev)
    scaler = make_scaler(precision, dev)
    x = torch.randint(0, shape.vocab, (shape.batch, shape.context))
    y = torch.randint(0, shape.vocab, (shape.batch, shape.context))
    peaks = []
    for _ in range(2):
        _, info = measure_step(lambda: train_step(model, opt, scaler, (x, y), 1e-3, precision, dev, 1.0),
                               alive=[*model_tensors(model), *optimizer_tensors(opt)])
        peaks.append(info["peak_bytes"])
    return peaks[0], peaks[1]


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("shape", [Shape(2, 64, 4, 64, 300, 4), Shape(3, 96, 4, 48, 2000, 3)])
def test_memory_model_matches_the_trainers_measured_peak(shape, precision):
    pytest.importorskip("torch")
    first, steady = _measured_peaks(shape, precision, "off")
    m = estimate_memory(shape, precision)
    # bf16 autocast on the CPU runs the same casts as fp16/bf16 on a GPU.
    assert m.first_step_peak == pytest.approx(first, rel=0.03)
    assert m.peak == pytest.approx(steady, rel=0.03)


@pytest.mark.parametrize("level", ["selective", "full"])
def test_economical_memory_model_matches_the_trainers_measured_peak(level):
    pytest.importorskip("torch")
    pytest.importorskip("trainer.model.economical")
    shape = Shape(2, 64, 4, 128, 300, 8)
    for precision in ("fp32", "bf16"):
        first, steady = _measured_peaks(shape, precision, level)
        m = estimate_memory(shape, precision, economical=level)
        assert m.peak == pytest.approx(steady, rel=0.12), precision
        assert m.peak < estimate_memory(shape, precision).peak
