"""The one-pass lean step (trainer/step/one_pass.py, lean_state "one_pass"): it trains, resumes
bit for bit in the real trainer, equals the exactly clipped step of the same moments when
the clip does not bite, clips a spike by its own step's norm, converts to and from AdamW and
the 8-bit lean state, and its pure-torch map is bitsandbytes'. Runs are compared with
themselves, never with hard-coded floats."""

from __future__ import annotations

import pytest
import torch

from tests.test_lean import _batches, _Scaled, _tiny_model
from tests.trainer_run import events, run_trainer, write_run

STEPS, STOP = 8, 5
KW = {"steps_to": STEPS, "eval_every": STEPS, "eval_segments": 8}
MODEL = {"width": 64}  # matrices with 8-bit m, the positional embedding (2,048) with an fp32 m


def _cfg(clip: float = 1.0):
    from trainer.config.run_config import TrainingConfig

    return TrainingConfig(lr=3e-3, grad_clip=clip)


def _run(model, opt, batches, clip: float, kind: str, precision: str = "fp32", spike_at: int = -1) -> list[float]:
    from trainer.step.optim import make_scaler
    from trainer.step.step import train_step

    cpu = torch.device("cpu")
    scaler = make_scaler(precision, cpu)
    losses = []
    for i, batch in enumerate(batches):
        m = _Scaled(model, 50.0 if i == spike_at else 1.0)
        if kind == "exact":  # the same moments after a backward pass that held the gradients
            from trainer.step.optim import autocast

            for g in opt.param_groups:
                g["lr"] = 3e-3
            with autocast(precision, cpu):
                loss = m(*batch)
            loss.backward()
            opt.step_held(clip)
            losses.append(float(loss.detach()))
        else:
            losses.append(float(train_step(m, opt, scaler, batch, 3e-3, precision, cpu, clip, "one_pass")))
    return losses


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_one_pass_trains_and_frees_every_gradient(precision):
    from trainer.step.one_pass import OnePassOptimizer

    model = _tiny_model()
    opt = OnePassOptimizer(model, _cfg(), torch.device("cpu"), precision)
    batch = _batches(1)[0]
    losses = _run(model, opt, [batch] * 12, 1.0, "one_pass", precision)
    assert losses[-1] < losses[0] - 0.3
    assert all(p.grad is None for p in model.parameters())
    st = opt.state[model.tok.weight]
    assert st["m"].dtype == torch.uint8 and "r" in st and "c" in st and "v" not in st  # small moments
    assert opt.squares is not None and opt.squares.shape == (len(opt.order),)


@pytest.mark.parametrize("clip", [0.0, 1e9])
def test_one_pass_equals_the_exactly_clipped_factored_step_when_the_clip_does_not_bite(clip):
    from trainer.step.one_pass import OnePassOptimizer

    a, b = _tiny_model(), _tiny_model()
    oa = OnePassOptimizer(a, _cfg(clip), torch.device("cpu"), "bf16")
    ob = OnePassOptimizer(b, _cfg(clip), torch.device("cpu"), "bf16")
    batches = _batches(4)
    la = _run(a, oa, batches, clip, "one_pass", "bf16")
    lb = _run(b, ob, batches, clip, "exact", "bf16")
    assert la == lb
    for p, q in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(p, q)


