"""Smoke tests of the lean state's two benchmarks at a tiny size (bench/lean_choice.py,
bench/clip_lag.py): they run, report what they say, and their bookkeeping is right. No
timing is asserted; the torchao variants run only where torchao is installed (its step is
compiled at the first call, which takes a minute, so here torch.compile is replaced by
the function itself and the same code runs eagerly)."""

from __future__ import annotations

import json
import math

import pytest

pytest.importorskip("bitsandbytes", reason="the lean state's library: pip install 'ternit-lab[lean]'")

TINY = ["--width", "32", "--layers", "1", "--heads", "2", "--context", "16", "--batch", "2"]


def _choice(tmp_path, tiny_data, variants: str) -> dict:
    from bench import lean_choice

    out = tmp_path / "choice.json"
    argv = [*TINY, "--vocab", "300", "--steps", "3", "--warmup", "1", "--segments", "4",
            "--variants", variants, "--data", str(tiny_data), "--json", str(out)]
    assert lean_choice.main(argv) == 0
    return json.loads(out.read_text(encoding="utf-8"))


def test_lean_choice_reports_each_variant_side_by_side(tmp_path, tiny_data):
    report = _choice(tmp_path, tiny_data, "adamw,bnb8,lean,adamw_bf16,lean_bf16")
    r = report["results"]
    assert list(r) == ["adamw", "bnb8", "lean", "adamw_bf16", "lean_bf16"]
    for v in r.values():
        assert len(v["step_times_s"]) == 3 and len(v["warmup_steps_s"]) == 1
        assert math.isfinite(v["held_out"]) and len(v["segment_losses"]) == 4
    # fp32 AdamW: two fp32 moments, 8 bytes a weight; 8-bit moments a quarter of it and a bit
    # (block scales, and fp32 moments for tensors under bitsandbytes' 4,096-element minimum).
    assert r["adamw"]["state_bytes_per_weight"] == pytest.approx(8.0, abs=0.01)
    assert 2.0 <= r["bnb8"]["state_bytes_per_weight"] < 4.0
    assert r["lean"]["fused_into_backward"] and not r["bnb8"]["fused_into_backward"]
    assert r["lean"]["opt_times_s"] == [] and len(r["bnb8"]["opt_times_s"]) == 3
    # The bf16 lean state keeps bf16 weights (no master copy), the normal bf16 mode fp32.
    assert r["lean_bf16"]["weight_bytes"] * 2 == r["adamw_bf16"]["weight_bytes"]
    assert r["lean_bf16"]["reference"] == "adamw_bf16" and r["bnb8"]["reference"] == "adamw"
    assert r["adamw"]["held_out_diff"] == 0.0  # against itself


def test_lean_choice_rejects_an_unknown_variant(capsys):
    from bench import lean_choice

    assert lean_choice.main(["--variants", "adamw,sgd"]) == 2
    assert "unknown variant(s) sgd" in capsys.readouterr().err


def test_lean_choice_without_torchao_says_so_and_measures_the_rest(tmp_path, tiny_data, monkeypatch, capsys):
    from bench import lean_choice

    monkeypatch.setattr(lean_choice, "torchao_available", lambda: False)
    assert list(_choice(tmp_path, tiny_data, "adamw,ao8")["results"]) == ["adamw"]
    assert "torchao is not installed: its variants are skipped" in capsys.readouterr().err


def test_lean_choice_measures_torchao_where_installed(tmp_path, tiny_data, monkeypatch):
    pytest.importorskip("torchao.optim", reason="torchao is measured only where installed")
    import torch

    # torchao compiles its update at each call (torch.compile(..., fullgraph=True)); eager,
    # the same update takes seconds here instead of a minute's compile.
    monkeypatch.setattr(torch, "compile", lambda fn, **_: fn)
    r = _choice(tmp_path, tiny_data, "adamw,ao8,ao_bf16sr")["results"]
    # torchao's codes and scales counted (at this size some tensors are not a multiple of
    # its 256-element block and keep fp32 moments, so less than AdamW's 8 but above 2).
    assert 2.0 <= r["ao8"]["state_bytes_per_weight"] < 7.0
    assert r["ao_bf16sr"]["state_bytes_per_weight"] == pytest.approx(4.0, abs=0.01)  # bf16 weights, fp32 moments
    assert r["ao_bf16sr"]["weight_bytes"] * 2 == r["adamw"]["weight_bytes"]


