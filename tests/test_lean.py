"""The lean training state (trainer/step/lean.py) in the real trainer on the CPU: bit-exact
resume in each combination with the economical levels, checkpoints crossing between the
lean and the normal state, fp32 export, gradients and losses against the normal mode, and
a missing library said in one line before anything is made."""

from __future__ import annotations

import pytest

from tests.trainer_run import events, run_module, run_trainer, write_run

bnb = pytest.importorskip("bitsandbytes", reason="the lean state's library: pip install 'ternit-lab[lean]'")

import torch  # noqa: E402

STEPS, STOP = 10, 6
# Width 64: the matrices and the token embedding get 8-bit moments, the positional
# embedding (2,048 weights) stays in bitsandbytes' fp32 path for small tensors: both kinds.
MODEL = {"width": 64}
KW = {"steps_to": STEPS, "eval_every": STEPS, "eval_segments": 8}


def losses_after(run_dir, step: int) -> list[float]:
    return [s["loss"] for s in events(run_dir, "step") if s["step"] > step]


@pytest.mark.parametrize(
    ("level", "precision", "lean", "compiled"),
    [("off", "bf16", True, True), ("selective", "bf16", "fused", False), ("full", "fp32", "fused", False)],
)
def test_lean_state_resumes_bit_exact_in_each_combination(tmp_path, tiny_data, monkeypatch, level, precision,
                                                          lean, compiled):
    # lean_state true holds its gradients, so the model compiles (the tests' backend: aot_eager).
    monkeypatch.setenv("TERNIT_COMPILE_BACKEND", "aot_eager")
    kw = {**KW, "lean_state": lean, "economical": level, "precision": precision, "compile": compiled}
    # A checkpoint kept at every step: the continuation starts from the whole run's own.
    whole = write_run(tmp_path / "whole", tiny_data, MODEL, **kw, checkpoint_every_min=0, keep_checkpoints=STEPS)
    p = run_trainer(whole)
    assert p.returncode == 0, p.stderr
    assert ("compile: on" in p.stderr) is compiled
    end = events(whole, "end")[-1]
    assert end["reason"] == "steps_reached"
    assert events(whole, "start")[0]["lean_state"] == ("on" if lean is True else lean)

    saved = whole / "checkpoints" / f"step-{STOP:08d}.pt"
    ckpt = torch.load(saved, weights_only=True)
    moments = ckpt["optimizer"]["state"]
    assert any(s["state1"].dtype == torch.uint8 for s in moments.values())  # 8-bit, saved
    want = torch.bfloat16 if precision == "bf16" else torch.float32
    assert {v.dtype for v in ckpt["model"].values()} == {want}
    parted = write_run(tmp_path / "parted", tiny_data, MODEL, **kw)
    p = run_trainer(parted, "--resume", str(saved))
    assert p.returncode == 0, p.stderr
    assert events(parted, "end")[-1]["state_sha256"] == end["state_sha256"]
    assert losses_after(parted, STOP) == losses_after(whole, STOP)