def test_one_pass_clips_a_spike_by_its_own_norm():
    """A step whose loss is ×50 (its norm ~50× the last step's): the progressive estimate
    sees it from the first hook, so the weights move about as much as the exactly clipped
    step's, and the last hook's estimate is the exact norm."""
    from trainer.step.one_pass import OnePassOptimizer

    a, b = _tiny_model(), _tiny_model()
    oa = OnePassOptimizer(a, _cfg(), torch.device("cpu"), "fp32")
    ob = OnePassOptimizer(b, _cfg(), torch.device("cpu"), "fp32")
    batches = _batches(3)
    before = [p.detach().clone() for p in a.parameters()]
    _run(a, oa, batches, 1.0, "one_pass", spike_at=2)
    _run(b, ob, batches, 1.0, "exact", spike_at=2)
    # the two runs differ by the earlier steps' clipping (estimated, exact): close, not equal
    assert oa.last_norm == pytest.approx(ob.last_norm, rel=1e-2)
    assert ob.last_norm > 10  # the spike is there
    moved_a = sum(float((p.detach() - q).norm()) for p, q in zip(a.parameters(), before, strict=True))
    moved_b = sum(float((p.detach() - q).norm()) for p, q in zip(b.parameters(), before, strict=True))
    assert moved_a == pytest.approx(moved_b, rel=0.3)


def test_pure_torch_map_and_quantization_are_bitsandbytes():
    bnb = pytest.importorskip("bitsandbytes")
    from trainer.step.lean import _dequantize
    from trainer.step.one_pass import dynamic_map, quantize_into

    code = dynamic_map()
    assert torch.equal(code, bnb.functional.create_dynamic_map(signed=True))
    x = torch.randn(5000, generator=torch.Generator().manual_seed(1)) * 0.01
    q, qs = bnb.functional.quantize_blockwise(x, code=code, blocksize=256)
    codes, absmax = torch.empty(5000, dtype=torch.uint8), torch.empty(20)
    quantize_into(x.clone(), codes, absmax, code)
    assert torch.equal(absmax, qs.absmax)
    assert float((codes == q).float().mean()) > 0.99  # the same nearest code but at ties
    back = _dequantize(codes, absmax, code)
    assert torch.allclose(back, _dequantize(q, qs.absmax, code), atol=float(absmax.max()) * 0.02)


def test_conversions_to_and_from_adamw_and_the_8bit_state():
    """AdamW → one_pass → AdamW keeps m (within 8 bits) and turns v into r cᵀ / mean(r); a
    one-pass state loads into the 8-bit lean state and back; a converted state primes."""
    bnb = pytest.importorskip("bitsandbytes")  # noqa: F841 — the 8-bit state's library
    from trainer.step.lean import LeanOptimizer, adamw_state_from_lean, full_moments
    from trainer.step.one_pass import OnePassOptimizer
    from trainer.step.optim import make_optimizer

    cpu = torch.device("cpu")
    normal = _tiny_model()
    adamw = make_optimizer(normal, _cfg(), cpu)
    for batch in _batches(2):
        normal(*batch).backward()
        adamw.step()
        adamw.zero_grad()
    one = _tiny_model()
    one.load_state_dict(normal.state_dict())
    op = OnePassOptimizer(one, _cfg(), cpu, "fp32")
    op.load_state_dict(adamw.state_dict())
    assert op.needs_priming(1.0)
    moments = full_moments(op.state_dict())
    for i, s in adamw.state_dict()["state"].items():
        m, v, step = moments[i]
        assert step == int(s["step"])
        assert torch.allclose(m, s["exp_avg"], atol=float(s["exp_avg"].abs().max()) * 0.02)
        want = s["exp_avg_sq"].mean(1, keepdim=True) * s["exp_avg_sq"].mean(0, keepdim=True) / s["exp_avg_sq"].mean()
        assert torch.allclose(v, want, rtol=1e-5, atol=1e-12)
    # It trains on from there, and goes back to AdamW (through the lean state's converter).
    _run(one, op, _batches(2), 1.0, "one_pass")
    back = make_optimizer(_tiny_model(), _cfg(), cpu)
    back.load_state_dict(adamw_state_from_lean(op.state_dict(), back))
    assert all(int(s["step"]) == 4 for s in back.state_dict()["state"].values())
    # one_pass → 8-bit lean → one_pass.
    lean_model = _tiny_model()
    lean = LeanOptimizer(lean_model, _cfg(), cpu, "fp32", "held")
    lean.load_state_dict(op.state_dict())
    assert any(s["state1"].dtype == torch.uint8 for s in lean.state_dict()["state"].values())
    again = OnePassOptimizer(_tiny_model(), _cfg(), cpu, "fp32")
    again.load_state_dict(lean.state_dict())
    assert again.needs_priming(1.0)
    trained = full_moments(op.state_dict())
    for i, (m, v, step) in full_moments(again.state_dict()).items():
        m0, v0, s0 = trained[i]
        assert step == s0
        assert torch.allclose(m, m0, atol=float(m0.abs().max()) * 0.05 + 1e-12)
        assert torch.allclose(v, v0, rtol=0.1, atol=float(v0.max()) * 0.05)


