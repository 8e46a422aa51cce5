"""app.sizing: every number of the «Как выбрать размер» panel, including the guide's examples."""

from __future__ import annotations

import json
import math
import random

import pytest

from app.base.numbers import count_text, plural_ru
from app.sizing import GPUS, estimate, flops_per_token, param_count, plateau, tokens_per_step
from app.sizing.formulas import Shape
from app.sizing.history import measured_from_run_dir, run_gpu
from trainer.plan.memory_model import MiB, estimate_memory

DEFAULT = dict(layers=8, width=512, heads=8, context=1024, vocab=4000, batch=6, steps_to=20000)


def est(**kw):
    return estimate(**{**DEFAULT, "gpu": "t4x2", "lang": "en", **kw})


# ---- the guide's examples -------------------------------------------------------------


def test_default_weights_are_the_guides_27_738_112():
    assert param_count(8, 512, 1024, 4000) == 27_738_112
    assert est()["params"] == 27_738_112


def test_weights_by_hand_for_another_shape():
    # 12·L·d² + V·d + n·d, term by term.
    assert param_count(3, 96, 128, 300) == 12 * 3 * 96 * 96 + 300 * 96 + 128 * 96 == 372_864


def test_tokens_per_step_is_12_288_for_batch_6_on_two_t4():
    assert tokens_per_step(6, 2, 1024) == 12_288
    assert est()["tokens_per_step"] == 12_288
    assert est(gpu="t4")["tokens_per_step"] == 6_144


def test_flops_per_token_is_six_per_weight_plus_attention():
    assert flops_per_token(8, 512, 1024, 4000) == 6 * 27_738_112 + 12 * 8 * 1024 * 512
    assert est()["flops_per_token"] == 216_760_320


def test_reference_speeds_for_the_default_model():
    a, b = est(), est(gpu="t4")
    assert a["tokens_per_s"] == pytest.approx(102_000)
    assert b["tokens_per_s"] == pytest.approx(49_000)
    assert a["tokens_per_s_source"] == "an estimate from the lab's measurement on Kaggle 2×T4"
    assert a["tokens_per_s_basis"]["is_measurement"] is False


def test_12_layers_are_about_1_5x_and_24_layers_about_3x_slower_than_8():
    base = est()["tokens_per_s"]
    assert base / est(layers=12)["tokens_per_s"] == pytest.approx(1.5, abs=0.08)
    assert base / est(layers=24)["tokens_per_s"] == pytest.approx(3.0, abs=0.2)


def test_27_7m_weights_want_about_550m_tokens_and_the_advice_says_so():
    e = est(data_tokens=120_000_000)
    assert e["tokens_wanted"] == 20 * 27_738_112
    assert e["tokens_per_weight"] == pytest.approx(120e6 / 27_738_112)
    assert "27.7 M weights want about 550 M tokens: you have 120 M — a smaller model or more data." in e["advice"]
    ru = estimate(**DEFAULT, gpu="t4x2", data_tokens=120_000_000)  # Russian by default
    assert any("27,7 млн весов хотят около 550 млн токенов, у вас 120 млн" in a for a in ru["advice"])


def test_enough_data_and_passes_over_it():
    e = est(data_tokens=600_000_000)
    assert any("enough data" in a for a in e["advice"])
    assert e["tokens_read"] == 20_000 * 12_288
    assert e["passes"] == pytest.approx(20_000 * 12_288 / 600e6)
    few = est(data_tokens=50_000_000)
    assert few["passes"] == pytest.approx(4.9152)
    assert any("4.9 passes" in a for a in few["advice"])


# ---- time and the limit ---------------------------------------------------------------


def test_time_to_steps_is_tokens_over_speed_plus_evaluation():
    e = est()
    train = 20_000 * 12_288 / 102_000
    evals = 20_000 // 200
    assert e["eval_seconds"] == pytest.approx(evals * 96 * 1024 / 3 / 102_000)
    assert e["seconds_to_steps"] == pytest.approx(train + e["eval_seconds"])
    assert e["limit_stops_at_step"] is None


def test_a_short_limit_stops_the_run_at_the_step_it_reaches():
    e = est(limit_min=10)
    per_step = e["seconds_to_steps"] / 20_000
    assert e["limit_stops_at_step"] == int(600 / per_step)
    assert 4_000 < e["limit_stops_at_step"] < 5_000
    assert any("10-min limit stops training near step" in a for a in e["advice"])
    assert est(limit_min=630)["limit_stops_at_step"] is None