def test_checkpoints_cross_between_lean_and_normal_and_export_fp32(tmp_path, tiny_data):
    # The normal run keeps a checkpoint of every step: the lean run continues from its step
    # STOP, and its own steps after STOP are the ones to compare with (no stop-and-resume).
    normal = write_run(tmp_path / "normal", tiny_data, MODEL, **KW, precision="bf16", checkpoint_every_min=0,
                       keep_checkpoints=STEPS)
    p = run_trainer(normal)
    assert p.returncode == 0, p.stderr
    normal_ckpt = normal / "checkpoints" / f"step-{STOP:08d}.pt"

    # Normal → lean: moments quantized, weights cast to bf16, said in the log.
    lean = write_run(tmp_path / "lean", tiny_data, MODEL, **KW, precision="bf16", lean_state=True)
    p = run_trainer(lean, "--resume", str(normal_ckpt))
    assert p.returncode == 0, p.stderr
    assert "saved without lean_state: moments quantized to 8 bits" in p.stderr
    # The same trajectory within what 8-bit moments and bf16 weights change in 4 steps.
    assert losses_after(lean, STOP) == pytest.approx(losses_after(normal, STOP), abs=0.02)

    # Lean → normal: moments dequantized to fp32 AdamW.
    back = write_run(tmp_path / "back", tiny_data, MODEL, **{**KW, "steps_to": STEPS + 2})
    p = run_trainer(back, "--resume", str(lean / "checkpoints" / f"step-{STEPS:08d}.pt"))
    assert p.returncode == 0, p.stderr
    assert "8-bit moments dequantized to fp32 AdamW" in p.stderr
    assert [s["step"] for s in events(back, "step")] == [STEPS + 1, STEPS + 2]

    # Export writes fp32 weights whichever state trained them.
    from safetensors.torch import load_file

    from trainer.model.export import export

    export(lean / "checkpoints" / f"step-{STEPS:08d}.pt", tmp_path / "lean.safetensors")
    weights = load_file(str(tmp_path / "lean.safetensors"))
    assert {v.dtype for v in weights.values()} == {torch.float32}


def _tiny_model():
    from trainer.config.run_config import ModelConfig
    from trainer.model.gpt import GPT

    model = GPT(ModelConfig(context=32, width=64, heads=2, layers=2, vocab=300))
    model.init_weights(7)
    return model


def _first_grads(model) -> dict[str, torch.Tensor]:
    seen: dict[str, torch.Tensor] = {}

    def keep(name: str):  # noqa: ANN202
        def hook(p: torch.Tensor) -> None:
            seen.setdefault(name, p.grad.clone())

        return hook

    for name, p in model.named_parameters():
        p.register_post_accumulate_grad_hook(keep(name))
    return seen


def _batches(n: int, scale_last: float = 1.0):
    g = torch.Generator().manual_seed(0)
    return [(x[:, :-1], x[:, 1:]) for x in (torch.randint(0, 300, (4, 33), generator=g) for _ in range(n))]