@pytest.mark.parametrize("precision", ["bf16", "fp32"])
def test_one_pass_resumes_bit_exact_in_the_trainer(tmp_path, tiny_data, precision):
    kw = {**KW, "lean_state": "one_pass", "economical": "full" if precision == "fp32" else "off",
          "precision": precision}
    whole = write_run(tmp_path / "whole", tiny_data, MODEL, **kw, checkpoint_every_min=0, keep_checkpoints=STEPS)
    p = run_trainer(whole)
    assert p.returncode == 0, p.stderr
    end = events(whole, "end")[-1]
    assert end["reason"] == "steps_reached"
    assert events(whole, "start")[0]["lean_state"] == "one_pass"
    steps = [s["loss"] for s in events(whole, "step")]
    assert steps[-1] < steps[0]
    saved = whole / "checkpoints" / f"step-{STOP:08d}.pt"
    ckpt = torch.load(saved, weights_only=True)
    assert ckpt["optimizer"]["lean"]["kind"] == "one_pass"
    assert ckpt["optimizer"]["lean"]["squares"] is not None  # P saved: no priming on resume
    parted = write_run(tmp_path / "parted", tiny_data, MODEL, **kw)
    p = run_trainer(parted, "--resume", str(saved))
    assert p.returncode == 0, p.stderr
    assert events(parted, "end")[-1]["state_sha256"] == end["state_sha256"]
    after = [s["loss"] for s in events(parted, "step") if s["step"] > STOP]
    assert after == [s["loss"] for s in events(whole, "step") if s["step"] > STOP]


def test_a_normal_checkpoint_continues_one_pass_and_back(tmp_path, tiny_data):
    normal = write_run(tmp_path / "normal", tiny_data, MODEL, **KW, checkpoint_every_min=0, keep_checkpoints=STEPS)
    assert run_trainer(normal).returncode == 0
    one = write_run(tmp_path / "one", tiny_data, MODEL, **KW, lean_state="one_pass")
    p = run_trainer(one, "--resume", str(normal / "checkpoints" / f"step-{STOP:08d}.pt"))
    assert p.returncode == 0, p.stderr
    assert "converted to one_pass" in p.stderr and "primes its clipping" in p.stderr
    back = write_run(tmp_path / "back", tiny_data, MODEL, **{**KW, "steps_to": STEPS + 2})
    p = run_trainer(back, "--resume", str(one / "checkpoints" / f"step-{STEPS:08d}.pt"))
    assert p.returncode == 0, p.stderr
    assert [s["step"] for s in events(back, "step")] == [STEPS + 1, STEPS + 2]