def test_a_continued_run_counts_only_its_own_steps():
    whole, tail = est(), est(start_step=15_000, limit_min=2)
    assert tail["steps"] == 5_000
    assert tail["seconds_to_steps"] == pytest.approx(whole["seconds_to_steps"] / 4, rel=0.01)
    assert 15_000 < tail["limit_stops_at_step"] < 20_000
    with pytest.raises(ValueError):
        est(start_step=20_000)


# ---- memory -----------------------------------------------------------------------------


def test_memory_parts_by_hand_fp32_and_fp16():
    s = Shape(layers=2, width=64, heads=4, context=32, vocab=100, batch=3)
    p = param_count(2, 64, 32, 100)
    bt, d = 3 * 32, 64
    m32 = estimate_memory(s, "fp32")
    assert (m32.weights, m32.gradients, m32.optimizer, m32.ddp_buckets) == (4 * p, 4 * p, 8 * p, 0)
    blocks = 2 * (64 * bt * d + (16 + 16) * bt)
    head = bt * (8 * d + 4 * 100) + 8 * bt
    assert m32.activations == blocks + head
    assert m32.loss_backward == 8 * bt * 100
    assert m32.peak == max(16 * p, 12 * p + blocks + head + 8 * bt * 100)
    m16 = estimate_memory(s, "fp16", cards=2)
    assert m16.ddp_buckets == 4 * p
    assert m16.autocast_copies == 2 * (12 * 2 * 64 * 64 + 100 * 64)
    assert m16.activations == 2 * (36 * bt * d + 32 * bt) + bt * (6 * d + 400) + 8 * bt


def test_economical_mode_keeps_less_and_its_levels_are_ordered():
    s = Shape(batch=6)
    off, sel, full = (estimate_memory(s, "fp16", 2, lvl) for lvl in ("off", "selective", "full"))
    assert full.activations < sel.activations < off.activations
    assert full.peak < sel.peak < off.peak
    assert sel.loss_backward < off.loss_backward  # no B·T·V tensor is held


def test_total_adds_the_framework_apart_and_fits_against_the_card():
    e = est()
    mem = e["memory_mb"]
    assert mem["total"] == pytest.approx(mem["allocated_peak"] + mem["framework"])
    assert mem["framework"] == pytest.approx(400 + 0.04 * mem["allocated_peak"])
    assert e["card_memory_mb"] == 15_360
    assert e["fits"] is True
    # The allocator's peak: the step's parts plus a T4's two cuBLAS workspaces.
    from trainer.plan.memory_model import cublas_workspace_bytes

    ws = cublas_workspace_bytes((7, 5))
    assert mem["allocated_peak"] == pytest.approx(estimate_memory(Shape(), "fp16", 2, workspace=ws).peak / MiB)


def test_max_batch_is_the_largest_that_fits():
    e = est(gpu="rtx3050")
    b = e["max_batch"]
    assert b > 6
    assert est(gpu="rtx3050", batch=b)["fits"] is True
    over = est(gpu="rtx3050", batch=b + 1)
    assert over["fits"] is False
    assert over["max_batch"] == b
    assert any(f"lower the batch to {b}" in a for a in over["advice"])


def test_no_fit_at_all_says_shrink_the_model():
    e = est(gpu="rtx3050", layers=48, width=2048, heads=16)
    assert e["fits"] is False and e["max_batch"] == 0
    assert any("shrink the model" in a for a in e["advice"])


def test_the_local_card_takes_its_memory_from_the_caller():
    e = est(gpu="local", card_memory_mb=lambda: 4096.0, local_name="NVIDIA GeForce RTX 3050 Laptop GPU")
    assert e["card_memory_mb"] == 4096.0 and e["fits"] is True
    # Recognised by name: the RTX 3050's speed, said as an estimate.
    assert e["tokens_per_s"] == pytest.approx(0.7 * 49_000)
    assert e["tokens_per_s_basis"]["kind"] == "spec_estimate"
    unknown = est(gpu="local", card_memory_mb=24_000, local_name="Some Card")
    assert unknown["tokens_per_s_basis"]["kind"] == "assumed_t4"
    assert "assumed as one T4" in unknown["tokens_per_s_source"]