def test_lean_gradients_and_losses_follow_the_normal_mode():
    """fp32, "fused": the first step's gradients are the normal mode's exactly (the same
    forward and backward; the hooks only take them earlier), no set of gradients is left
    held, and over five steps, every one clipped exactly in both, the losses stay within
    0.01 of the normal mode's (what 8-bit moments change at this size)."""
    from trainer.config.run_config import TrainingConfig
    from trainer.step.lean import LeanOptimizer
    from trainer.step.optim import make_optimizer, make_scaler
    from trainer.step.step import train_step

    t = TrainingConfig(lr=3e-3, grad_clip=1.0)
    cpu = torch.device("cpu")
    normal, lean = _tiny_model(), _tiny_model()
    # The first gradients of each (registered first: before the lean update's own hook).
    first_n, first_l = _first_grads(normal), _first_grads(lean)
    opt_n = make_optimizer(normal, t, cpu)
    opt_l = LeanOptimizer(lean, t, cpu, "fp32", "fused")  # the plan's step kind
    scaler = make_scaler("fp32", cpu)
    losses = []
    for i, batch in enumerate(_batches(5)):
        ln = train_step(normal, opt_n, scaler, batch, t.lr, "fp32", cpu, t.grad_clip)
        ll = train_step(lean, opt_l, scaler, batch, t.lr, "fp32", cpu, t.grad_clip, "fused")
        losses.append((float(ln), float(ll)))
        if i == 0:
            assert first_n.keys() == first_l.keys() and len(first_n) == 10
            assert all(torch.equal(first_n[n], first_l[n]) for n in first_n)
            assert all(p.grad is None for p in lean.parameters())  # no gradient set held
    assert losses[0][0] == losses[0][1]
    assert [b for _, b in losses] == pytest.approx([a for a, _ in losses], abs=0.01)


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_held_and_fused_steps_clip_exactly_and_agree_bit_for_bit(precision):
    """"on" (gradients held) and "fused" (two backward passes, none held) make the same
    steps bit for bit, and both scale a spiking step by clip_grad_norm_'s coefficient of
    that step's own norm: the third batch's loss is multiplied by 50, so its gradient norm
    is ~50× the others' and the step must be clipped by it (a clip taken from the previous
    step's norm would let it through whole)."""
    from trainer.config.run_config import TrainingConfig
    from trainer.step.lean import LeanOptimizer
    from trainer.step.optim import make_scaler
    from trainer.step.step import train_step

    t = TrainingConfig(lr=3e-3, grad_clip=1.0)
    cpu = torch.device("cpu")
    held, fused, ref = _tiny_model(), _tiny_model(), _tiny_model()
    opt_h = LeanOptimizer(held, t, cpu, precision, "held")
    opt_f = LeanOptimizer(fused, t, cpu, precision, "fused")
    opt_r = LeanOptimizer(ref, t, cpu, precision, "held")
    scaler = make_scaler(precision, cpu)
    for i, batch in enumerate(_batches(4)):
        spike = 50.0 if i == 2 else 1.0
        train_step(_Scaled(held, spike), opt_h, scaler, batch, t.lr, precision, cpu, t.grad_clip, "held")
        train_step(_Scaled(fused, spike), opt_f, scaler, batch, t.lr, precision, cpu, t.grad_clip, "fused")
        assert opt_h.last_norm == opt_f.last_norm
        for a, b in zip(held.parameters(), fused.parameters(), strict=True):
            assert torch.equal(a, b)
        # The reference: the same optimizer stepped after torch's own clip_grad_norm_.
        loss = (ref(*batch) if precision == "fp32" else _bf16_loss(ref, batch)) * spike
        loss.backward()
        norm = float(torch.nn.utils.get_total_norm([p.grad.float() for p in ref.parameters()]))
        # bf16: the two models' weights drift apart by roundings of the coefficient's last bit
        assert opt_h.last_norm == pytest.approx(norm, rel=1e-5 if precision == "fp32" else 1e-3)
        if i == 2:
            assert norm > 10 * t.grad_clip  # the spike is there, and it was clipped by it
        coef = min(1.0, t.grad_clip / (norm + 1e-6))
        for p in ref.parameters():
            p.grad = (p.grad.float() * coef).to(p.dtype)
        opt_r.step()
        for p in ref.parameters():
            p.grad = None
        for a, b in zip(held.parameters(), ref.parameters(), strict=True):
            assert torch.allclose(a.float(), b.float(), rtol=0.02, atol=2e-3)


class _Scaled(torch.nn.Module):
    """The model's loss times `factor`: a step whose gradient norm spikes."""

    def __init__(self, model: torch.nn.Module, factor: float) -> None:
        super().__init__()
        self.model, self.factor = model, factor

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.model(x, y) * self.factor


def _bf16_loss(model, batch):  # noqa: ANN001, ANN202
    from trainer.step.optim import autocast

    with autocast("bf16", torch.device("cpu")):
        return model(*batch)


def test_missing_library_is_one_line_and_exit_2_before_anything_is_made(tmp_path, tiny_data):
    # A real ImportError: a package of that name that refuses to import, first on the path.
    blocker = tmp_path / "blocker" / "bitsandbytes"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('No module named bitsandbytes')\n")
    run = write_run(tmp_path / "run", tiny_data, MODEL, **KW, lean_state="offload")
    # tests/trainer_blocked_import.py puts it first on the path (as PYTHONPATH would, in a
    # process forked from the tests' zygote, which had imported the real one) and runs
    # `python -m trainer`.
    p = run_module("tests.trainer_blocked_import", str(blocker.parent), "--run", str(run))
    assert p.returncode == 2
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert lines == [lines[0]] and lines[0].startswith("error: training.lean_state needs the bitsandbytes library")
    assert "pip install 'ternit-lab[lean]'" in lines[0]
    assert not (run / "checkpoints").exists()
    assert events(run, "end")[-1]["reason"] == "error"