def _lag(tmp_path, tiny_data, *extra: str) -> dict:
    from bench import clip_lag

    out = tmp_path / "lag.json"
    argv = [*TINY, "--steps", "8", "--seeds", "1", "--data", str(tiny_data), "--json", str(out), *extra]
    assert clip_lag.main(argv) == 0
    return json.loads(out.read_text(encoding="utf-8"))


def test_clip_lag_compares_the_used_coefficient_with_the_exact_one(tmp_path, tiny_data):
    from bench.clip_lag import exact_coef

    report = _lag(tmp_path, tiny_data, "--lr", "0.01")
    seed = report["seeds"][0]
    lagged = seed["runs"]["lagged"]
    norms, used = lagged["norms"], lagged["used_coefs"]
    assert len(norms) == len(used) == 8
    assert used[0] == 1.0  # the first step of a run is not clipped
    # Every later step was scaled by the coefficient of the previous step's norm.
    assert used[1:] == pytest.approx([exact_coef(n, 1.0) for n in norms[:-1]], rel=1e-9)
    assert set(seed["runs"]) == {"lagged", "exact", "fused", "exact_nudged", "normal", "growth", "pertensor",
                                 "progressive", "progressive_shrink", "progressive_tail", "factored_exact",
                                 "factored_progressive"}
    # The trainer's two exact lean steps are the same training bit for bit.
    assert seed["runs"]["fused"]["segment_losses"] == seed["runs"]["exact"]["segment_losses"]
    assert seed["fused_minus_exact"] == 0.0
    lag = seed["lag"]
    assert 0.0 <= lag["rel_diff_median"] <= lag["rel_diff_p90"] <= lag["rel_diff_max"]
    assert 0.0 <= lag["active_exact"] <= 1.0 and 0.0 <= lag["disagree"] <= 1.0
    assert math.isfinite(report["summary"]["lagged_minus_exact_mean"])


def test_without_clipping_the_lagged_and_exact_runs_are_the_same_training(tmp_path, tiny_data):
    """With clipping off the two arms differ in nothing but where the update is made (in the
    backward pass or after it): their held-out losses are bit-identical, so whatever the
    bench reports with clipping on comes from the clipping alone."""
    seed = _lag(tmp_path, tiny_data, "--clip", "0", "--no-control")["seeds"][0]
    assert set(seed["runs"]) == {"lagged", "exact", "fused"}
    assert seed["runs"]["lagged"]["segment_losses"] == seed["runs"]["exact"]["segment_losses"]
    assert seed["lag"]["rel_diff_max"] == 0.0 and seed["lag"]["active_exact"] == 0.0


def test_clip_lag_pertensor_arm_clips_each_update_and_reports_an_interval(tmp_path, tiny_data):
    """The per-tensor update clip (issue 34's one-pass candidate): a large learning rate
    makes some updates' RMS exceed one learning rate, and those are scaled down; two seeds
    give the difference from exact clipping a 95 % interval."""
    from bench import clip_lag

    out = tmp_path / "lag.json"
    argv = [*TINY, "--steps", "6", "--seeds", "2", "--data", str(tiny_data), "--json", str(out),
            "--runs", "pertensor", "--lr", "0.05"]
    assert clip_lag.main(argv) == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    seed = report["seeds"][0]
    assert set(seed["runs"]) == {"exact", "pertensor"} and seed["pertensor_clipped_updates"] >= 0
    low, high = report["summary"]["pertensor_minus_exact_95"]
    assert low <= report["summary"]["pertensor_minus_exact_mean"] <= high
    assert set(report["summary"]["step_ms_median"]) == {"exact", "pertensor"}