def test_no_local_card_means_unknown_memory_not_a_guess(monkeypatch):
    from bench.fake_nvml import pc_with_cards

    pc_with_cards(monkeypatch, [])  # a driver with no card (as on a machine without one)
    e = est(gpu="local")
    assert e["card_memory_mb"] is None and e["fits"] is None and e["max_batch"] is None
    assert any("memory is unknown" in a for a in e["advice"])


def test_cpu_is_fp32_with_ram_and_a_rate_estimate():
    e = est(gpu="cpu", batch=2)
    assert e["precision"] == "fp32" and e["memory_mb"]["autocast_copies"] == 0
    assert e["card_memory_mb"] > 0
    assert e["tokens_per_s_basis"]["kind"] == "cpu_rate"
    assert "not measured on this machine yet" in e["tokens_per_s_source"]


def test_gpu_table_has_the_six_names_with_their_facts():
    assert set(GPUS) == {"t4x2", "t4", "rtx3050", "rtx5070ti", "local", "cpu"}
    assert GPUS["t4x2"].cards == 2 and GPUS["t4"].memory_mb == 15_360
    # What auto picks there is the plan's (trainer.plan.planner.precision_choice), from the card's facts.
    from app.sizing.gpus import machine_for
    from trainer.plan.planner import precision_choice

    assert precision_choice("auto", machine_for("t4")).value == "fp16"
    assert precision_choice("auto", machine_for("rtx5070ti")).value == "bf16"
    for g in GPUS.values():
        assert g.label["ru"] and g.label["en"]


# ---- measured runs ------------------------------------------------------------------------


def run_entry(run="r1", **kw):
    m = {"run": run, "gpu": "t4x2", "params": 27_738_112, "layers": 8, "width": 512, "context": 1024,
         "batch": 6, "tokens_per_s": 95_000.0, "mem_peak_mb": 2000.0, "economical": False}
    m.update(kw)
    return m


def test_a_measured_run_of_the_same_size_replaces_the_reference_and_says_so():
    e = est(measured=[run_entry()])
    assert e["tokens_per_s"] == pytest.approx(95_000)
    assert e["tokens_per_s_source"] == "measured in run r1"
    assert e["tokens_per_s_basis"] == {"kind": "measured", "run": "r1", "is_measurement": True}
    assert not any("not a measurement" in a for a in e["advice"])


def test_the_nearest_measured_size_on_that_card_is_used_and_scaled():
    far = run_entry("far", layers=24, params=param_count(24, 512, 1024, 4000), tokens_per_s=30_000.0)
    near = run_entry("near", layers=10, params=param_count(10, 512, 1024, 4000), tokens_per_s=80_000.0)
    other_card = run_entry("t4run", gpu="t4", tokens_per_s=1.0)
    econ = run_entry("econ", economical=True, tokens_per_s=1.0)
    e = est(measured=[far, near, other_card, econ])
    assert e["tokens_per_s_basis"]["run"] == "near"
    ratio = flops_per_token(10, 512, 1024, 4000) / flops_per_token(8, 512, 1024, 4000)
    assert e["tokens_per_s"] == pytest.approx(80_000 * ratio)
    assert "scaled from the measurement of run near" in e["tokens_per_s_source"]


def test_a_toy_run_far_from_the_asked_size_is_not_scaled_from():
    """A 35-thousand-weight run's step is mostly fixed cost: scaled by compute to the default
    model it made that model look 3.6× slower on the CPU than the CPU's rate says. Beyond
    MAX_SCALE_DISTANCE the card's own figure is used again (and says it is an estimate)."""
    toy = run_entry("toy", gpu="cpu", layers=2, width=32, context=32, batch=4,
                    params=param_count(2, 32, 32, 300), tokens_per_s=400.0)
    plain = est(gpu="cpu")
    e = est(gpu="cpu", measured=[toy])
    assert e["tokens_per_s_basis"]["kind"] == "cpu_rate" and e["tokens_per_s"] == pytest.approx(plain["tokens_per_s"])
    # A size near the toy is still scaled from it.
    small = est(gpu="cpu", layers=3, width=32, heads=2, context=32, vocab=300, batch=4, measured=[toy])
    assert small["tokens_per_s_basis"]["run"] == "toy"


