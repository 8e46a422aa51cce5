"""`ternit bench sizing-gpu`: the sizing model against a GPU probe's measurements
(app/sizing/probe_check.py reading what scripts/gpu_probe.py writes)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.sizing.formulas import flops_per_token, param_count
from app.sizing.probe_check import check, main
from trainer.plan.memory_model import MiB, cublas_workspace_bytes, estimate_memory
from trainer.plan.step_cost import economical_factor

ROOT = Path(__file__).resolve().parents[1]
LADDER = [(4, 256, 4, 256, 16), (8, 256, 4, 256, 16), (16, 256, 4, 256, 16), (8, 512, 8, 1024, 6),
          (16, 512, 8, 1024, 6)]


def case(L, d, h, n, b, level="off", seconds=None, peak_mb=None, kernels=300):
    from app.sizing.formulas import Shape

    V = 4000
    if seconds is None:  # a card with a fixed 4 ms a step and 200 TFLOP/s of arithmetic
        seconds = 0.004 + flops_per_token(L, d, n, V) * b * n / 200e12
    return {"layers": L, "width": d, "heads": h, "context": n, "vocab": V, "batch": b, "level": level,
            "compiled": False, "params": param_count(L, d, n, V), "wall_ms": seconds * 1000,
            "tokens_per_s": b * n / seconds, "kernels": kernels,
            "peak_mb": peak_mb if peak_mb is not None else
            estimate_memory(Shape(L, d, h, n, V, b), "bf16", 1, level, cublas_workspace_bytes((9, 0))).peak / MiB}


def test_speed_from_the_other_sizes_recovers_a_fixed_plus_compute_card():
    """Sizes inside the ladder are predicted exactly by the fit of the others; the nearest
    single run's scaling, which has no fixed part, misses."""
    r = check({"device": "NVIDIA H200", "cases": [case(*s) for s in LADDER]})
    assert len(r["speed"]) == len(LADDER)
    inner = [row for row in r["speed"] if row["size"] in ("L8 d256 n256 b16", "L8 d512 n1024 b6")]
    for row in inner:
        assert row["kind"] == "fitted_measured"
        assert abs(row["error"]) < 0.01
    assert max(abs(row["nearest_error"]) for row in r["speed"]) > 0.05


def test_memory_and_economical_rows_compare_like_with_like():
    probe = {"device": "x", "cases": [
        case(8, 512, 8, 1024, 6, peak_mb=1000.0, kernels=348),
        case(8, 512, 8, 1024, 6, "selective", seconds=0.0125 * 1.2, kernels=436),
        {"label": "L8 d512 n1024 b6 off compiled", "error": "RuntimeError('no compiler')"},
    ]}
    probe["cases"][0]["wall_ms"] = 12.5
    r = check(probe)
    assert r["speed"] == []  # one normal size: nothing to scale from
    m = {row["level"]: row for row in r["memory"]}
    predicted = m["off"]["predicted_mb"]
    assert m["off"]["error"] == pytest.approx(predicted / 1000.0 - 1)
    (e,) = r["economical"]
    assert e["measured_ratio"] == pytest.approx(1.2)
    assert e["kernel_ratio"] == pytest.approx(436 / 348)
    from app.sizing.formulas import Shape

    assert e["arithmetic_ratio"] == pytest.approx(economical_factor(Shape(8, 512, 8, 1024, 4000, 6), "selective"))


def test_cli_prints_the_comparison_and_writes_json(tmp_path, capsys):
    src = tmp_path / "probe.json"
    src.write_text(json.dumps({"device": "NVIDIA H200", "cases": [case(*s) for s in LADDER]}))
    out = tmp_path / "check.json"
    assert main([str(src), "--cc", "9.0", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "median |error|" in text and "predicted peak" in text
    assert len(json.loads(out.read_text())["speed"]) == len(LADDER)
    assert main([str(tmp_path / "missing.json")]) == 2


def test_reads_what_the_probe_script_really_writes(tmp_path):
    """The probe's own output (its --smoke run on this machine's CPU) is what the check reads."""
    out = tmp_path / "probe.json"
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_probe.py"), str(out), "--smoke"],
                       capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-2000:]
    probe = json.loads(out.read_text())
    r = check(probe)
    assert probe["cases"] and all("error" not in c for c in probe["cases"])
    (e,) = r["economical"]  # the smoke run times the normal and the selective mode at one size
    assert e["level"] == "selective" and e["measured_ratio"] > 0


@pytest.mark.filterwarnings("ignore:CUDA is not available")
def test_the_probe_profiler_runs_where_there_is_no_gpu():
    """Its CUDA kernel list is empty on the CPU, but the code path (profiler, event filter,
    summary) runs: a GPU session should not be the first to execute it."""
    import importlib.util

    import torch

    spec = importlib.util.spec_from_file_location("gpu_probe", ROOT / "scripts" / "gpu_probe.py")
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    busy, kernels, top = probe.profile_step(lambda: torch.ones(64, 64) @ torch.ones(64, 64), lambda: None)
    assert (busy, kernels, top) == (0, 0, [])