def test_the_plan_refuses_one_pass_where_a_step_inside_backward_cannot_be_and_says_why():
    from trainer.config.run_config import from_dict
    from trainer.plan.planner import known_machine, plan

    card = known_machine("rtx5070ti")
    p = plan(from_dict({"training": {"lean_state": "one_pass"}}), card)
    assert p.step.value == "one_pass" and p.compile.value == "off"
    assert "one backward pass" in p.step.reason.text()
    fp16 = plan(from_dict({"training": {"lean_state": "one_pass"}}), known_machine("t4"))
    assert fp16.code == "fused_fp16" and '"one_pass"' in fp16.text() and "loss scaler" in fp16.text()
    micro = plan(from_dict({"training": {"lean_state": "one_pass", "tokens_per_step": 2 * 6 * 1024}}), card)
    assert micro.code == "fused_micro_steps" and "micro-steps" in micro.text()
    ddp = plan(from_dict({"training": {"lean_state": "one_pass", "precision": "fp32", "sharding": "ddp"}}),
               known_machine("t4x2"))
    assert ddp.code == "lean_under_ddp" and "DDP" in ddp.text()
    fsdp = plan(from_dict({"training": {"lean_state": "one_pass", "precision": "fp32", "sharding": "fsdp"}}),
                known_machine("t4x2"))
    assert fsdp.code == "lean_under_fsdp"
    on = plan(from_dict({"training": {"lean_state": "one_pass", "compile": "on"}}), card)
    assert on.code == "compile_on_lean"


def test_the_form_says_the_one_pass_refusals_in_its_words():
    from app.base.plan_texts import text
    from trainer.config.reasons import Refusal

    for lang, words in (("ru", "малые моменты, один проход"), ("en", "small moments, one pass")):
        said = text(Refusal("fused_micro_steps", {"lean": "one_pass", "micro": 2}), lang)
        assert words in said and "one_pass" not in said


def test_the_table_lookup_finds_the_nearest_code_as_bucketize_does():
    from trainer.step.one_pass import _nearest_table, dynamic_map, nearest_code

    code = dynamic_map()
    mids, below = _nearest_table(code)
    g = torch.Generator().manual_seed(3)
    edges = mids[:-1]
    x = torch.cat([torch.randn(50_000, generator=g) * 0.3, torch.rand(50_000, generator=g) * 2 - 1,
                   torch.randn(20_000, generator=g) * 1e-4, edges, -edges,
                   torch.nextafter(edges, torch.tensor(2.0)), torch.nextafter(edges, torch.tensor(-2.0)),
                   torch.tensor([0.0, -0.0, 1.0, -1.0])]).clamp(-1, 1)
    assert torch.equal(nearest_code(x, mids, below).int(), torch.bucketize(x, edges, out_int32=True))


@pytest.mark.parametrize(("rows", "cols"), [(512, 2048), (2048, 512), (4000, 256)])
def test_a_matrix_update_holds_the_slice_bytes_the_estimate_counts(rows, cols):
    """The update's temporaries at their peak, counted on real tensors, are what the memory
    model counts a weight of a slice (trainer.plan.state_bytes.ONE_PASS_SLICE_BYTES): a change
    that makes the update keep one more fp32 copy (an int64 index, a square left bound) is
    seen here, where the form's figure would silently fall short."""
    from torch import nn

    from trainer.config.run_config import TrainingConfig
    from trainer.plan.state_bytes import ONE_PASS_SLICE_BYTES, one_pass_temporaries
    from trainer.step.memory import StoragePeak
    from trainer.step.one_pass import OnePassOptimizer

    holder = nn.Module()
    holder.w = nn.Parameter(torch.randn(rows, cols) * 0.02)
    opt = OnePassOptimizer(holder, TrainingConfig(), torch.device("cpu"), "bf16")
    p = holder.w
    for _ in range(2):  # the first makes the state (counted as the optimizer's, not here)
        p.grad = torch.randn(rows, cols).bfloat16()
        state = [v for v in opt.state[p].values() if torch.is_tensor(v)]
        with StoragePeak(alive=[p, p.grad, opt.code, *opt.table, *state]) as sp:
            opt._update(0, p, torch.tensor(0.5))
    n = rows * cols
    held = sp.peak_bytes - sp.baseline_bytes
    assert ONE_PASS_SLICE_BYTES * n <= held <= (ONE_PASS_SLICE_BYTES + 0.1) * n
    # the estimate's term for the parameter: its bf16 gradient beside the slice's bytes
    assert one_pass_temporaries(rows, cols, "bf16") >= 2 * n + held