def test_measured_peak_memory_calibrates_the_estimate():
    plain = est()
    pred = plain["memory_mb"]["allocated_peak"]
    e = est(measured=[run_entry(mem_peak_mb=pred * 1.25)])
    assert e["memory_calibration"] == {"factor": pytest.approx(1.25), "run": "r1"}
    assert e["memory_mb"]["allocated_peak"] == pytest.approx(pred * 1.25)
    assert any("corrected by run r1" in a for a in e["advice"])


def test_broken_history_entries_are_skipped():
    e = est(measured=[{"run": "x", "gpu": "t4x2"}, run_entry(tokens_per_s=None), run_entry(layers="?")])
    assert e["tokens_per_s_basis"]["kind"] == "reference"


def test_measured_runs_are_read_from_a_run_folder(tmp_path):
    d = tmp_path / "run-7"
    d.mkdir()
    cfg = {"model": {"context": 64, "width": 32, "heads": 2, "layers": 2, "vocab": 300},
           "training": {"batch_per_card": 4}, "target": {"kind": "local", "gpu": "auto"}}
    lines = [{"event": "start", "step": 0, "params": param_count(2, 32, 64, 300), "config": cfg,
              "device": "cpu", "world_size": 1, "economical": "off"}]
    for i, tps in enumerate([10.0, 500.0, 1000.0, 1100.0, 900.0, 1000.0]):
        lines.append({"event": "step", "step": i + 1, "tokens_per_s": tps,
                      "mem_peak_mb": 3.5 if i == 0 else None})
    (d / "events.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n{torn", encoding="utf-8")
    m = measured_from_run_dir(d)
    assert m["run"] == "run-7" and m["gpu"] == "cpu" and m["batch"] == 4 and m["vocab"] == 300
    assert m["tokens_per_s"] == 1000.0  # the median after the two warm-up steps
    assert m["mem_peak_mb"] == 3.5 and m["steps"] == 6


def test_run_gpu_names():
    assert run_gpu({"device": "cuda", "world_size": 2, "config": {"target": {"kind": "kaggle"}}}) == "t4x2"
    assert run_gpu({"device": "cuda", "world_size": 1, "config": {"target": {"kind": "kaggle"}}}) == "t4"
    assert run_gpu({"device": "cuda", "config": {"target": {"kind": "local", "gpu": "rtx3050"}}}) == "rtx3050"
    assert run_gpu({"device": "cuda", "config": {"target": {"kind": "local", "gpu": "auto"}}}) == "local"


# ---- validation ---------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [dict(width=500), dict(batch=0), dict(gpu="p100"), dict(layers=0),
                                 dict(precision="fp8"), dict(limit_min=0)])
def test_bad_fields_are_value_errors_that_name_them(bad):
    with pytest.raises(ValueError):
        est(**bad)


# ---- when to grow ---------------------------------------------------------------------------


def curve(f, steps, noise, seed=0):
    r = random.Random(seed)
    return [(s, f(s) + r.gauss(0, noise), f(s) - 0.02, f(s) + 0.02) for s in steps]


def test_a_falling_curve_says_train_longer():
    pts = curve(lambda s: 5 - 0.1 * math.log2(s), range(200, 4001, 200), 0.01)
    r = plateau(pts, lang="en")
    assert r["state"] == "falling"
    assert r["slope_per_doubling"] == pytest.approx(-0.1, abs=0.03)
    assert r["ci95"][0] < r["slope_per_doubling"] < r["ci95"][1] < -0.01
    assert "Training longer is cheaper" in r["advice"][0]


def test_a_flat_curve_is_a_plateau_with_the_data_needed_to_grow():
    pts = curve(lambda s: 3.0, range(200, 8001, 200), 0.002)
    r = plateau(pts, params=27_738_112, data_tokens=120_000_000, lang="en")
    assert r["state"] == "plateau"
    assert r["advice"][1] == ("A 2× bigger model (55.5 M weights) needs about 1.1 B tokens, "
                              "you have 120 M: add data first.")
    ok = plateau(pts, params=27_738_112, data_tokens=2_000_000_000, lang="en")
    assert ok["advice"][1].endswith("grow it.")


def test_one_noisy_low_point_does_not_make_a_trend():
    pts = curve(lambda s: 3.0, range(200, 8001, 200), 0.002)
    pts[-1] = (pts[-1][0], 2.9, 2.88, 2.92)  # a lucky last evaluation
    assert plateau(pts)["state"] in ("plateau", "unclear")