def test_progressive_estimate_is_exact_when_the_whole_gradient_scales_alike():
    """Issue 34's one-pass rule: a spike that multiplies every gradient by one factor is
    estimated exactly at every parameter's hook, from the first one on; the last hook's
    estimate is this step's norm whatever the gradients did; s² = 1 (the tail rule)
    assumes the parameters not yet done unchanged."""
    import torch

    from bench.clip_lag import progressive_estimate

    last = torch.tensor([0.5, 2.0, 0.25, 1.0, 3.0], dtype=torch.float64)  # last step's squares
    now = last * 49.0  # every gradient 7× last step's
    true = float(now.sum().sqrt())
    for i in range(1, len(last) + 1):
        est = progressive_estimate(now[:i].sum(), last[:i].sum(), last.sum(), 0.0)
        assert float(est) == pytest.approx(true, rel=1e-9)
    odd = torch.tensor([9.0, 0.1, 4.0, 0.5, 2.0], dtype=torch.float64)  # grown unevenly
    for prior in (0.0, 0.25, None):
        assert float(progressive_estimate(odd.sum(), last.sum(), last.sum(), prior)) == \
            pytest.approx(float(odd.sum().sqrt()), rel=1e-9)
    tail = progressive_estimate(now[:1].sum(), last[:1].sum(), last.sum(), None)
    assert float(tail) == pytest.approx(float((now[0] + last[1:].sum()).sqrt()), rel=1e-9)


def test_clip_lag_progressive_arm_estimates_every_hook_and_without_clipping_is_exact(tmp_path, tiny_data):
    """The progressive arm records one estimate a parameter a step; with clipping off it is
    the exact arm's training bit for bit (its priming pass updates nothing)."""
    seed = _lag(tmp_path, tiny_data, "--runs", "progressive", "--lr", "0.05")["seeds"][0]
    ests = seed["runs"]["progressive"]["step_estimates"]
    assert len(ests) == 8 and all(len(e) == len(ests[0]) > 1 for e in ests)
    # The last hook has seen every gradient: its estimate is the step's norm.
    assert [e[-1] for e in ests] == pytest.approx(seed["runs"]["progressive"]["norms"], rel=1e-5)
    assert 0.0 <= seed["progressive_est"]["rel_median"] <= seed["progressive_est"]["rel_max"]
    off = _lag(tmp_path, tiny_data, "--runs", "progressive", "--clip", "0")["seeds"][0]
    assert off["runs"]["progressive"]["segment_losses"] == off["runs"]["exact"]["segment_losses"]


def test_clip_lag_factored_arms_differ_only_by_their_clipping(tmp_path, tiny_data):
    """The trainer's one-pass optimizer (8-bit first, factored second moment), exactly clipped
    after a held pass and as its own one-pass step: with clipping off the two are the same
    training bit for bit (under bf16 too: the stochastic rounding is seeded alike), so what
    the bench reports between them with clipping on is the clipping's."""
    off = _lag(tmp_path, tiny_data, "--runs", "factored_exact,factored_progressive", "--clip", "0",
               "--precision", "bf16")["seeds"][0]
    runs = off["runs"]
    assert runs["factored_exact"]["segment_losses"] == runs["factored_progressive"]["segment_losses"]
    on = _lag(tmp_path, tiny_data, "--runs", "factored_progressive", "--lr", "0.05")["seeds"][0]
    assert math.isfinite(on["factored_progressive_minus_exact"])
    norms = on["runs"]["factored_progressive"]["norms"]  # the trainer's step's exact norm, each step
    assert len(norms) == 8 and all(math.isfinite(n) and n > 0 for n in norms)
