"""`ternit bench sample` runs end to end at tiny sizes (no timing asserted; the figures are
in docs/PERF.md): both sides give the same greedy tokens, the shares are fractions."""

from __future__ import annotations

import json

from app.cli import bench as bench_cli
from bench import sample as bench


def test_bench_sample_tiny(tmp_path, capsys):
    out = tmp_path / "r.json"
    args = ["--context", "32", "--width", "32", "--heads", "2", "--layers", "2", "--vocab", "300",
            "--prompt", "8", "--new", "16", "--series", "2", "--train-batch", "2", "--train-steps", "1",
            "--sample-tokens", "4", "--eval-every", "10", "--run-steps", "12", "--run-eval-every", "6",
            "--json", str(out)]
    assert bench.main(args) == 0
    r = json.loads(out.read_text())
    g = r["generation"]
    assert g["equal_output"] and g["cached"]["n"] == g["plain"]["n"] == 2 and g["speedup_median"] > 0
    assert 0 < r["training_share"]["share"] < 1
    assert r["trainer_run"]["evaluations"] == 2 and 0 < r["trainer_run"]["share"]["median"] < 1
    assert "cached/plain" in capsys.readouterr().out


def test_plain_loop_matches_the_cached_generator_greedy():
    import torch

    from trainer.config.run_config import ModelConfig
    from trainer.model.gpt import GPT

    model = GPT(ModelConfig(context=16, width=32, heads=2, layers=2, vocab=50))
    model.init_weights(0)
    model = model.double().eval()  # double: the two paths add in different orders
    torch.manual_seed(0)
    prompt = [1, 2, 3, 4]
    assert bench.plain_generate(model, prompt, 10) == bench.cached_generate(model, prompt, 10)


def test_registered_and_refuses_bad_sizes(capsys):
    assert bench_cli.BENCHES["sample"][1] == "bench.sample"
    assert bench.main(["--context", "16", "--prompt", "10", "--new", "10"]) == 2


def test_against_hf_tiny(tmp_path):
    import pytest

    pytest.importorskip("transformers", reason="--against-hf needs transformers (dev extra)")
    out = tmp_path / "hf.json"
    args = ["--context", "32", "--width", "32", "--heads", "2", "--layers", "2", "--vocab", "300",
            "--prompt", "4", "--against-hf", "2x6,1x4", "--series", "2", "--json", str(out)]
    assert bench.main(args) == 0
    r = json.loads(out.read_text())
    assert [(c["prompts"], c["new"]) for c in r["cases"]] == [(2, 6), (1, 4)]
    cfg = bench.ModelConfig(32, 32, 2, 2, 300)
    for c in r["cases"]:
        assert c["equal_tokens"] and c["lab"]["n"] == c["hf"]["n"] == 2 and c["ratio"]["median"] > 0
        assert 0 < c["of_rate"]["lab"]["one_row"]
        # the roofline, timed in every series beside the sides: each side's time a token over the
        # products alone, series by series; HF's is the ceiling
        ms = c["ms_per_token"]
        assert ms["floor"]["n"] == 2 and 0 < ms["floor"]["min"] <= ms["floor"]["max"]
        assert c["ceiling"] == c["over_floor"]["hf"] and c["ceiling"]["n"] == 2 and c["ceiling"]["min"] > 0
        assert c["over_floor"]["lab"]["max"] <= ms["lab"]["max"] / ms["floor"]["min"]
        assert sorted(1e3 / x for x in (ms["lab"]["min"], ms["lab"]["max"])) == [c["lab"]["min"], c["lab"]["max"]]
        assert c["flop_per_token"] == sum(bench.token_flops(cfg, 4 + i) for i in range(c["new"])) / c["new"]
    assert r["floor_ms"]["n"] == 4  # two series in each of the two cases
    assert bench.parse_cases("8x512, 4×256") == [(8, 512), (4, 256)]


def test_bench_sample_layouts_tiny(tmp_path):
    """The packed weights' layouts side by side: every arm each round, the order rotated, the
    tokens equal across the arms (7 MB of weights: the lab's buffer is the huge-page map on Linux)."""
    out = tmp_path / "l.json"
    args = ["--context", "64", "--width", "256", "--heads", "4", "--layers", "2", "--vocab", "1000",
            "--prompt", "8", "--new", "6", "--series", "3", "--layouts", "--json", str(out)]
    assert bench.main(args) == 0
    r = json.loads(out.read_text())
    assert r["equal_tokens"] and all(r[arm]["n"] == 3 for arm in ("separate", "one buffer", "pack"))
    assert set(r["over_separate"]) == {"one buffer", "pack"} and r["over_separate"]["pack"]["median"] > 0
    assert bench.main(["--context", "16", "--prompt", "10", "--new", "10", "--layouts"]) == 2  # past the context


def test_bench_sample_static_tiny(tmp_path, capfd):
    """The fixed-shape arm (the CUDA graph's step on a card) runs on the CPU: both sides, the
    series alternating, the agreement reported per series."""
    out = tmp_path / "s.json"
    args = ["--context", "32", "--width", "32", "--heads", "2", "--layers", "2", "--vocab", "300",
            "--prompt", "8", "--new", "16", "--series", "2", "--static", "cpu", "--json", str(out)]
    assert bench_cli.main(["sample", *args]) == 0
    r = json.loads(out.read_text())
    assert r["precision"] == "fp32" and r["static"]["n"] == r["dynamic"]["n"] == 2
    assert len(r["tokens_agreeing_before_a_difference"]) == 2 and r["static_over_dynamic_median"] > 0
    assert "tokens agreeing" in capfd.readouterr().out  # its own process, as the user's command