def test_rising_validation_is_over_fitting():
    pts = curve(lambda s: 2 + 0.05 * math.log2(s), range(200, 4001, 200), 0.005)
    r = plateau(pts, lang="ru")
    assert r["state"] == "rising" and "переучивается" in r["advice"][0]


def test_noisy_short_curves_are_unclear_and_too_few_points_say_so():
    pts = curve(lambda s: 3 - 0.01 * math.log2(s), range(100, 801, 100), 0.05, seed=3)
    assert plateau(pts)["state"] == "unclear"
    r = plateau([(100, 3.0, 2.9, 3.1), (200, 2.9, 2.8, 3.0)], lang="en")
    assert r["state"] == "too_few" and "Too few" in r["advice"][0]
    assert plateau([])["last"] is None


# ---- numbers and the command --------------------------------------------------------------------


def test_numbers_are_said_in_each_language():
    assert count_text(554_762_240, "en", 2) == "550 M"
    assert count_text(27_738_112, "ru") == "27,7 млн"
    assert [plural_ru(n, "шаг", "шага", "шагов") for n in (1, 3, 5, 11, 21, 112)] == [
        "шаг", "шага", "шагов", "шагов", "шаг", "шагов"]


def test_cli_json_prints_the_same_object(capsys):
    from app.cli.main import main

    argv = ["estimate", "--layers", "8", "--width", "512", "--heads", "8", "--context", "1024",
            "--vocab", "4000", "--batch", "6", "--gpu", "t4x2", "--steps-to", "20000",
            "--limit-min", "630", "--data-tokens", "120000000", "--json", "--lang", "en"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("params", "flops_per_token", "tokens_per_step", "tokens_per_s", "tokens_per_s_source",
                "seconds_to_steps", "limit_stops_at_step", "memory_mb", "card_memory_mb", "fits",
                "max_batch", "tokens_per_weight", "advice"):
        assert key in out
    assert out == json.loads(json.dumps(est(limit_min=630, data_tokens=120_000_000).as_json()))
    assert main(["estimate", "--economical", "--gpu", "t4", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["economical"] == {
        "level": "selective", "lean_state": "off", "sharding": "none", "auto": False}


def test_cli_human_output_and_errors(capsys):
    from app.cli.main import main

    assert main(["estimate", "--gpu", "rtx3050", "--lang", "ru"]) == 0
    out = capsys.readouterr().out
    assert "27 738 112" in out.replace("\u00a0", " ") and "— оценка" in out
    # Speed, time and the limit once, as rows (the advice under them said them again).
    assert out.count("6\u00a0144") == 1 and "Скорость ≈" not in out and "займут" not in out
    time_row = next(line for line in out.splitlines() if line.startswith("Время"))
    assert "обучение ≈" in time_row and "проверок на отложенной выборке ≈" in time_row
    assert main(["estimate", "--width", "500", "--lang", "en"]) == 2
    assert "does not divide" in capsys.readouterr().err
    # A model whose weights and optimizer alone overflow the card: no "largest batch 0".
    assert main(["estimate", "--layers", "48", "--width", "4096", "--heads", "32", "--gpu", "t4x2",
                 "--lang", "ru"]) == 0
    fits = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("Помещается"))
    assert "даже батч 1 не помещается" in fits and "батч 0" not in fits


def test_cli_refuses_what_the_trainer_refuses_in_the_interface_language(capsys, russian):
    """A vocabulary past uint16 (the trainer's rule, not only the data's) and every shape error
    in Russian by default, each one line with exit code 2."""
    from app.cli.main import main

    cases = [(["--vocab", "70000"], "model.vocab: нужно не больше 65\u00a0536, а не 70\u00a0000"),
             (["--width", "500"], "ширина 500 не делится на число голов 8: подойдут 1, 2, 4, 5, 10"),
             (["--batch", "0"], "training.batch_per_card: нужно не меньше 1, а не 0"),
             (["--steps-to", "0"], "«Шагов до» должно быть больше"),
             (["--limit-min", "0"], "лимит должен быть больше 0")]
    for args, text in cases:
        assert main(["estimate", *args]) == 2
        err = capsys.readouterr().err
        assert text in err and len(err.strip().splitlines()) == 1, err
    assert main(["estimate", "--vocab", "65536", "--json"]) == 0  # the trainer's largest
    assert json.loads(capsys.readouterr().out)["params"] == 12 * 8 * 512**2 + 65536 * 512 + 1024 * 512


def test_cli_plateau_of_a_run_folder(tmp_path, capsys):
    from app.cli.main import main

    d = tmp_path / "r"
    d.mkdir()
    rows = [{"event": "start", "step": 0, "params": 1000}]
    rows += [{"event": "eval", "step": s, "val_loss": 5 - 0.1 * math.log2(s) + (0.003 if s % 400 else -0.003),
              "val_ci95": [0, 9], "segments": 96} for s in range(200, 4001, 200)]
    (d / "events.jsonl").write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    assert main(["estimate", "--plateau", str(d), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["state"] == "falling"
    assert main(["estimate", "--plateau", str(tmp_path / "none")]) == 2


def test_cpu_speed_is_the_per_thread_rate_slowed_for_narrow_models(monkeypatch):
    from app.sizing.gpus import CPU_FLOPS_PER_THREAD, cpu_has_avx512

    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    rate = 2 * CPU_FLOPS_PER_THREAD["avx512" if cpu_has_avx512() else "avx2"]
    e = est(gpu="cpu", layers=2, width=128, heads=4, context=128, vocab=512, batch=8)
    want = rate / (flops_per_token(2, 128, 128, 512) * (1 + 2 * 36 / 128) * (1 + 2 * 32 / 1024))
    assert e["tokens_per_s"] == pytest.approx(want)
    # A measured CPU run is scaled with the same narrow-width term.
    m = run_entry("cpu1", gpu="cpu", layers=4, width=256, context=128, batch=8,
                  params=param_count(4, 256, 128, 512), tokens_per_s=1000.0)
    scaled = est(gpu="cpu", layers=2, width=128, heads=4, context=128, vocab=512, batch=8, measured=[m])
    cost = lambda L, d: flops_per_token(L, d, 128, 512) * (1 + 72 / d)  # noqa: E731
    assert scaled["tokens_per_s"] == pytest.approx(1000.0 * cost(4, 256) / cost(2, 128))  # same rows
    fewer = est(gpu="cpu", layers=2, width=128, heads=4, context=128, vocab=512, batch=2, measured=[m])
    assert fewer["tokens_per_s"] == pytest.approx(scaled["tokens_per_s"] * (1 + 64 / 1024) / (1 + 64 / 256))


def test_bench_analysis_reports_prediction_errors(monkeypatch):
    from app.sizing import bench
    from app.sizing.formulas import step_cost

    monkeypatch.setenv("OMP_NUM_THREADS", "1")

    def entry(size, tps, peak):
        _, layers, width, heads, context, vocab, batch = size
        return {"run": size[0], "gpu": "cpu", "params": param_count(layers, width, context, vocab),
                "layers": layers, "width": width, "heads": heads, "context": context, "vocab": vocab,
                "batch": batch, "economical": "off", "tokens_per_s": tps, "mem_peak_mb": peak,
                "tokens_per_s_fast": tps, "tokens_per_s_median": tps * 0.9}

    runs = {}
    for size in bench.SIZES[:3]:
        _, layers, width, heads, context, vocab, batch = size
        true = 1e11 / step_cost(layers, width, context, vocab, 36.0, batch * context, 32.0)
        mem = estimate_memory(Shape(layers, width, heads, context, vocab, batch), "fp32")
        runs[size[0]] = [entry(size, true * (1.1 if size[0] == "A" else 1.0), mem.first_step_peak / MiB)]
    r = bench.analyse(runs, [], "cpu")
    errors = {(x["from"], x["to"]): x["error"] for x in r["speed"]}
    assert errors[("B", "C")] == pytest.approx(0, abs=1e-9)
    assert errors[("A", "B")] == pytest.approx(0.1) and errors[("B", "A")] == pytest.approx(1 / 1.1 - 1)
    assert all(row["error"] == pytest.approx(0, abs=1e-3) for row in r["memory"])


def test_advice_kinds_name_each_sentence():
    e = est(limit_min=10, data_tokens=50_000_000)
    assert e["advice_kinds"] == ["speed", "time", "limit", "memory", "data", "passes"]
    assert len(e["advice"]) == len(e["advice_kinds"])
    assert est()["advice_kinds"] == ["speed", "time", "memory", "data"]


def test_the_local_card_is_read_through_nvml(monkeypatch):
    from app.sizing.gpus import local_card
    from bench.fake_nvml import FakeCard, pc_with_cards

    pc_with_cards(monkeypatch, [FakeCard(name="NVIDIA GeForce RTX 3050", total_mb=8192)])
    card = local_card()
    assert card is not None and card.name == "NVIDIA GeForce RTX 3050" and card.memory_mb == 8192
    assert card.compute_capability == (8, 6)
    e = est(gpu="local")
    assert e["card_memory_mb"] == 8192 and e["fits"] is True
    assert e["tokens_per_s"] == pytest.approx(0.7 * 49_000)
    assert e["advice"][0].startswith("Speed ≈ 34,300 tokens/s on NVIDIA GeForce RTX 3050 (")


def test_gpu_peak_counts_cublas_workspaces_as_measured_on_an_h200():
    """The trainer's mem_peak_mb on an H200 (docs/gpu-2026-11-30/trainer.json, n 256, d 256,
    4 layers, V 1024, batch 8) against the model with cuBLAS's two 32 MiB workspaces."""
    import json
    from pathlib import Path

    from trainer.plan.memory_model import MiB, Shape, cublas_workspace_bytes, estimate_memory

    runs = json.loads((Path(__file__).parent.parent / "docs/gpu-2026-11-30/trainer.json").read_text())["resume"]
    measured = {("bf16" if r["precision"] == "auto" else r["precision"]): r["mem_peak_mb"] for r in runs}
    s = Shape(layers=4, width=256, heads=4, context=256, vocab=1024, batch=8)
    ws = cublas_workspace_bytes((9, 0))
    assert ws == 64 * MiB
    for precision, mb in measured.items():
        assert estimate_memory(s, precision).peak / MiB < 0.8 * mb  # without the term: a third short
        assert estimate_memory(s, precision, workspace=ws).peak / MiB == pytest.approx(mb, rel=0.03)
    assert cublas_workspace_bytes((7, 5)) == 2 * (4096 * 2 + 16 * 8) * 1024  # a T4
    assert cublas_workspace_bytes(None) == 0


def test_the_estimate_adds_the_workspace_on_gpus_only():
    from app.sizing import estimate

    args = dict(layers=2, width=64, heads=2, context=64, vocab=300, batch=2, steps_to=10)
    t4 = estimate(gpu="t4", **args)["memory_mb"]
    assert t4["cublas_workspace"] == pytest.approx(2 * 8.125)
    assert estimate(gpu="cpu", **args)["memory_mb"]["cublas_workspace"] == 0


def test_many_passes_over_tiny_data_read_as_a_number():
    """A tiny dataset read tens of thousands of times: «49,2 тыс. проходов», not "45259.7"."""
    many = estimate(**{**DEFAULT, "gpu": "t4x2", "lang": "ru", "data_tokens": 5000})
    line = next(a for a in many["advice"] if "проход" in a)
    assert "49,2 тыс. проходов" in line, line
    few = estimate(**{**DEFAULT, "gpu": "t4x2", "lang": "en", "data_tokens": 100_000_000})
    assert any("2.5 passes" in a for a in few["advice"])



def test_the_time_says_what_it_is_made_of():
    """Issue 27: 20,000 steps at 1.67 B weights on an RTX 5070 Ti said ≈ 58 min where its own
    149 ms a step gives ≈ 50 min. The difference is the 100 held-out evaluations (96
    segments of 1,024 tokens each, forward only), now said in the breakdown."""
    from app.sizing.advice import time_parts

    e = est(gpu="rtx5070ti", layers=26, width=2304, heads=18, batch=1, steps_to=20_000)
    assert e.evaluations == 100  # every 200 steps, the last at 20,000
    train_s = e.seconds_to_steps - e.eval_seconds
    assert train_s / 20_000 == pytest.approx(0.149, rel=1e-3)
    assert e.eval_seconds == pytest.approx(100 * 96 * 1024 / 3 / e.tokens_per_s)
    assert time_parts(e, "ru") == ("обучение ≈ 50 мин + 100 проверок на отложенной выборке ≈ 8 мин; "
                                   "запуск и сохранение чекпоинтов сверх того")
    assert "(training ≈ 50 min + 100 held-out evaluations ≈ 8 min;" in e.advice_texts()[1]
